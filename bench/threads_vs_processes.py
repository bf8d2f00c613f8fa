"""The same renders on two threads of one process and on two processes.

    .venv/bin/python bench/threads_vs_processes.py [--renders 300] [--runs 3] [--json F]
        [--encoders pillow,libvips]

No HTTP, no Django: ``core.pipeline.render`` of the medium-JPEG case
(2000x1333 fitted into 485-500 px, q80) in a loop, the way the executor's
render threads call it. Interleaved over ``--runs``:

- ``1 thread``: one loop in one process (CPU per image alone);
- ``2 threads``: two loops on two threads of one process, as one gunicorn
  process with ``WORKERS = 2`` renders;
- ``2 processes``: one loop in each of two processes at once, as two
  single-threaded image servers (thumbor) render.

Each row gives images/s, CPU ms per image and cores kept busy (CPU over
wall time). ``--encoders`` repeats every variant with each ``ENCODER``
(``RenderSettings.encoder``), interleaved; rows are then named
"2 threads, libvips" and so on. The difference between the last two rows is what running two
renders in one process costs on this machine (docs/BENCHMARKS.md,
"One process or two").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.driver import spread  # noqa: E402

VARIANTS = ("1 thread", "2 threads", "2 processes")


def render_loop(
    source: Path, renders: int, threads: int, encoder: str = "pillow"
) -> dict[str, float]:
    """Render ``renders`` thumbnails on each of ``threads`` threads; time and CPU of the process."""
    from bench.cases import CASES, oximg_path
    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path

    pipeline.configure(concurrency=1)
    case = CASES["medium-jpeg"]
    data = source.read_bytes()
    info = pipeline.probe(data)
    settings = pipeline.RenderSettings(encoder=encoder)
    widths = list(range(485, 501))
    options = [parse_path(oximg_path(case, width, "")[1:]).options for width in widths]

    def loop() -> None:
        for index in range(renders):
            deadline = time.monotonic() + 60
            chosen = options[index % len(options)]
            plan = pipeline.plan_render(info, chosen, "jpeg", settings)
            pipeline.render(data, chosen, "jpeg", settings, deadline=deadline, plan=plan)

    loop()  # warm: imports, allocator, libvips' thread pool
    return on_threads(loop, threads, renders)


def on_threads(loop: Callable[[], None], threads: int, per_thread: int) -> dict[str, float]:
    """Run ``loop`` (``per_thread`` images) on ``threads`` threads at once; wall time and CPU."""
    started, cpu = time.perf_counter(), time.process_time()
    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "images": per_thread * threads,
    }


def child(source: Path, renders: int, threads: int, encoder: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        __file__,
        "--child",
        str(source),
        str(renders),
        str(threads),
        encoder,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def collect(processes: list[subprocess.Popen[str]]) -> list[dict[str, float]]:
    outputs = []
    for process in processes:
        out, _ = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"render loop failed with {process.returncode}")
        outputs.append(json.loads(out.splitlines()[-1]))
    return outputs


def figures(loops: list[dict[str, float]]) -> dict[str, float]:
    """Images/s, CPU ms per image and cores busy of loops that ran at the same time."""
    wall = max(loop["wall_s"] for loop in loops)
    cpu = sum(loop["cpu_s"] for loop in loops)
    images = sum(loop["images"] for loop in loops)
    return {
        "images_per_s": images / wall,
        "cpu_ms_per_image": 1000 * cpu / images,
        "cores": cpu / wall,
    }


def measure(variant: str, source: Path, renders: int, encoder: str) -> dict[str, float]:
    if variant == "1 thread":
        return figures(collect([child(source, renders, 1, encoder)]))
    if variant == "2 threads":
        return figures(collect([child(source, renders, 2, encoder)]))
    pair = [child(source, renders, 1, encoder), child(source, renders, 1, encoder)]
    return figures(collect(pair))


def row_names(encoders: list[str]) -> list[tuple[str, str, str]]:
    """(row name, variant, encoder) in run order; plain variant names for one encoder."""
    if len(encoders) == 1:
        return [(variant, variant, encoders[0]) for variant in VARIANTS]
    return [(f"{v}, {e}", v, e) for v in VARIANTS for e in encoders]


def interleaved(
    rows: list[tuple[str, str, str]],
    measure_row: Callable[[str, str], dict[str, float]],
    runs: int,
    unit: str,
) -> dict[str, list[dict[str, float]]]:
    """Every (name, variant, encoder) row measured once per run, rows interleaved, each printed."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in rows}
    for run in range(runs):
        for name, variant, encoder in rows:
            row = measure_row(variant, encoder)
            results[name].append(row)
            print(
                f"run {run + 1} {name:<22} {row['images_per_s']:7.1f} {unit}/s "
                f"{row['cpu_ms_per_image']:6.2f} CPU ms each {row['cores']:5.2f} cores",
                flush=True,
            )
    return results


def summarised(
    results: dict[str, list[dict[str, float]]], title: str
) -> dict[str, dict[str, dict[str, float]]]:
    """Median and min-max of each figure per row, printed under ``title``."""
    summary = {
        name: {key: spread(row[key] for row in found).to_dict() for key in found[0]}
        for name, found in results.items()
    }
    print(f"\n{title}")
    for name, row in summary.items():
        cells = "  ".join(
            f"{key} {row[key]['median']:.2f} ({row[key]['low']:.2f}-{row[key]['high']:.2f})"
            for key in ("images_per_s", "cpu_ms_per_image", "cores")
        )
        print(f"  {name:<22} {cells}")
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=300, help="per thread or process")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--source", type=Path, help="a JPEG (default: bench/images.py's medium)")
    parser.add_argument("--encoders", default="pillow", help="comma-separated ENCODER values")
    args = parser.parse_args(argv)
    rows = row_names(args.encoders.split(","))
    source = args.source
    if source is None:
        from bench.images import write_set

        source = write_set(Path(tempfile.mkdtemp(prefix="oximg-tvp-")))["medium.jpg"]
    results = interleaved(
        rows,
        lambda variant, encoder: measure(variant, source, args.renders, encoder),
        args.runs,
        "images",
    )
    summary = summarised(
        results, f"{source.name} -> 485-500 px q80, medians (min-max) of {args.runs} runs:"
    )
    report = {"renders": args.renders, "runs": args.runs, "results": results, "summary": summary}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _, _, path, renders, threads, encoder = sys.argv
        print(json.dumps(render_loop(Path(path), int(renders), int(threads), encoder)))
    else:
        main()
