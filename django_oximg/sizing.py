"""sorl-thumbnail's and easy-thumbnails' sizes, as options that give exactly them.

A site moving from either package keeps every thumbnail's size to the pixel
with ``sizing="sorl"`` or ``sizing="easy-thumbnails"`` (usually in the
``TAG_DEFAULTS`` setting). Their arithmetic differs from imgproxy's in two
ways:

* Python's ``round()`` rounds halves to even, imgproxy rounds them up: a
  4:3 photo at width 150 is 112 high there, 113 here.
* sorl-thumbnail first derives a missing side from the aspect ratio,
  rounded, then fits into that box, so the rounded side can shrink the
  other: the same photo at ``"150"`` is 149x112 in sorl-thumbnail.

So the tag computes the package's size from the source's header and asks
for exactly that: ``rs:force:W:H`` for a fit (which is what the packages do:
they resize to the rounded size), ``rs:fill:W:H`` for a crop, and
``padding`` where the package pads, placed as it places it.

sorl-thumbnail also places a crop its own way: its ``parse_crop`` puts the
window at ``int(slack * percent / 100)`` of the scaled image, truncated, so
a centred crop with an odd number of pixels to lose keeps the extra one on
the right (or bottom). imgproxy's centre rounds ``(slack + 1) / 2`` instead,
half to even, which puts the window one pixel further right or down for
three slacks in four. easy-thumbnails centres the window on its focal
point as ``int(side * percent / 100) - int(window / 2)``. So a crop by a
compass word (``center``, ``top``, ``left``...), and with easy-thumbnails a
focus point, is asked for as a gravity anchored top left with the package's
offsets in pixels (``g:nowe:X:Y``), which is its place exactly. Only what both
packages can express is translated; a request with a ``dpr``, a crop
region, a rotation, minimum sizes or padding of its own keeps imgproxy's
arithmetic. Pure Python: no image is read.
"""

from __future__ import annotations

import math
from typing import Any

from django_oximg.core.options import Gravity, Options
from django_oximg.core.options.geometry import (
    EAST_GRAVITIES,
    NORTH_GRAVITIES,
    QUARTER_TURN_ORIENTATIONS,
    SOUTH_GRAVITIES,
    WEST_GRAVITIES,
)

#: (width, height)
Size = tuple[int, int]

#: The gravities sorl-thumbnail's crop words name: its "left top", "center", "bottom"...
COMPASS_GRAVITIES = frozenset(
    {"ce", *NORTH_GRAVITIES, *SOUTH_GRAVITIES, *EAST_GRAVITIES, *WEST_GRAVITIES}
)


def exact_size_options(
    sizing: str, width: int, height: int, orientation: int, effective: Options
) -> dict[str, Any] | None:
    """The options to add for ``sizing``'s size, or None where imgproxy's arithmetic stays.

    ``width``/``height``/``orientation`` are the source's header values;
    ``effective`` the options the URL would otherwise expand to. The
    changes are meant for the tag's own options, which come after any
    preset in the URL and so win over it.
    """
    if sizing == "imgproxy" or not translatable(effective):
        return None
    if effective.auto_rotate and orientation in QUARTER_TURN_ORIENTATIONS:
        width, height = height, width
    crop = effective.resizing_type == "fill"
    smart = crop and effective.gravity.type == "sm"
    box = (effective.width, effective.height)
    gravity = None
    if sizing == "sorl":
        scaled = sorl_scaled((width, height), box, crop, effective.enlarge)
        result, canvas, offset = sorl_size((width, height), scaled, box, crop, smart, effective)
        if crop and not smart:
            gravity = sorl_crop_gravity(scaled, result, effective.gravity)
    else:
        scaled, target = easy_scaled((width, height), box, crop, effective.enlarge)
        result, canvas, offset = easy_size(scaled, target, box, crop, effective)
        if crop and not smart:
            gravity = easy_crop_gravity(scaled, target, effective.gravity)
    left, top = offset
    padding = (top, canvas[0] - result[0] - left, canvas[1] - result[1] - top, left)
    exact: dict[str, Any] = {
        "resizing_type": "fill" if crop else "force",
        "width": result[0],
        "height": result[1],
        "enlarge": True,
        "extend": False,
        "padding": padding,
    }
    if gravity is not None:
        exact["gravity"] = gravity
    return exact


def translatable(options: Options) -> bool:
    """Whether the packages' arithmetic covers ``options`` (see the module's docstring)."""
    return (
        options.resizing_type in ("fit", "fill")
        and bool(options.width or options.height)
        and options.dpr == 1
        and options.crop is None
        and not options.rotate
        and not (options.min_width or options.min_height)
        and options.padding == (0, 0, 0, 0)
        and options.extend_gravity is None
    )


def sorl_round(number: float) -> int:
    """sorl-thumbnail's ``toint``: ``round()`` above 1, rounded up below (never 0)."""
    return round(number) if number > 1 else math.ceil(number)


def sorl_box(source: Size, box: Size) -> Size:
    """sorl-thumbnail's ``parse_geometry``: a side left free is derived from the ratio."""
    ratio = source[0] / source[1]
    return box[0] or sorl_round(box[1] * ratio), box[1] or sorl_round(box[0] / ratio)


def sorl_scaled(source: Size, box: Size, crop: bool, enlarge: bool) -> Size:
    """The size sorl-thumbnail's ``scale`` resizes ``source`` to, before any crop."""
    x, y = float(source[0]), float(source[1])
    width, height = sorl_box(source, box)
    factors = (width / x, height / y)
    factor = max(factors) if crop else min(factors)
    if factor < 1 or enlarge:
        return sorl_round(x * factor), sorl_round(y * factor)
    return source


def compass_percents(gravity: Gravity) -> tuple[int, int] | None:
    """How far across and down (0, 50 or 100 %) a compass gravity places a crop.

    None for any other gravity, and for one with offsets of its own.
    """
    if gravity.type not in COMPASS_GRAVITIES or gravity.x or gravity.y:
        return None
    across = 0 if gravity.type in WEST_GRAVITIES else 100 if gravity.type in EAST_GRAVITIES else 50
    down = 0 if gravity.type in NORTH_GRAVITIES else 100 if gravity.type in SOUTH_GRAVITIES else 50
    return across, down


def sorl_crop_offset(slack: int, percent: int) -> int:
    """sorl-thumbnail's ``parse_crop``: ``percent`` of the pixels to lose, truncated."""
    return int(max(0, min(slack * percent / 100.0, slack)))


def sorl_crop_gravity(scaled: Size, window: Size, gravity: Gravity) -> Gravity | None:
    """A gravity putting ``window`` where sorl-thumbnail crops it out of ``scaled``.

    For the compass gravities its crop words give (no offsets of their own);
    None for the rest (a focus point, a smart crop), which keep imgproxy's
    placement. Offsets from the top-left corner say sorl's place exactly
    (0 stays 0: a gravity offset below 1 is a fraction of the image).
    """
    percents = compass_percents(gravity)
    if percents is None:
        return None
    across, down = percents
    left = sorl_crop_offset(scaled[0] - window[0], across)
    top = sorl_crop_offset(scaled[1] - window[1], down)
    return Gravity("nowe", float(left), float(top))


def sorl_size(
    source: Size, scaled: Size, box: Size, crop: bool, smart: bool, options: Options
) -> tuple[Size, Size, Size]:
    """Result, canvas and the result's offset on it, as sorl-thumbnail's PIL engine makes them.

    Its ``parse_geometry`` with the ratio, ``crop`` (and ``_entropy_crop``
    for smart) and ``padding``, after ``scale`` (``scaled``, from :func:`sorl_scaled`).
    """
    width, height = sorl_box(source, box)
    result = scaled
    if smart:
        wanted = width / height
        result = (
            max(min(scaled[0], round(scaled[1] * wanted)), 1),
            max(min(scaled[1], round(scaled[0] / wanted)), 1),
        )
    elif crop:
        result = (min(scaled[0], width), min(scaled[1], height))
    if not options.extend or result == (width, height):
        return result, result, (0, 0)
    offset = (int((width - result[0]) / 2), int((height - result[1]) / 2))
    return result, (width, height), offset


def easy_scaled(source: Size, box: Size, crop: bool, enlarge: bool) -> tuple[Size, Size]:
    """The size easy-thumbnails' ``scale_and_crop`` resizes ``source`` to, and its target.

    The target is the box with a side left free derived from the scale.
    """
    x, y = float(source[0]), float(source[1])
    target_x, target_y = box
    factors = (target_x / x, target_y / y)
    scale = max(factors) if crop or not (target_x and target_y) else min(factors)
    if not target_x:
        target_x = round(x * scale)
    elif not target_y:
        target_y = round(y * scale)
    scaled = source
    if scale < 1 or (scale > 1 and enlarge):
        scaled = (max(1, round(x * scale)), max(1, round(y * scale)))
    return scaled, (target_x, target_y)


def easy_crop_offset(side: int, cut: int, percent: float) -> int:
    """easy-thumbnails' crop around a focal point ``percent`` along a side, kept inside."""
    return max(0, min(side - cut, int(side * percent / 100) - int(cut / 2)))


def easy_crop_gravity(scaled: Size, target: Size, gravity: Gravity) -> Gravity | None:
    """A gravity putting the window where easy-thumbnails crops it out of ``scaled``.

    Its crop centres the target on a focal point (50 %, 50 % unless
    ``target``), both halves truncated; an edge crop keeps that edge. For the
    compass gravities (no offsets of their own) and a focus point; None for
    the rest.
    """
    percents: tuple[float, float] | None
    if gravity.type == "fp":
        # Rounded to a billionth: 0.29 * 100 is 28.999999999999996.
        percents = round(gravity.x * 100, 9), round(gravity.y * 100, 9)
    else:
        # 0 % keeps the near edge and 100 % the far one (the offset is kept inside).
        percents = compass_percents(gravity)
    if percents is None:
        return None
    across, down = percents
    window = (min(scaled[0], target[0]), min(scaled[1], target[1]))
    left = easy_crop_offset(scaled[0], window[0], across)
    top = easy_crop_offset(scaled[1], window[1], down)
    return Gravity("nowe", float(left), float(top))


def easy_size(
    scaled: Size, target: Size, box: Size, crop: bool, options: Options
) -> tuple[Size, Size, Size]:
    """Result, canvas and offset, as easy-thumbnails' ``scale_and_crop`` and ``background`` do.

    ``scaled`` and ``target`` are :func:`easy_scaled`'s.
    """
    result, (target_x, target_y) = scaled, target
    if crop:
        result = (min(result[0], target_x), min(result[1], target_y))
    padded = options.extend and box[0] and box[1]
    if not padded or (result[0] >= box[0] and result[1] >= box[1]):
        return result, result, (0, 0)
    offset = ((box[0] - result[0]) // 2, (box[1] - result[1]) // 2)
    return result, box, offset


def sorl_margin(size: Size, box: Size) -> str:
    """sorl-thumbnail's ``margin`` filter: CSS margins centring ``size`` in ``box``.

    ``box`` is a geometry's width and height, 0 for a side left free (it
    is then derived from ``size``'s ratio, as sorl-thumbnail does). The odd
    pixel goes right and bottom; the values are truncated as its ``%d`` does.
    """
    width, height = size
    box_width, box_height = sorl_box(size, box)
    extra_x, extra_y = box_width - width, box_height - height
    top = bottom = extra_y / 2
    right = left = extra_x / 2
    if extra_x % 2:
        right += 1
    if extra_y % 2:
        bottom += 1
    return " ".join("%dpx" % side for side in (top, right, bottom, left))  # noqa: UP031
