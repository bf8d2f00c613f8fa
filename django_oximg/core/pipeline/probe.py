"""What a source's header says, read without decoding pixels.

:func:`probe` is cheap enough to run before a job is admitted (resolution,
frame and format limits, the memory estimate) and its answer,
:class:`SourceInfo`, is what the render is planned from.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from typing import Any

import pyvips

from django_oximg.core.errors import InvalidImage, UnsupportedFormat
from django_oximg.core.pipeline.libvips import Image, ensure_configured, libvips_error


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
    #: that the render need not parse it again; None when not at hand.
    header: Image = field(default=None, compare=False, repr=False)
    #: This describes a HEIF's embedded thumbnail, which is what is loaded
    #: (``enforce_thumbnail``; :func:`embedded_thumbnail`).
    embedded_thumbnail: bool = False
    #: A HEIF's codec as libheif names it ("hevc" for HEIC, "av1" for AVIF);
    #: "" for other formats. libvips decodes AV1 here, pillow-heif HEVC
    #: (:mod:`.heic`).
    compression: str = ""


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


#: Source formats (``SourceInfo.format``) that are web formats as they are.
WEB_FORMATS = frozenset({"jpeg", "png", "webp", "gif"})


def web_format(info: SourceInfo) -> str:
    """The output format the source already is (``raw``, ``skip_processing``), or "".

    A HEIF file counts as AVIF when its images are AV1, as browsers take it.
    """
    if info.format in WEB_FORMATS:
        return info.format
    header = info.header
    if info.format == "heif" and header is not None and header.get_typeof("heif-compression"):
        return "avif" if header.get("heif-compression") == "av1" else ""
    return ""


#: Formats whose files may carry an embedded thumbnail libvips can load
#: (imgproxy reads the same ones for ``enforce_thumbnail``).
THUMBNAIL_FORMATS = frozenset({"heif"})


def embedded_thumbnail(data: bytes, info: SourceInfo) -> SourceInfo:
    """What the header of ``data``'s embedded thumbnail says, or ``info`` when it has none.

    For ``enforce_thumbnail``: the render is then planned from, and loads,
    the thumbnail. A HEIF without a thumbnail gives its main image's size.
    """
    if info.format not in THUMBNAIL_FORMATS or info.compression == HEVC:
        # pillow-heif, which decodes HEIC (:mod:`.heic`), decodes no thumbnails.
        return info
    try:
        image = pyvips.Image.heifload_source(memory_source(data), thumbnail=True)
        size = (int(image.width), int(image.height))
    except pyvips.Error as error:
        raise libvips_error(error, data) from error
    if size == (info.width, info.height):
        return info
    return replace(info, width=size[0], height=size[1], header=None, embedded_thumbnail=True)


def probe(data: bytes) -> SourceInfo:
    """Read the header of ``data``; raise InvalidImage/UnsupportedFormat.

    libvips opens the header only; pixels are decoded later, if ever, so this is
    cheap enough to run before admitting a job (resolution and frame limits).
    """
    ensure_configured()
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
            compression=str(image.get("heif-compression")) if "heif-compression" in fields else "",
        )
    except pyvips.Error as error:
        raise libvips_error(error, data) from error
    check_complete(info, data)
    check_decodable(info)
    return info


#: ``heif-compression`` of a HEIC's images, which libvips here cannot decode.
HEVC = "hevc"


def check_decodable(info: SourceInfo) -> None:
    """Refuse a HEIC (415) when pillow-heif, its decoder here, is not installed.

    Told from the header, so a HEIC is refused before it is admitted, as
    any format that cannot be rendered (an upload validator asking the same
    questions refuses it too); pillow-heif is looked for, not imported.
    """
    if info.format == "heif" and info.compression == HEVC and not pillow_heif_installed():
        raise UnsupportedFormat("a HEIC source needs pillow-heif (the heic extra)")


def pillow_heif_installed() -> bool:
    """Whether ``pillow_heif`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("pillow_heif") is not None
    except ValueError:  # in sys.modules as None: import refused
        return False
