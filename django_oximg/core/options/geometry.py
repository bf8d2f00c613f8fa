"""Output geometry: the exact size a request produces, computed without pixels.

The template tag prints ``width``/``height`` from this module without touching an
image, and the pipeline executes the same plan, so the two can never disagree.
The arithmetic follows imgproxy's ``calcScale``/``calcSizes``/``limitScale``
(imgproxy v3) so sizes match an imgproxy server given the same URL:

1. The source is taken in its final orientation: EXIF orientation (when
   ``auto_rotate``) plus the ``rotate`` option; a quarter turn swaps sides.
2. The ``crop`` option cuts a region first; its size is what gets scaled.
3. One scale per axis from the resizing type, ``zoom``, ``dpr``, ``enlarge``
   and ``min_width``/``min_height``.
4. The scaled image is cropped to the requested box (``fill`` and friends),
   then extended to it (``extend``), then to its aspect ratio
   (``extend_aspect_ratio``), then padded (``padding`` times ``dpr``).
5. If the result would exceed ``max_result_dimension`` (the configured
   limit, lowered by the request's own ``max_result_dimension``) everything
   is scaled down together.

Pure Python on purpose: no pyvips, no Django, cheap enough for every page view.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from django_oximg.core.options import Gravity, Options, result_dimension_limit

#: EXIF orientations that turn the stored image by a quarter turn (5..8).
QUARTER_TURN_ORIENTATIONS = frozenset({5, 6, 7, 8})


class Geometry(NamedTuple):
    """The size plan for one request; all sizes in output pixels.

    Every intermediate size is here so the pipeline can execute the plan step
    by step and the tests can check each step against it.
    """

    #: Source size in its final orientation (after auto-rotate and ``rotate``).
    source_width: int
    source_height: int
    #: Size of the ``crop`` region before scaling; equals the source when no crop.
    crop_width: int
    crop_height: int
    #: Size after scaling the crop region.
    scaled_width: int
    scaled_height: int
    #: Size after cropping to the requested box (``fill``, ``fill-down``, ...).
    result_width: int
    result_height: int
    #: Size after ``extend`` and then ``extend_aspect_ratio`` (equals the
    #: result size without them).
    canvas_width: int
    canvas_height: int
    #: Pixels added by ``padding``: top, right, bottom, left.
    padding: tuple[int, int, int, int]
    #: The requested box times the effective dpr; 0 for "not requested".
    target_width: int
    target_height: int
    #: The dpr actually applied (lowered when enlargement is not allowed).
    dpr_scale: float
    #: Size after ``extend`` alone: the canvas, unless ``extend_aspect_ratio``
    #: grows it further.
    extended_width: int
    extended_height: int

    @property
    def width(self) -> int:
        """Final output width."""
        return self.canvas_width + self.padding[1] + self.padding[3]

    @property
    def height(self) -> int:
        """Final output height."""
        return self.canvas_height + self.padding[0] + self.padding[2]


def round_half_up(value: float) -> int:
    """Round halves away from zero, as Go's ``math.Round`` (Python rounds to even)."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def scale_size(size: int, scale: float) -> int:
    """``size * scale`` rounded half up; 0 stays 0 (it means "not requested")."""
    return 0 if size == 0 else round_half_up(size * scale)


def scale_size_to_even(size: int, scale: float) -> int:
    """``size * scale`` rounded half to even, as imgproxy rounds padding and offsets."""
    return 0 if size == 0 else round(size * scale)


def min_non_zero(a: int, b: int) -> int:
    """The smaller of two sizes where 0 means "unset"."""
    if a == 0:
        return b
    if b == 0:
        return a
    return min(a, b)


def orientation_swaps_sides(orientation: int, auto_rotate: bool, rotate: int) -> bool:
    """Whether EXIF orientation plus the ``rotate`` option make a quarter turn."""
    exif_quarter = auto_rotate and orientation in QUARTER_TURN_ORIENTATIONS
    return exif_quarter != (rotate % 180 == 90)


def crop_size(size: int, crop: float) -> int:
    """A ``crop`` dimension in pixels: pixels when >= 1, a fraction below 1, 0 for none."""
    if crop == 0:
        return 0
    if crop >= 1:
        return int(crop)
    return max(1, round_half_up(size * crop))


def resolve_resizing_type(options: Options, width: int, height: int) -> str:
    """``auto`` is ``fill`` when source and box share an orientation, else ``fit``."""
    if options.resizing_type != "auto":
        return options.resizing_type
    box_width = options.width or width
    box_height = options.height or height
    same_orientation = (width - height >= 0) == (box_width - box_height >= 0)
    return "fill" if same_orientation else "fit"


def compute_shrinks(width: int, height: int, options: Options) -> tuple[float, float]:
    """Shrink factors per axis (source / box) before dpr and enlarge limits."""
    box_width = options.width or width
    box_height = options.height or height
    x_shrink = 1.0 if box_width == width else width / box_width
    y_shrink = 1.0 if box_height == height else height / box_height
    if x_shrink == 1 and y_shrink == 1:
        return x_shrink, y_shrink
    kind = resolve_resizing_type(options, width, height)
    if options.width == 0 and kind != "force":
        x_shrink = y_shrink
    elif options.height == 0 and kind != "force":
        y_shrink = x_shrink
    elif kind == "fit":
        x_shrink = y_shrink = max(x_shrink, y_shrink)
    elif kind in ("fill", "fill-down"):
        x_shrink = y_shrink = min(x_shrink, y_shrink)
    return x_shrink, y_shrink


def compute_scales(width: int, height: int, options: Options) -> tuple[float, float, float]:
    """Scale per axis and the effective dpr for a ``width`` x ``height`` region.

    Without ``enlarge`` the image is never upscaled; the dpr is lowered so the
    requested box shrinks with it (imgproxy keeps the dpr when extending, so
    the composition does not change with the dpr).
    """
    x_shrink, y_shrink = compute_shrinks(width, height, options)
    x_shrink /= options.zoom_width
    y_shrink /= options.zoom_height
    dpr_scale = options.dpr
    if not options.enlarge:
        least = min(x_shrink, y_shrink)
        if least < 1:
            x_shrink /= least
            y_shrink /= least
            if not options.extend:
                dpr_scale /= least
        dpr_scale = min(dpr_scale, x_shrink, y_shrink)
    if options.min_width > 0:
        min_shrink = width / options.min_width
        if min_shrink < x_shrink:
            y_shrink /= x_shrink / min_shrink
            x_shrink = min_shrink
    if options.min_height > 0:
        min_shrink = height / options.min_height
        if min_shrink < y_shrink:
            x_shrink /= y_shrink / min_shrink
            y_shrink = min_shrink
    x_shrink = min(x_shrink / dpr_scale, float(width))
    y_shrink = min(y_shrink / dpr_scale, float(height))
    return 1.0 / x_shrink, 1.0 / y_shrink, dpr_scale


class _Sizes(NamedTuple):
    """Sizes that follow from a choice of scales (recomputed after limiting)."""

    target: tuple[int, int]
    scaled: tuple[int, int]
    result_crop: tuple[int, int]


def compute_sizes(
    width: int, height: int, x_scale: float, y_scale: float, dpr_scale: float, options: Options
) -> _Sizes:
    """Target box, scaled size and the crop-to-box size.

    ``fill-down`` without ``enlarge`` keeps the requested aspect ratio when the
    image is smaller than the box: it crops to that ratio instead of the box.
    """
    target_w = scale_size(options.width, dpr_scale * options.zoom_width)
    target_h = scale_size(options.height, dpr_scale * options.zoom_height)
    scaled_w = scale_size(width, x_scale)
    scaled_h = scale_size(height, y_scale)
    crop_w, crop_h = target_w, target_h
    if options.resizing_type == "fill-down" and not options.enlarge:
        diff_w = target_w / scaled_w
        diff_h = target_h / scaled_h
        if diff_w > diff_h and diff_w > 1:
            crop_w, crop_h = scaled_w, scale_size(scaled_w, target_h / target_w)
        elif diff_h > diff_w and diff_h > 1:
            crop_w, crop_h = scale_size(scaled_h, target_w / target_h), scaled_h
    return _Sizes((target_w, target_h), (scaled_w, scaled_h), (crop_w, crop_h))


def aspect_ratio_size(width: int, height: int, box_width: int, box_height: int) -> tuple[int, int]:
    """``width`` x ``height`` grown on one side to the box's aspect ratio (0, 0 when it has it)."""
    diff_w = box_width / width
    diff_h = box_height / height
    if diff_h > diff_w:
        return width, scale_size(width, box_height / box_width)
    if diff_w > diff_h:
        return scale_size(height, box_width / box_height), height
    return 0, 0


def scaled_padding(options: Options, dpr_scale: float) -> tuple[int, int, int, int]:
    """Padding in output pixels (CSS pixels times the effective dpr)."""
    top, right, bottom, left = options.padding
    return (
        scale_size_to_even(top, dpr_scale),
        scale_size_to_even(right, dpr_scale),
        scale_size_to_even(bottom, dpr_scale),
        scale_size_to_even(left, dpr_scale),
    )


def _result_and_canvas(sizes: _Sizes, options: Options) -> tuple[int, ...]:
    """Size after crop-to-box, after extend, and after extend to the aspect ratio."""
    result_w = min_non_zero(sizes.result_crop[0], sizes.scaled[0])
    result_h = min_non_zero(sizes.result_crop[1], sizes.scaled[1])
    extended_w, extended_h = result_w, result_h
    if options.extend:
        extended_w = max(result_w, sizes.target[0])
        extended_h = max(result_h, sizes.target[1])
    canvas_w, canvas_h = extended_w, extended_h
    if options.extend_aspect_ratio and all(sizes.target):
        aspect_w, aspect_h = aspect_ratio_size(result_w, result_h, *sizes.target)
        if aspect_w and aspect_h:  # never smaller than the image, as imgproxy's extend
            canvas_w = max(canvas_w, aspect_w)
            canvas_h = max(canvas_h, aspect_h)
    return result_w, result_h, canvas_w, canvas_h, extended_w, extended_h


def plan_geometry(
    width: int,
    height: int,
    options: Options,
    *,
    orientation: int = 1,
    max_result_dimension: int,
) -> Geometry:
    """Plan the output of ``options`` applied to a ``width`` x ``height`` source.

    ``width``/``height`` are the stored size (as the header says, one frame for
    animations); ``orientation`` is the EXIF orientation 1..8. A
    ``max_result_dimension`` of 0 disables the limit. It has no default: every
    caller passes the configured limit, so an estimate can never plan with
    another limit than the render. The request's own ``max_result_dimension``
    lowers it here, so the tags, the estimate and the render all see it.
    """
    if width < 1 or height < 1:
        raise ValueError(f"source size must be positive, got {width}x{height}")
    if orientation_swaps_sides(orientation, options.auto_rotate, options.rotate):
        width, height = height, width
    crop = options.crop
    crop_w = crop_size(width, crop.width) if crop else 0
    crop_h = crop_size(height, crop.height) if crop else 0
    region_w = min_non_zero(crop_w, width)
    region_h = min_non_zero(crop_h, height)

    x_scale, y_scale, dpr_scale = compute_scales(region_w, region_h, options)
    sizes = compute_sizes(region_w, region_h, x_scale, y_scale, dpr_scale, options)
    padding = scaled_padding(options, dpr_scale)

    max_result_dimension = result_dimension_limit(
        max_result_dimension, options.max_result_dimension
    )
    if max_result_dimension > 0:
        _, _, out_w, out_h, _, _ = _result_and_canvas(sizes, options)
        out_w += padding[1] + padding[3]
        out_h += padding[0] + padding[2]
        if max(out_w, out_h) > max_result_dimension:
            down = max_result_dimension / max(out_w, out_h)
            x_scale = max(x_scale * down, 1.0 / region_w)
            y_scale = max(y_scale * down, 1.0 / region_h)
            dpr_scale *= down
            sizes = compute_sizes(region_w, region_h, x_scale, y_scale, dpr_scale, options)
            padding = scaled_padding(options, dpr_scale)

    result_w, result_h, canvas_w, canvas_h, extended_w, extended_h = _result_and_canvas(
        sizes, options
    )
    return Geometry(
        source_width=width,
        source_height=height,
        crop_width=region_w,
        crop_height=region_h,
        scaled_width=sizes.scaled[0],
        scaled_height=sizes.scaled[1],
        result_width=result_w,
        result_height=result_h,
        canvas_width=canvas_w,
        canvas_height=canvas_h,
        padding=padding,
        target_width=sizes.target[0],
        target_height=sizes.target[1],
        dpr_scale=dpr_scale,
        extended_width=extended_w,
        extended_height=extended_h,
    )


#: Compass gravities that pin an edge; the rest of the axis is centred.
NORTH_GRAVITIES = frozenset({"no", "noea", "nowe"})
SOUTH_GRAVITIES = frozenset({"so", "soea", "sowe"})
EAST_GRAVITIES = frozenset({"ea", "noea", "soea"})
WEST_GRAVITIES = frozenset({"we", "nowe", "sowe"})


def _gravity_offset(size: int, offset: float, offset_scale: float) -> int:
    """An offset in pixels: absolute (times ``offset_scale``) when >= 1, else a fraction."""
    if abs(offset) >= 1:
        return round(offset * offset_scale)
    return scale_size_to_even(size, offset)


def place(
    outer_width: int,
    outer_height: int,
    inner_width: int,
    inner_height: int,
    gravity: Gravity,
    offset_scale: float = 1.0,
    *,
    overflow: bool = False,
) -> tuple[int, int]:
    """Left/top of an inner box inside an outer one, anchored by ``gravity``.

    Used both to crop (inner = the kept region) and to extend (inner = the
    image on a larger canvas). Compass offsets move the box away from the
    anchored edge; ``fp`` centres the box on a focus point given as fractions.
    The box is kept inside the outer one; with ``overflow`` (a watermark) it
    may stick out as long as one pixel of it overlaps. ``sm`` is placed as
    ``ce`` here: the pipeline asks libvips for the attention crop instead
    when it can.
    """
    if gravity.type == "fp":
        left = scale_size_to_even(outer_width, gravity.x) - inner_width // 2
        top = scale_size_to_even(outer_height, gravity.y) - inner_height // 2
    else:
        off_x = _gravity_offset(outer_width, gravity.x, offset_scale)
        off_y = _gravity_offset(outer_height, gravity.y, offset_scale)
        left = round((outer_width - inner_width + 1) / 2) + off_x
        top = round((outer_height - inner_height + 1) / 2) + off_y
        if gravity.type in NORTH_GRAVITIES:
            top = off_y
        if gravity.type in SOUTH_GRAVITIES:
            top = outer_height - inner_height - off_y
        if gravity.type in EAST_GRAVITIES:
            left = outer_width - inner_width - off_x
        if gravity.type in WEST_GRAVITIES:
            left = off_x
    if overflow:
        left = max(1 - inner_width, min(left, outer_width - 1))
        top = max(1 - inner_height, min(top, outer_height - 1))
    else:
        left = max(0, min(left, outer_width - inner_width))
        top = max(0, min(top, outer_height - inner_height))
    return left, top
