"""Render throughput: render threads (WORKERS) x libvips threads per render (LIBVIPS_CONCURRENCY).

    .venv/bin/python bench/concurrency.py [--repeats 3] [--images 200] [--image medium] [--deadline]

Each combination runs in a fresh subprocess (libvips' thread count is set
once per process, as ``runtime`` does it, through
``core.pipeline.configure(concurrency=...)``). In it, ``WORKERS`` threads
render the bench image (bench/images.py: medium 2000x1333 or large
7360x4912) fitted into (485-500)x500 as JPEG q80 (bench/cases.py's
``medium-jpeg`` operation) through
``core.pipeline.render``, pulling from one shared count of images, exactly
the work the executor's worker threads do. Combinations are interleaved and
the whole set repeated, and the medians reported: images/s, process CPU
seconds per image and the median time of one render. It also reports how
much CPU *other* processes took meanwhile (from /proc/stat), because on a
shared machine that, not the settings, can decide the result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.driver import OtherLoad  # noqa: E402

WORKERS = (1, 2, 4)
LIBVIPS_CONCURRENCY = (1, 2)

#: Renders before timing starts in each subprocess (loads libvips' code and
#: warms the allocator, so the first trial is not penalised).
WARM_UP = 6


def child(
    workers: int, concurrency: int, image: Path, count: int, deadline: bool
) -> dict[str, float]:
    """Render ``count`` thumbnails with ``workers`` threads; return the measurements.

    With ``deadline``, each render gets a (never reached) deadline as the server
    gives it, which turns on libvips progress callbacks into Python.
    """
    from bench.cases import CASES, oximg_path
    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path

    pipeline.configure(concurrency=concurrency)
    data = image.read_bytes()
    settings = pipeline.RenderSettings()
    case = CASES["medium-jpeg"]  # its operation; the image is --image's

    def render(index: int) -> float:
        start = time.perf_counter()
        options = parse_path(oximg_path(case, case.widths(1, index)[0], "")[1:]).options
        at = time.monotonic() + 60 if deadline else None
        pipeline.render(data, options, case.format, settings, deadline=at)
        return time.perf_counter() - start

    for index in range(WARM_UP):
        render(index)
    tickets = iter(range(count))
    lock = threading.Lock()
    times: list[float] = []

    def work() -> None:
        while True:
            with lock:
                index = next(tickets, None)
            if index is None:
                return
            elapsed = render(index)
            with lock:
                times.append(elapsed)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    cpu = time.process_time()
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return {
        "images_per_s": count / wall,
        "cpu_ms_per_image": 1000 * cpu / count,
        "render_ms_p50": 1000 * statistics.median(times),
    }


def trial(
    workers: int, concurrency: int, image: Path, count: int, deadline: bool
) -> dict[str, float]:
    """One combination in a fresh interpreter."""
    command = [
        sys.executable,
        __file__,
        "--child",
        str(workers),
        str(concurrency),
        str(image),
        str(count),
        "deadline" if deadline else "none",
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
    result: dict[str, float] = json.loads(output.stdout)
    return result


def write_image(name: str) -> Path:
    from bench.images import SIZES, photo

    width, height = SIZES[f"{name}.jpg"]
    path = Path(tempfile.mkdtemp(prefix="oximg-concurrency-")) / f"{name}.jpg"
    path.write_bytes(bytes(photo(width, height).jpegsave_buffer(Q=90)))
    return path


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        threads, libvips_threads, path, count, deadline = sys.argv[2:7]
        measured = child(
            int(threads), int(libvips_threads), Path(path), int(count), deadline == "deadline"
        )
        print(json.dumps(measured))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=200, help="renders per trial")
    parser.add_argument("--image", choices=("medium", "large"), default="medium")
    parser.add_argument(
        "--deadline", action="store_true", help="give renders a deadline, as the server does"
    )
    args = parser.parse_args()

    from django_oximg.core.limits.cgroups import usable_cpus

    image = write_image(args.image)
    other = OtherLoad()
    combos = list(itertools.product(WORKERS, LIBVIPS_CONCURRENCY))
    results: dict[tuple[int, int], list[dict[str, float]]] = {combo: [] for combo in combos}
    for repeat in range(args.repeats):
        # Rotate the order each round, so no combination always runs first or last.
        shift = repeat * len(combos) // max(1, args.repeats)
        for workers, concurrency in combos[shift:] + combos[:shift]:
            results[workers, concurrency].append(
                trial(workers, concurrency, image, args.images, args.deadline)
            )

    print(
        f"{args.image} JPEG -> fit 500x500 JPEG q80, {args.images} renders per trial, "
        f"{args.repeats} interleaved repeats, {usable_cpus()} usable CPUs, "
        f"render deadline {'on' if args.deadline else 'off'}; medians"
    )
    print(f"other processes used {other.cpus():.2f} CPUs on average meanwhile")
    header = ("WORKERS", "LIBVIPS_CONC", "images/s", "CPU ms/img", "render ms")
    print("{:>7} {:>12} {:>9} {:>10} {:>9}".format(*header))
    for workers, concurrency in combos:
        runs = results[workers, concurrency]
        rate, cpu, latency = (
            statistics.median(run[key] for run in runs)
            for key in ("images_per_s", "cpu_ms_per_image", "render_ms_p50")
        )
        print(f"{workers:>7} {concurrency:>12} {rate:>9.1f} {cpu:>10.1f} {latency:>9.1f}")


if __name__ == "__main__":
    main()
