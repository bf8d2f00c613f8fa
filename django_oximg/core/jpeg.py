"""JPEG decoding with libjpeg-turbo (through simplejpeg) at a DCT scale.

Why not libvips' own loader: pyvips-binary builds libvips against mozjpeg,
whose decoder is slower than libjpeg-turbo 3 on the same bytes (a 2000x1333
photo decoded at 1/4: 12.8 against 10.4 ms of CPU; a 7360x4912 one at 1/8:
125 against 115 ms; docs/BENCHMARKS.md, "The JPEG decoder"), and decoding
is most of a JPEG thumbnail's cost. simplejpeg is a small, maintained
wrapper that ships libjpeg-turbo in its wheels and releases the GIL while
it decodes, so the executor's render threads still use every core.

Only the pixels come from here: :mod:`django_oximg.core.pipeline` still reads
the header (size, orientation, ICC profile) with libvips and does everything
after the decode. This module imports no pyvips and no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

import simplejpeg

#: Largest decode (pixels after the DCT scale) done here. libjpeg-turbo
#: decodes into one whole-image array (3 bytes per pixel for RGB) where
#: libvips streams strips (about 1.4); thumbnails are far below this, and a
#: render that keeps most of a large photo's pixels is left to libvips' lower
#: peak. 16 MP is a 48 MiB array. core/budget.py estimates with it.
MAX_DECODED_PIXELS = 16_000_000

#: JPEG colour spaces decoded here (CMYK and YCCK go to libvips, which undoes
#: Adobe's inverted CMYK and imports it through a profile).
DECODED_COLOURSPACES = {"YCbCr": "RGB", "RGB": "RGB", "Gray": "GRAY"}


@dataclass(frozen=True)
class Decoded:
    """Interleaved 8-bit pixels: ``bands`` values per pixel, rows top to bottom."""

    pixels: memoryview
    width: int
    height: int
    bands: int


def decode_scaled(data: bytes, shrink: int) -> Decoded | None:
    """Decode ``data`` at 1/``shrink`` (1, 2, 4 or 8), or None to let libvips do it.

    None when the decode would exceed :data:`MAX_DECODED_PIXELS`, when the
    colour space is not plain RGB/YCbCr/grey, and whenever
    libjpeg-turbo complains at all (``strict``: a truncated file, extraneous
    bytes, a corrupt segment): libvips then decodes it and applies the
    project's own policy (truncation is an error, harmless warnings are not),
    so the two decoders never disagree on which files are valid.

    libjpeg rounds the scaled size up (the last row and column come from a
    fraction of a source block); libvips' loader crops that away, and so
    should the caller, to get the same size.
    """
    try:
        height, width, colourspace, _subsampling = simplejpeg.decode_jpeg_header(data)
        target = DECODED_COLOURSPACES.get(colourspace)
        decoded_pixels = -(-width // shrink) * -(-height // shrink)
        if target is None or decoded_pixels > MAX_DECODED_PIXELS:
            return None
        # min_factor pins the DCT scale: libjpeg-turbo also offers k/8 scales,
        # which simplejpeg would take for a bare minimum size.
        pixels = simplejpeg.decode_jpeg(
            data,
            colorspace=target,
            min_factor=shrink,
            min_width=-(-width // shrink),
            min_height=-(-height // shrink),
            strict=True,
        )
    except ValueError:
        return None
    decoded_height, decoded_width, bands = pixels.shape
    return Decoded(memoryview(pixels).cast("B"), decoded_width, decoded_height, bands)
