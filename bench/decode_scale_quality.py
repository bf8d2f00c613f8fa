"""Quality at matched bytes of a smaller JPEG decode scale, with and without a sharpen.

    bash bench/peers/setup_tools.sh; bash bench/fetch_photos.sh
    .venv/bin/python bench/decode_scale_quality.py [--boxes 320,400,500]
        [--variants m1,m1.3,m1-sharpen0.25] [--photos DIR] [--json FILE]

The question behind ``JPEG_SHRINK_MARGIN``'s default: a fit decoded at the
DCT scale below the default's (1/4 where 1.5 keeps 1/2) costs less CPU
(docs/BENCHMARKS.md, "Where a miss's CPU goes"); does it cost look at the
same bytes, and can a cheap sharpen after the resize buy the look back?

Every photo of ``--photos`` is fitted into each box the way the pipeline
fits a JPEG (libjpeg's DCT-scaled decode at the scale the margin allows,
Lanczos3 to the rounded size) and encoded by the pipeline's own JPEG
encoder (:func:`django_oximg.core.pipeline.encoder.encode`) at q60-q90; each output
is scored with SSIMULACRA2 against the full decode resized in linear light.
Printed per box: each variant's score minus the default margin's, read at
the default's q80 bytes (bench/matched.py), median and worst photo. The
comparison with bare libvips and the other servers is bench/quality.py's.

Variants: ``m<margin>`` (a margin of the pipeline's rule) and
``m<margin>-sharpen<amount>`` (then a 3x3 unsharp mask on each band).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench import matched  # noqa: E402
from bench import quality_contenders as contenders  # noqa: E402
from bench.quality import TOOLS_PYTHON, decoded_rgb, run_scorer  # noqa: E402
from django_oximg.core import defaults  # noqa: E402
from django_oximg.core.pipeline import encoder  # noqa: E402
from django_oximg.core.pipeline.load import jpeg_shrink  # noqa: E402

QUALITIES = (60, 70, 80, 90)
#: The quality whose bytes the scores are read at (the JPEG default).
TARGET_QUALITY = 80
BASELINE = f"m{defaults.JPEG_SHRINK_MARGIN:g}"


def sharpened(image: Any, amount: float) -> Any:
    """A 3x3 unsharp mask of strength ``amount`` (integer arithmetic, per band)."""
    k = round(amount * 16)
    mask = pyvips.Image.new_from_array([[0, -k, 0], [-k, 64 + 4 * k, -k], [0, -k, 0]], scale=64)
    return image.conv(mask, precision="integer").cast("uchar")


def variant_pixels(name: str, photo: contenders.Photo, full: Any, box: tuple[int, int]) -> Any:
    """The fitted, not yet encoded thumbnail ``name`` makes of ``photo`` (``full``: its decode)."""
    margin_text, _, sharpen = name[1:].partition("-sharpen")
    shrink = jpeg_shrink(full.width, full.height, box[0], box[1], float(margin_text))
    image = contenders.decoded(photo, shrink)
    image = image.resize(box[0] / image.width, vscale=box[1] / image.height, kernel="lanczos3")
    if image.width != box[0] or image.height != box[1]:
        image = image.embed(0, 0, box[0], box[1], extend="copy")
    if sharpen:
        image = sharpened(image, float(sharpen))
    return image.copy_memory()


def png(image: Any, work: Path) -> Path:
    """``image`` written losslessly once, named by its pixels."""
    digest = hashlib.sha1(bytes(image.write_to_memory())).hexdigest()
    path = work / f"{digest}-{image.width}x{image.height}.png"
    if not path.exists():
        image.pngsave(str(path), compression=1)
    return path


def outputs(
    photo: Path, boxes: list[int], variants: list[str], work: Path
) -> list[tuple[str, int, str, int, int, Path, Path]]:
    """(photo, box, variant, quality, bytes, reference png, output png) for every output."""
    source = contenders.Photo(photo.stem, photo.read_bytes())
    full = contenders.decoded(source, 1).copy_memory()
    rows = []
    for box in boxes:
        scale = min(box / full.width, box / full.height)
        size = (max(1, round(full.width * scale)), max(1, round(full.height * scale)))
        # Linear-light Lanczos3 of the full decode, to exactly this size.
        ref = png(contenders.resized(full, size[0] / full.width, size[1] / full.height, 0.0), work)
        for name in variants:
            pixels = variant_pixels(name, source, full, size)
            for quality in QUALITIES:
                encoded = encoder.encode(
                    pixels.write_to_memory(), *size, pixels.bands, "jpeg", quality
                )
                output = png(decoded_rgb(encoded), work)
                rows.append((photo.stem, box, name, quality, len(encoded), ref, output))
    return rows


def report(curves: dict[tuple[str, int, str], list[tuple[int, float, int]]]) -> None:
    boxes = sorted({box for _, box, _ in curves})
    names = sorted({name for _, _, name in curves})
    photos = sorted({photo for photo, _, _ in curves})
    for box in boxes:
        print(f"fit {box}: score minus {BASELINE}'s at {BASELINE}'s q{TARGET_QUALITY} bytes")
        for name in names:
            if name == BASELINE:
                continue
            deltas = {}
            for photo in photos:
                base = curves[(photo, box, BASELINE)]
                target = next(n for n, _, q in base if q == TARGET_QUALITY)
                ours = [(n, s) for n, s, _ in curves[(photo, box, name)]]
                theirs = [(n, s) for n, s, _ in base]
                deltas[photo] = matched.score_at_bytes(ours, target) - matched.score_at_bytes(
                    theirs, target
                )
            worst, value = matched.worst(deltas)
            print(
                f"  {name:20s} median {matched.median(deltas.values()):+.2f}"
                f"  worst {value:+.2f} ({worst})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", default="320,400,500")
    parser.add_argument("--variants", default="m1,m1.3,m1-sharpen0.25")
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not TOOLS_PYTHON.exists():
        parser.error("needs bench/peers/.venv-tools (bash bench/peers/setup_tools.sh)")
    photos = sorted(args.photos.glob("*.jpg"))
    if not photos:
        parser.error(f"no photos in {args.photos} (bash bench/fetch_photos.sh)")
    boxes = [int(box) for box in args.boxes.split(",")]
    variants = [BASELINE, *(v for v in args.variants.split(",") if v and v != BASELINE)]
    work = Path(tempfile.mkdtemp(prefix="oximg-decode-scale-"))
    rows = [row for photo in photos for row in outputs(photo, boxes, variants, work)]
    found = run_scorer([(ref, out) for *_, ref, out in rows], work)
    curves: dict[tuple[str, int, str], list[tuple[int, float, int]]] = {}
    for (photo, box, name, quality, size, _, _), score in zip(rows, found, strict=True):
        curves.setdefault((photo, box, name), []).append((size, score, quality))
    report(curves)
    if args.json:
        args.json.write_text(json.dumps({"|".join(map(str, k)): v for k, v in curves.items()}))


if __name__ == "__main__":
    main()
