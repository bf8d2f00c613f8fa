"""AVIF effort at thumbnail sizes: bytes, SSIMULACRA2 and encoder CPU at each effort.

    bash bench/peers/setup_tools.sh          # ssimulacra2
    bash bench/fetch_photos.sh               # 14 photos into bench/photos
    .venv/bin/python bench/avif_effort.py [--efforts 0,1,2,3,4] [--rounds 3]

For each photo and size (fills of 400x300, 200x200 and 800x600, the
thumbnails of a gallery page) django-oximg's pixels before encoding are made
once (:func:`bench.quality_contenders.oximg_pixels`), then encoded by
libvips' AVIF saver as the pipeline calls it at each effort and at each
quality of ``--qualities``. The encodes are interleaved (each round walks
the photos, each photo its efforts in a rotated order) and timed in this
process: wall time, and the process's CPU time (every thread's: CPU above
wall shows the encoder using more than one thread; ``--concurrency`` sets
libvips' threads, as ``LIBVIPS_CONCURRENCY`` does in the server). Each output is scored with
SSIMULACRA2 against the linear-light reference of bench/quality.py.

Per size and effort the table gives the median CPU per encode at the
default quality, the bytes and score there, and the "matched look": the
bytes each effort needs for the score effort 2 gives at the default quality
(interpolated on its quality sweep, bench/matched.py), relative to effort
2's own bytes, as a median over the photos.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench import matched  # noqa: E402
from bench import quality_contenders as contenders  # noqa: E402
from bench.quality import decoded_rgb, run_scorer  # noqa: E402
from bench.quality_contenders import Case, Photo  # noqa: E402
from django_oximg.core import defaults  # noqa: E402

SIZES = ((400, 300), (200, 200), (800, 600))

#: The effort whose look the others are matched to: the pipeline's for thumbnails.
BASE_EFFORT = 2


def encode(image: Any, quality: int, effort: int) -> tuple[bytes, float, float]:
    """``image`` as AVIF the way core/pipeline/encode.py saves it; (bytes, wall s, CPU s)."""
    wall, cpu = time.perf_counter(), time.process_time()
    data = image.heifsave_buffer(
        Q=quality, compression="av1", effort=effort, bitdepth=8, keep=contenders.KEEP_NONE
    )
    return bytes(data), time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--efforts", default="0,1,2,3,4")
    parser.add_argument("--qualities", default="45..85:5")
    parser.add_argument("--rounds", type=int, default=3, help="timed encodes per output")
    parser.add_argument("--only", default="", help="comma-separated photo file names")
    parser.add_argument(
        "--concurrency", type=int, help="libvips threads (LIBVIPS_CONCURRENCY); default libvips'"
    )
    args = parser.parse_args()
    if args.concurrency:
        pyvips.concurrency_set(args.concurrency)
    efforts = [int(e) for e in args.efforts.split(",")]
    qualities = matched.parse_qualities(args.qualities)
    default_quality = defaults.QUALITY["avif"]
    if default_quality not in qualities:
        qualities = sorted({*qualities, default_quality})
    photos = [
        Photo(path.stem, path.read_bytes())
        for path in contenders.photo_paths(args.photos, args.only)
    ]
    cases = [Case(f"fill-{w}x{h}", "fill", w, h, "avif", default_quality) for w, h in SIZES]
    print(f"{len(photos)} photos, efforts {efforts}, qualities {qualities}", file=sys.stderr)
    # outputs[(case, photo, effort, quality)] = bytes; times[(case, effort)] = [(wall, cpu)]
    outputs: dict[tuple[str, str, int, int], bytes] = {}
    times: dict[tuple[str, int], list[tuple[float, float]]] = {}
    pixels = {(c.name, p.name): contenders.oximg_pixels(p, c) for c in cases for p in photos}
    for index in range(args.rounds):
        for case in cases:
            for number, photo in enumerate(photos):
                image = pixels[(case.name, photo.name)]
                shift = (index + number) % len(efforts)
                for effort in efforts[shift:] + efforts[:shift]:
                    for quality in qualities if index == 0 else [default_quality]:
                        data, wall, cpu = encode(image, quality, effort)
                        outputs[(case.name, photo.name, effort, quality)] = data
                        if quality == default_quality:
                            times.setdefault((case.name, effort), []).append((wall, cpu))
        print(f"round {index + 1} done", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pairs: list[tuple[Path, Path]] = []
        refs: dict[tuple[str, str], Path] = {}
        keys = list(outputs)
        for key in keys:
            case = next(c for c in cases if c.name == key[0])
            photo = next(p for p in photos if p.name == key[1])
            if (case.name, photo.name) not in refs:
                ref = contenders.reference(photo, case, case.width, case.height)
                refs[(case.name, photo.name)] = work / f"ref-{case.name}-{photo.name}.png"
                ref.pngsave(str(refs[(case.name, photo.name)]), compression=1)
            png = work / f"{len(pairs)}.png"
            decoded_rgb(outputs[key]).pngsave(str(png), compression=1)
            pairs.append((refs[(case.name, photo.name)], png))
        scores = dict(zip(keys, run_scorer(pairs, work), strict=True))
    print(
        f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}, "
        f"concurrency {pyvips.concurrency_get()}"
    )
    print(
        "| size | effort | CPU ms / encode | wall ms | CPU / wall "
        f"| KB at q{default_quality} | SSIMULACRA2 | bytes for effort {BASE_EFFORT}'s look |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in cases:
        for effort in efforts:
            walls = [w for w, _ in times[(case.name, effort)]]
            cpus = [c for _, c in times[(case.name, effort)]]
            sizes, looks, ratios = [], [], []
            for photo in photos:
                base = (case.name, photo.name, BASE_EFFORT, default_quality)
                own = (case.name, photo.name, effort, default_quality)
                sizes.append(len(outputs[own]))
                looks.append(scores[own])
                curve = [
                    (float(len(outputs[(case.name, photo.name, effort, q)])),
                     scores[(case.name, photo.name, effort, q)])
                    for q in qualities
                ]  # fmt: skip
                if base in scores:
                    ratios.append(matched.bytes_at_score(curve, scores[base]) / len(outputs[base]))
            cpu, wall = statistics.median(cpus), statistics.median(walls)
            ratio = matched.median(ratios)
            print(
                f"| {case.width}x{case.height} | {effort} | {cpu * 1000:.1f} | {wall * 1000:.1f} "
                f"| {cpu / wall:.2f} | {statistics.mean(sizes) / 1000:.1f} "
                f"| {statistics.mean(looks):.2f} | {ratio:.3f} |"
            )


if __name__ == "__main__":
    main()
