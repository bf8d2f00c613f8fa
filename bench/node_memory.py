"""The memory of one gunicorn node whose sources and result cache are on S3.

    .venv/bin/python bench/node_memory.py [--runs 3] [--before COMMIT] [--redis]
        [--threads 64] [--budget-mib 256] [--hits 64] [--misses 96]

One node as docs/deployment.md runs it: gunicorn gthread, one worker
process, ``--threads 64``, ``MALLOC_ARENA_MAX=2`` (``--malloc-arena-max 0``
leaves glibc's default), ``OximgMiddleware`` (bench/wsgi_apps.py), the
executor's defaults (``WORKERS`` = CPUs, ``QUEUE_SIZE`` = ``WORKERS`` x 16,
``QUEUE_TIMEOUT`` 5 s) and ``MEMORY_BUDGET`` ``--budget-mib``. Its sources
and its result cache are django-storages' ``S3Storage`` on moto's S3 server
(tests/s3_server.py) in a process of its own on 127.0.0.1; with
``--redis``, ``COORDINATION_CACHE`` is a redis-server on a Unix socket
(tests/services.py). The sources are three photo-like JPEGs of 2.2-2.9 MP
(bench/images.py's drawing).

Each run starts a fresh node per contender (the work tree, and with
``--before`` the package at that commit), contenders interleaved and their
order alternated from run to run, and reads the worker's ``VmRSS`` (and its
``VmHWM``, the peak since it started) from ``/proc``:

1. idle: after its first four answers (a miss, its hit, another miss and
   its hit) and once its CPU has settled;
2. after ``--hits`` concurrent requests for one cached thumbnail (each a
   GetObject on S3: S3 hits are not remembered in memory);
3. after ``--misses`` concurrent misses, distinct sizes (300-500 px) of the
   three photos; each request is a connection of its own, so at most
   ``--threads`` are inside the node at once and the rest wait in its
   listening socket's backlog. Past ``WORKERS + QUEUE_SIZE`` admitted
   renders the executor answers 429, as it would for an operator.

The peak is compared with docs/deployment.md's container formula for a node
whose result cache is on S3: idle RSS + ``MEMORY_BUDGET`` + 100 MiB of
allocator slack and source bytes (``HIT_CACHE_BYTES`` counts only with a
local-disk result cache: S3 hits are not kept in memory). Medians with
min-max over runs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, oximg_url  # noqa: E402
from bench.driver import process_tree, rss_mib, wait_until_idle  # noqa: E402
from django_oximg.benchmarking.gunicorn import status_of  # noqa: E402

MIB = 1024 * 1024

#: The source photos on S3: 2.2-2.9 MP, the size of a phone photo resized for the web.
PHOTOS = {
    "photos/p0.jpg": (2000, 1333),
    "photos/p1.jpg": (1800, 1200),
    "photos/p2.jpg": (2100, 1400),
}

#: The operation of every request: bench/cases.py's boxes of 300-500 px, JPEG q80.
BOXES = CASES["medium-jpeg-boxes"]

#: docs/deployment.md's slack on top of the idle RSS and MEMORY_BUDGET.
SLACK_MIB = 100

CONTENDERS = ("oximg", "oximg-before")

#: Seconds a request of a burst may take before it counts as failed (status 0).
REQUEST_TIMEOUT = 120.0


def photo_url(number: int, width: int, tag: str) -> str:
    """The signed path of photo ``number`` fitted into ``width`` x 500, with a cache buster."""
    case = dataclasses.replace(BOXES, source=list(PHOTOS)[number])
    return oximg_url(case, width, tag)


def distinct_misses(count: int, tag: str) -> list[str]:
    """``count`` paths of distinct sizes, the photos taken in turn."""
    return [
        photo_url(index % len(PHOTOS), width, tag)
        for index, width in enumerate(BOXES.widths(count))
    ]


def upload_photos(s3: Any, bucket: str) -> None:
    """Draw the photos (JPEG q90) and put them into ``bucket``."""
    from bench.images import photo

    client = s3.client()
    for name, (width, height) in PHOTOS.items():
        body = bytes(photo(width, height).jpegsave_buffer(Q=90))
        client.put_object(Bucket=bucket, Key=name, Body=body)


def node_settings(budget_mib: int, coordinated: bool) -> dict[str, Any]:
    """OXIMG of a node: sources and results on S3, the executor's defaults, the budget."""
    from django_oximg.conf import OximgSettings

    settings: dict[str, Any] = {
        "SOURCE_STORAGE": "s3source",
        "CACHE_STORAGE": "s3cache",
        "MEMORY_BUDGET": budget_mib * MIB,
        # bench/bench_settings.py queues deeper for throughput runs; a node
        # as deployed keeps the defaults.
        "QUEUE_SIZE": OximgSettings.QUEUE_SIZE,
        "QUEUE_TIMEOUT": OximgSettings.QUEUE_TIMEOUT,
    }
    if coordinated:
        settings["COORDINATION_CACHE"] = "coordination"
    return settings


def node_env(
    s3: Any,
    source_bucket: str,
    cache_bucket: str,
    redis_env: Mapping[str, str],
    malloc_arena_max: int = 2,
) -> dict[str, str]:
    """A node's environment: the S3 storages, Redis if given, ``MALLOC_ARENA_MAX`` unless 0."""
    env = {**servers.s3_environment(s3.endpoint, source_bucket, cache_bucket), **redis_env}
    if malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(malloc_arena_max)
    return env


@contextlib.contextmanager
def s3_node(
    *,
    work: Path,
    name: str,
    first_path: str,
    settings: Mapping[str, Any],
    env: Mapping[str, str],
    threads: int,
    package_root: Path | None,
) -> Iterator[servers.Running]:
    """One node: bench/servers.py's middleware server, started once it answers ``first_path``.

    Its local media root stays empty: sources and results are where
    ``settings`` and ``env`` put them.
    """
    media = work / f"media-{name}"
    media.mkdir(exist_ok=True)
    with servers.oximg(
        media,
        "middleware",
        first_path,
        threads=threads,
        oximg_settings=settings,
        log_dir=work,
        package_root=package_root,
        name=name,
        extra_env=env,
    ) as node:
        yield node


def burst(requests: list[tuple[int, str]]) -> Counter[int]:
    """Every ``(port, path)`` asked at once, a thread and a connection each; the statuses.

    Status 0: no answer within :data:`REQUEST_TIMEOUT`, or the connection failed.
    """
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(len(requests))

    def ask(port: int, path: str) -> None:
        start.wait()
        try:
            status = status_of(port, path, timeout=REQUEST_TIMEOUT)
        except OSError:
            status = 0
        with lock:
            statuses[status] += 1

    threads = [threading.Thread(target=ask, args=request) for request in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def worker_of(master: int) -> int:
    """The one worker process of the gunicorn ``master``."""
    children = process_tree(master)[1:]
    if len(children) != 1:
        raise RuntimeError(f"expected one gunicorn worker, found {children}")
    return children[0]


def memory(pid: int) -> dict[str, float]:
    """The worker's RSS now, its peak so far (MiB) and its thread count."""
    return {
        "rss": rss_mib(pid, "VmRSS"),
        "hwm": rss_mib(pid, "VmHWM"),
        "threads": float(len(os.listdir(f"/proc/{pid}/task"))),
    }


def measure_node(
    contender: str,
    run: int,
    args: argparse.Namespace,
    s3: Any,
    source_bucket: str,
    work: Path,
    redis_env: Mapping[str, str],
    before: Path | None,
) -> dict[str, Any]:
    """The figures of one fresh node (see the module docstring)."""
    tag = f"{contender}{run}"  # no key repeats between nodes: leases in Redis outlive a node
    env = node_env(s3, source_bucket, s3.new_bucket(), redis_env, args.malloc_arena_max)
    hot = photo_url(0, BOXES.width, tag)
    with s3_node(
        work=work,
        name=f"{contender}-{run}",
        first_path=hot,
        settings=node_settings(args.budget_mib, bool(redis_env)),
        env=env,
        threads=args.threads,
        package_root=before if contender == "oximg-before" else None,
    ) as node:
        worker = worker_of(node.pid)
        other = photo_url(1, BOXES.smallest, tag)
        for path in (hot, other, other):
            if status_of(node.port, path) != 200:
                raise RuntimeError(f"{contender}: {path} did not answer 200")
        wait_until_idle(node.pid)
        idle = memory(worker)
        hits = burst([(node.port, hot)] * args.hits)
        after_hits = memory(worker)
        wait_until_idle(node.pid)
        misses = burst([(node.port, path) for path in distinct_misses(args.misses, tag)])
        after_misses = memory(worker)
        if worker_of(node.pid) != worker:
            raise RuntimeError(f"{contender}: the worker was replaced")
    return {
        "idle_rss": idle["rss"],
        "hits_rss": after_hits["rss"],
        "misses_rss": after_misses["rss"],
        "peak": after_misses["hwm"],
        "hits_peak": after_hits["hwm"],
        "threads": after_misses["threads"],
        "hits": dict(hits),
        "misses": dict(misses),
    }


def limit_mib(idle_rss: float, budget_mib: int) -> float:
    """docs/deployment.md's container size for a node with its result cache on S3."""
    return idle_rss + budget_mib + SLACK_MIB


def spread_cell(values: list[float]) -> str:
    """Median (min-max) in whole MiB."""
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def statuses_cell(runs: list[dict[str, Any]], name: str) -> str:
    """Each run's statuses, e.g. ``200 x 34, 429 x 62``, runs separated by ``;``."""
    return "; ".join(
        ", ".join(f"{status} x {count}" for status, count in sorted(run[name].items()))
        for run in runs
    )


def table(results: Mapping[str, list[dict[str, Any]]], budget_mib: int) -> list[str]:
    """The report: one row per contender, medians (min-max) over runs."""
    lines = [
        "| contender | idle RSS | after hits | after misses | peak (VmHWM) | peak - idle "
        f"| idle + {budget_mib} + {SLACK_MIB} | within | threads |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for contender, runs in results.items():

        def cell(name: str, runs: list[dict[str, Any]] = runs) -> str:
            return spread_cell([run[name] for run in runs])

        growth = [run["peak"] - run["idle_rss"] for run in runs]
        limits = [limit_mib(run["idle_rss"], budget_mib) for run in runs]
        within = sum(run["peak"] <= limit for run, limit in zip(runs, limits, strict=True))
        lines.append(
            f"| {contender} | {cell('idle_rss')} | {cell('hits_rss')} | {cell('misses_rss')} "
            f"| {cell('peak')} | {spread_cell(growth)} | {spread_cell(limits)} "
            f"| {within} of {len(runs)} | {statistics.median(run['threads'] for run in runs):.0f} |"
        )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--before", metavar="COMMIT", help="add oximg-before: the package at COMMIT"
    )
    parser.add_argument("--redis", action="store_true", help="COORDINATION_CACHE on redis-server")
    parser.add_argument("--threads", type=int, default=64, help="gunicorn --threads")
    parser.add_argument("--budget-mib", type=int, default=256, help="MEMORY_BUDGET in MiB")
    parser.add_argument("--hits", type=int, default=64, help="concurrent hits of one thumbnail")
    parser.add_argument("--misses", type=int, default=96, help="concurrent distinct misses")
    parser.add_argument(
        "--malloc-arena-max", type=int, default=2, help="MALLOC_ARENA_MAX (0: glibc's default)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from bench.load import checkout
    from tests.s3_server import s3_server_process

    work = Path(tempfile.mkdtemp(prefix="oximg-node-memory-"))
    contenders = ["oximg", "oximg-before"] if args.before else ["oximg"]
    before = checkout(args.before, work) if args.before else None
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    print(f"load average at start: {' '.join(f'{n:.2f}' for n in os.getloadavg())}", flush=True)
    with contextlib.ExitStack() as stack:
        s3 = stack.enter_context(s3_server_process())
        redis_env = stack.enter_context(servers.redis(work)) if args.redis else {}
        source_bucket = s3.new_bucket()
        upload_photos(s3, source_bucket)
        for run in range(args.runs):
            order = contenders if run % 2 == 0 else contenders[::-1]
            for contender in order:
                figures = measure_node(
                    contender, run, args, s3, source_bucket, work, redis_env, before
                )
                results[contender].append(figures)
                print(
                    f"  run {run + 1} {contender:<13} idle {figures['idle_rss']:5.0f}  "
                    f"hits {figures['hits_rss']:5.0f}  misses {figures['misses_rss']:5.0f}  "
                    f"peak {figures['peak']:5.0f} MiB  threads {figures['threads']:.0f}  "
                    f"hits {dict(sorted(figures['hits'].items()))}  "
                    f"misses {dict(sorted(figures['misses'].items()))}",
                    flush=True,
                )
    print(f"load average at end: {' '.join(f'{n:.2f}' for n in os.getloadavg())}")
    print(
        f"\none node, gunicorn gthread 1 x {args.threads} threads, MEMORY_BUDGET "
        f"{args.budget_mib} MiB, MALLOC_ARENA_MAX {args.malloc_arena_max or 'unset'}, "
        f"coordination {'on redis-server' if args.redis else 'off'}, {args.runs} runs; "
        f"{args.hits} hits, {args.misses} misses; MiB, medians (min-max)"
    )
    for line in table(results, args.budget_mib):
        print(line)
    for contender, runs in results.items():
        print(f"- {contender} hits: {statuses_cell(runs, 'hits')}")
        print(f"- {contender} misses: {statuses_cell(runs, 'misses')}")


if __name__ == "__main__":
    main()
