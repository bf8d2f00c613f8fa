"""JPEG decode alone: libvips (mozjpeg), ours (Pillow's libjpeg-turbo, with the copy handed to
libvips), Pillow as thumbor decodes, and simplejpeg (libjpeg-turbo, numpy) when installed.

    .venv/bin/python bench/jpeg_decoders.py [--rounds 60]
    .venv/bin/python bench/jpeg_decoders.py --dct-scales [--rounds 15]

For the medium (2000x1333) and large (7360x4912) photos of bench/images.py,
each at the DCT scales a 500 px thumbnail uses (margin 1 and libvips' 2),
decode to pixels in memory on one thread, interleaved round by round, and
print the median process CPU per decode (libvips decodes on its own worker
thread, so thread CPU would miss it). Also checks the decoders give the
same pixels (largest difference per sample against libvips').

The Pillow column decodes as thumbor's PIL engine does (``Image.open`` on a
``BytesIO`` of the file, ``draft`` to the scale, ``load``; Pillow in this
venv, not thumbor's own): the decode the two servers share, which bounds
how far ahead of thumbor a JPEG thumbnail can get (docs/BENCHMARKS.md).

``--dct-scales``: our decoder alone at the scales between 1/4 and 1/2. With
``JPEG_SHRINK_MARGIN`` 1 a 2000-2560 px photo decodes at 1/4 for a 500 px
thumbnail, with 1.5 (the default) at 1/2; libjpeg-turbo can also decode at
3/8, which Pillow's ``draft`` never picks, so here Pillow is told the scale
directly (its decoder passes it on as ``scale_denom`` 3, which libjpeg
turns into 3/8). For the medium photo and a 2560x1600 one drawn the same
way: the CPU of each decode at 1/4, 3/8 and 1/2, and the ratio of 3/8 to
1/2 in the same run (docs/BENCHMARKS.md, "Tried and not kept").
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402
from PIL import Image as PILImage  # noqa: E402
from PIL import ImageFile  # noqa: E402

from bench.images import photo, write_set  # noqa: E402
from django_oximg.core import pipeline  # noqa: E402
from django_oximg.core.pipeline import jpeg  # noqa: E402

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


def pillow_decode(data: bytes, shrink: int) -> PILImage.Image:
    image = PILImage.open(io.BytesIO(data))
    image.draft("RGB", (image.width // shrink, image.height // shrink))
    image.load()
    return image


def pillow_pixels(data: bytes, shrink: int) -> pyvips.Image:
    """Pillow's decode as a libvips image, for the pixel check (not timed)."""
    image = pillow_decode(data, shrink)
    return pyvips.Image.new_from_memory(image.tobytes(), image.width, image.height, 3, "uchar")


def simplejpeg_decode(data: bytes, shrink: int) -> pyvips.Image:
    """simplejpeg, which core/pipeline/jpeg.py used before Pillow (it brings numpy)."""
    import simplejpeg

    height, width, _colourspace, _ = simplejpeg.decode_jpeg_header(data)
    pixels = simplejpeg.decode_jpeg(
        data,
        colorspace="RGB",
        min_factor=shrink,
        min_width=-(-width // shrink),
        min_height=-(-height // shrink),
        strict=True,
    )
    rows, columns, bands = pixels.shape
    return pyvips.Image.new_from_memory(memoryview(pixels).cast("B"), columns, rows, bands, "uchar")


#: Column name: the decode that is timed, and its pixels as a libvips image.
DECODERS: dict[str, tuple[Callable[[bytes, int], object], Callable[[bytes, int], pyvips.Image]]] = {
    "libvips (mozjpeg)": (libvips_decode, libvips_decode),
    "ours (Pillow's libjpeg-turbo)": (turbo_decode, turbo_decode),
    "Pillow (thumbor's)": (pillow_decode, pillow_pixels),
}
if importlib.util.find_spec("simplejpeg"):
    DECODERS["simplejpeg (libjpeg-turbo)"] = (simplejpeg_decode, simplejpeg_decode)


#: ``--dct-scales``: eighths of the full size to decode at, and the scale_denom Pillow
#: passes for each; and the photos, drawn as bench/images.py draws them.
EIGHTHS = {2: 4, 3: 3, 4: 2}
SCALE_SOURCES = {"medium 2000x1333": (2000, 1333), "2560x1600": (2560, 1600)}


def decode_eighths(data: bytes, eighths: int) -> PILImage.Image:
    """``data`` decoded by Pillow's libjpeg-turbo at ``eighths``/8 of its size."""
    image = PILImage.open(io.BytesIO(data))
    width, height = image.size
    image.draft("RGB", (width // 2, height // 2))  # sets up a scaled decode
    size = (-(-width * eighths // 8), -(-height * eighths // 8))
    tile = image.tile[0]
    image._size = size
    image.decoderconfig = (EIGHTHS[eighths], 0)
    image.tile = [ImageFile._Tile(tile.codec_name, (0, 0, *size), tile.offset, tile.args)]
    image.load()
    return image


def largest_difference(image: pyvips.Image, reference: pyvips.Image) -> float:
    image = image.crop(0, 0, reference.width, reference.height)
    return float((image.cast("int") - reference.cast("int")).abs().max())


def cpu_ms(decode: Callable[[bytes, int], object], data: bytes, shrink: int) -> float:
    started = time.process_time()
    decode(data, shrink)
    return 1000 * (time.process_time() - started)


def decoders_table(rounds: int) -> None:
    """Every decoder at the scales a 500 px thumbnail uses, and their largest difference."""
    pipeline.configure(concurrency=1)
    images = Path(tempfile.mkdtemp(prefix="oximg-decoders-"))
    write_set(images)
    names = list(DECODERS)
    print("| source | scale | " + " | ".join(f"{name} CPU ms" for name in names) + " | max diff |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for name, shrinks in SCALES.items():
        data = (images / name).read_bytes()
        name_rounds = max(3, rounds // (10 if name == "large.jpg" else 1))
        for shrink in shrinks:
            reference = libvips_decode(data, shrink)
            difference = max(
                largest_difference(pixels(data, shrink), reference)
                for _decode, pixels in DECODERS.values()
            )
            timings: dict[str, list[float]] = {decoder: [] for decoder in names}
            for _ in range(name_rounds):
                for decoder, (decode, _pixels) in DECODERS.items():
                    timings[decoder].append(cpu_ms(decode, data, shrink))
            medians = " | ".join(f"{statistics.median(timings[d]):.2f}" for d in names)
            print(f"| {name} | 1/{shrink} | {medians} | {difference:g} |")


def dct_scales_table(rounds: int) -> None:
    """``--dct-scales``: Pillow's decode at 1/4, 3/8 and 1/2, interleaved round by round."""
    print("| source | 1/4 ms | 3/8 ms | 1/2 ms | 3/8 x 1/2 |")
    print("|---|---:|---:|---:|---:|")
    for name, (width, height) in SCALE_SOURCES.items():
        data = bytes(photo(width, height).jpegsave_buffer(Q=90))
        times: dict[int, list[float]] = {eighths: [] for eighths in EIGHTHS}
        for _ in range(rounds):
            for eighths in EIGHTHS:
                started = time.process_time()
                decoded = decode_eighths(data, eighths)
                times[eighths].append((time.process_time() - started) * 1000)
                assert decoded.size[0] == -(-width * eighths // 8), decoded.size
        median = {eighths: statistics.median(values) for eighths, values in times.items()}
        print(
            f"| {name} | {median[2]:.2f} | {median[3]:.2f} | {median[4]:.2f} "
            f"| {median[3] / median[4]:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="60; --dct-scales 15")
    parser.add_argument(
        "--dct-scales", action="store_true", help="our decoder alone at 1/4, 3/8 and 1/2"
    )
    args = parser.parse_args()
    if args.dct_scales:
        dct_scales_table(args.rounds or 15)
    else:
        decoders_table(args.rounds or 60)


if __name__ == "__main__":
    main()
