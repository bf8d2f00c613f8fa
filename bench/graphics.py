"""Six drawn graphics, the sources a site shows besides photos, drawn with pyvips.

    python bench/graphics.py OUTPUT_DIR

writes ``logo.png`` (shapes and a word on a transparent background),
``screenshot.png`` (flat panels, buttons and lines of text),
``text.png`` (a paragraph, black on white), ``illustration.png`` (flat
colour shapes), ``gradient.png`` (smooth two-axis gradient) and
``noise.png`` (coloured noise: the worst case for every encoder), each
1200x900 PNG. They are the flat content where a photo codec's choice
differs from a photo's (palette PNG or lossless WebP may win), and alpha,
which a JPEG-only package drops. The same code gives the same bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pyvips

WIDTH, HEIGHT = 1200, 900

PARAGRAPH = (
    "Thumbnails are rendered once and sent on every view, so their bytes cost a site "
    "far more than their render. A flat graphic with sharp edges and few colours "
    "compresses best without loss; a photo compresses best with it."
)


def flat(width: int, height: int, colour: Sequence[float]) -> pyvips.Image:
    return (pyvips.Image.black(width, height) + colour).cast("uchar").copy(interpretation="srgb")


def text(markup: str, width: int, dpi: int = 150) -> pyvips.Image:
    """Rendered text as a one-band mask (0-255)."""
    return pyvips.Image.text(markup, width=width, dpi=dpi, font="sans")


def paint(
    image: pyvips.Image, mask: pyvips.Image, colour: Sequence[float], x: int, y: int
) -> pyvips.Image:
    """``colour`` through the one-band ``mask`` placed at (x, y) over ``image``."""
    layer = flat(mask.width, mask.height, colour)
    if image.bands == 4:
        layer = layer.bandjoin(mask).copy(interpretation="srgb")
        return image.composite2(layer, "over", x=x, y=y).cast("uchar")
    area = image.crop(x, y, mask.width, mask.height)
    blended = (layer * mask + area * (255 - mask)) / 255
    return image.insert(blended.cast("uchar"), x, y)


def logo() -> pyvips.Image:
    """Two overlapping discs and a word on a transparent background (anti-aliased edges)."""
    canvas = pyvips.Image.black(WIDTH, HEIGHT, bands=4).copy(interpretation="srgb")
    xyz = pyvips.Image.xyz(WIDTH, HEIGHT)
    for cx, colour in ((380, [220, 60, 40]), (560, [30, 110, 200])):
        distance = ((xyz[0] - cx) ** 2 + (xyz[1] - 330) ** 2) ** 0.5
        edge = 250.5 - distance  # one pixel of anti-aliasing at the rim
        mask = ((edge < 0).ifthenelse(0, (edge > 1).ifthenelse(1, edge)) * 255).cast("uchar")
        canvas = paint(canvas, mask, colour, 0, 0)
    word = text("<b>oximg</b>", 900, dpi=400)
    return paint(canvas, word, [40, 40, 40], (WIDTH - word.width) // 2, 640)


def screenshot() -> pyvips.Image:
    """A settings page: a sidebar, a header bar, buttons and lines of text."""
    image = flat(WIDTH, HEIGHT, [246, 247, 249])
    image = image.draw_rect([38, 44, 56], 0, 0, 240, HEIGHT, fill=True)
    image = image.draw_rect([255, 255, 255], 240, 0, WIDTH - 240, 70, fill=True)
    image = image.draw_rect([220, 224, 230], 240, 70, WIDTH - 240, 2, fill=True)
    for index in range(8):
        label = text(f"Menu item {index + 1}", 200, dpi=110)
        image = paint(image, label, [210, 214, 220], 30, 100 + 48 * index)
    image = paint(image, text("<b>Settings</b>", 400, dpi=150), [30, 30, 30], 270, 22)
    for row in range(9):
        y = 110 + 80 * row
        image = image.draw_rect([255, 255, 255], 270, y, 880, 64, fill=True)
        image = image.draw_rect([225, 228, 233], 270, y, 880, 64, fill=False)
        image = paint(
            image,
            text(f"Option {row + 1}: thumbnails per page", 500, 110),
            [60, 60, 60],
            290,
            y + 22,
        )
        image = image.draw_rect(
            [40, 120, 220] if row % 2 else [200, 205, 212], 1060, y + 18, 64, 28, fill=True
        )
    return image


def text_page() -> pyvips.Image:
    """Black text on white, as a scanned or exported page."""
    image = flat(WIDTH, HEIGHT, [255, 255, 255])
    y = 40
    for index in range(4):
        block = text(("<b>Heading</b>\n" if index == 0 else "") + PARAGRAPH, WIDTH - 120, dpi=130)
        if y + block.height > HEIGHT:
            break
        image = paint(image, block, [0, 0, 0], 60, y)
        y += block.height + 30
    return image


def illustration() -> pyvips.Image:
    """Flat colour shapes: a sky, hills, a sun, a house (few colours, hard edges)."""
    image = flat(WIDTH, HEIGHT, [140, 200, 240])
    image = image.draw_circle([255, 210, 60], 950, 180, 110, fill=True)
    image = image.draw_circle([90, 170, 80], 300, 1100, 600, fill=True)
    image = image.draw_circle([60, 140, 60], 1000, 1200, 650, fill=True)
    image = image.draw_rect([200, 80, 60], 420, 430, 260, 200, fill=True)
    image = image.draw_rect([120, 70, 40], 520, 520, 60, 110, fill=True)
    image = image.draw_rect([250, 250, 220], 450, 470, 50, 50, fill=True)
    for index in range(5):
        image = image.draw_circle(
            [255, 255, 255], 150 + 70 * index, 150 + (index % 2) * 20, 50, fill=True
        )
    return image


def gradient() -> pyvips.Image:
    """A smooth two-axis gradient: banding shows at once where a codec cuts corners."""
    xyz = pyvips.Image.xyz(WIDTH, HEIGHT)
    red = xyz[0] * (255.0 / WIDTH)
    green = xyz[1] * (255.0 / HEIGHT)
    blue = 255 - (xyz[0] + xyz[1]) * (255.0 / (WIDTH + HEIGHT))
    return red.bandjoin([green, blue]).cast("uchar")


def noise() -> pyvips.Image:
    """Independent noise in each band: nothing to predict, the worst case for every encoder."""
    bands = [
        pyvips.Image.gaussnoise(WIDTH, HEIGHT, sigma=60, mean=128, seed=seed) for seed in (1, 2, 3)
    ]
    return bands[0].bandjoin(bands[1:]).cast("uchar")


GRAPHICS: dict[str, Callable[[], pyvips.Image]] = {
    "logo.png": logo,
    "screenshot.png": screenshot,
    "text.png": text_page,
    "illustration.png": illustration,
    "gradient.png": gradient,
    "noise.png": noise,
}


def write_graphics(directory: Path) -> list[Path]:
    """The six graphics as PNG files in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in GRAPHICS.items():
        path = directory / name
        path.write_bytes(bytes(draw().pngsave_buffer(compression=6)))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_graphics(Path(sys.argv[1])):
        image = pyvips.Image.new_from_file(str(path))
        size = path.stat().st_size
        print(f"{path}: {image.width}x{image.height}, {image.bands} bands, {size} bytes")
