"""Several sizes of one source from one decode (rendering ahead) against one miss per size.

    .venv/bin/python bench/render_ahead.py [--rounds 7]

For the medium photo of bench/images.py (2000x1333 JPEG), two sets of five
sizes, each rendered both ways, interleaved round by round:

* **separate**: what five first requests cost, one after another: for each
  size the header probe, the plan and ``pipeline.render`` (its own decode);
* **one decode**: what the render-ahead task costs: the probe once, the five
  plans, and ``pipeline.batch.render_batch`` (one decode per DCT scale).

The source bytes are in memory for both (the file read is left out). The
time is the process's CPU time (every libvips thread counted, one libvips
thread per operation), so a busy shared machine slows both sides alike;
the ratio is separate / one decode, per round, and the table gives the
median and the range over the rounds. Every batch result is checked to be
byte for byte the separate render's. docs/BENCHMARKS.md has the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.images import SIZES, photo  # noqa: E402
from django_oximg.core import pipeline  # noqa: E402
from django_oximg.core.options import parse_path  # noqa: E402
from django_oximg.core.pipeline.batch import render_batch  # noqa: E402

#: Two sets of five sizes a site may declare for an upload: (options, format).
CASES = {
    "a card, a thumbnail, two widths, a large WebP": [
        ("/rs:fill:160:160/g:sm", "jpeg"),
        ("/rs:fill:400:300/g:ce", "jpeg"),
        ("/w:300", "jpeg"),
        ("/w:640", "jpeg"),
        ("/rs:fit:1200:800/q:70", "webp"),
    ],
    "five sizes of one DCT scale (200-330 px)": [
        ("/w:300", "jpeg"),
        ("/rs:fill:300:200/g:ce", "jpeg"),
        ("/w:260/q:60", "jpeg"),
        ("/rs:fill:200:200/g:sm", "jpeg"),
        ("/w:330", "webp"),
    ],
}

SETTINGS = pipeline.RenderSettings()

T = TypeVar("T")


def separate(data: bytes, sizes: list[tuple[str, str]]) -> list[bytes]:
    """Each size as a miss renders it: probe, plan, render."""
    made = []
    for path, fmt in sizes:
        options = parse_path(path + "/plain/x.jpg", {}).options
        plan = pipeline.plan_render(pipeline.probe(data), options, fmt, SETTINGS)
        made.append(pipeline.render(data, options, fmt, SETTINGS, plan=plan).data)
    return made


def one_decode(data: bytes, sizes: list[tuple[str, str]]) -> tuple[list[bytes], int]:
    """All sizes as the render-ahead task renders them; and the decodes made."""
    info = pipeline.probe(data)
    plans = {
        index: pipeline.plan_render(
            info, parse_path(path + "/plain/x.jpg", {}).options, fmt, SETTINGS
        )
        for index, (path, fmt) in enumerate(sizes)
    }
    results, stats = render_batch(data, plans, SETTINGS, timeout=60)
    made = []
    for index in plans:
        result = results[index]
        assert isinstance(result, pipeline.Rendered), result
        made.append(result.data)
    return made, stats.shared_decodes + stats.separate


def cpu_ms(work: Callable[[], T]) -> tuple[float, T]:
    """The process CPU time ``work`` took, in ms, and what it returned."""
    started = time.process_time()
    result = work()
    return (time.process_time() - started) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    pipeline.configure(concurrency=1)
    width, height = SIZES["medium.jpg"]
    data = bytes(photo(width, height).jpegsave_buffer(Q=90))
    print(f"medium.jpg {width}x{height}, {len(data)} bytes, {args.rounds} rounds, process CPU")
    print()
    print("| sizes | decodes | separate ms | one decode ms | separate / one decode |")
    print("|---|---:|---:|---:|---:|")
    for name, sizes in CASES.items():
        one_decode(data, sizes)  # warm-up: libvips' operation cache is off, imports are not
        apart: list[float] = []
        together: list[float] = []
        decodes = 0
        for _ in range(args.rounds):
            ms, made = cpu_ms(lambda sizes=sizes: separate(data, sizes))
            apart.append(ms)
            ms, (batch_made, decodes) = cpu_ms(lambda sizes=sizes: one_decode(data, sizes))
            together.append(ms)
            assert batch_made == made, "one decode gave other bytes"
        ratios = [a / b for a, b in zip(apart, together, strict=True)]
        print(
            f"| {name} | {decodes} | {statistics.median(apart):.0f} "
            f"({min(apart):.0f}-{max(apart):.0f}) | {statistics.median(together):.0f} "
            f"({min(together):.0f}-{max(together):.0f}) | {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}) |"
        )


if __name__ == "__main__":
    main()
