"""libjpeg-turbo's DCT scales between 1/4 and 1/2: is 3/8 a cheaper middle way?

    .venv/bin/python bench/dct_scales.py [--rounds 15]

``JPEG_SHRINK_MARGIN`` 1 decodes a 2000-2560 px photo at 1/4 for a 500 px
thumbnail, 1.5 (the default) at 1/2. libjpeg-turbo can also decode at 3/8,
which Pillow's ``draft`` never picks; here Pillow is told the scale
directly (its decoder passes it on as ``scale_denom`` 3, which libjpeg
turns into 3/8). For the medium photo of bench/images.py (2000x1333) and a
2560x1600 one drawn the same way, the process CPU of each decode at 1/4,
3/8 and 1/2, interleaved round by round, median over the rounds; the ratio
of 3/8 to 1/2 is taken in the same run (docs/BENCHMARKS.md, "Tried and
not kept").
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PIL import Image as PILImage  # noqa: E402
from PIL import ImageFile  # noqa: E402

from bench.images import photo  # noqa: E402

#: Eighths of the full size to decode at, and the scale_denom Pillow passes for each.
SCALES = {2: 4, 3: 3, 4: 2}
SOURCES = {"medium 2000x1333": (2000, 1333), "2560x1600": (2560, 1600)}


def decode(data: bytes, eighths: int) -> PILImage.Image:
    """``data`` decoded by Pillow's libjpeg-turbo at ``eighths``/8 of its size."""
    image = PILImage.open(io.BytesIO(data))
    width, height = image.size
    image.draft("RGB", (width // 2, height // 2))  # sets up a scaled decode
    size = (-(-width * eighths // 8), -(-height * eighths // 8))
    tile = image.tile[0]
    image._size = size
    image.decoderconfig = (SCALES[eighths], 0)
    image.tile = [ImageFile._Tile(tile.codec_name, (0, 0, *size), tile.offset, tile.args)]
    image.load()
    return image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print("| source | 1/4 ms | 3/8 ms | 1/2 ms | 3/8 x 1/2 |")
    print("|---|---:|---:|---:|---:|")
    for name, (width, height) in SOURCES.items():
        data = bytes(photo(width, height).jpegsave_buffer(Q=90))
        times: dict[int, list[float]] = {eighths: [] for eighths in SCALES}
        for _ in range(args.rounds):
            for eighths in SCALES:
                started = time.process_time()
                decoded = decode(data, eighths)
                times[eighths].append((time.process_time() - started) * 1000)
                assert decoded.size[0] == -(-width * eighths // 8), decoded.size
        median = {eighths: statistics.median(values) for eighths, values in times.items()}
        print(
            f"| {name} | {median[2]:.2f} | {median[3]:.2f} | {median[4]:.2f} "
            f"| {median[3] / median[4]:.2f} |"
        )


if __name__ == "__main__":
    main()
