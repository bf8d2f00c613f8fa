"""CPU per thumbnail of the contenders bench/quality.py scores, in this process, one thread.

    .venv/bin/python bench/quality_cpu.py [--photos bench/photos] [--repeats 9] [--json FILE]

For each photo and case, every contender of bench/quality_contenders.py that
runs in this process makes its thumbnail at django-oximg's default quality
``--repeats`` times, the contenders interleaved so that a slow spell of the
(shared, noisy) machine hits them all alike, each round starting with the
next contender; the process CPU time of each
call is kept and its median per photo reported, then the median over the
photos. libvips runs one thread (``pipeline.configure(concurrency=1)``), so
CPU time is the cost of one thumbnail on one core.

The encoder variants re-encode django-oximg's own pixels, which are computed
once before timing: their figure is the encoder alone. Every other figure is
a whole thumbnail from the photo's bytes (decode, resize, encode). Ratios are taken photo by photo
(the same photo, the same minute), then their median over the photos.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import matched  # noqa: E402
from bench import quality_contenders as contenders  # noqa: E402
from bench.quality_contenders import CASES, Photo  # noqa: E402


def cpu_ms(make: Any, photo: Photo, case: contenders.Case) -> float:
    started = time.process_time()
    make(photo, case, case.default_quality, case.format)
    return 1000 * (time.process_time() - started)


def measure(paths: list[Path], repeats: int) -> dict[str, Any]:
    """``{case: {key: {photo: median ms}}}``."""
    found: dict[str, Any] = {}
    for case in CASES.values():
        chosen = [c for c in contenders.CONTENDERS if not c.cases or case.name in c.cases]
        for path in paths:
            photo = Photo(path.name, path.read_bytes())
            contenders.oximg_pixels(photo, case)  # the encoder variants' input, made once
            for contender in chosen:  # warm-up
                cpu_ms(contender.make, photo, case)
            samples: dict[str, list[float]] = {c.key: [] for c in chosen}
            for repeat in range(repeats):
                # Each round starts with another contender: the first after a
                # large render pays for its page faults and cold caches.
                start = repeat % len(chosen)
                for contender in chosen[start:] + chosen[:start]:
                    samples[contender.key].append(cpu_ms(contender.make, photo, case))
            for key, values in samples.items():
                found.setdefault(case.name, {}).setdefault(key, {})[path.name] = statistics.median(
                    values
                )
            print(f"{case.name} {path.name}", file=sys.stderr)
    return found


#: What each ratio is taken against: the defaults, and the defaults without the
#: EXIF block (the render every other in-process contender is comparable to).
BASES = ("oximg", "oximg-kcr0")


def ratio(per_photo: dict[str, float], base: dict[str, float]) -> float:
    """The median over photos of this contender's CPU over the base's, photo by photo."""
    return matched.median(per_photo[photo] / base[photo] for photo in per_photo if photo in base)


def table(found: dict[str, Any]) -> str:
    parts = []
    labels = {c.key: c.label for c in contenders.CONTENDERS}
    for name, by_key in found.items():
        rows = []
        for key, per_photo in by_key.items():
            values = list(per_photo.values())
            rows.append(
                [
                    f"`{key}` {labels.get(key, key)}",
                    matched.number(matched.median(values)),
                    f"{matched.number(min(values))}-{matched.number(max(values))}",
                    *(matched.number(ratio(per_photo, by_key[b]), 2) for b in BASES),
                ]
            )
        parts.append(f"### {name}\n")
        header = ["contender", "CPU ms (median)", "range over photos", *(f"x `{b}`" for b in BASES)]
        parts.append(matched.markdown_table(header, rows) + "\n")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--only-photos", default="", help="comma-separated file names")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--report", type=Path, help="print the table of a results file, no run")
    args = parser.parse_args()
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return
    paths = contenders.photo_paths(args.photos, args.only_photos)
    from django_oximg.core import pipeline

    pipeline.configure(concurrency=1)
    found = measure(paths, args.repeats)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(found, indent=1))
    print(table(found))


if __name__ == "__main__":
    main()
