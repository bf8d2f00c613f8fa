"""The URL contract: parse and build imgproxy-style processing options.

A request path (after the signature) looks like either of::

    /<option>/<option>/.../plain/<percent-encoded source>@<ext>
    /<option>/<option>/.../<base64url(source), may be split by "/">.<ext>

Options use imgproxy's names and short forms, with imgproxy's semantics, so any
imgproxy URL builder works unchanged: an option is ``name:arg1:arg2...``;
omitted trailing arguments keep their current values; later options override
earlier ones; a ``default`` preset applies before everything else; the URL's
extension wins over a ``format`` option. Parsing yields a frozen
:class:`Options`; :func:`build_path` turns one back into the canonical path,
which is what the result-cache key is made from (never the raw URL, so encoding
variants of one request share one cache object).

Where imgproxy is lenient this module is strict, because a silently ignored
value would still make a distinct cache key: a bad boolean, a non-finite or
out-of-range number and an unknown format are all :class:`InvalidOptions`.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import quote, unquote

from django_oximg.core.errors import InvalidOptions

#: Gravity types as imgproxy names them. ``sm`` is libvips' attention crop,
#: ``fp`` a focus point given as fractions of the image.
GRAVITY_TYPES = ("no", "so", "ea", "we", "noea", "nowe", "soea", "sowe", "ce", "sm", "fp")

#: Where a watermark may go: the compass points and the centre, or ``re``,
#: replicated over the whole image (imgproxy's watermark positions).
WATERMARK_POSITIONS = ("no", "so", "ea", "we", "noea", "nowe", "soea", "sowe", "ce", "re")

RESIZING_TYPES = ("fit", "fill", "fill-down", "force", "auto")

#: Output formats we can encode, by the extension used in URLs.
OUTPUT_FORMATS = ("jpeg", "png", "webp", "avif", "gif")

#: ``quality_mode`` values (a django-oximg extension, not an imgproxy option):
#: "high" resizes in linear light from a decode of at least twice the target.
QUALITY_MODES = ("standard", "high")


@dataclass(frozen=True)
class Gravity:
    """Where to anchor a crop or an extension.

    ``type`` is one of :data:`GRAVITY_TYPES`. For compass types ``x`` and ``y``
    are offsets in pixels (imgproxy's ``x_offset``/``y_offset``); for ``fp``
    they are the focus point as fractions 0..1 of width and height.
    """

    type: str = "ce"
    x: float = 0.0
    y: float = 0.0


@dataclass(frozen=True)
class Crop:
    """Crop the source before resizing (imgproxy ``crop``).

    ``width``/``height`` are pixels of the source, or fractions of it when below
    1; 0 means the full dimension. ``gravity`` None means the request's gravity.
    """

    width: float = 0.0
    height: float = 0.0
    gravity: Gravity | None = None


@dataclass(frozen=True)
class Watermark:
    """The site's watermark image laid over the result (imgproxy ``watermark``).

    ``opacity`` 0 means no watermark. ``position`` is one of
    :data:`WATERMARK_POSITIONS`; ``x``/``y`` are offsets in pixels (times the
    dpr) or fractions of the image below 1, as for gravity, and for ``re``
    the spacing between copies. ``scale`` > 0 fits the watermark into that
    share of the image's size; 0 keeps its own size.
    """

    opacity: float = 0.0
    position: str = "ce"
    x: float = 0.0
    y: float = 0.0
    scale: float = 0.0


@dataclass(frozen=True)
class Options:
    """One request's processing options, fully parsed and validated.

    Defaults are imgproxy's defaults, except ``format`` (empty means: from the
    URL extension, else negotiated from Accept) and the quality (0 means the
    configured per-format default).
    """

    resizing_type: str = "fit"
    width: int = 0
    height: int = 0
    min_width: int = 0
    min_height: int = 0
    dpr: float = 1.0
    enlarge: bool = False
    extend: bool = False
    extend_gravity: Gravity | None = None
    gravity: Gravity = field(default_factory=Gravity)
    crop: Crop | None = None
    #: top, right, bottom, left in CSS pixels (multiplied by ``dpr``).
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: RGB, or None for the default (white when flattening, transparent otherwise).
    background: tuple[int, int, int] | None = None
    blur: float = 0.0
    sharpen: float = 0.0
    #: Clockwise, a multiple of 90 in 0..270.
    rotate: int = 0
    flip_horizontal: bool = False
    flip_vertical: bool = False
    #: 0 means the per-format default from ``format_quality`` or settings.
    quality: int = 0
    #: Per-format qualities as sorted (format, quality) pairs.
    format_quality: tuple[tuple[str, int], ...] = ()
    #: One of :data:`OUTPUT_FORMATS`, or "" for extension/negotiation.
    format: str = ""
    strip_metadata: bool = True
    keep_copyright: bool = True
    strip_color_profile: bool = True
    auto_rotate: bool = True
    cachebuster: str = ""
    #: Unix timestamp after which the URL answers 404; 0 for never.
    expires: int = 0
    #: Encode again at lower quality until the result fits; 0 for no limit.
    max_bytes: int = 0
    #: Multiply the requested box (``zoom``), per axis.
    zoom_width: float = 1.0
    zoom_height: float = 1.0
    #: Extend the result to the requested aspect ratio (``extend_aspect_ratio``).
    extend_aspect_ratio: bool = False
    extend_aspect_ratio_gravity: Gravity | None = None
    #: ``trim``: cut away a border of one colour, before anything else. None
    #: for no trim; the colour None means the top-left pixel's.
    trim_threshold: float | None = None
    trim_color: tuple[int, int, int] | None = None
    trim_equal_horizontal: bool = False
    trim_equal_vertical: bool = False
    #: Size of the ``pixelate`` blocks in output pixels; 0 for none.
    pixelate: int = 0
    watermark: Watermark = field(default_factory=Watermark)
    #: ``Content-Disposition``: the file name (without extension), and
    #: ``attachment`` rather than ``inline``. Headers only, never the bytes.
    filename: str = ""
    return_attachment: bool = False
    #: Source formats served as they are when the output format is theirs.
    skip_processing: tuple[str, ...] = ()
    #: Serve the source as it is (checked, never processed).
    raw: bool = False
    #: Render an embedded thumbnail (HEIF/AVIF) instead of the main image.
    enforce_thumbnail: bool = False
    #: Per-URL limits; each can only lower the configured one; 0: as configured.
    max_src_resolution: int = 0
    max_src_file_size: int = 0
    max_animation_frames: int = 0
    max_animation_frame_resolution: int = 0
    #: One of :data:`QUALITY_MODES`, or "" for the site's ``QUALITY_MODE``.
    quality_mode: str = ""


@dataclass(frozen=True)
class ParsedPath:
    """A parsed request path: options plus the source name and its encoding."""

    options: Options
    #: The source, percent-decoded exactly once (a storage name or an http(s) URL).
    source: str
    #: Fields some option or preset set (even to their default): what a client
    #: hint may no longer change.
    assigned: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass(frozen=True)
class URLRules:
    """What a site lets URLs say: imgproxy's ``ALLOWED_PROCESSING_OPTIONS`` and
    ``ONLY_PRESETS``."""

    #: Option names a URL may use, as written there (``w`` and ``width`` are
    #: two names); presets may use any. Empty: every option.
    allowed_options: frozenset[str] = frozenset()
    #: The URL names presets only: its first segment is ``name:name...``,
    #: then the source.
    only_presets: bool = False


#: No rules: every option, written as options.
ANY_URL = URLRules()


#: Largest width, height, minimum size, padding, crop size or gravity offset, in
#: pixels. Far above any real output (the pipeline clamps results to
#: MAX_RESULT_DIMENSION); it only keeps absurd numbers out of the arithmetic.
MAX_DIMENSION = 100_000

#: imgproxy caps the client-hint DPR at 8; a larger factor only multiplies work.
MAX_DPR = 8.0

#: Blur and sharpen sigma: past this the mask is larger than any thumbnail.
MAX_SIGMA = 100.0

#: ``zoom`` factors: past this every result is clamped by MAX_RESULT_DIMENSION
#: anyway; it only keeps absurd numbers out of the arithmetic.
MAX_ZOOM = 1000.0

#: ``trim`` compares 8-bit sRGB pixels: a threshold of 255 already keeps everything.
MAX_TRIM_THRESHOLD = 255.0

#: Characters of a ``filename``: a header, not a document.
MAX_FILENAME_LENGTH = 255

#: ``max_src_resolution`` and ``max_animation_frame_resolution`` are given in
#: megapixels, as imgproxy takes them; this keeps the pixel count an int64.
MAX_MEGAPIXELS = 10.0**9

#: Options applied for one request, presets expanded. Bounds the work a URL can
#: cause by naming presets that name presets many times over.
MAX_APPLIED_OPTIONS = 500

#: Accepted format names (URL extension, ``format``, ``format_quality``) and the
#: name each one means.
FORMAT_NAMES = {
    "jpg": "jpeg",
    "jpeg": "jpeg",
    "png": "png",
    "webp": "webp",
    "avif": "avif",
    "gif": "gif",
}

#: Go's strconv.ParseBool, which is what imgproxy uses.
BOOLEANS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}

# Numbers are matched before conversion because int() and float() also accept
# whitespace, "_", non-ASCII digits, "inf" and "nan", and int() refuses more than
# 4300 digits with a ValueError. The length caps keep every match in range.
INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,18}")
REAL_TEXT = re.compile(
    r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,3})?"
)
_HEX_COLOR = re.compile(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")

_DEFAULTS = Options()
_FIELD_NAMES = tuple(f.name for f in fields(Options))


class Draft(dict[str, Any]):
    """A parse in progress: Options' fields by name, mutated option by option.

    Remembers which fields an option (or a preset) set, even to their
    default: a client hint sets ``width`` or ``dpr`` only where no option did.
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.assigned: set[str] = set()

    def __setitem__(self, name: str, value: Any) -> None:
        self.assigned.add(name)
        super().__setitem__(name, value)


Handler = Callable[[Draft, list[str]], None]


def lowered_limit(configured: int, requested: int) -> int:
    """A limit as a URL may set it (``max_src_resolution`` and friends): only lower.

    ``requested`` 0 means the URL set none.
    """
    return min(configured, requested) if requested else configured


# -- errors ---------------------------------------------------------------------


def _shown(value: str) -> str:
    """``value`` made safe to echo in a response body: short, printable ASCII."""
    text = "".join(c if " " <= c <= "~" and c not in "<>&\"'\\" else "?" for c in value[:64])
    return text + "..." if len(value) > 64 else text


def _invalid(option: str, value: str, why: str = "invalid value") -> InvalidOptions:
    """The error for a bad ``value`` of ``option``; the public text names both."""
    return InvalidOptions(
        detail=f"{option}: {why}: {value[:200]!r}",
        public=f"Invalid {option}: {_shown(value)}",
    )


def _invalid_source(why: str) -> InvalidOptions:
    return InvalidOptions(detail=f"source: {why}", public="Invalid source URL")


# -- argument parsers -----------------------------------------------------------


def _single(option: str, args: list[str]) -> str:
    if len(args) != 1:
        raise _invalid(option, ":".join(args), "takes one argument")
    return args[0]


def _integer(option: str, text: str, low: int, high: int) -> int:
    if INTEGER_TEXT.fullmatch(text) is None:
        raise _invalid(option, text, "not an integer")
    value = int(text)
    if not low <= value <= high:
        raise _invalid(option, text, f"not in {low}..{high}")
    return value


def _real(option: str, text: str, low: float, high: float, *, above_low: bool = False) -> float:
    """A finite float in ``low..high`` (``low`` itself excluded when ``above_low``)."""
    if REAL_TEXT.fullmatch(text) is None:
        raise _invalid(option, text, "not a number")
    value = float(text)
    if not low <= value <= high or (above_low and value == low):
        raise _invalid(option, text, f"not in {low}..{high}")
    return value


def _dimension(option: str, text: str) -> int:
    return _integer(option, text, 0, MAX_DIMENSION)


def _boolean(option: str, text: str) -> bool:
    value = BOOLEANS.get(text)
    if value is None:
        raise _invalid(option, text, "not a boolean")
    return value


def _format_name(option: str, text: str) -> str:
    name = FORMAT_NAMES.get(text)
    if name is None:
        raise _invalid(option, text, "unsupported format")
    return name


def _gravity(option: str, args: list[str], current: Gravity, *, allow_smart: bool) -> Gravity:
    """Parse ``%type:%x:%y``: offsets not given, or given empty, keep ``current``'s.

    imgproxy keeps offsets left out too, but refuses an empty one
    (``g:no::5``); here an empty offset is skipped, as an empty argument of
    every other option is. A focus point needs both of its coordinates.
    """
    kind = args[0]
    if kind not in GRAVITY_TYPES or (kind == "sm" and not allow_smart):
        raise _invalid(option, kind, "unknown gravity type")
    if kind == "sm":
        if len(args) > 1:
            raise _invalid(option, ":".join(args), "smart gravity takes no offsets")
        return Gravity("sm")
    if kind == "fp":
        if len(args) != 3:
            raise _invalid(option, ":".join(args), "focus point needs x and y")
        return Gravity("fp", _real(option, args[1], 0.0, 1.0), _real(option, args[2], 0.0, 1.0))
    if len(args) > 3:
        raise _invalid(option, ":".join(args), "too many arguments")
    x, y = current.x, current.y
    if len(args) > 1 and args[1]:
        x = _real(option, args[1], -MAX_DIMENSION, MAX_DIMENSION)
    if len(args) > 2 and args[2]:
        y = _real(option, args[2], -MAX_DIMENSION, MAX_DIMENSION)
    return Gravity(kind, x, y)


def _hex_color(text: str, option: str = "background") -> tuple[int, int, int]:
    if _HEX_COLOR.fullmatch(text) is None:
        raise _invalid(option, text, "not RRGGBB or RGB hex")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    return (int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16))


# -- option handlers: (draft, args) -> None, one per imgproxy option -------------


def _apply_resize(draft: Draft, args: list[str]) -> None:
    """``rs:%type:%width:%height:%enlarge:%extend:%gravity...``"""
    if len(args) > 8:
        raise _invalid("resize", ":".join(args), "too many arguments")
    if args[0]:
        _apply_resizing_type(draft, args[:1])
    if len(args) > 1:
        _apply_size(draft, args[1:])


def _apply_size(draft: Draft, args: list[str]) -> None:
    """``s:%width:%height:%enlarge:%extend:%gravity...``; empty arguments are skipped."""
    if len(args) > 7:
        raise _invalid("size", ":".join(args), "too many arguments")
    for handler, arg in zip((_apply_width, _apply_height, _apply_enlarge), args, strict=False):
        if arg:
            handler(draft, [arg])
    if len(args) > 3 and args[3]:
        _apply_extend(draft, args[3:])


def _apply_resizing_type(draft: Draft, args: list[str]) -> None:
    value = _single("resizing_type", args)
    if value not in RESIZING_TYPES:
        raise _invalid("resizing_type", value, "unknown resizing type")
    draft["resizing_type"] = value


def _dimension_handler(field_name: str, option: str) -> Handler:
    def handler(draft: Draft, args: list[str]) -> None:
        draft[field_name] = _dimension(option, _single(option, args))

    return handler


def _boolean_handler(field_name: str, option: str) -> Handler:
    def handler(draft: Draft, args: list[str]) -> None:
        draft[field_name] = _boolean(option, _single(option, args))

    return handler


def _sigma_handler(field_name: str) -> Handler:
    def handler(draft: Draft, args: list[str]) -> None:
        draft[field_name] = _real(field_name, _single(field_name, args), 0.0, MAX_SIGMA)

    return handler


_apply_width = _dimension_handler("width", "width")
_apply_height = _dimension_handler("height", "height")
_apply_enlarge = _boolean_handler("enlarge", "enlarge")


def _apply_dpr(draft: Draft, args: list[str]) -> None:
    draft["dpr"] = _real("dpr", _single("dpr", args), 0.0, MAX_DPR, above_low=True)


def _extend_handler(field_name: str) -> Handler:
    """``%extend:%gravity...`` into ``field_name`` and its ``_gravity`` field
    (``extend`` and ``extend_aspect_ratio``); smart gravity is not allowed here."""
    gravity_field = f"{field_name}_gravity"

    def handler(draft: Draft, args: list[str]) -> None:
        if len(args) > 4:
            raise _invalid(field_name, ":".join(args), "too many arguments")
        draft[field_name] = _boolean(field_name, args[0])
        if len(args) > 1:
            current = draft[gravity_field] or Gravity()
            draft[gravity_field] = _gravity(
                f"{field_name} gravity", args[1:], current, allow_smart=False
            )

    return handler


#: ``ex:%extend:%gravity...``
_apply_extend = _extend_handler("extend")


def _apply_gravity(draft: Draft, args: list[str]) -> None:
    draft["gravity"] = _gravity("gravity", args, draft["gravity"], allow_smart=True)


def _apply_crop(draft: Draft, args: list[str]) -> None:
    """``c:%width:%height:%gravity...``; the gravity defaults to the request's."""
    current = draft["crop"] or Crop()
    width = _real("crop", args[0], 0.0, MAX_DIMENSION)
    height = _real("crop", args[1], 0.0, MAX_DIMENSION) if len(args) > 1 else current.height
    gravity = current.gravity
    if len(args) > 2:
        gravity = _gravity("crop gravity", args[2:], gravity or Gravity(), allow_smart=True)
    draft["crop"] = Crop(width, height, gravity)


def _apply_padding(draft: Draft, args: list[str]) -> None:
    """``pd:%top:%right:%bottom:%left``, CSS-style: each value fills the sides after it."""
    if len(args) > 4:
        raise _invalid("padding", ":".join(args), "too many arguments")
    top, right, bottom, left = draft["padding"]
    if args[0]:
        top = right = bottom = left = _dimension("padding", args[0])
    if len(args) > 1 and args[1]:
        right = left = _dimension("padding", args[1])
    if len(args) > 2 and args[2]:
        bottom = _dimension("padding", args[2])
    if len(args) > 3 and args[3]:
        left = _dimension("padding", args[3])
    draft["padding"] = (top, right, bottom, left)


def _apply_background(draft: Draft, args: list[str]) -> None:
    """``bg:%R:%G:%B`` or ``bg:%hex``; ``bg:`` alone switches the background off."""
    if len(args) == 1:
        draft["background"] = _hex_color(args[0]) if args[0] else None
    elif len(args) == 3:
        red, green, blue = (_integer("background", arg, 0, 255) for arg in args)
        draft["background"] = (red, green, blue)
    else:
        raise _invalid("background", ":".join(args), "takes R:G:B or a hex colour")


def _apply_rotate(draft: Draft, args: list[str]) -> None:
    """``rot:%angle``: a multiple of 90, stored clockwise in 0..270."""
    text = _single("rotate", args)
    angle = _integer("rotate", text, -(10**9), 10**9)
    if angle % 90:
        raise _invalid("rotate", text, "not a multiple of 90")
    draft["rotate"] = angle % 360


def _apply_flip(draft: Draft, args: list[str]) -> None:
    """``fl:%horizontal:%vertical``; empty arguments are skipped."""
    if len(args) > 2:
        raise _invalid("flip", ":".join(args), "too many arguments")
    if args[0]:
        draft["flip_horizontal"] = _boolean("flip", args[0])
    if len(args) > 1 and args[1]:
        draft["flip_vertical"] = _boolean("flip", args[1])


def _apply_quality(draft: Draft, args: list[str]) -> None:
    draft["quality"] = _integer("quality", _single("quality", args), 0, 100)


def _apply_format_quality(draft: Draft, args: list[str]) -> None:
    """``fq:%format:%quality:...``: merged into earlier pairs; quality 0 removes one."""
    if len(args) % 2:
        raise _invalid("format_quality", ":".join(args), "needs format:quality pairs")
    merged = dict(draft["format_quality"])
    for name, quality in zip(args[::2], args[1::2], strict=True):
        merged[_format_name("format_quality", name)] = _integer("format_quality", quality, 0, 100)
    draft["format_quality"] = tuple(sorted((f, q) for f, q in merged.items() if q))


def _apply_format(draft: Draft, args: list[str]) -> None:
    draft["format"] = _format_name("format", _single("format", args))


def _apply_cachebuster(draft: Draft, args: list[str]) -> None:
    draft["cachebuster"] = _single("cachebuster", args)


def _apply_zoom(draft: Draft, args: list[str]) -> None:
    """``z:%zoom_x_y`` or ``z:%zoom_x:%zoom_y``: multiply the requested box."""
    if len(args) > 2:
        raise _invalid("zoom", ":".join(args), "too many arguments")
    width = _real("zoom", args[0], 0.0, MAX_ZOOM, above_low=True)
    height = _real("zoom", args[1], 0.0, MAX_ZOOM, above_low=True) if len(args) > 1 else width
    draft["zoom_width"], draft["zoom_height"] = width, height


def _apply_trim(draft: Draft, args: list[str]) -> None:
    """``t:%threshold:%color:%equal_hor:%equal_ver``, as imgproxy reads it.

    An empty threshold switches trimming off; the colour, left out or
    empty, is the top-left pixel's; the two flags keep their values when
    left out.
    """
    if len(args) > 4:
        raise _invalid("trim", ":".join(args), "too many arguments")
    draft["trim_threshold"] = _real("trim", args[0], 0.0, MAX_TRIM_THRESHOLD) if args[0] else None
    color = args[1] if len(args) > 1 else ""
    draft["trim_color"] = _hex_color(color, "trim") if color else None
    if len(args) > 2 and args[2]:
        draft["trim_equal_horizontal"] = _boolean("trim", args[2])
    if len(args) > 3 and args[3]:
        draft["trim_equal_vertical"] = _boolean("trim", args[3])


def _apply_watermark(draft: Draft, args: list[str]) -> None:
    """``wm:%opacity:%position:%x_offset:%y_offset:%scale``; empty arguments are skipped."""
    if len(args) > 5:
        raise _invalid("watermark", ":".join(args), "too many arguments")
    mark: Watermark = draft["watermark"]
    changes: dict[str, Any] = {"opacity": _real("watermark", args[0], 0.0, 1.0)}
    if len(args) > 1 and args[1]:
        if args[1] not in WATERMARK_POSITIONS:
            raise _invalid("watermark", args[1], "unknown position")
        changes["position"] = args[1]
    for name, index in (("x", 2), ("y", 3)):
        if len(args) > index and args[index]:
            changes[name] = _real("watermark", args[index], -MAX_DIMENSION, MAX_DIMENSION)
    if len(args) > 4 and args[4]:
        changes["scale"] = _real("watermark", args[4], 0.0, MAX_ZOOM, above_low=True)
    draft["watermark"] = replace(mark, **changes)


def _apply_filename(draft: Draft, args: list[str]) -> None:
    """``fn:%filename:%encoded``: the name, or its URL-safe base64 when ``encoded``."""
    if len(args) > 2:
        raise _invalid("filename", ":".join(args), "too many arguments")
    name = args[0]
    if len(args) > 1 and args[1] and _boolean("filename", args[1]):
        name = _base64_text(name, "filename")
    if len(name) > MAX_FILENAME_LENGTH:
        raise _invalid("filename", name, f"longer than {MAX_FILENAME_LENGTH} characters")
    draft["filename"] = name


def _apply_skip_processing(draft: Draft, args: list[str]) -> None:
    """``skp:%extension1:%extension2...``: added to the formats already named."""
    names = set(draft["skip_processing"])
    for text in args:
        name = FORMAT_NAMES.get(text)
        if name is None:
            raise _invalid("skip_processing", text, "unsupported format")
        names.add(name)
    draft["skip_processing"] = tuple(sorted(names))


def _resolution_handler(field_name: str) -> Handler:
    """A resolution in megapixels (a real number), kept as pixels."""

    def handler(draft: Draft, args: list[str]) -> None:
        megapixels = _real(field_name, _single(field_name, args), 0.0, MAX_MEGAPIXELS)
        draft[field_name] = int(megapixels * 1_000_000)

    return handler


def _count_handler(field_name: str) -> Handler:
    """A whole number from 0 up (a count, a size in bytes, a timestamp)."""

    def handler(draft: Draft, args: list[str]) -> None:
        draft[field_name] = _integer(field_name, _single(field_name, args), 0, 10**18)

    return handler


def _apply_quality_mode(draft: Draft, args: list[str]) -> None:
    """``qm:%mode``: django-oximg's own option (imgproxy has no option of this name)."""
    mode = _single("quality_mode", args)
    if mode not in QUALITY_MODES:
        raise _invalid("quality_mode", mode, f"expected one of {', '.join(QUALITY_MODES)}")
    draft["quality_mode"] = mode


def _handler_table() -> dict[str, Handler]:
    """Every option by its long and short names (``preset`` is handled by the parser)."""
    entries: list[tuple[tuple[str, ...], Handler]] = [
        (("resize", "rs"), _apply_resize),
        (("size", "s"), _apply_size),
        (("resizing_type", "rt"), _apply_resizing_type),
        (("width", "w"), _apply_width),
        (("height", "h"), _apply_height),
        (("min-width", "mw"), _dimension_handler("min_width", "min-width")),
        (("min-height", "mh"), _dimension_handler("min_height", "min-height")),
        (("dpr",), _apply_dpr),
        (("enlarge", "el"), _apply_enlarge),
        (("extend", "ex"), _apply_extend),
        (("gravity", "g"), _apply_gravity),
        (("crop", "c"), _apply_crop),
        (("padding", "pd"), _apply_padding),
        (("background", "bg"), _apply_background),
        (("blur", "bl"), _sigma_handler("blur")),
        (("sharpen", "sh"), _sigma_handler("sharpen")),
        (("rotate", "rot"), _apply_rotate),
        (("flip", "fl"), _apply_flip),
        (("quality", "q"), _apply_quality),
        (("format_quality", "fq"), _apply_format_quality),
        (("format", "f", "ext"), _apply_format),
        (("strip_metadata", "sm"), _boolean_handler("strip_metadata", "strip_metadata")),
        (("keep_copyright", "kcr"), _boolean_handler("keep_copyright", "keep_copyright")),
        (
            ("strip_color_profile", "scp"),
            _boolean_handler("strip_color_profile", "strip_color_profile"),
        ),
        (("auto_rotate", "ar"), _boolean_handler("auto_rotate", "auto_rotate")),
        (("cachebuster", "cb"), _apply_cachebuster),
        # ``exp:%timestamp``: stored only; the thumbnailer compares it with its clock.
        (("expires", "exp"), _count_handler("expires")),
        (("max_bytes", "mb"), _count_handler("max_bytes")),
        (("zoom", "z"), _apply_zoom),
        (("extend_aspect_ratio", "extend_ar", "exar"), _extend_handler("extend_aspect_ratio")),
        (("trim", "t"), _apply_trim),
        (("pixelate", "pix"), _dimension_handler("pixelate", "pixelate")),
        (("watermark", "wm"), _apply_watermark),
        (("filename", "fn"), _apply_filename),
        (
            ("return_attachment", "att"),
            _boolean_handler("return_attachment", "return_attachment"),
        ),
        (("skip_processing", "skp"), _apply_skip_processing),
        (("raw",), _boolean_handler("raw", "raw")),
        (("enforce_thumbnail", "eth"), _boolean_handler("enforce_thumbnail", "enforce_thumbnail")),
        (("max_src_resolution", "msr"), _resolution_handler("max_src_resolution")),
        (("max_src_file_size", "msfs"), _count_handler("max_src_file_size")),
        (("max_animation_frames", "maf"), _count_handler("max_animation_frames")),
        (
            ("max_animation_frame_resolution", "mafr"),
            _resolution_handler("max_animation_frame_resolution"),
        ),
        (("quality_mode", "qm"), _apply_quality_mode),
    ]
    return {name: handler for names, handler in entries for name in names}


_HANDLERS = _handler_table()

#: ``preset``/``pr`` recurse into the parser, so they are not in the handler table.
PRESET_NAMES = ("preset", "pr")

#: Every option name a URL may use, long and short.
OPTION_NAMES = frozenset(_HANDLERS) | frozenset(PRESET_NAMES)


# -- parsing --------------------------------------------------------------------


class _OptionParser:
    """Applies options and presets to a draft, counting them against the cap."""

    def __init__(self, presets: Mapping[str, str]) -> None:
        self.presets = presets
        self.applied = 0

    def apply(self, draft: Draft, name: str, args: list[str], chain: tuple[str, ...]) -> None:
        self.applied += 1
        if self.applied > MAX_APPLIED_OPTIONS:
            raise InvalidOptions(
                detail=f"more than {MAX_APPLIED_OPTIONS} options", public="Too many options"
            )
        if name in PRESET_NAMES:
            self.apply_presets(draft, args, chain)
            return
        handler = _HANDLERS.get(name)
        if handler is None:
            raise InvalidOptions(
                detail=f"unknown option {name[:200]!r}", public=f"Unknown option: {_shown(name)}"
            )
        handler(draft, args)

    def apply_presets(self, draft: Draft, names: list[str], chain: tuple[str, ...]) -> None:
        """Apply each named preset; one already being applied is skipped, as imgproxy does."""
        for name in names:
            text = self.presets.get(name)
            if text is None:
                raise _invalid("preset", name, "unknown preset")
            if name in chain:
                continue
            for segment in filter(None, text.split("/")):
                option, sep, rest = segment.partition(":")
                if not sep:
                    raise _invalid("preset", name, f"segment {segment!r} has no arguments")
                self.apply(draft, option, rest.split(":"), (*chain, name))


def _unquote(text: str) -> str:
    """Percent-decode once; bytes that are not UTF-8 are an error, never replaced."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as error:
        raise InvalidOptions(
            detail=f"not UTF-8 once percent-decoded: {text[:200]!r}", public="Invalid URL encoding"
        ) from error


def _split_extension(text: str, mark: str) -> tuple[str, str]:
    head, _, extension = text.partition(mark)
    if mark in extension:
        raise _invalid_source(f"more than one {mark!r}")
    return head, extension


def _decode_base64(text: str) -> str:
    """URL-safe base64 (padding optional) of UTF-8 text."""
    decoded = _base64url_text(text)
    if decoded is None:
        raise _invalid_source("not URL-safe base64 of UTF-8 text")
    return decoded


def _base64_text(text: str, option: str) -> str:
    decoded = _base64url_text(text)
    if decoded is None:
        raise _invalid(option, text, "not URL-safe base64 of UTF-8 text")
    return decoded


def _base64url_text(text: str) -> str | None:
    """URL-safe base64 (padding optional) of UTF-8 text, or None."""
    text = text.rstrip("=")
    if _BASE64URL.fullmatch(text) is None or len(text) % 4 == 1:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _decode_source(segments: list[str]) -> tuple[str, str]:
    """The source and the extension ("" when absent) from the segments after the options."""
    if segments and segments[0] == "plain":
        head, extension = _split_extension("/".join(segments[1:]), "@")
        source = _unquote(head)
    else:
        head, extension = _split_extension("".join(segments), ".")
        source = _decode_base64(head)
    if not source:
        raise _invalid_source("empty")
    if "\x00" in source:
        raise _invalid_source("contains NUL")
    return source, extension


def _normalized(options: Options) -> Options:
    """``options`` with no-op variants folded, so equal effects compare equal.

    An extend gravity of plain centre or without extend is None; a crop of the
    full image (0 by 0) is None; so are the trim colour and flags without a
    trim, a watermark of opacity 0, blocks of 1 pixel; ``raw`` serves the
    source as it is, so no format or skipped format applies to it.
    """
    changes: dict[str, Any] = {}
    for enabled, gravity in (
        ("extend", "extend_gravity"),
        ("extend_aspect_ratio", "extend_aspect_ratio_gravity"),
    ):
        value = getattr(options, gravity)
        if value is not None and (not getattr(options, enabled) or value == Gravity()):
            changes[gravity] = None
    if options.crop is not None and options.crop.width == 0 and options.crop.height == 0:
        changes["crop"] = None
    if options.trim_threshold is None:
        changes.update(trim_color=None, trim_equal_horizontal=False, trim_equal_vertical=False)
    if options.pixelate == 1:
        changes["pixelate"] = 0
    if options.watermark.opacity == 0:
        changes["watermark"] = Watermark()
    if options.raw:
        changes.update(format="", skip_processing=())
    changes = {name: value for name, value in changes.items() if getattr(options, name) != value}
    return replace(options, **changes) if changes else options


def _option_segments(path: str) -> tuple[list[str], list[str]]:
    """Split the path into option segments (percent-decoded) and the source's segments.

    As imgproxy does: options run up to the first segment without a ":".
    """
    segments = path.removeprefix("/").split("/")
    options: list[str] = []
    for index, segment in enumerate(segments):
        text = _unquote(segment) if "%" in segment else segment
        if ":" not in text:
            return options, segments[index:]
        options.append(text)
    return options, []


def _preset_segments(path: str) -> tuple[list[str], list[str]]:
    """``ONLY_PRESETS``: the first segment names presets, the rest is the source."""
    first, _, rest = path.removeprefix("/").partition("/")
    names = _unquote(first) if "%" in first else first
    return names.split(":"), rest.split("/")


def _check_allowed(name: str, rules: URLRules) -> None:
    if rules.allowed_options and name not in rules.allowed_options:
        raise InvalidOptions(
            detail=f"option {name[:200]!r} is not in ALLOWED_PROCESSING_OPTIONS",
            public=f"Forbidden option: {_shown(name)}",
        )


def parse_path(
    path: str, presets: Mapping[str, str] | None = None, rules: URLRules = ANY_URL
) -> ParsedPath:
    """Parse a request path (the part after the signature, starting with "/").

    ``path`` is raw, still percent-encoded: option segments and the plain
    source are each percent-decoded exactly once here. ``presets`` maps preset
    names to option strings such as ``"rs:fill:300:300/q:70"``; a ``default``
    preset applies to every request, before the URL's options. ``rules``
    are the site's limits on what a URL may say (:class:`URLRules`).
    Raises :class:`~django_oximg.core.errors.InvalidOptions` naming the option,
    and nothing else, whatever the input.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidOptions(detail="path is not encodable text", public="Invalid URL") from error
    parser = _OptionParser(presets or {})
    draft = Draft({name: getattr(_DEFAULTS, name) for name in _FIELD_NAMES})
    if "default" in parser.presets:
        parser.apply_presets(draft, ["default"], ())
    if rules.only_presets:
        preset_names, source_segments = _preset_segments(path)
        parser.apply_presets(draft, preset_names, ())
    else:
        option_segments, source_segments = _option_segments(path)
        for segment in option_segments:
            name, _, rest = segment.partition(":")
            _check_allowed(name, rules)
            parser.apply(draft, name, rest.split(":"), ())
    source, extension = _decode_source(source_segments)
    if extension and not draft["raw"]:
        # imgproxy applies the extension after the options, so it wins over ``format``.
        draft["format"] = _format_name("format", extension)
    return ParsedPath(_normalized(Options(**draft)), source, frozenset(draft.assigned))


# -- building -------------------------------------------------------------------


def _number(value: float) -> str:
    """The shortest text that parses back to exactly ``value``."""
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _flag(value: bool) -> str:
    return "1" if value else "0"


def _gravity_text(gravity: Gravity) -> str:
    if gravity.type == "sm":
        return "sm"
    if gravity.type != "fp" and gravity.x == 0 and gravity.y == 0:
        return gravity.type
    return f"{gravity.type}:{_number(gravity.x)}:{_number(gravity.y)}"


def _geometry_segments(options: Options) -> Iterator[str]:
    """Size, gravity, crop and padding, in a fixed order, defaults left out."""
    if options.resizing_type != _DEFAULTS.resizing_type:
        yield f"rt:{options.resizing_type}"
    for name, value in (
        ("w", options.width),
        ("h", options.height),
        ("mw", options.min_width),
        ("mh", options.min_height),
    ):
        if value:
            yield f"{name}:{value}"
    if options.dpr != _DEFAULTS.dpr:
        yield f"dpr:{_number(options.dpr)}"
    if options.enlarge:
        yield "el:1"
    if options.extend:
        gravity = options.extend_gravity
        yield "ex:1" if gravity is None else f"ex:1:{_gravity_text(gravity)}"
    if options.gravity != _DEFAULTS.gravity:
        yield f"g:{_gravity_text(options.gravity)}"
    if options.crop is not None:
        crop = options.crop
        text = f"c:{_number(crop.width)}:{_number(crop.height)}"
        yield text if crop.gravity is None else f"{text}:{_gravity_text(crop.gravity)}"
    if options.padding != _DEFAULTS.padding:
        yield "pd:" + ":".join(str(side) for side in options.padding)
    if (options.zoom_width, options.zoom_height) != (1.0, 1.0):
        zoom = [options.zoom_width, options.zoom_height]
        yield "z:" + ":".join(map(_number, zoom[:1] if zoom[0] == zoom[1] else zoom))
    if options.extend_aspect_ratio:
        gravity = options.extend_aspect_ratio_gravity
        yield "exar:1" if gravity is None else f"exar:1:{_gravity_text(gravity)}"


def _trailing_defaults_dropped(option: str, args: list[str], defaults: list[str]) -> str:
    """``option:args``, without the trailing arguments that equal their default."""
    while len(args) > 1 and args[-1] == defaults[len(args) - 1]:
        args.pop()
    return f"{option}:" + ":".join(args)


def _color_text(color: tuple[int, int, int]) -> str:
    return "".join(f"{channel:02x}" for channel in color)


def _effect_segments(options: Options) -> Iterator[str]:
    """Background, filters, rotation and flips, in a fixed order, defaults left out."""
    if options.trim_threshold is not None:
        args = [
            _number(options.trim_threshold),
            _color_text(options.trim_color) if options.trim_color else "",
            _flag(options.trim_equal_horizontal),
            _flag(options.trim_equal_vertical),
        ]
        yield _trailing_defaults_dropped("t", args, ["", "", "0", "0"])
    if options.background is not None:
        yield "bg:" + _color_text(options.background)
    if options.blur:
        yield f"bl:{_number(options.blur)}"
    if options.sharpen:
        yield f"sh:{_number(options.sharpen)}"
    if options.rotate:
        yield f"rot:{options.rotate}"
    if options.flip_horizontal or options.flip_vertical:
        yield f"fl:{_flag(options.flip_horizontal)}:{_flag(options.flip_vertical)}"
    if options.pixelate:
        yield f"pix:{options.pixelate}"
    mark = options.watermark
    if mark.opacity:
        numbers = [_number(value) for value in (mark.x, mark.y, mark.scale)]
        texts = [_number(mark.opacity), mark.position, *numbers]
        yield _trailing_defaults_dropped("wm", texts, ["", "ce", "0", "0", "0"])


def _output_segments(options: Options) -> Iterator[str]:
    """Encoding, metadata and handling options, in a fixed order, defaults left out."""
    if options.quality:
        yield f"q:{options.quality}"
    if options.quality_mode:
        yield f"qm:{options.quality_mode}"
    if options.format_quality:
        yield "fq:" + ":".join(f"{name}:{quality}" for name, quality in options.format_quality)
    for name, value, default in (
        ("sm", options.strip_metadata, _DEFAULTS.strip_metadata),
        ("kcr", options.keep_copyright, _DEFAULTS.keep_copyright),
        ("scp", options.strip_color_profile, _DEFAULTS.strip_color_profile),
        ("ar", options.auto_rotate, _DEFAULTS.auto_rotate),
    ):
        if value != default:
            yield f"{name}:{_flag(value)}"
    if options.cachebuster:
        yield "cb:" + quote(options.cachebuster, safe="")
    if options.expires:
        yield f"exp:{options.expires}"
    if options.max_bytes:
        yield f"mb:{options.max_bytes}"
    if options.filename:
        yield _filename_segment(options.filename)
    for name, flag in (
        ("att", options.return_attachment),
        ("raw", options.raw),
        ("eth", options.enforce_thumbnail),
    ):
        if flag:
            yield f"{name}:1"
    if options.skip_processing:
        yield "skp:" + ":".join(options.skip_processing)
    for name, pixels in (
        ("msr", options.max_src_resolution),
        ("mafr", options.max_animation_frame_resolution),
    ):
        if pixels:
            yield f"{name}:{_megapixels_text(pixels)}"
    for name, count in (
        ("msfs", options.max_src_file_size),
        ("maf", options.max_animation_frames),
    ):
        if count:
            yield f"{name}:{count}"


#: File names written as they are in ``fn``; any other is base64-encoded.
_PLAIN_FILENAME = re.compile(r"[A-Za-z0-9._~-]+")


def _filename_segment(name: str) -> str:
    if _PLAIN_FILENAME.fullmatch(name):
        return f"fn:{name}"
    encoded = base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii").rstrip("=")
    return f"fn:{encoded}:1"


def _megapixels_text(pixels: int) -> str:
    """Megapixels that parse back (as imgproxy parses them, truncating) to ``pixels``."""
    candidate = pixels / 1_000_000
    while int(candidate * 1_000_000) < pixels:
        candidate = math.nextafter(candidate, math.inf)
    return _number(candidate)


def _check_buildable(options: Options, source: str) -> None:
    """Refuse what no URL can carry, rather than build a path that parses differently."""
    if not source or "\x00" in source:
        raise _invalid_source("empty or contains NUL")
    try:
        source.encode("utf-8")
        options.cachebuster.encode("utf-8")
    except UnicodeEncodeError as error:
        raise _invalid_source("not encodable text") from error
    if ":" in options.cachebuster:
        raise _invalid("cachebuster", options.cachebuster, "contains ':'")
    try:
        options.filename.encode("utf-8")
    except UnicodeEncodeError as error:
        raise _invalid("filename", options.filename, "not encodable text") from error


def build_path(options: Options, source: str, *, encode: str = "plain") -> str:
    """Build the canonical path for ``options`` and ``source``.

    Only options that differ from the defaults appear, in a fixed order, by
    their short names, with the output format as the extension. ``encode`` is
    ``"plain"`` (source percent-encoded, "/" and ":" kept) or ``"base64"``.
    ``parse_path(build_path(o, s)) == ParsedPath(o, s)`` for every valid,
    normalised ``o`` (no-op variants such as a 0x0 crop are folded first, so
    requests with the same effect share one path, and so one cache key).
    """
    if encode not in ("plain", "base64"):
        raise ValueError(f"encode must be 'plain' or 'base64', not {encode!r}")
    _check_buildable(options, source)
    options = _normalized(options)
    segments = [
        *_geometry_segments(options),
        *_effect_segments(options),
        *_output_segments(options),
    ]
    if encode == "plain":
        segments.append("plain")
        tail = quote(source, safe="/:")
        mark = "@"
    else:
        tail = base64.urlsafe_b64encode(source.encode("utf-8")).decode("ascii").rstrip("=")
        mark = "."
    segments.append(f"{tail}{mark}{options.format}" if options.format else tail)
    return "/" + "/".join(segments)
