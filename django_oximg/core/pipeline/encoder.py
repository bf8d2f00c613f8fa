"""JPEG and WebP encoding of pixels already in memory, on the calling thread (Pillow).

Why not libvips' savers for these: a libvips saver pulls the image through
libvips' thread pool, a worker thread computing strips and a write-behind
thread encoding them, the render thread waiting on both, a hand-off every
16 lines. Two such renders in one process kept 1.5 of 2 cores busy where two
processes kept 1.95, even driven from C with the GIL out of the way
(docs/BENCHMARKS.md, "The encoder on the render thread"). When the pixels are
already in memory (a JPEG decoded by libjpeg-turbo, :mod:`.jpeg`), the
pipeline computes the result on the render thread and hands it here:
Pillow's encoders (libjpeg-turbo, libwebp) run on that same thread, and
nothing waits for anything. (Pillow's JPEG encoder holds the GIL while it
writes into a ``BytesIO``, as here; writing into a file descriptor
released it, but the server was no faster for it, so that was not kept:
docs/BENCHMARKS.md.)

The output is libvips' own: a JPEG decodes to the same pixels as
``jpegsave`` with ``optimize_coding`` and the same quantisation tables
(Pillow adds an 18-byte JFIF header),
a WebP is byte-identical to ``webpsave`` at ``effort`` 4 (tests/test_encoder.py).
Metadata: an ICC profile and the minimal EXIF block of ``keep_copyright``
(:mod:`.exif`), as the pipeline decides; results that keep everything
go to libvips, and so does a JPEG too dense for Pillow's buffer
(:class:`BufferFull`).
This module imports no pyvips and no Django.
"""

from __future__ import annotations

import io

from PIL import Image as PILImage

#: Output formats encoded here.
FORMATS = frozenset({"jpeg", "webp"})

#: Pillow image mode for each band count of 8-bit sRGB pixels.
MODES = {1: "L", 3: "RGB", 4: "RGBA"}

#: Largest result (pixels) encoded here. The whole result is held a few
#: times over while it is encoded (the fetched pixels, Pillow's 4-byte
#: copy, libjpeg's coefficients for ``optimize``) where libvips' savers
#: stream strips. Thumbnails are far below this; larger results go to
#: libvips. ``bench/memory.py weights`` measures the largest results taken
#: here, and core/pipeline/budget.py's estimates stay above them.
MAX_PIXELS = 2_000_000

#: Longest side each format can hold; longer results go to libvips, whose
#: saver reports it as an error.
MAX_SIDE = {"jpeg": 65_500, "webp": 16_383}

#: libvips' ``jpegsave`` subsamples chroma (4:2:0) below this quality and
#: keeps it whole (4:4:4) from it on; Pillow's numbers for the two.
FULL_CHROMA_QUALITY = 90
SUBSAMPLING_444, SUBSAMPLING_420 = 0, 2

#: Below :data:`FULL_CHROMA_QUALITY` a JPEG is quantised with the tables
#: tuned for MS-SSIM on the Kodak photo set (mozjpeg's table 2, libvips'
#: ``quant_table=2``), from it on with JPEG's own (Annex K, table 0). On 14
#: real photos at equal bytes they score 1.0 SSIMULACRA2 point above Annex K
#: at quality 80's size and 2.1 at quality 60's, for the same encoder CPU;
#: with 4:4:4 chroma they lose 0.5, so quality 90 and above keep Annex K
#: (docs/quality.md, "JPEG quantisation tables"). The same quality number
#: gives a file 3-7 % smaller that scores a little higher.
TUNED_QUANT_TABLE, ANNEX_K_QUANT_TABLE = 2, 0

#: Table 2 at a scale of 100 % (quality 50), luminance then chrominance, in
#: the order Pillow's ``qtables`` takes (tests/test_encoder.py reads them
#: back from libvips). libjpeg scales them by quality as it scales Annex K.
TUNED_TABLES = (
    (12, 17, 20, 21, 30, 34, 56, 63, 18, 20, 20, 26, 28, 51, 61, 55,
     19, 20, 21, 26, 33, 58, 69, 55, 26, 26, 26, 30, 46, 87, 86, 66,
     31, 33, 36, 40, 46, 96, 100, 73, 40, 35, 46, 62, 81, 100, 111, 91,
     46, 66, 76, 86, 102, 121, 120, 101, 68, 90, 90, 96, 113, 102, 105, 103),
    (8, 12, 15, 15, 86, 96, 96, 98, 13, 13, 15, 26, 90, 96, 99, 98,
     12, 15, 18, 96, 99, 99, 99, 99, 17, 16, 90, 96, 99, 99, 99, 99,
     96, 96, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
     99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99),
)  # fmt: skip


def quant_table(quality: int) -> int:
    """The quantisation table a JPEG at ``quality`` uses (libvips' ``quant_table``)."""
    return TUNED_QUANT_TABLE if quality < FULL_CHROMA_QUALITY else ANNEX_K_QUANT_TABLE


#: libvips' ``webpsave`` effort as the pipeline uses it (Pillow calls it ``method``).
WEBP_EFFORT = 4


class BufferFull(Exception):
    """Pillow could not write this JPEG: it did not fit Pillow's output buffer.

    With optimised Huffman tables libjpeg writes the whole entropy-coded
    image at the end, in one go, into a buffer Pillow sizes at one byte per
    pixel (two from quality 95). Photos at any quality stay well below it,
    but noise-like detail at quality 90 and above (4:4:4) does not: libjpeg
    stops with "Suspension not allowed here" and Pillow raises ``OSError``.
    The caller encodes such a result with libvips' saver, which streams.
    """


def can_encode(fmt: str, width: int, height: int, bands: int) -> bool:
    """Whether a ``width`` x ``height`` result of ``bands`` bands in ``fmt`` is encoded here."""
    return (
        fmt in FORMATS
        and bands in MODES
        and width * height <= MAX_PIXELS
        and max(width, height) <= MAX_SIDE[fmt]
    )


def encode(
    pixels: bytes | bytearray,
    width: int,
    height: int,
    bands: int,
    fmt: str,
    quality: int,
    icc_profile: bytes | None = None,
    exif: bytes | None = None,
    progressive: bool = False,
) -> bytes:
    """Encode interleaved 8-bit sRGB ``pixels`` (rows top to bottom) as ``fmt``.


    ``icc_profile`` and ``exif`` (a whole block, ``Exif\\0\\0`` prefix
    included) are embedded when given. The settings are the ones
    :func:`django_oximg.core.pipeline.encode.save` gives libvips: JPEG with
    optimised Huffman tables and :func:`quant_table`'s tables (progressive
    with ``progressive``, as ``jpegsave``'s ``interlace``), WebP lossy at
    effort 4. Raises :class:`BufferFull` for a JPEG larger than Pillow's
    buffer.
    """
    mode = MODES[bands]
    image = PILImage.frombuffer(mode, (width, height), pixels, "raw", mode, 0, 1)
    extra: dict[str, bytes] = {}
    if icc_profile:
        extra["icc_profile"] = icc_profile
    if exif:
        extra["exif"] = exif
    out = io.BytesIO()
    if fmt == "jpeg":
        full_chroma = quality >= FULL_CHROMA_QUALITY
        jpeg: dict[str, object] = {
            "subsampling": SUBSAMPLING_444 if full_chroma else SUBSAMPLING_420
        }
        if quant_table(quality) == TUNED_QUANT_TABLE:
            jpeg["qtables"] = TUNED_TABLES
        try:
            image.save(
                out,
                "JPEG",
                quality=quality,
                optimize=True,
                progressive=progressive,
                **jpeg,
                **extra,
            )
        except OSError as error:
            raise BufferFull(f"{width}x{height} JPEG at quality {quality}") from error
    elif fmt == "webp":
        image.save(out, "WEBP", quality=quality, method=WEBP_EFFORT, **extra)
    else:
        raise ValueError(f"not encoded here: {fmt!r}")
    return out.getvalue()
