"""Estimate a job's peak memory from its source header, before any pixel is decoded.

The executor reserves this estimate against the per-process memory budget, so
the figure must be cheap (header only) and on the safe side. Decoders differ a
lot: a baseline JPEG streams through shrink-on-load, a progressive JPEG or an
interlaced PNG must hold the whole decoded image, an animated GIF holds every
frame. The weights below express that; see docs/operations.md for how they
were measured and how to re-measure them.
"""

from __future__ import annotations

from django_oximg.core.pipeline import SourceInfo

MIB = 1024 * 1024

#: Fixed overhead of any job: libvips buffers, the encoded source and result.
BASE_BYTES = 8 * MIB

#: Bytes held per decoded source pixel, by (format, interlaced). Baseline
#: JPEG/PNG/WebP decode in strips, so they hold far less than a whole image;
#: interlaced ones and GIF frames are decoded whole, as 4-band uchar.
BYTES_PER_PIXEL: dict[tuple[str, bool], float] = {
    ("jpeg", False): 0.5,
    ("jpeg", True): 4.0,
    ("png", False): 1.0,
    ("png", True): 4.0,
    ("webp", False): 4.0,
    ("gif", False): 4.0,
    ("gif", True): 4.0,
    ("heif", False): 4.0,
}

#: Any format not in the table is assumed to be decoded whole.
DEFAULT_BYTES_PER_PIXEL = 4.0


def jpeg_shrink_factor(width: int, height: int, box_width: int, box_height: int) -> int:
    """The libjpeg DCT scale (1, 2, 4 or 8) libvips can use for this target box."""
    if box_width <= 0 and box_height <= 0:
        return 1
    ratios = []
    if box_width > 0:
        ratios.append(width / box_width)
    if box_height > 0:
        ratios.append(height / box_height)
    ratio = min(ratios)
    factor = 1
    # libvips keeps a margin of 2x over the target before shrinking on load.
    while factor < 8 and ratio / (factor * 2) >= 2:
        factor *= 2
    return factor


def estimate_peak_bytes(info: SourceInfo, frames: int, box: tuple[int, int]) -> int:
    """Estimated peak bytes to render ``frames`` frames of ``info`` into ``box``."""
    pixels = info.width * info.height * max(frames, 1)
    weight = BYTES_PER_PIXEL.get((info.format, info.interlaced), DEFAULT_BYTES_PER_PIXEL)
    if info.format == "jpeg" and not info.interlaced:
        shrink = jpeg_shrink_factor(info.width, info.height, *box)
        pixels //= shrink * shrink
        weight = 4.0 if shrink > 1 else weight
    return BASE_BYTES + int(pixels * weight)
