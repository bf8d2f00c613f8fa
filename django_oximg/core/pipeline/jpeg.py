"""JPEG decoding with libjpeg-turbo (through Pillow) at a DCT scale.

Why not libvips' own loader: pyvips-binary builds libvips against mozjpeg,
whose decoder is slower than libjpeg-turbo 3 on the same bytes (a 2000x1333
photo decoded at 1/4: 9.8 against 8.8 ms of CPU; a 7360x4912 one at 1/8:
108 against 102 ms; docs/BENCHMARKS.md), and decoding
is most of a JPEG thumbnail's cost. Pillow's wheels carry libjpeg-turbo, the
encoder (:mod:`django_oximg.core.pipeline.encoder`) needs Pillow anyway, and it
releases the GIL while it decodes, so the executor's render threads still
use every core. (simplejpeg, used before, decoded 3 % faster on the medium
photo but brought numpy, about 100 ms of every new process's start.)

Only the pixels come from here: :mod:`django_oximg.core.pipeline` still reads
the header (size, orientation, ICC profile) with libvips and does everything
after the decode. This module imports no pyvips and no Django.
"""

from __future__ import annotations

import io
import struct
from typing import NamedTuple

from PIL import ImageFile, JpegImagePlugin

#: Largest decode (pixels after the DCT scale) done here. Pillow decodes into
#: one whole image (4 bytes per pixel for RGB, 1 for grey) and hands over a
#: packed copy (3 or 1), where libvips streams strips (about 1.4 bytes per
#: pixel); thumbnails are far below this, and a render that keeps most of a
#: large photo's pixels is left to libvips' lower peak. core/pipeline/budget.py
#: estimates with it.
MAX_DECODED_PIXELS = 16_000_000

#: Bytes Pillow holds per decoded pixel and band at the peak of a decode:
#: its own image (RGB stored as 4 bytes, grey as 1) and the packed copy.
PEAK_BYTES_PER_SAMPLE = {3: 7 / 3, 1: 2.0}

#: Pillow's modes decoded here, with their bands (CMYK and YCCK go to
#: libvips, which undoes Adobe's inverted CMYK and imports it through a profile).
DECODED_MODES = {"RGB": 3, "L": 1}

#: What Pillow raises for a file it cannot decode: libvips then decides.
DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError, struct.error)


class Decoded(NamedTuple):
    """Interleaved 8-bit pixels: ``bands`` values per pixel, rows top to bottom."""

    pixels: bytes
    width: int
    height: int
    bands: int


def decode_scaled(data: bytes, shrink: int) -> Decoded | None:
    """Decode ``data`` at 1/``shrink`` (1, 2, 4 or 8), or None to let libvips do it.

    None when the decode would exceed :data:`MAX_DECODED_PIXELS`, when the
    colour space is not plain RGB/YCbCr/grey, and whenever Pillow cannot
    decode the file: a truncated one (libvips then applies the project's
    own policy, truncation is an error), or one Pillow does not take for a
    JPEG. Files with recoverable damage (extraneous bytes before a marker,
    a bad Huffman code) are decoded here as libvips would decode them:
    both recover with libjpeg's own code (tests/test_jpeg.py). A site that
    switches on Pillow's ``LOAD_TRUNCATED_IMAGES`` gets libvips for every
    JPEG, so truncated files keep failing as libvips says.

    libjpeg rounds the scaled size up (the last row and column come from a
    fraction of a source block); libvips' loader crops that away, and so
    should the caller, to get the same size.
    """
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        return None
    try:
        # The JPEG plugin itself, not Image.open: no format sniffing, and no
        # decompression-bomb warning for a source whose size the thumbnailer
        # has already checked against MAX_SRC_RESOLUTION.
        with JpegImagePlugin.JpegImageFile(io.BytesIO(data)) as image:
            bands = DECODED_MODES.get(image.mode)
            width, height = image.size
            scaled = (-(-width // shrink), -(-height // shrink))
            if bands is None or scaled[0] * scaled[1] > MAX_DECODED_PIXELS:
                return None
            # Pillow picks the largest scale at which the image still covers
            # the size asked for; the floor of 1/shrink is covered at exactly
            # 1/shrink and at no larger scale.
            image.draft(image.mode, (max(1, width // shrink), max(1, height // shrink)))
            if image.size != scaled:
                return None
            image.decodermaxblock = len(data) + 1  # one pass, no suspended decode
            image.load()
            pixels = image.tobytes()
    except DECODE_ERRORS:
        return None
    return Decoded(pixels, scaled[0], scaled[1], bands)
