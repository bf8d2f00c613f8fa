"""Deterministic benchmark images, drawn with pyvips (nothing is downloaded).

    python bench/images.py OUTPUT_DIR

writes ``medium.jpg`` (2000x1333), ``large.jpg`` (7360x4912), ``alpha.png``
(1280x960 with alpha) and ``anim.gif`` (12 frames), the image set of the
reference image-server benchmarks. The same seed gives the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyvips

SIZES = {"medium.jpg": (2000, 1333), "large.jpg": (7360, 4912)}


def photo(width: int, height: int) -> pyvips.Image:
    """Photo-like: smooth gradients, a few soft shapes and sensor-like noise.

    Flat synthetic images compress and resize unrealistically fast; this keeps
    the JPEG entropy of a real photo (about 1.5-2.5 bits per pixel at q90).
    """
    xyz = pyvips.Image.xyz(width, height)
    x, y = xyz[0], xyz[1]
    red = x * (200.0 / width) + 30
    green = y * (180.0 / height) + 40
    blue = ((x * 0.013).sin() * (y * 0.011).cos() + 1) * 90 + 30
    image = red.bandjoin([green, blue])
    for index in range(6):
        cx = width * (0.15 + 0.14 * index)
        cy = height * (0.3 + 0.08 * (index % 3))
        radius = min(width, height) * (0.08 + 0.02 * index)
        distance = ((x - cx) ** 2 + (y - cy) ** 2) ** 0.5
        mask = (1 - distance / radius).ifthenelse(1 - distance / radius, 0) > 0
        image = mask.ifthenelse([230 - 30 * index, 120 + 20 * index, 60 + 25 * index], image)
    noise = pyvips.Image.gaussnoise(width, height, sigma=10, mean=0, seed=42)
    return (image + noise).cast("uchar")


def alpha_png(width: int = 1280, height: int = 960) -> bytes:
    rgb = photo(width, height)
    xyz = pyvips.Image.xyz(width, height)
    distance = ((xyz[0] - width / 2) ** 2 + (xyz[1] - height / 2) ** 2) ** 0.5
    alpha = (255 - distance * (255 / (min(width, height) / 2))).cast("uchar")
    return bytes(rgb.bandjoin(alpha).pngsave_buffer())


def animated_gif(width: int = 480, height: int = 360, frames: int = 12) -> bytes:
    pages = []
    base = photo(width, height)
    for index in range(frames):
        left = int((width - 60) * index / (frames - 1))
        pages.append(base.draw_circle([250, 240, 40], left + 30, height // 2, 30, fill=True))
    image = pyvips.Image.arrayjoin(pages, across=1).copy()
    image.set_type(pyvips.GValue.gint_type, "page-height", height)
    image.set_type(pyvips.GValue.array_int_type, "delay", [80] * frames)
    image.set_type(pyvips.GValue.gint_type, "loop", 0)
    return bytes(image.gifsave_buffer())


def write_set(directory: Path) -> dict[str, Path]:
    """Write the image set into ``directory`` (skipping files already there)."""
    directory.mkdir(parents=True, exist_ok=True)
    made = {}
    for name, (width, height) in SIZES.items():
        path = directory / name
        if not path.exists():
            path.write_bytes(bytes(photo(width, height).jpegsave_buffer(Q=90)))
        made[name] = path
    for name, draw in (("alpha.png", alpha_png), ("anim.gif", animated_gif)):
        path = directory / name
        if not path.exists():
            path.write_bytes(draw())
        made[name] = path
    return made


if __name__ == "__main__":
    for name, path in write_set(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/images")).items():
        print(name, path.stat().st_size, "bytes")
