"""The source's pixels, loaded as small as the plan allows.

Three ways, chosen from the plan and the settings:

* **Shrink on load** (no ``crop``): libvips' thumbnail straight to the
  planned size, reading the source bytes in place, so libvips picks the
  cheapest decode (JPEG DCT scaling, WebP/HEIF scaling, PNG/GIF line
  skipping), auto-rotates by EXIF and imports CMYK.
* **libjpeg-turbo** (a JPEG, ``JPEG_DECODER`` "libjpeg-turbo"): the pixels
  of the DCT-scaled decode come from :mod:`django_oximg.core.pipeline.jpeg`, faster
  than the mozjpeg in pyvips-binary, and :func:`resize_decoded` does what
  libvips' thumbnail would; what it declines, libvips decodes.
* **Full load** (``crop``, ``trim``): the whole source at full size, as
  the region is cut before scaling. A JPEG whose ``crop`` region is then
  shrunk is decoded at a DCT scale instead (:func:`load_crop`), the region
  cut from that.

A HEIC (a HEIF of HEVC images) is decoded whole by pillow-heif
(:mod:`~django_oximg.core.pipeline.heic`), then taken on as a libjpeg-turbo
decode is.

With ``enforce_thumbnail`` a HEIF/AVIF source's embedded thumbnail is
loaded instead of its main image (libheif gives the main image when there
is none); the probe already planned from the thumbnail's size.

In the high-quality mode (:attr:`Plan.linear_light`) the first two stop at
a decode of at least :data:`~django_oximg.core.pipeline.plan.HIGH_QUALITY_MARGIN`
times the planned size (:func:`load_supersampled`), and the resize step
does the rest in linear light.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pyvips

from django_oximg.core.options import Options
from django_oximg.core.options.geometry import QUARTER_TURN_ORIENTATIONS, place
from django_oximg.core.pipeline import jpeg
from django_oximg.core.pipeline.heic import heic_decoded, needs_pillow_heif
from django_oximg.core.pipeline.libvips import COPYRIGHT_FIELDS, EXIF_FIELD, ICC_FIELD, Image
from django_oximg.core.pipeline.plan import HIGH_QUALITY_MARGIN, Plan, RenderSettings
from django_oximg.core.pipeline.probe import SourceInfo, memory_source
from django_oximg.core.pipeline.steps.resize import resize_to

#: JPEG DCT scales libjpeg can decode at.
JPEG_SHRINKS = (8, 4, 2)

#: The margin libvips' thumbnail keeps itself: no explicit JPEG shrink needed.
LIBVIPS_SHRINK_MARGIN = 2.0


class Loaded(NamedTuple):
    """A loaded source, and whether its pixels are all in memory already."""

    image: Image
    #: True when nothing upstream streams from a decoder (libjpeg-turbo
    #: decoded it whole, or it was copied to memory): computing the result on
    #: the render thread then holds little more than the result's pixels.
    in_memory: bool


def load(data: bytes, plan: Plan, settings: RenderSettings) -> Loaded:
    """``data`` loaded for ``plan``: shrunk on load, or whole for ``crop`` and ``trim``."""
    if needs_pillow_heif(plan.source):
        return heic_loaded(data, plan)
    if not plan.full_load:
        if plan.linear_light and not plan.source.embedded_thumbnail:
            return load_supersampled(data, plan, settings)
        return load_thumbnail(data, plan, settings)
    cropped = load_crop(data, plan, settings)
    if cropped is not None:
        return cropped
    return Loaded(load_full(data, plan), False)


def heic_loaded(data: bytes, plan: Plan) -> Loaded:
    """A HEIC source, decoded whole by pillow-heif (:mod:`.heic`; it has no
    shrink-on-load), already upright: resized to the load size as libvips'
    thumbnail would, unless ``crop``/``trim`` or the high-quality mode's
    resize step take it from its full size."""
    image = heic_decoded(data, plan.options)
    if plan.full_load or plan.linear_light:
        return Loaded(image, True)
    width, height = plan.load_size
    return Loaded(resize_decoded(image, width, height, 1), True)


def loader_options(animated: bool) -> str:
    """Option string for the loader: fail on truncation, all frames when animated."""
    return "fail_on=truncated,n=-1" if animated else "fail_on=truncated"


def jpeg_shrink(
    source_width: int, source_height: int, width: int, height: int, margin: float
) -> int:
    """The largest DCT scale leaving at least ``margin`` x ``width`` x ``height``."""
    for shrink in JPEG_SHRINKS:
        if source_width / shrink >= width * margin and source_height / shrink >= height * margin:
            return shrink
    return 1


def upright_size(info: SourceInfo, options: Options) -> tuple[int, int]:
    """The source's size after EXIF auto-rotation (orientations 5-8 swap the axes)."""
    if options.auto_rotate and info.orientation >= 5:
        return info.height, info.width
    return info.width, info.height


def load_thumbnail(data: bytes, plan: Plan, settings: RenderSettings) -> Loaded:
    """Load straight at the planned scaled size (shrink-on-load), upright.

    The planned size is in the final orientation, so a ``rotate`` quarter
    turn (applied later) swaps it back (:attr:`Plan.load_size`). CMYK is
    converted to sRGB here; tagged RGB keeps its profile for the colour step.

    libvips decodes a JPEG at a DCT scale that leaves a 2x margin for the
    resize. With ``settings.jpeg_shrink_margin`` below 2, a JPEG is decoded
    here at the smaller scale that margin allows, and ``thumbnail_image``
    does the rest (rotation, CMYK import and the resize, exactly as above).
    With ``settings.jpeg_decoder`` "libjpeg-turbo" (the default) the pixels
    of that decode come from :func:`turbo_decoded` instead, at any margin,
    and :func:`resize_decoded` does what ``thumbnail_image`` would; what it
    declines, libvips decodes. Only that decode is :attr:`Loaded.in_memory`.
    """
    width, height = plan.load_size
    info, options = plan.source, plan.options
    if info.embedded_thumbnail:
        # libvips' thumbnail decides for itself whether a HEIF's thumbnail
        # is large enough; enforce_thumbnail takes it whatever its size.
        thumbnail = pyvips.Image.heifload_source(
            memory_source(data), thumbnail=True, fail_on="truncated"
        )
        image = thumbnail.thumbnail_image(
            width, height=height, size="force", no_rotate=not options.auto_rotate
        )
        return Loaded(image, False)
    if info.format == "jpeg":
        shrink, decoded = scaled_jpeg(data, plan, settings, decode_margin(plan, settings))
        if decoded is not None:
            return turbo_loaded(decoded, plan)
        if shrink > dct_shrink(plan, LIBVIPS_SHRINK_MARGIN):
            image = libvips_jpeg(data, shrink).thumbnail_image(
                width, height=height, size="force", no_rotate=not options.auto_rotate
            )
            return Loaded(image, False)
    return Loaded(libvips_thumbnail(data, plan), False)


def load_supersampled(data: bytes, plan: Plan, settings: RenderSettings) -> Loaded:
    """Load upright at no less than ``HIGH_QUALITY_MARGIN`` x the planned size, for the mode.

    A JPEG is decoded at the DCT scale leaving that margin (or the larger
    ``settings.jpeg_shrink_margin``) and only turned upright: the resize
    step takes it from there in linear light. Other formats go through
    libvips' thumbnail in its linear mode, straight to the planned size:
    what shrink-on-load they allow (WebP, HEIF) and the whole reduction in
    linear light, alpha premultiplied there. A PNG has no shrink-on-load,
    so every pixel is converted to floats: about 4x the CPU of the
    standard mode for a 4 MP PNG (docs/quality.md).
    """
    info, options = plan.source, plan.options
    if info.format == "jpeg":
        shrink, decoded = scaled_jpeg(data, plan, settings, decode_margin(plan, settings))
        if decoded is not None:
            return turbo_loaded(decoded, plan)
        decoded = libvips_jpeg(data, shrink)
        turned = options.auto_rotate and info.orientation >= 5
        size = (decoded.height, decoded.width) if turned else (decoded.width, decoded.height)
        image = decoded.thumbnail_image(
            size[0], height=size[1], size="force", no_rotate=not options.auto_rotate
        )
        return Loaded(image, False)
    return Loaded(libvips_thumbnail(data, plan, linear=True), False)


def libvips_thumbnail(data: bytes, plan: Plan, linear: bool = False) -> Image:
    """libvips' own thumbnail of ``data`` at the planned size (its shrink-on-load, if any)."""
    width, height = plan.load_size
    return pyvips.Image.thumbnail_source(
        memory_source(data),
        width,
        height=height,
        size="force",
        no_rotate=not plan.options.auto_rotate,
        linear=linear,
        option_string=loader_options(plan.animated),
    )


def dct_shrink(plan: Plan, margin: float) -> int:
    """The DCT scale of :func:`jpeg_shrink` for ``plan``'s upright source and load size."""
    width, height = plan.load_size
    return jpeg_shrink(*upright_size(plan.source, plan.options), width, height, margin)


def applied_orientation(plan: Plan) -> int:
    """The EXIF orientation the load applies: the source's, or 1 (none) without ``auto_rotate``."""
    return plan.source.orientation if plan.options.auto_rotate else 1


def scaled_jpeg(
    data: bytes, plan: Plan, settings: RenderSettings, margin: float
) -> tuple[int, Image | None]:
    """The DCT scale leaving ``margin`` x the load size, and libjpeg-turbo's decode at it.

    The decode (not yet upright, nor resized) is None when libvips is to
    decode: ``settings.jpeg_decoder`` "libvips", or :func:`turbo_decoded`
    declined.
    """
    shrink = dct_shrink(plan, margin)
    return shrink, turbo_decoded_if_asked(data, shrink, plan, settings)


def turbo_decoded_if_asked(
    data: bytes, shrink: int, plan: Plan, settings: RenderSettings
) -> Image | None:
    """:func:`turbo_decoded` where ``settings.jpeg_decoder`` asks for libjpeg-turbo; None:
    libvips decodes."""
    if settings.jpeg_decoder != "libjpeg-turbo":
        return None
    return turbo_decoded(data, shrink, plan.source, plan.options)


def decode_margin(plan: Plan, settings: RenderSettings) -> float:
    """How much larger than its target a JPEG is decoded: ``settings.jpeg_shrink_margin``,
    or the high-quality mode's margin where that is larger (its resize needs the pixels)."""
    if plan.linear_light:
        return max(settings.jpeg_shrink_margin, HIGH_QUALITY_MARGIN)
    return settings.jpeg_shrink_margin


def turbo_loaded(decoded: Image, plan: Plan) -> Loaded:
    """What the load gives ``plan`` of libjpeg-turbo's decode: upright, and at the
    load size unless the high-quality mode's resize step takes it there."""
    orientation = applied_orientation(plan)
    if plan.linear_light:
        return Loaded(decoded if orientation == 1 else decoded.autorot(), True)
    width, height = plan.load_size
    return Loaded(resize_decoded(decoded, width, height, orientation), True)


def libvips_jpeg(data: bytes, shrink: int) -> Image:
    """libvips' decode at 1/``shrink``, streamed (not yet upright, CMYK not yet imported)."""
    return pyvips.Image.jpegload_source(
        memory_source(data), shrink=shrink, access="sequential", fail_on="truncated"
    )


def resize_decoded(image: Image, width: int, height: int, orientation: int) -> Image:
    """What ``thumbnail_image(width, height, size="force")`` does to a turbo decode, for less.

    The decode is 8-bit RGB or grey, without alpha, and needs neither CMYK
    import nor shrinking on load, so of ``thumbnail_image``'s steps only
    the resize and the EXIF ``orientation`` (1: none) are left; both are
    done here, in that order, as it does. Same pixels (tests/test_jpeg.py
    compares every orientation and option with libvips' own decode), about
    2 % fewer instructions per medium render (docs/BENCHMARKS.md).
    """
    if orientation in QUARTER_TURN_ORIENTATIONS:  # resize to the size before the turn
        width, height = height, width
    image = resize_to(image, width, height)
    return image if orientation == 1 else image.autorot()


def turbo_decoded(data: bytes, shrink: int, info: SourceInfo, options: Options) -> Image | None:
    """The JPEG decoded by libjpeg-turbo at 1/``shrink``, as libvips' loader would give it.

    None when :func:`django_oximg.core.pipeline.jpeg.decode_scaled` leaves the file to
    libvips, or when the output keeps all metadata (``strip_metadata`` off:
    libvips' loader carries every EXIF, XMP and IPTC field). Otherwise the
    fields the later steps read come from libvips' header parse, which
    decodes no pixels (:attr:`SourceInfo.header`, read by the probe):
    the ICC profile, resolution, orientation and, for
    ``keep_copyright`` when libvips found an Artist or Copyright tag, the
    EXIF block (the encoder writes only those two tags of it,
    :mod:`django_oximg.core.exif`). The pixels
    are the same as libvips' (tests/test_jpeg.py), so the output bytes are too.
    """
    if not options.strip_metadata:
        return None
    decoded = jpeg.decode_scaled(data, shrink)
    if decoded is None:
        return None
    header = info.header
    if header is None:
        header = pyvips.Image.jpegload_source(memory_source(data), access="sequential")
    image = pyvips.Image.new_from_memory(
        decoded.pixels, decoded.width, decoded.height, decoded.bands, "uchar"
    )
    # libvips' loader rounds the scaled size down; libjpeg rounds it up.
    image = image.crop(0, 0, info.width // shrink, info.height // shrink).copy(
        interpretation="srgb" if decoded.bands == 3 else "b-w",
        xres=header.xres,
        yres=header.yres,
    )
    copied = [ICC_FIELD, "resolution-unit"]
    if options.keep_copyright and any(header.get_typeof(name) for name in COPYRIGHT_FIELDS):
        copied.append(EXIF_FIELD)
    for name in copied:
        gtype = header.get_typeof(name)
        if gtype:
            image.set_type(gtype, name, header.get(name))
    if info.orientation != 1:
        image.set_type(pyvips.GValue.gint_type, "orientation", info.orientation)
    return image


def load_full(data: bytes, plan: Plan) -> Image:
    """Load at full size for ``crop`` and ``trim`` (they cut before scaling)."""
    options, animated = plan.options, plan.animated
    kwargs: dict[str, Any] = {"access": "random", "fail_on": "truncated"}
    if animated:
        kwargs["n"] = -1
    if plan.source.embedded_thumbnail:
        kwargs["thumbnail"] = True
    image = pyvips.Image.new_from_buffer(data, "", **kwargs)
    if options.auto_rotate and not animated:
        image = image.autorot()
    return image


def crop_shrink(plan: Plan, settings: RenderSettings) -> int:
    """The DCT scale :func:`load_crop` decodes a ``crop`` at; 1: load at full size.

    Only a still JPEG whose region is cut from the upright source as stored
    (no ``rotate`` or flip, which the steps apply before the crop; no
    ``trim``, which needs the source itself; no smart crop, which looks at
    the whole region's pixels at full size), and only when the region is
    larger than the scaled size by ``settings.jpeg_shrink_margin`` (the
    high-quality mode's margin, if larger) at that scale: the same margin
    the shrink-on-load path leaves for its resize.
    """
    options, info, geometry = plan.options, plan.source, plan.geometry
    crop = options.crop
    if crop is None or plan.trims or plan.animated or info.format != "jpeg":
        return 1
    if info.embedded_thumbnail or options.rotate % 360 or options.flip_horizontal:
        return 1
    if options.flip_vertical or (crop.gravity or options.gravity).type == "sm":
        return 1
    return jpeg_shrink(
        geometry.crop_width,
        geometry.crop_height,
        geometry.scaled_width,
        geometry.scaled_height,
        decode_margin(plan, settings),
    )


def load_crop(data: bytes, plan: Plan, settings: RenderSettings) -> Loaded | None:
    """A JPEG's ``crop`` region, decoded at the DCT scale of :func:`crop_shrink`.

    A small crop of a large photo followed by a downscale (Wagtail's
    ``fill-`` around a focal point is one) would otherwise decode every
    pixel at full size. The region is placed on the full-size source exactly
    as the crop step places it, then cut from the scaled decode with its
    edges rounded to that decode's pixels: less than half an output pixel
    off at the margin kept. The crop step then has nothing left to cut
    (the image is no larger than its region) and the resize step takes the
    region to the scaled size. None: load at full size (:func:`load_full`).
    """
    shrink = crop_shrink(plan, settings)
    if shrink == 1:
        return None
    options, geometry = plan.options, plan.geometry
    assert options.crop is not None
    decoded = turbo_decoded_if_asked(data, shrink, plan, settings)
    in_memory = decoded is not None
    if decoded is None:
        decoded = pyvips.Image.jpegload_source(
            memory_source(data), shrink=shrink, access="random", fail_on="truncated"
        )
    image = decoded.autorot() if applied_orientation(plan) != 1 else decoded
    full_width, full_height = geometry.source_width, geometry.source_height
    width, height = geometry.crop_width, geometry.crop_height
    gravity = options.crop.gravity or options.gravity
    left, top = place(full_width, full_height, width, height, gravity, 1.0)
    x_scale, y_scale = image.width / full_width, image.height / full_height
    x0, y0 = round(left * x_scale), round(top * y_scale)
    x1 = min(max(round((left + width) * x_scale), x0 + 1), image.width)
    y1 = min(max(round((top + height) * y_scale), y0 + 1), image.height)
    return Loaded(image.crop(x0, y0, x1 - x0, y1 - y0), in_memory)
