"""Bytes of JPEG results, baseline against progressive (``JPEG_PROGRESSIVE``), and Wagtail's.

    .venv/bin/python bench/progressive_jpeg.py [--quality 85] [--json out.json]

Four generated photo-like JPEGs (``bench/images.py``'s gradients and three
Perlin-noise photos with grain, as tests/test_pipeline.py draws them), each
rendered through ``core.pipeline.render`` at the sizes Wagtail sites ask
most (``fill-100x100``, ``fill-200x200``, ``width-320``, ``width-640``,
``width-1200``) at ``--quality``, baseline and progressive; beside them,
Wagtail's own rendition bytes made as Wagtail makes them (Willow over
Pillow: crop, Lanczos resize, ``save_as_jpeg(quality, progressive=True,
optimize=True)``), when Willow is installed. Prints, per size, the summed
bytes of the four photos and the ratios.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

import pyvips

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.images import photo as gradients
from django_oximg.core import pipeline
from django_oximg.core.options import Options

#: Wagtail filter specs and their geometry: (width, height, fill).
SIZES = {
    "fill-100x100": (100, 100, True),
    "fill-200x200": (200, 200, True),
    "width-320": (320, 0, False),
    "width-640": (640, 0, False),
    "width-1200": (1200, 0, False),
}


def perlin_photo(width: int, height: int, seed: int, cell: int) -> pyvips.Image:
    """Smooth shapes, texture and grain (tests/test_pipeline.py's ``photo``)."""
    bands = []
    for offset in range(3):
        smooth = pyvips.Image.perlin(width, height, cell_size=cell, seed=seed + offset) * 80 + 128
        grain = pyvips.Image.gaussnoise(width, height, sigma=8, seed=seed + offset)
        bands.append(smooth + grain)
    return bands[0].bandjoin(bands[1:]).cast("uchar").copy(interpretation="srgb")


def sources() -> dict[str, bytes]:
    """The four photos as JPEGs at quality 92, as a camera or an editor would leave them."""
    images = {
        "gradients 2000x1333": gradients(2000, 1333).copy(interpretation="srgb"),
        "perlin-32 2400x1600": perlin_photo(2400, 1600, seed=1, cell=32),
        "perlin-64 2400x1600": perlin_photo(2400, 1600, seed=4, cell=64),
        "perlin-128 1600x1200": perlin_photo(1600, 1200, seed=7, cell=128),
    }
    return {name: bytes(image.jpegsave_buffer(Q=92)) for name, image in images.items()}


def options_for(width: int, height: int, fill: bool) -> Options:
    if fill:
        return Options(width=width, height=height, resizing_type="fill")
    return Options(width=width)


def oximg_bytes(data: bytes, spec: tuple[int, int, bool], quality: int, progressive: bool) -> int:
    settings = pipeline.RenderSettings(quality={"jpeg": quality}, jpeg_progressive=progressive)
    return len(pipeline.render(data, options_for(*spec), "jpeg", settings).data)


def wagtail_bytes(data: bytes, spec: tuple[int, int, bool], quality: int) -> int | None:
    """Wagtail's rendition bytes: Willow crops to the ratio, resizes (Lanczos), saves."""
    try:
        import willow
    except ImportError:
        return None
    except Exception:  # Willow reads Django's settings when Django is installed
        from django.conf import settings

        settings.configure()
        import willow
    image = willow.Image.open(io.BytesIO(data))
    source_width, source_height = image.get_size()
    width, height, fill = spec
    if fill:
        scale = max(width / source_width, height / source_height)
        crop_width, crop_height = round(width / scale), round(height / scale)
        left, top = (source_width - crop_width) // 2, (source_height - crop_height) // 2
        image = image.crop((left, top, left + crop_width, top + crop_height))
    else:
        height = round(source_height * width / source_width)
    out = io.BytesIO()
    image.resize((width, height)).save_as_jpeg(
        out, quality=quality, progressive=True, optimize=True
    )
    return len(out.getvalue())


def measure(quality: int) -> dict[str, dict[str, Any]]:
    pipeline.configure(concurrency=1)
    photos = sources()
    rows: dict[str, dict[str, Any]] = {}
    for name, spec in SIZES.items():
        baseline = sum(oximg_bytes(data, spec, quality, False) for data in photos.values())
        progressive = sum(oximg_bytes(data, spec, quality, True) for data in photos.values())
        wagtails = [wagtail_bytes(data, spec, quality) for data in photos.values()]
        wagtail = None if None in wagtails else sum(w for w in wagtails if w is not None)
        rows[name] = {"baseline": baseline, "progressive": progressive, "wagtail": wagtail}
    return rows


def table(rows: dict[str, dict[str, Any]], quality: int) -> str:
    lines = [
        f"| size (4 photos, q{quality}) | baseline | progressive | progressive / baseline "
        "| Wagtail | baseline / Wagtail | progressive / Wagtail |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        wagtail = row["wagtail"]
        versus = (
            f"{row['baseline'] / wagtail:.3f} | {row['progressive'] / wagtail:.3f}"
            if wagtail
            else "- | -"
        )
        lines.append(
            f"| {name} | {row['baseline']:,} | {row['progressive']:,} "
            f"| {row['progressive'] / row['baseline']:.3f} | {wagtail or '-':,} | {versus} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quality", type=int, default=85)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = measure(args.quality)
    print(table(rows, args.quality))
    if args.json:
        args.json.write_text(json.dumps({"quality": args.quality, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
