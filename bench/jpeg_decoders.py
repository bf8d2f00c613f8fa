"""JPEG decode alone: libvips (pyvips-binary's mozjpeg) against libjpeg-turbo (simplejpeg).

    .venv/bin/python bench/jpeg_decoders.py [--rounds 60]

For the medium (2000x1333) and large (7360x4912) photos of bench/images.py,
each at the DCT scales a 500 px thumbnail uses (margin 1 and libvips' 2),
decode to pixels in memory on one thread, interleaved round by round, and
print the median process CPU per decode (libvips decodes on its own worker
thread, so thread CPU would miss it). Also checks the two decoders give the
same pixels (largest difference per sample).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench.images import write_set  # noqa: E402
from django_oximg.core import jpeg, pipeline  # noqa: E402

#: Source, DCT scales to measure.
SCALES = {"medium.jpg": (4, 2), "large.jpg": (8, 4)}


def libvips_decode(data: bytes, shrink: int) -> pyvips.Image:
    source = pyvips.Source.new_from_memory(data)
    image = pyvips.Image.jpegload_source(source, shrink=shrink, access="sequential")
    return pyvips.Image.new_from_memory(
        image.write_to_memory(), image.width, image.height, image.bands, "uchar"
    )


def turbo_decode(data: bytes, shrink: int) -> pyvips.Image:
    decoded = jpeg.decode_scaled(data, shrink)
    assert decoded is not None
    return pyvips.Image.new_from_memory(
        decoded.pixels, decoded.width, decoded.height, decoded.bands, "uchar"
    )


def cpu_ms(decode: Callable[[bytes, int], object], data: bytes, shrink: int) -> float:
    started = time.process_time()
    decode(data, shrink)
    return 1000 * (time.process_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    pipeline.configure(concurrency=1)
    images = Path(tempfile.mkdtemp(prefix="oximg-decoders-"))
    write_set(images)
    print("| source | scale | libvips (mozjpeg) CPU ms | libjpeg-turbo CPU ms | ratio | max diff |")
    print("|---|---|---|---|---|---|")
    for name, shrinks in SCALES.items():
        data = (images / name).read_bytes()
        rounds = max(3, args.rounds // (10 if name == "large.jpg" else 1))
        for shrink in shrinks:
            reference = libvips_decode(data, shrink)
            ours = turbo_decode(data, shrink).crop(0, 0, reference.width, reference.height)
            difference = (ours.cast("int") - reference.cast("int")).abs().max()
            timings: dict[str, list[float]] = {"libvips": [], "turbo": []}
            for _ in range(rounds):
                timings["libvips"].append(cpu_ms(libvips_decode, data, shrink))
                timings["turbo"].append(cpu_ms(turbo_decode, data, shrink))
            vips_ms = statistics.median(timings["libvips"])
            turbo_ms = statistics.median(timings["turbo"])
            print(
                f"| {name} | 1/{shrink} | {vips_ms:.2f} | {turbo_ms:.2f} | "
                f"{vips_ms / turbo_ms:.2f} | {difference:g} |"
            )


if __name__ == "__main__":
    main()
