"""Overload: drive gunicorn at a multiple of its sustainable rate and see who is turned away.

    .venv/bin/python bench/overload.py [--factor 4] [--duration 10] [--threads 64]

1. Starts gunicorn (gthread, one process) on 127.0.0.1 serving the test
   project (tests/servers.py) with the default executor: ``WORKERS`` = usable
   CPUs, ``QUEUE_SIZE`` = workers x 16, ``QUEUE_TIMEOUT`` 5 s.
2. Measures the sustainable rate: a closed loop at concurrency = ``WORKERS``
   of diverse URLs (bench/cases.py's ``medium-jpeg``: the 2000x1333 JPEG of
   bench/images.py fitted into (485-500)x500, JPEG q80, each URL with its own
   cachebuster, so every request is a cache miss and single-flight never
   shares one).
3. Offers ``--factor`` times that rate as an open loop: arrivals on a fixed
   schedule, whatever the answers (a bounded number, a bounded time).

Reports the share of each status, the latency of 429s (they should be
immediate), the p50/p99 of admitted (200) requests, and anything that is not
200, 429 or 503. Latency of a request is counted from its scheduled arrival,
so a client that falls behind cannot hide queueing (coordinated omission).
The client is asyncio with raw sockets, cheap enough to share a 2-core box
with the server; it still takes some CPU from it, as any local load does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import CASES, oximg_url, url_list  # noqa: E402
from bench.driver import OtherLoad, parse_head, percentile  # noqa: E402
from bench.images import SIZES, photo  # noqa: E402
from django_oximg.core.limits.cgroups import usable_cpus  # noqa: E402
from tests.servers import gunicorn  # noqa: E402

#: A request that takes longer than this is counted as a client timeout.
REQUEST_TIMEOUT = 30.0

#: Statuses an overloaded server may answer a valid request with.
EXPECTED = {200, 429, 503}


@dataclass
class Answer:
    """One request's outcome; ``status`` 0 for a client-side failure."""

    status: int
    #: Seconds from the scheduled arrival (open loop) or the send (closed loop).
    latency: float
    #: Seconds from the actual send: excludes the client's own lateness.
    service: float
    retry_after: bool = False
    no_store: bool = False


@dataclass
class Report:
    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0

    def statuses(self) -> Counter[int]:
        return Counter(answer.status for answer in self.answers)

    def latencies(self, status: int, attr: str = "latency") -> list[float]:
        return sorted(getattr(a, attr) for a in self.answers if a.status == status)


async def get(port: int, path: str, scheduled: float) -> Answer:
    """GET ``path`` on a fresh connection and read the status line and headers."""
    sent = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), REQUEST_TIMEOUT
        )
    except (OSError, TimeoutError):
        now = time.perf_counter()
        return Answer(0, now - scheduled, now - sent)
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        data = await asyncio.wait_for(reader.read(-1), REQUEST_TIMEOUT)
    except (OSError, TimeoutError):
        data = b""
    finally:
        writer.close()
    now = time.perf_counter()
    try:
        status, headers = parse_head(data.partition(b"\r\n\r\n")[0])
    except ValueError:  # nothing, or not HTTP: a client-side failure
        return Answer(0, now - scheduled, now - sent)
    return Answer(
        status,
        now - scheduled,
        now - sent,
        retry_after="retry-after" in headers,
        no_store=headers.get("cache-control", "").startswith("no-store"),
    )


def signed_paths(count: int, tag: str) -> list[str]:
    """``count`` distinct misses of the medium-JPEG case: width 485-500, a cachebuster each."""
    return url_list(CASES["medium-jpeg"], count, "diverse", tag, oximg_url)


async def closed_loop(port: int, paths: list[str], concurrency: int, seconds: float) -> Report:
    """``concurrency`` clients, each sending its next request when the last is answered."""
    report = Report()
    queue = iter(paths)
    start = time.perf_counter()
    stop = start + seconds

    async def client() -> None:
        for path in queue:
            if time.perf_counter() >= stop:
                return
            begin = time.perf_counter()
            report.answers.append(await get(port, path, begin))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    report.seconds = time.perf_counter() - start
    return report


async def open_loop(port: int, paths: list[str], rate: float) -> Report:
    """One request every ``1 / rate`` seconds, sent whether or not earlier ones returned."""
    report = Report()
    start = time.perf_counter() + 0.05

    async def arrival(index: int, path: str) -> None:
        scheduled = start + index / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        report.answers.append(await get(port, path, scheduled))

    await asyncio.gather(*(arrival(i, p) for i, p in enumerate(paths)))
    report.seconds = time.perf_counter() - start
    return report


def effective_workers(requested: int) -> int:
    """The executor's worker count the server will use (WORKERS 0 = usable CPUs)."""
    return requested or usable_cpus()


def print_open_loop(report: Report, rate: float) -> None:
    statuses = report.statuses()
    total = len(report.answers)
    print(f"open loop: {total} requests offered at {rate:.1f}/s over {report.seconds:.1f} s")
    for status, count in sorted(statuses.items()):
        print(f"  status {status}: {count} ({100 * count / total:.1f} %)")
    for status in (429, 503, 200):
        late = report.latencies(status)
        service = report.latencies(status, "service")
        if late:
            print(
                f"  {status} latency ms from arrival p50 {1000 * percentile(late, 0.5):.1f} "
                f"p99 {1000 * percentile(late, 0.99):.1f} max {1000 * late[-1]:.1f}; "
                f"from send p50 {1000 * percentile(service, 0.5):.1f} "
                f"p99 {1000 * percentile(service, 0.99):.1f}"
            )
    refusals = [a for a in report.answers if a.status in (429, 503)]
    bad_headers = [a for a in refusals if not (a.retry_after and a.no_store)]
    print(f"  refusals without Retry-After + no-store: {len(bad_headers)}")
    unexpected = {s: c for s, c in statuses.items() if s not in EXPECTED}
    print(f"  statuses other than 200/429/503 (0 = client failure): {unexpected or 'none'}")
    print(f"  served: {statuses[200] / report.seconds:.1f} req/s")


def run(args: argparse.Namespace) -> None:
    media = Path(tempfile.mkdtemp(prefix="oximg-overload-")) / "media"
    media.mkdir(parents=True)
    width, height = SIZES["medium.jpg"]
    (media / "medium.jpg").write_bytes(bytes(photo(width, height).jpegsave_buffer(Q=90)))
    oximg = {"WORKERS": args.workers, "QUEUE_SIZE": args.queue_size}
    other = OtherLoad()
    with gunicorn(media, workers=1, threads=args.threads, oximg=oximg) as server:
        port = int(server.base.rsplit(":", 1)[1])
        workers = effective_workers(args.workers)
        pids = server.worker_pids()
        asyncio.run(closed_loop(port, signed_paths(20, "w"), workers, 60.0))  # warm up
        sustained = asyncio.run(
            closed_loop(port, signed_paths(100_000, "s"), workers, args.measure)
        )
        served = sustained.statuses()[200]
        rate = served / sustained.seconds
        print(
            f"gunicorn gthread 1 process x {args.threads} threads; WORKERS {workers}, "
            f"QUEUE_SIZE {args.queue_size or workers * 16}"
        )
        print(
            f"sustainable (closed loop, c={workers}): {rate:.1f} req/s "
            f"({served} x 200 in {sustained.seconds:.1f} s, "
            f"statuses {dict(sustained.statuses())}); "
            f"p50 {1000 * percentile(sustained.latencies(200), 0.5):.1f} ms"
        )
        offered = rate * args.factor
        count = min(args.max_requests, int(offered * args.duration))
        report = asyncio.run(open_loop(port, signed_paths(count, "o"), offered))
        print_open_loop(report, offered)
        print(f"  same worker process afterwards: {server.worker_pids() == pids}")
    print(f"other processes used {other.cpus():.2f} CPUs on average meanwhile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=4.0, help="offered / sustainable rate")
    parser.add_argument("--duration", type=float, default=10.0, help="open-loop seconds")
    parser.add_argument("--measure", type=float, default=8.0, help="closed-loop seconds")
    parser.add_argument("--max-requests", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=64, help="gunicorn threads")
    parser.add_argument("--workers", type=int, default=0, help="OXIMG WORKERS (0: CPUs)")
    parser.add_argument("--queue-size", type=int, default=0, help="OXIMG QUEUE_SIZE (0: x16)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
