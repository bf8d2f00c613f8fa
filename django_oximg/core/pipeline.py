"""The image pipeline: pyvips only, no Django, no settings.

This is the only module that imports pyvips (importing it initialises libvips).
:func:`configure` runs once per process before any image is touched: it turns
the operation cache off, blocks loaders we never want to reach untrusted bytes
and sets libvips' thread count.

:func:`render` runs a fixed order of small steps, each ``(image, ...) -> image``:

1. load, shrinking on load to the planned size (libvips ``thumbnail``), EXIF
   auto-rotate, CMYK to sRGB; or, with the ``crop`` option, a full load
2. per frame: ``rotate``/``flip`` -> ``crop`` -> resize to plan -> colour to
   8-bit sRGB -> crop to the requested box (gravity) -> ``blur`` ->
   ``sharpen`` -> ``extend`` -> ``padding`` -> flatten alpha
3. strip metadata, encode (again at lower quality for ``max_bytes``); a
   JPEG or WebP result of pixels already in memory is computed on the
   calling thread and encoded by :mod:`django_oximg.core.encoder`

:func:`summarise` gives the ``/info`` endpoint a source's BlurHash and dominant
colour from one tiny shrink-on-load thumbnail.

Sizes come from :mod:`django_oximg.core.geometry`, so the output is exactly the
size the template tag predicted. Every ``pyvips.Error`` becomes one of the
project's errors with the libvips message kept as ``detail``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import blurhash
import pyvips

from django_oximg.core import encoder, jpeg
from django_oximg.core.deadlines import Deadline
from django_oximg.core.errors import (
    InvalidImage,
    OximgError,
    ProcessingTimeout,
    ResultTooLarge,
    UnsupportedFormat,
)
from django_oximg.core.geometry import (
    QUARTER_TURN_ORIENTATIONS,
    Geometry,
    place,
    plan_geometry,
)
from django_oximg.core.options import Gravity, Options

#: A pyvips image; pyvips ships no type information.
Image = Any


@dataclass(frozen=True)
class SourceInfo:
    """What a source's header says, read without decoding pixels."""

    width: int
    height: int
    #: libvips loader family: "jpeg", "png", "webp", "gif", "heif", "tiff", ...
    format: str
    #: Number of pages/frames (1 for still images).
    frames: int = 1
    #: EXIF orientation 1..8 (1 when absent).
    orientation: int = 1
    has_alpha: bool = False
    #: Progressive JPEG / interlaced PNG or GIF: these cost more memory to decode.
    interlaced: bool = False
    #: The header as libvips read it (a pyvips image, no pixels decoded), so
    #: that :func:`render` need not parse it again; None when not at hand.
    header: Image = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RenderSettings:
    """Site-wide pipeline defaults, built once from settings by the caller."""

    #: Default quality per output format.
    quality: dict[str, int] = field(
        default_factory=lambda: {"jpeg": 80, "webp": 75, "avif": 65, "png": 0, "gif": 0}
    )
    #: Largest output side in pixels; larger requests are clamped.
    max_result_dimension: int = 8192
    #: More frames than this and only the first frame is used.
    max_animation_frames: int = 100
    #: libvips AVIF encoder effort (0 fastest .. 9 slowest); see docs/pipeline.md.
    avif_effort: int = 2
    #: JPEG sources decode at the smallest DCT scale (1/2, 1/4, 1/8) that
    #: still leaves this many times the target size for the final resize.
    #: 2.0 is libvips' own rule; 1 (the default) is imgproxy's and Pillow's
    #: draft mode: 11 % less CPU than 1.5 on a 4x downscale for 0.7 less
    #: SSIMULACRA2. See docs/BENCHMARKS.md (JPEG decode scale).
    jpeg_shrink_margin: float = 1.0
    #: Who decodes JPEG pixels: "libjpeg-turbo" (simplejpeg, faster than the
    #: mozjpeg inside pyvips-binary; :mod:`django_oximg.core.jpeg`) or "libvips".
    jpeg_decoder: str = "libjpeg-turbo"
    #: Who encodes JPEG and WebP results whose pixels are already in memory:
    #: "pillow" (on the render thread; :mod:`django_oximg.core.encoder`) or
    #: "libvips" (its savers, with their own threads).
    encoder: str = "pillow"


@dataclass(frozen=True)
class Rendered:
    """An encoded result."""

    data: bytes
    format: str
    width: int
    #: Height of one frame (the whole image for still output).
    height: int
    #: Frames in the output (1 unless an animation was kept).
    frames: int = 1

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.format]


CONTENT_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "avif": "image/avif",
    "gif": "image/gif",
}

#: Loaders never offered untrusted bytes: they parse formats an image server has
#: no use for and have a history of memory-safety bugs (libvips marks most as
#: untrusted too). Names absent from this libvips build are ignored by libvips.
BLOCKED_LOADERS = (
    "VipsForeignLoadSvg",
    "VipsForeignLoadPdf",
    "VipsForeignLoadMagick",
    "VipsForeignLoadVips",
    "VipsForeignLoadCsv",
    "VipsForeignLoadMatrix",
    "VipsForeignLoadRaw",
    "VipsForeignLoadPpm",
    "VipsForeignLoadRad",
    "VipsForeignLoadFits",
    "VipsForeignLoadAnalyze",
    "VipsForeignLoadOpenslide",
    "VipsForeignLoadOpenexr",
    "VipsForeignLoadMat",
    "VipsForeignLoadDcraw",
)

#: libvips saver per output format, used to tell whether a format is available.
SAVERS = {
    "jpeg": "jpegsave_buffer",
    "png": "pngsave_buffer",
    "webp": "webpsave_buffer",
    "avif": "heifsave_buffer",
    "gif": "gifsave_buffer",
}

#: Formats whose encoder has a quality setting (the ``max_bytes`` loop lowers it).
LOSSY_FORMATS = frozenset({"jpeg", "webp", "avif"})

#: Source formats whose frames we keep as an animation.
ANIMATED_SOURCES = frozenset({"gif", "webp"})

#: Browsers play shorter GIF/WebP delays at 100 ms or as fast as they can; 20 ms
#: is the shortest delay that plays consistently.
MIN_FRAME_DELAY_MS = 20

#: Quality used when neither the request nor the settings give one.
FALLBACK_QUALITY = 80

#: The ``max_bytes`` loop gives up below this quality: the result is garbage.
MIN_QUALITY = 10

#: Metadata kept with ``keep_copyright``: who made the picture and who owns it.
COPYRIGHT_FIELDS = frozenset({"exif-ifd0-Copyright", "exif-ifd0-Artist"})

WHITE = (255, 255, 255)

_configured = False
_configure_lock = threading.Lock()


# --- set-up -------------------------------------------------------------------


def configure(concurrency: int | None = None, block_untrusted: bool = True) -> None:
    """Set libvips up for untrusted input; call once at process start.

    The operation cache is turned off: it keeps decoded images alive across
    requests (memory the budget cannot see) and every request is different.
    ``concurrency`` is libvips' worker threads per image (None keeps libvips'
    default, the number of CPUs). libvips' info and debug messages stop
    reaching Python logging (:func:`quiet_libvips_info`).
    """
    global _configured
    with _configure_lock:
        pyvips.cache_set_max(0)
        pyvips.cache_set_max_mem(0)
        pyvips.cache_set_max_files(0)
        quiet_libvips_info()
        if block_untrusted:
            pyvips.block_untrusted_set(True)
            for name in BLOCKED_LOADERS:
                pyvips.operation_block_set(name, True)
        if concurrency is not None:
            pyvips.concurrency_set(concurrency)
        _configured = True


#: GLib log levels still passed to Python logging (as pyvips does for all).
LOGGED_LEVELS = (
    pyvips.GLogLevelFlags.LEVEL_ERROR
    | pyvips.GLogLevelFlags.LEVEL_CRITICAL
    | pyvips.GLogLevelFlags.LEVEL_WARNING
    | pyvips.GLogLevelFlags.LEVEL_MESSAGE
    | pyvips.GLogLevelFlags.FLAG_FATAL
    | pyvips.GLogLevelFlags.FLAG_RECURSION
)


def quiet_libvips_info() -> None:
    """Keep libvips' warnings in Python logging, but not its info and debug lines.

    pyvips routes every libvips log line to a Python callback, and libvips
    8.18 writes about ten info and debug lines per thumbnail (the loader it
    picked, the shrink plan, the resize kernels, "threadpool completed"),
    each from inside a C call, so each takes the GIL back while the render
    threads need it. Below warning level the lines now go to GLib's default
    handler, which drops them unless ``G_MESSAGES_DEBUG`` asks for them.
    Relies on two names private to pyvips; without them nothing changes.
    """
    handler_id = getattr(pyvips, "_log_handler_id", None)
    callback = getattr(pyvips, "_log_handler_cb", None)
    if not handler_id or callback is None:
        return
    glib = pyvips.glib_lib
    glib.g_log_remove_handler(b"VIPS", handler_id)
    pyvips._log_handler_id = glib.g_log_set_handler(
        b"VIPS", LOGGED_LEVELS, callback, pyvips.ffi.NULL
    )


def _ensure_configured() -> None:
    """Configure with safe defaults if the caller forgot, so blocking is never skipped."""
    if not _configured:
        configure()


def libvips_version() -> str:
    """The running libvips version, e.g. ``"8.18.3"``."""
    return ".".join(str(pyvips.version(part)) for part in range(3))


def check_libvips_version(minimum: tuple[int, int, int] = (8, 18, 3)) -> None:
    """Refuse to run on a libvips older than ``minimum`` (security fixes, loader limits)."""
    running = tuple(int(pyvips.version(part)) for part in range(3))
    if running < minimum:
        wanted = ".".join(map(str, minimum))
        raise RuntimeError(
            f"django-oximg needs libvips >= {wanted}, but {libvips_version()} is loaded; "
            "install a newer pyvips-binary or system libvips"
        )


def saver_available(fmt: str) -> bool:
    """Whether this libvips build can encode ``fmt``."""
    try:
        pyvips.Operation.new_from_name(SAVERS[fmt])
    except (KeyError, pyvips.Error):
        return False
    return True


# --- errors -------------------------------------------------------------------


#: Signatures of formats we recognise but refuse to load (see BLOCKED_LOADERS).
#: Only consulted after libvips found no loader, to tell "a format we block"
#: (415) from "not an image at all" (422). Text formats with no signature
#: (CSV, matrix) cannot be told from garbage and count as not an image.
BLOCKED_SIGNATURES = (
    re.compile(
        # The doctype may hold an internal subset ("[<!ENTITY ...>]"), as XXE attacks do.
        rb"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*"
        rb"(?:<!DOCTYPE\s+svg[^>\[]*(?:\[.*?\][^>]*)?>\s*)?<svg",
        re.S | re.I,
    ),
    re.compile(rb"\A%PDF-"),
    re.compile(rb"\A(?:\x08\xf2\xa6\xb6|\xb6\xa6\xf2\x08)"),  # libvips native .v
    re.compile(rb"\AP[1-7Ff]\s"),  # PBM/PGM/PPM/PFM
    re.compile(rb"\ASIMPLE  ="),  # FITS
    re.compile(rb"\A#\?RADIANCE"),
    re.compile(rb"\AMATLAB"),
    re.compile(rb"\Av/1\x01"),  # OpenEXR
)


def is_blocked_format(data: bytes) -> bool:
    """Whether ``data`` starts like a format we deliberately do not load."""
    head = data[:4096]
    return any(signature.match(head) for signature in BLOCKED_SIGNATURES)


def _wrap_error(error: pyvips.Error, data: bytes = b"") -> OximgError:
    """The project error for a libvips failure, keeping libvips' words for logs.

    No loader at all: 415 for a format we block on purpose (SVG, PDF, ...),
    422 for bytes that are no image (empty, random, an HTML error page), as
    imgproxy answers. A loader that fails to decode: 422.
    """
    detail = f"{error.message}: {error.detail}".strip()
    if ("not in a known format" in detail or "is blocked" in detail) and is_blocked_format(data):
        return UnsupportedFormat(detail)
    return InvalidImage(detail)


# --- probe --------------------------------------------------------------------

#: libvips loader name prefixes, longest first, to the format names we use.
LOADER_FORMATS = (
    ("jpegload", "jpeg"),
    ("uhdrload", "jpeg"),
    ("pngload", "png"),
    ("webpload", "webp"),
    ("gifload", "gif"),
    ("heifload", "heif"),
    ("tiffload", "tiff"),
    ("jxlload", "jxl"),
    ("jp2kload", "jp2k"),
    ("svgload", "svg"),
)


def _format_of(image: Image, fields: set[str]) -> str:
    """Our name for the loader that opened ``image`` (``fields``: its field names)."""
    loader = str(image.get("vips-loader")) if "vips-loader" in fields else ""
    for prefix, name in LOADER_FORMATS:
        if loader.startswith(prefix):
            return name
    return loader.split("load")[0] or "unknown"


def _int_field(image: Image, fields: set[str], name: str, default: int) -> int:
    """An integer metadata field, or ``default`` when the header lacks it.

    ``fields`` is ``image.get_fields()``, asked once: each question to libvips
    costs a round trip through cffi.
    """
    return int(image.get(name)) if name in fields else default


#: The last byte of every complete GIF. libvips' GIF loader drops a cut-off last
#: frame without an error, even with ``fail_on``, so a GIF truncated between
#: or inside later frames would render as a shorter animation; without its
#: trailer it is refused instead.
GIF_TRAILER = b"\x3b"


def check_complete(info: SourceInfo, data: bytes) -> None:
    """Refuse a truncated file that libvips would decode without complaint (GIF)."""
    if info.format == "gif" and not data.rstrip(b"\x00").endswith(GIF_TRAILER):
        raise InvalidImage("GIF without its trailer: truncated")


def memory_source(data: bytes) -> Any:
    """A libvips source reading ``data`` in place.

    ``new_from_buffer`` and ``thumbnail_buffer`` copy the whole buffer first
    (1.6 ms of CPU for a 13 MB JPEG, twice per request); a memory source does
    not. The caller keeps ``data`` alive while libvips reads it (every caller
    here holds it for the whole render).
    """
    return pyvips.Source.new_from_memory(data)


def probe(data: bytes) -> SourceInfo:
    """Read the header of ``data``; raise InvalidImage/UnsupportedFormat.

    libvips opens the header only; pixels are decoded later, if ever, so this is
    cheap enough to run before admitting a job (resolution and frame limits).
    """
    _ensure_configured()
    if not data:
        raise InvalidImage("empty source")
    try:
        image = pyvips.Image.new_from_source(memory_source(data), "", access="sequential")
        fields = set(image.get_fields())
        orientation = _int_field(image, fields, "orientation", 1)
        info = SourceInfo(
            width=int(image.width),
            height=int(image.height),
            format=_format_of(image, fields),
            frames=max(1, _int_field(image, fields, "n-pages", 1)),
            orientation=orientation if 1 <= orientation <= 8 else 1,
            has_alpha=bool(image.hasalpha()),
            interlaced=bool(_int_field(image, fields, "interlaced", 0)),
            header=image,
        )
    except pyvips.Error as error:
        raise _wrap_error(error, data) from error
    check_complete(info, data)
    return info


# --- deadline -----------------------------------------------------------------


def watched(image: Image, deadline: Deadline) -> Image:
    """``image``, whose computation libvips stops (its kill flag) when ``deadline`` passes.

    Watch each image that will be computed (the one handed to a saver,
    ``copy_memory`` or a region); the computation then fails, and
    :func:`failure` tells a timeout from a broken file.
    """
    deadline.on_expiry(partial(image.set_kill, True))
    return image


def failure(error: pyvips.Error, deadline: Deadline) -> OximgError:
    """The error to raise for a libvips failure during a watched computation."""
    if deadline.expired:
        return ProcessingTimeout(f"render deadline passed: {error.message}")
    return _wrap_error(error)


# --- load ---------------------------------------------------------------------


def keeps_animation(info: SourceInfo, fmt: str, settings: RenderSettings) -> bool:
    """Animated GIF/WebP into GIF/WebP stays animated, within the frame limit."""
    return (
        info.frames > 1
        and info.format in ANIMATED_SOURCES
        and fmt in ("gif", "webp")
        and info.frames <= settings.max_animation_frames
    )


def _loader_options(animated: bool) -> str:
    """Option string for the loader: fail on truncation, all frames when animated."""
    return "fail_on=truncated,n=-1" if animated else "fail_on=truncated"


#: The libvips metadata field holding an embedded ICC profile.
ICC_FIELD = "icc-profile-data"

#: JPEG DCT scales libjpeg can decode at.
JPEG_SHRINKS = (8, 4, 2)

#: The margin libvips' thumbnail keeps itself: no explicit JPEG shrink needed.
LIBVIPS_SHRINK_MARGIN = 2.0


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


class Loaded(NamedTuple):
    """A loaded source, and whether its pixels are all in memory already."""

    image: Image
    #: True when nothing upstream streams from a decoder (libjpeg-turbo
    #: decoded it whole, or it was copied to memory): computing the result on
    #: the render thread then holds little more than the result's pixels.
    in_memory: bool


def load_thumbnail(
    data: bytes,
    geometry: Geometry,
    options: Options,
    animated: bool,
    info: SourceInfo | None = None,
    settings: RenderSettings | None = None,
) -> Loaded:
    """Load straight at the planned scaled size (shrink-on-load), upright.

    libvips picks the cheapest decode (JPEG DCT scaling, WebP/HEIF scaling,
    PNG/GIF line skipping) and auto-rotates by EXIF. The planned size is in the
    final orientation, so a ``rotate`` quarter turn (applied later) swaps it
    back. CMYK is converted to sRGB here; tagged RGB keeps its profile for
    :func:`to_srgb`.

    libvips decodes a JPEG at a DCT scale that leaves a 2x margin for the
    resize. With ``settings.jpeg_shrink_margin`` below 2, a JPEG is decoded
    here at the smaller scale that margin allows, and ``thumbnail_image``
    does the rest (rotation, CMYK import and the resize, exactly as above).
    With ``settings.jpeg_decoder`` "libjpeg-turbo" (the default) the pixels
    of that decode come from :func:`turbo_decoded` instead, at any margin,
    and :func:`resize_decoded` does what ``thumbnail_image`` would; what it
    declines, libvips decodes. Only that decode is :attr:`Loaded.in_memory`.
    """
    width, height = geometry.scaled_width, geometry.scaled_height
    if options.rotate % 180 == 90:
        width, height = height, width
    settings = settings or RenderSettings(jpeg_shrink_margin=LIBVIPS_SHRINK_MARGIN)
    if info is not None and info.format == "jpeg":
        upright_w, upright_h = upright_size(info, options)
        shrink = jpeg_shrink(upright_w, upright_h, width, height, settings.jpeg_shrink_margin)
        if settings.jpeg_decoder == "libjpeg-turbo":
            decoded = turbo_decoded(data, shrink, info, options)
            if decoded is not None:
                turn = info.orientation if options.auto_rotate else 1
                return Loaded(resize_decoded(decoded, width, height, turn), True)
        if shrink > jpeg_shrink(upright_w, upright_h, width, height, LIBVIPS_SHRINK_MARGIN):
            decoded = pyvips.Image.jpegload_source(
                memory_source(data), shrink=shrink, access="sequential", fail_on="truncated"
            )
            image = decoded.thumbnail_image(
                width, height=height, size="force", no_rotate=not options.auto_rotate
            )
            return Loaded(image, False)
    image = pyvips.Image.thumbnail_source(
        memory_source(data),
        width,
        height=height,
        size="force",
        no_rotate=not options.auto_rotate,
        option_string=_loader_options(animated),
    )
    return Loaded(image, False)


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

    None when :func:`django_oximg.core.jpeg.decode_scaled` leaves the file to
    libvips, or when the output keeps all metadata (``strip_metadata`` off:
    libvips' loader carries every EXIF, XMP and IPTC field). Otherwise the
    fields the later steps read come from libvips' header parse, which
    decodes no pixels (:attr:`SourceInfo.header`, read by :func:`probe`):
    the ICC profile, resolution, orientation and, for
    ``keep_copyright``, the EXIF block with its Copyright and Artist tags
    (:func:`strip_metadata` would drop every other tag anyway). The pixels
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
    if options.keep_copyright:
        kept = [name for name in COPYRIGHT_FIELDS if header.get_typeof(name)]
        copied += ["exif-data", *kept] if kept else []
    for name in copied:
        gtype = header.get_typeof(name)
        if gtype:
            image.set_type(gtype, name, header.get(name))
    if info.orientation != 1:
        image.set_type(pyvips.GValue.gint_type, "orientation", info.orientation)
    return image


def load_full(data: bytes, options: Options, animated: bool) -> Image:
    """Load at full size for the ``crop`` option (the region is cut before scaling)."""
    kwargs: dict[str, Any] = {"access": "random", "fail_on": "truncated"}
    if animated:
        kwargs["n"] = -1
    image = pyvips.Image.new_from_buffer(data, "", **kwargs)
    if options.auto_rotate and not animated:
        image = image.autorot()
    return image


def frame_layout(image: Image, animated: bool) -> tuple[int, int]:
    """How many frames an animation strip holds, and their height (a still image: one)."""
    if not animated or not image.get_typeof("page-height"):
        return 1, image.height
    page_height = int(image.get("page-height"))
    return image.height // page_height, page_height


def split_frames(image: Image, count: int, height: int) -> list[Image]:
    """The ``count`` frames of ``height`` rows of a strip (:func:`frame_layout`)."""
    if count == 1:
        return [image]
    return [image.crop(0, i * height, image.width, height) for i in range(count)]


def join_frames(frames: list[Image], source: Image) -> Image:
    """Put frames back into one strip with page height, loop and clamped delays."""
    if len(frames) == 1:
        return frames[0]
    return animation_strip(pyvips.Image.arrayjoin(frames, across=1), frames[0].height, source)


def animation_strip(strip: Image, frame_height: int, source: Image) -> Image:
    """``strip`` as an animation of ``frame_height`` pages: ``source``'s loop, clamped delays."""
    strip = strip.copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", frame_height)
    if source.get_typeof("loop"):
        strip.set_type(pyvips.GValue.gint_type, "loop", int(source.get("loop")))
    if source.get_typeof("delay"):
        delays = [max(int(delay), MIN_FRAME_DELAY_MS) for delay in source.get("delay")]
        strip.set_type(pyvips.GValue.array_int_type, "delay", delays)
    return strip


# --- per-frame steps ----------------------------------------------------------


def rotate_and_flip(image: Image, options: Options) -> Image:
    """Apply ``rotate`` (clockwise quarter turns), then ``flip_horizontal``/``flip_vertical``."""
    turns = {90: "d90", 180: "d180", 270: "d270"}
    if options.rotate % 360 in turns:
        image = image.rot(turns[options.rotate % 360])
    if options.flip_horizontal:
        image = image.fliphor()
    if options.flip_vertical:
        image = image.flipver()
    return image


def crop_region(
    image: Image, width: int, height: int, gravity: Gravity, offset_scale: float, smart: bool
) -> Image:
    """Cut ``width`` x ``height`` out of ``image`` where ``gravity`` says.

    ``sm`` asks libvips for the most interesting region (attention strategy:
    edges, skin tones, saturated colour) when ``smart`` is allowed.
    """
    width, height = min(width, image.width), min(height, image.height)
    if width == image.width and height == image.height:
        return image
    if gravity.type == "sm" and smart:
        return image.smartcrop(width, height, interesting="attention")
    left, top = place(image.width, image.height, width, height, gravity, offset_scale)
    return image.crop(left, top, width, height)


def crop_source(image: Image, geometry: Geometry, options: Options, smart: bool) -> Image:
    """The ``crop`` option: cut the region before scaling (offsets are source pixels)."""
    if options.crop is None:
        return image
    gravity = options.crop.gravity or options.gravity
    return crop_region(image, geometry.crop_width, geometry.crop_height, gravity, 1.0, smart)


def resize_to(image: Image, width: int, height: int) -> Image:
    """Resize to exactly ``width`` x ``height`` (alpha premultiplied, so edges stay clean)."""
    if image.width == width and image.height == height:
        return image
    x_scale, y_scale = width / image.width, height / image.height
    if image.hasalpha():
        resized = image.premultiply().resize(x_scale, vscale=y_scale).unpremultiply()
        resized = resized.cast(image.format)
    else:
        resized = image.resize(x_scale, vscale=y_scale)
    if resized.width != width or resized.height != height:
        # libvips rounds the same way, but guard a 1 px disagreement anyway.
        resized = resized.embed(0, 0, width, height, extend="copy")
    return resized


def to_srgb(image: Image, options: Options) -> Image:
    """Make the frame 8-bit sRGB (alpha kept) from any colour space and depth.

    With ``strip_color_profile`` an embedded profile is applied and dropped; a
    broken profile is ignored rather than failing the request. Without it, an
    RGB image keeps its profile (the encoder embeds it).
    """
    has_profile = bool(image.get_typeof(ICC_FIELD))
    if not has_profile and image.format == "uchar" and image.interpretation == "srgb":
        return image  # the common case, asked in as few libvips calls as possible
    if image.interpretation == "cmyk":
        image = image.icc_transform("srgb", input_profile="cmyk", embedded=True, depth=8)
    elif has_profile and (options.strip_color_profile or image.interpretation != "srgb"):
        try:
            image = image.icc_transform("srgb", embedded=True, intent="perceptual", depth=8)
        except pyvips.Error:
            image = image.copy()
            image.remove(ICC_FIELD)
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
    if image.format != "uchar":
        image = image.cast("uchar")
    if options.strip_color_profile and image.get_typeof(ICC_FIELD):
        image = image.copy()
        image.remove(ICC_FIELD)
    return image


def crop_to_result(image: Image, geometry: Geometry, options: Options, smart: bool) -> Image:
    """Crop the scaled frame to the requested box (``fill``, ``fill-down``, min sizes)."""
    return crop_region(
        image,
        geometry.result_width,
        geometry.result_height,
        options.gravity,
        geometry.dpr_scale,
        smart,
    )


def blur(image: Image, options: Options) -> Image:
    """``blur``: Gaussian blur with the given sigma."""
    return image.gaussblur(options.blur) if options.blur > 0 else image


def sharpen(image: Image, options: Options) -> Image:
    """``sharpen``: unsharp mask with the given sigma (libvips ``sharpen``)."""
    if options.sharpen <= 0:
        return image
    return image.sharpen(sigma=options.sharpen).colourspace("srgb").cast("uchar")


def fill_colour(image: Image, options: Options) -> list[float]:
    """Colour of new pixels: the background option, else transparent or white."""
    if options.background is not None:
        colour = list(map(float, options.background))
        return [*colour, 255.0] if image.hasalpha() else colour
    return [*map(float, WHITE), 0.0] if image.hasalpha() else list(map(float, WHITE))


def extend(image: Image, geometry: Geometry, options: Options) -> Image:
    """``extend``: put the frame on a canvas of the requested size (``extend_gravity``)."""
    width, height = geometry.canvas_width, geometry.canvas_height
    if width == image.width and height == image.height:
        return image
    gravity = options.extend_gravity or Gravity()
    left, top = place(width, height, image.width, image.height, gravity, geometry.dpr_scale)
    return image.embed(
        left, top, width, height, extend="background", background=fill_colour(image, options)
    )


def pad(image: Image, geometry: Geometry, options: Options) -> Image:
    """``padding``: add a border (already multiplied by the dpr in the plan)."""
    top, right, bottom, left = geometry.padding
    if not (top or right or bottom or left):
        return image
    return image.embed(
        left,
        top,
        image.width + left + right,
        image.height + top + bottom,
        extend="background",
        background=fill_colour(image, options),
    )


def flatten(image: Image, options: Options, fmt: str) -> Image:
    """Drop alpha onto the background for JPEG, or whenever ``background`` is set."""
    if not image.hasalpha() or (fmt != "jpeg" and options.background is None):
        return image
    colour = list(map(float, options.background or WHITE))
    return image.flatten(background=colour).cast("uchar")


def per_pixel_only(frame_size: tuple[int, int], geometry: Geometry, options: Options) -> bool:
    """Whether every :func:`process_frame` step left for frames of this size is per pixel.

    Then they can run once over a whole animation strip instead of frame by
    frame: no rotation or flip, no ``crop``, the frame already at its
    planned size (``resize_to``, ``crop_to_result`` and ``extend`` have
    nothing to do), no padding, no blur or sharpening (which would reach
    across frame edges). What is left, :func:`to_srgb` and :func:`flatten`,
    gives the same pixels either way.
    """
    return (
        options.rotate % 360 == 0
        and not options.flip_horizontal
        and not options.flip_vertical
        and options.crop is None
        and frame_size == (geometry.scaled_width, geometry.scaled_height)
        and frame_size == (geometry.result_width, geometry.result_height)
        and frame_size == (geometry.canvas_width, geometry.canvas_height)
        and not any(geometry.padding)
        and options.blur <= 0
        and options.sharpen <= 0
    )


def process_frame(
    image: Image, geometry: Geometry, options: Options, fmt: str, animated: bool
) -> Image:
    """Every per-frame step in order; ``sm`` gravity is centred for animations."""
    smart = not animated
    image = rotate_and_flip(image, options)
    image = crop_source(image, geometry, options, smart)
    image = resize_to(image, geometry.scaled_width, geometry.scaled_height)
    image = to_srgb(image, options)
    image = crop_to_result(image, geometry, options, smart)
    image = blur(image, options)
    image = sharpen(image, options)
    image = extend(image, geometry, options)
    image = pad(image, geometry, options)
    return flatten(image, options, fmt)


# --- metadata and encoding ----------------------------------------------------


def strip_metadata(image: Image, options: Options) -> tuple[Image, int]:
    """Decide what metadata the encoder keeps; return the image and libvips keep flags.

    ``strip_metadata`` drops EXIF, XMP and IPTC (GPS, camera serials). With
    ``keep_copyright`` the EXIF Copyright and Artist tags survive: every other
    EXIF tag is removed from the image so libvips rewrites a minimal EXIF block.
    An ICC profile is kept only when ``strip_color_profile`` is off.
    """
    keep_flags = pyvips.enums.ForeignKeep
    keep = keep_flags.NONE if options.strip_color_profile else keep_flags.ICC
    if not options.strip_metadata:
        return image, keep | keep_flags.EXIF | keep_flags.XMP | keep_flags.IPTC
    if not options.keep_copyright:
        return image, int(keep)
    fields = image.get_fields()
    if COPYRIGHT_FIELDS.intersection(fields):
        image = image.copy()
        for name in fields:
            if name.startswith("exif-ifd") and name not in COPYRIGHT_FIELDS:
                image.remove(name)
        keep |= keep_flags.EXIF
    return image, int(keep)


def quality_for(fmt: str, options: Options, settings: RenderSettings) -> int:
    """Quality: the request's, else its per-format one, else the site default."""
    if options.quality:
        return options.quality
    per_format = dict(options.format_quality)
    if per_format.get(fmt):
        return per_format[fmt]
    return settings.quality.get(fmt) or FALLBACK_QUALITY


def encode(image: Image, fmt: str, quality: int, keep: int, settings: RenderSettings) -> bytes:
    """Encode one image; only the lossy formats use ``quality``."""
    if fmt == "jpeg":
        data = image.jpegsave_buffer(Q=quality, optimize_coding=True, keep=keep)
    elif fmt == "png":
        data = image.pngsave_buffer(compression=6, keep=keep)
    elif fmt == "webp":
        data = image.webpsave_buffer(Q=quality, effort=4, keep=keep)
    elif fmt == "avif":
        data = image.heifsave_buffer(
            Q=quality,
            compression="av1",
            effort=settings.avif_effort,
            bitdepth=8,
            keep=keep,
        )
    elif fmt == "gif":
        data = image.gifsave_buffer(keep=keep)
    else:
        raise UnsupportedFormat(f"unknown output format {fmt!r}")
    return bytes(data)


def next_quality(quality: int, size: int, max_bytes: int) -> int:
    """A lower quality for the ``max_bytes`` loop: bigger overshoots step further."""
    overshoot = size / max_bytes
    factor = 0.25 if overshoot > 3 else 0.5 if overshoot > 1.5 else 0.75
    return int(quality * factor)


#: Result rows computed per region fetch. One fetch of the whole result makes
#: every step of the pipeline hold its whole output at once: 109 MiB for a
#: 1350x900 result of a 2448x1632 decode, against 34 MiB in strips of 64
#: rows (libvips' saver: 23 MiB); the CPU is the same (docs/BENCHMARKS.md).
FETCH_ROWS = 64


def in_memory_encoder(
    image: Image, fmt: str, keep: int, settings: RenderSettings, watch: Deadline
) -> Callable[[int], bytes] | None:
    """Compute ``image`` on this thread and return its encoder by quality, or None.

    None leaves the result to libvips' savers: with ``settings.encoder``
    "libvips", when the result keeps EXIF, XMP or IPTC (libvips rewrites
    those), or when :mod:`django_oximg.core.encoder` does not take its size,
    bands or format. Region fetches run the pipeline on the calling thread,
    without libvips' thread pool, :data:`FETCH_ROWS` rows at a time, so the
    caller must know every pixel upstream is in memory already
    (:attr:`Loaded.in_memory`); the result is held once.
    """
    width, height, bands = image.width, image.height, image.bands
    if (
        settings.encoder != "pillow"
        or keep & ~int(pyvips.enums.ForeignKeep.ICC)
        or not encoder.can_encode(fmt, width, height, bands)
    ):
        return None
    region = pyvips.Region.new(watched(image, watch))
    pixels = bytearray(width * height * bands)
    row_bytes = width * bands
    for top in range(0, height, FETCH_ROWS):
        rows = min(FETCH_ROWS, height - top)
        pixels[top * row_bytes : (top + rows) * row_bytes] = region.fetch(0, top, width, rows)
    icc_profile = None
    if keep & int(pyvips.enums.ForeignKeep.ICC) and image.get_typeof(ICC_FIELD):
        icc_profile = bytes(image.get(ICC_FIELD))
    return partial(encoder.encode, pixels, width, height, bands, fmt, icc_profile=icc_profile)


def encode_within_limit(
    encode_at: Callable[[int], bytes], fmt: str, options: Options, settings: RenderSettings
) -> bytes:
    """Encode with ``encode_at(quality)``, lowering the quality until it fits ``max_bytes``."""
    quality = quality_for(fmt, options, settings)
    data = encode_at(quality)
    if not options.max_bytes:
        return data
    while len(data) > options.max_bytes:
        if fmt not in LOSSY_FORMATS or quality <= MIN_QUALITY:
            raise ResultTooLarge(f"{len(data)} bytes > max_bytes {options.max_bytes}")
        quality = max(MIN_QUALITY, next_quality(quality, len(data), options.max_bytes))
        data = encode_at(quality)
    return data


# --- render -------------------------------------------------------------------


def render(
    data: bytes,
    options: Options,
    fmt: str,
    settings: RenderSettings,
    *,
    deadline: float | None = None,
    info: SourceInfo | None = None,
) -> Rendered:
    """Render ``data`` with ``options`` into format ``fmt`` (one of OUTPUT_FORMATS).

    ``deadline`` is a ``time.monotonic()`` value; libvips is stopped once it
    passes and :class:`ProcessingTimeout` is raised. The output size always
    equals :func:`~django_oximg.core.geometry.plan_geometry`'s prediction.
    ``info`` is :func:`probe`'s answer for ``data`` when the caller has it
    already (the thumbnailer probes before admitting a job), saving a second
    header read.
    """
    _ensure_configured()
    if fmt not in CONTENT_TYPES:
        raise UnsupportedFormat(f"unknown output format {fmt!r}")
    if info is None:
        info = probe(data)
    with Deadline(deadline) as watch:
        return _render_watched(data, options, fmt, settings, info, watch)


def _render_watched(
    data: bytes,
    options: Options,
    fmt: str,
    settings: RenderSettings,
    info: SourceInfo,
    watch: Deadline,
) -> Rendered:
    animated = keeps_animation(info, fmt, settings)
    geometry = plan_geometry(
        info.width,
        info.height,
        options,
        orientation=info.orientation,
        max_result_dimension=settings.max_result_dimension,
    )
    try:
        if options.crop is None:
            source, in_memory = load_thumbnail(data, geometry, options, animated, info, settings)
        else:
            source, in_memory = load_full(data, options, animated), False
        if options.gravity.type == "sm" and not animated:
            # The attention crop reads the frame twice: compute it once, watched.
            source, in_memory = watched(source, watch).copy_memory(), True
        count, frame_height = frame_layout(source, animated)
        frame_width = source.width
        if count > 1 and per_pixel_only((frame_width, frame_height), geometry, options):
            # One pass over the strip: libvips computes the frames' crops of
            # a lazy strip anew for each frame (about 40 % more CPU for a
            # 12-frame GIF, docs/pipeline.md), and these steps need no crops.
            image = flatten(to_srgb(source, options), options, fmt)
            image = animation_strip(image, frame_height, source)
        else:
            frames = [
                process_frame(frame, geometry, options, fmt, animated)
                for frame in split_frames(source, count, frame_height)
            ]
            frame_width, frame_height = frames[0].width, frames[0].height
            image = join_frames(frames, source)
        image, keep = strip_metadata(image, options)
        encode_at = in_memory_encoder(image, fmt, keep, settings, watch) if in_memory else None
        if encode_at is None:
            if options.max_bytes:
                # The max_bytes loop may encode again: decode and process only once.
                image = watched(image, watch).copy_memory()
            encode_at = partial(encode, watched(image, watch), fmt, keep=keep, settings=settings)
        encoded = encode_within_limit(encode_at, fmt, options, settings)
    except pyvips.Error as error:
        raise failure(error, watch) from error
    return Rendered(encoded, fmt, int(frame_width), int(frame_height), count)


# --- the benchmark's ceiling ----------------------------------------------------


def bare_thumbnail(data: bytes, width: int, height: int, fmt: str, quality: int) -> bytes:
    """libvips' thumbnail and saver alone, with the encoder options :func:`encode` uses.

    No probe, plan, checks or steps: what a hand-written libvips program would
    do for a plain fit. ``manage.py oximg_bench`` compares :func:`render` and
    the served path against it (here because only this module imports pyvips).
    """
    _ensure_configured()
    try:
        image = pyvips.Image.thumbnail_buffer(data, width, height=height)
        if fmt == "jpeg" and image.hasalpha():
            image = image.flatten(background=list(WHITE))
        return encode(image, fmt, quality, 0, RenderSettings())
    except pyvips.Error as error:
        raise _wrap_error(error, data) from error


def sample_jpeg(width: int, height: int, quality: int = 90) -> bytes:
    """A photo-like JPEG (gradients plus sensor-like noise) for benchmarks.

    Flat synthetic images decode and compress unrealistically fast; the noise
    keeps the entropy of a real photo (about 2 bits per pixel at q90).
    """
    xyz = pyvips.Image.xyz(width, height)
    x, y = xyz[0], xyz[1]
    red = x * (200.0 / width) + 30
    green = y * (180.0 / height) + 40
    blue = ((x * 0.013).sin() * (y * 0.011).cos() + 1) * 90 + 30
    noise = pyvips.Image.gaussnoise(width, height, sigma=10, mean=0, seed=42)
    image = (red.bandjoin([green, blue]) + noise).cast("uchar").copy(interpretation="srgb")
    return bytes(image.jpegsave_buffer(Q=quality))


# --- summary: BlurHash and dominant colour (the /info endpoint) ----------------

#: Longest side, in pixels, of the thumbnail a summary is computed from. A
#: BlurHash keeps at most 9x9 cosine components and the dominant colour is a
#: histogram, so 32 px is plenty for both; shrink-on-load keeps the decode of
#: a large source small and the pure-Python BlurHash encoder fast.
SUMMARY_SIZE = 32

#: Levels per channel of the dominant-colour histogram: 4 gives 64 bins, coarse
#: enough that the ~1000 pixels of a noisy photo still pile up in one.
COLOUR_LEVELS = 4

#: Pixels at least this opaque count for the dominant colour (transparent
#: areas have no colour anyone sees).
OPAQUE_ALPHA = 128


@dataclass(frozen=True)
class Summary:
    """A source's look in a few bytes: a BlurHash and a dominant colour, each optional."""

    blurhash: str | None
    #: "#rrggbb"
    dominant_color: str | None


def summarise(
    data: bytes,
    blurhash_components: tuple[int, int] | None,
    dominant_color: bool,
    *,
    deadline: float | None = None,
) -> Summary:
    """Summarise ``data`` from one tiny, upright, sRGB thumbnail of it.

    The thumbnail is loaded with shrink-on-load (JPEG DCT scaling, WebP/HEIF
    scaling), so the cost stays small even for large sources. The BlurHash is
    computed on the thumbnail flattened onto white (BlurHash has no alpha);
    the dominant colour on its opaque pixels (see :func:`dominant_colour`).

    ``deadline`` is watched as for :func:`render`, but the (one-tile) output
    is computed in one piece, so a slow decode is stopped late or not at
    all; the real bounds are shrink-on-load and the caller's resolution
    check (``MAX_SRC_RESOLUTION``).
    """
    _ensure_configured()
    with Deadline(deadline) as watch:
        try:
            image = pyvips.Image.thumbnail_buffer(
                data, SUMMARY_SIZE, height=SUMMARY_SIZE, option_string=_loader_options(False)
            )
            image = watched(to_srgb(image, Options()), watch).copy_memory()
            rgba = image.extract_band(0, n=4) if image.hasalpha() else image.bandjoin(255)
            pixels = bytes(rgba.cast("uchar").write_to_memory())
        except pyvips.Error as error:
            raise failure(error, watch) from error
    width = int(image.width)
    blurhash = None
    if blurhash_components is not None:
        blurhash = encode_blurhash(pixels, width, blurhash_components)
    return Summary(blurhash, dominant_colour(pixels) if dominant_color else None)


def encode_blurhash(rgba: bytes, width: int, components: tuple[int, int]) -> str:
    """The BlurHash of RGBA pixels (``width`` per row), flattened onto white.

    The ``blurhash`` package (pure Python, Wolt's algorithm) does the
    encoding; it wants rows of sRGB triples.
    """
    flat = [_over_white(rgba[i : i + 4]) for i in range(0, len(rgba), 4)]
    rows = [flat[start : start + width] for start in range(0, len(flat), width)]
    x_components, y_components = components
    return str(blurhash.encode(rows, components_x=x_components, components_y=y_components))


def _over_white(pixel: bytes) -> tuple[int, int, int]:
    red, green, blue, alpha = pixel
    return (
        (red * alpha + 255 * (255 - alpha)) // 255,
        (green * alpha + 255 * (255 - alpha)) // 255,
        (blue * alpha + 255 * (255 - alpha)) // 255,
    )


def dominant_colour(rgba: bytes) -> str:
    """The mean colour of the most populated bin of a coarse RGB histogram, as "#rrggbb".

    Each opaque pixel falls into one of ``COLOUR_LEVELS``\\ :sup:`3` bins; the
    bin holding the most pixels wins (the first one met on a tie, so the
    answer is deterministic) and its pixels' mean is the answer, a colour
    that really occurs rather than a bin's centre. With no opaque pixel at
    all, every pixel counts.
    """
    pixels = [rgba[i : i + 4] for i in range(0, len(rgba), 4)]
    counted = [p for p in pixels if p[3] >= OPAQUE_ALPHA] or pixels
    step = 256 // COLOUR_LEVELS
    bins: dict[tuple[int, int, int], list[int]] = {}
    for red, green, blue, _alpha in counted:
        totals = bins.setdefault((red // step, green // step, blue // step), [0, 0, 0, 0])
        totals[0] += 1
        totals[1] += red
        totals[2] += green
        totals[3] += blue
    count, red, green, blue = max(bins.values(), key=lambda totals: totals[0])
    return "#" + "".join(f"{round(total / count):02x}" for total in (red, green, blue))
