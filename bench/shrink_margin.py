"""JPEG decode scale and decoder: throughput of JPEG_SHRINK_MARGIN and JPEG_DECODER values.

    .venv/bin/python bench/shrink_margin.py [--runs 3] [--seconds 4] [--margins 2,1.5,1]
        [--decoders libjpeg-turbo,libvips]

For each case (medium and large JPEG fitted into (485-500)x500, JPEG q80),
each margin and each decoder, ``core.pipeline.render`` runs in a fresh
process on 2 threads (bench/inprocess.py), with bare pyvips
``thumbnail_buffer`` and ``new_from_buffer(shrink=N)`` + ``resize`` beside
it; the order is interleaved and repeated, and medians with min-max
printed. The quality side of the margin is bench/quality.py (the decoders
give the same pixels: tests/test_jpeg.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import CASES  # noqa: E402
from bench.driver import spread  # noqa: E402
from bench.images import write_set  # noqa: E402
from bench.load import measure_inprocess  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--margins", default="2,1.5,1")
    parser.add_argument("--decoders", default="libjpeg-turbo")
    parser.add_argument("--cases", default="medium-jpeg,large-jpeg")
    args = parser.parse_args()
    images = Path(tempfile.mkdtemp(prefix="oximg-margin-"))
    write_set(images)
    margins = [float(m) for m in args.margins.split(",")]
    decoders = args.decoders.split(",")
    contenders: list[tuple[str, float | None, str | None]] = [
        ("pyvips", None, None),
        ("pyvips-shrink", None, None),
    ]
    contenders += [("pipeline", m, d) for d in decoders for m in margins]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for run in range(args.runs):
        for case in args.cases.split(","):
            for name, margin, decoder in contenders:
                extra = []
                label = name
                if margin is not None and decoder is not None:
                    extra = ["--margin", str(margin), "--decoder", decoder]
                    label = f"{name} {decoder} margin {margin:g}"
                result = measure_inprocess(name, CASES[case], images, args.seconds, extra)
                results.setdefault((case, label), []).append(result)
                print(
                    f"run {run + 1} {case} {label}: {result['rps']:.1f} img/s "
                    f"{result['cpu_ms_per_request']:.1f} CPU ms/img, "
                    f"others {result['other_cpus']:.2f}",
                    flush=True,
                )
    print("\n| case | contender | img/s (2 threads) | CPU ms/img | bytes |")
    print("|---|---|---|---|---|")
    for (case, label), runs in results.items():
        rps = spread(r["rps"] for r in runs)
        cpu = spread(r["cpu_ms_per_request"] for r in runs)
        size = spread(r["bytes_per_response"] for r in runs)
        print(
            f"| {case} | {label} | {rps.median:.1f} ({rps.low:.1f}-{rps.high:.1f}) | "
            f"{cpu.median:.1f} | {size.median:.0f} |"
        )


if __name__ == "__main__":
    main()
