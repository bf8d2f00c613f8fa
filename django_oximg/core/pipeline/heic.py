"""HEIC sources: HEIF files of HEVC-coded images, decoded by pillow-heif (the ``heic`` extra).

An iPhone saves its photos as HEIC. pyvips-binary's libheif reads a HEIF
file's structure (sizes, turns, items) but has no HEVC decoder, for the
codec's patents; pillow-heif's wheels bundle libheif with libde265. So a
HEIC source is probed by libvips like any other (:mod:`.probe`): its
resolution, frames and memory estimate are checked against the limits
before anything is decoded, and only the decode of the admitted source
goes through pillow-heif, here, into a pyvips image the steps take as
they take any other. A bomb is refused from its header, as every source.

libheif applies the file's own turns (``irot``/``imir``, where a HEIC
keeps the camera's orientation) on both paths, so the probe's size is the
decoded, upright size and no EXIF orientation is applied on top (libvips
reports none for HEIF). High bit depths are decoded to 8 bits, as every
result is 8-bit. pillow-heif does not decode a file's embedded thumbnails,
so ``enforce_thumbnail`` renders a HEIC's main image.

Without pillow-heif installed the probe refuses a HEIC source (415), as a
format that cannot be rendered.
"""

from __future__ import annotations

from typing import Any

import pyvips

from django_oximg.core.errors import InvalidImage, UnsupportedFormat
from django_oximg.core.options import Options
from django_oximg.core.pipeline.libvips import EXIF_FIELD, ICC_FIELD, Image
from django_oximg.core.pipeline.probe import HEVC, SourceInfo

#: pillow-heif's 8-bit modes, by their number of bands.
BANDS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}

#: The fields libvips parses an EXIF block's Orientation into; a saver
#: writes the tag from the first.
ORIENTATION_FIELDS = ("orientation", "exif-ifd0-Orientation")

#: libvips' XMP field; pillow-heif gives the packet as ``info["xmp"]``.
XMP_FIELD = "xmp-data"


def needs_pillow_heif(info: SourceInfo) -> bool:
    """Whether ``info`` describes a HEIF whose images only pillow-heif can decode."""
    return info.format == "heif" and info.compression == HEVC


def pillow_heif_module() -> Any:
    """The ``pillow_heif`` module, imported on the first HEIC decode (it loads libheif)."""
    try:
        import pillow_heif
    except ImportError as error:
        raise UnsupportedFormat("a HEIC source needs pillow-heif (the heic extra)") from error
    return pillow_heif


def heic_decoded(data: bytes, options: Options) -> Image:
    """The primary image of the HEIC ``data``, decoded whole, upright, 8-bit.

    The pyvips image refers to pillow-heif's pixel buffer without a copy
    when its rows are unpadded. The ICC profile rides along for the colour
    step; EXIF and XMP only where the encoder may write them
    (``strip_metadata`` off, or ``keep_copyright``, which reads the EXIF).
    """
    pillow_heif = pillow_heif_module()
    try:
        heif = pillow_heif.open_heif(data, convert_hdr_to_8bit=True)
        bands = BANDS.get(heif.mode)
        if bands is None:
            raise InvalidImage(f"HEIC image in mode {heif.mode!r}")
        width, height = heif.size
        image = image_of(heif.data, heif.stride, width, height, bands)
    except (ValueError, RuntimeError, OSError, SyntaxError) as error:
        raise InvalidImage(f"pillow-heif: {error}") from error
    fields: dict[str, bytes] = {}
    info = heif.info
    if info.get("icc_profile"):
        fields[ICC_FIELD] = bytes(info["icc_profile"])
    if (not options.strip_metadata or options.keep_copyright) and info.get("exif"):
        fields[EXIF_FIELD] = bytes(info["exif"])
    if not options.strip_metadata and info.get("xmp"):
        fields[XMP_FIELD] = bytes(info["xmp"])
    for name, value in fields.items():
        image.set_type(pyvips.GValue.blob_type, name, value)
    # libvips reads the EXIF block's Orientation into the image: a HEIC
    # keeps the camera's there too, but libheif has turned the pixels by it
    # already, and a saver would write it again (AVIF as a turn of its own).
    for name in ORIENTATION_FIELDS:
        if image.get_typeof(name):
            image.remove(name)
    return image


def image_of(pixels: Any, stride: int, width: int, height: int, bands: int) -> Image:
    """A pyvips image of interleaved 8-bit rows ``stride`` bytes apart (libheif may pad them)."""
    row = width * bands
    if stride != row:
        view = memoryview(pixels)
        pixels = b"".join(view[y * stride : y * stride + row] for y in range(height))
    image = pyvips.Image.new_from_memory(pixels, width, height, bands, "uchar")
    interpretation = "srgb" if bands >= 3 else "b-w"
    return image.copy(interpretation=interpretation)
