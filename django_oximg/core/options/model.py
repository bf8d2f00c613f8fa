"""What a request asks for: the frozen :class:`Options` and its parts, their limits.

Everything here is data: the option values as the pipeline reads them, the
bounds that keep a URL's numbers out of absurd arithmetic, the draft a parse
fills in, and the normal form (:func:`normalized`) in which requests with
the same effect compare equal, and so build one canonical path and share one
cache key. How the values are written in a URL is :mod:`.table`'s concern.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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

#: ``autoquality`` methods, as imgproxy names them. ``ml`` predicts a first
#: quality with a neural network in imgproxy; without one it is ``dssim``,
#: which is what it is here.
AUTOQUALITY_METHODS = ("none", "size", "dssim", "ml")

#: Largest ``autoquality`` target: a size in bytes, or a DSSIM far above
#: any image's (DSSIM 1 is an SSIM of 0.5).
MAX_AUTOQUALITY_TARGET = 10.0**12


class Gravity(NamedTuple):
    """Where to anchor a crop or an extension.

    ``type`` is one of :data:`GRAVITY_TYPES`. For compass types ``x`` and ``y``
    are offsets in pixels (imgproxy's ``x_offset``/``y_offset``); for ``fp``
    they are the focus point as fractions 0..1 of width and height.
    """

    type: str = "ce"
    x: float = 0.0
    y: float = 0.0


class Crop(NamedTuple):
    """Crop the source before resizing (imgproxy ``crop``).

    ``width``/``height`` are pixels of the source, or fractions of it when below
    1; 0 means the full dimension. ``gravity`` None means the request's gravity.
    """

    width: float = 0.0
    height: float = 0.0
    gravity: Gravity | None = None


class Watermark(NamedTuple):
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


class AutoQuality(NamedTuple):
    """A URL's ``autoquality:%method:%target:%min_quality:%max_quality:%allowed_error``.

    Each argument redefines the site's ``AUTOQUALITY`` setting of the same
    meaning, as imgproxy's do; one left out (empty here, or None) keeps it.
    The quality bounds given in a URL hold for every format, where the
    setting's ``FORMAT_MIN``/``FORMAT_MAX`` would bound each one.
    """

    #: One of :data:`AUTOQUALITY_METHODS`, or "" for the site's.
    method: str = ""
    #: Bytes for ``size``, DSSIM for ``dssim``; None for the site's.
    target: float | None = None
    #: 1..100; 0 for the site's (per format).
    min_quality: int = 0
    max_quality: int = 0
    #: How far from the DSSIM target is close enough; None for the site's.
    allowed_error: float | None = None


class Options(NamedTuple):
    """One request's processing options, fully parsed and validated.

    Defaults are imgproxy's defaults, except ``format`` (empty means: from the
    URL extension, else negotiated from Accept) and the quality (0 means the
    configured per-format default).

    A NamedTuple, as the request path's records are: a parse, a tag and a
    client hint each build or ``_replace`` one several times, which a
    frozen dataclass of these sixty fields does several times slower
    (docs/BENCHMARKS.md, "Page renders"). Every default is immutable.
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
    gravity: Gravity = Gravity()
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
    watermark: Watermark = Watermark()
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
    #: ``max_result_dimension``: the largest side of the result for this URL,
    #: only ever below ``MAX_RESULT_DIMENSION`` (:func:`result_dimension_limit`).
    max_result_dimension: int = 0
    #: One of :data:`QUALITY_MODES`, or "" for the site's ``QUALITY_MODE``.
    quality_mode: str = ""
    #: ``autoquality``: the quality searched per image; all unset: the site's.
    autoquality: AutoQuality = AutoQuality()
    #: The site's own options (``OXIMG["EXTENSIONS"]``) a request gives, as
    #: sorted (short name, canonical arguments) pairs, none at its default
    #: (:mod:`.extensions`).
    extensions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ParsedPath:
    """A parsed request path: options plus the source name and its encoding."""

    options: Options
    #: The source, percent-decoded exactly once (a storage name or an http(s) URL).
    source: str
    #: Fields some option or preset set (even to their default): what a client
    #: hint may no longer change.
    assigned: frozenset[str] = field(default=frozenset(), compare=False)


class URLRules(NamedTuple):
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


DEFAULTS = Options()


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


def lowered_limit(configured: int, requested: int) -> int:
    """A limit as a URL may set it (``max_src_resolution`` and friends): only lower.

    ``requested`` 0 means the URL set none.
    """
    return min(configured, requested) if requested else configured


def result_dimension_limit(configured: int, requested: int) -> int:
    """The largest side of a result: ``MAX_RESULT_DIMENSION`` lowered by a URL's
    ``max_result_dimension``.

    Unlike the source limits, a configured 0 means no limit (as in
    imgproxy), so a URL's value there is the limit; a URL's 0 sets none.
    """
    if not requested:
        return configured
    return min(configured, requested) if configured else requested


def normalized(options: Options) -> Options:
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
    return options._replace(**changes) if changes else options
