"""Remote sources through gunicorn: memory while they download, other answers while they are slow.

    .venv/bin/python bench/remote.py downloads [--budget-mib 200] [--requests 12]
    .venv/bin/python bench/remote.py slow [--requests 40] [--same]

Both start gunicorn (one worker process, ``WORKERS`` 2, 64 threads) on
127.0.0.1 with an HTTP source on 127.0.0.1 (``tests/upstream.py``), and
sign their URLs as any client holding them would.

``downloads``: ``--requests`` concurrent thumbnails of as many distinct
URLs, each a 47 MiB JPEG (noise, so it stays that large), under
``MEMORY_BUDGET`` ``--budget-mib``. The worker process's RSS is sampled
every 20 ms; the target is base + budget + 100 MiB.

``slow``: the source answers nothing until released. ``--requests``
thumbnails of distinct URLs (``--same``: one URL) are fired at it; while they
wait, ``/health`` and a cached thumbnail are asked for 50 times each, one
after the other, and their latency is reported against the same requests
with no source waiting.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.driver import rss_mib  # noqa: E402
from tests.servers import Server, gunicorn, imgproxy_url, request  # noqa: E402
from tests.upstream import ImageServer, image_server  # noqa: E402

MIB = 1024 * 1024

#: Samples of /health and of a cached thumbnail, each.
SAMPLES = 50


def large_jpeg(target: int) -> bytes:
    """A noise JPEG of about ``target`` bytes (noise compresses badly at q100)."""
    import pyvips

    def draw(side: int) -> bytes:
        bands = [pyvips.Image.gaussnoise(side, side, sigma=60, mean=128, seed=s) for s in (1, 2, 3)]
        image = bands[0].bandjoin(bands[1:]).cast("uchar")
        return bytes(image.jpegsave_buffer(Q=100, subsample_mode="off"))

    trial = draw(1000)  # bytes grow with pixels: scale the side once
    return draw(int(1000 * (target / len(trial)) ** 0.5))


def settings_for(upstream: ImageServer, **extra: object) -> dict[str, object]:
    return {
        "WORKERS": 2,
        "HTTP_SOURCES": [upstream.prefix],
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
        "HTTP_TIMEOUT": 60.0,
        "SOURCE_TIMEOUT": 70.0,
        "QUEUE_TIMEOUT": 60.0,
        **extra,
    }


def thumbnail(server: Server, upstream: ImageServer, name: str, width: int = 500) -> str:
    source = upstream.url(f"/photos/{name}.jpg")
    return imgproxy_url(server.base, f"/rs:fit:{width}:{width}/plain/{source}@jpeg")


def fire(urls: list[str]) -> tuple[list[threading.Thread], list[int]]:
    statuses: list[int] = []

    def one(url: str) -> None:
        statuses.append(request(url, timeout=300).status)

    threads = [threading.Thread(target=one, args=(url,), daemon=True) for url in urls]
    for thread in threads:
        thread.start()
    return threads, statuses


def run_downloads(args: argparse.Namespace) -> None:
    body = large_jpeg(47 * MIB)
    media = Path(tempfile.mkdtemp(prefix="oximg-remote-")) / "media"
    media.mkdir()
    budget = args.budget_mib * MIB
    with (
        image_server(body) as upstream,
        gunicorn(
            media, workers=1, threads=64, oximg=settings_for(upstream, MEMORY_BUDGET=budget)
        ) as server,
    ):
        [pid] = server.worker_pids()
        warm = request(thumbnail(server, upstream, "warm-up", 100), timeout=300)
        base = rss_mib(pid)
        samples: list[float] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append(rss_mib(pid))
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        threads, statuses = fire(
            [thumbnail(server, upstream, f"big-{n}") for n in range(args.requests)]
        )
        for thread in threads:
            thread.join(600)
        elapsed = time.monotonic() - started
        done.set()
        sampler.join()
        same = server.worker_pids() == {pid}
    peak = max(samples)
    print(f"source: {len(body) / MIB:.1f} MiB JPEG; warm-up {warm.status}")
    print(
        f"{args.requests} concurrent requests, distinct URLs: {sorted(Counter(statuses).items())}"
    )
    print(
        f"MEMORY_BUDGET {args.budget_mib} MiB, WORKERS 2, SOURCE_READS 4 (default), {elapsed:.1f} s"
    )
    print(
        f"worker RSS: base {base:.0f} MiB, peak {peak:.0f} MiB, "
        f"peak - base {peak - base:.0f} MiB (target <= {args.budget_mib + 100}); "
        f"{len(samples)} samples; same worker: {same}"
    )


def latencies(urls: list[str]) -> list[float]:
    taken = []
    for url in urls:
        started = time.perf_counter()
        status = request(url, timeout=300).status
        taken.append((time.perf_counter() - started) * 1000)
        assert status == 200, status
    return taken


def describe(taken: list[float]) -> str:
    ordered = sorted(taken)
    p95 = ordered[int(len(ordered) * 0.95)]
    return f"median {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms"


def run_slow(args: argparse.Namespace) -> None:
    from tests import images

    media = Path(tempfile.mkdtemp(prefix="oximg-remote-")) / "media"
    media.mkdir()
    with (
        image_server(images.jpeg(1600, 1200)) as upstream,
        gunicorn(media, workers=1, threads=64, oximg=settings_for(upstream)) as server,
    ):
        [pid] = server.worker_pids()
        hit = thumbnail(server, upstream, "cached")
        assert request(hit).status == 200
        health = server.base + "/img/health"
        idle = latencies([health] * SAMPLES), latencies([hit] * SAMPLES)
        upstream.open.clear()
        names = (
            ["slow"] * args.requests if args.same else [f"slow-{n}" for n in range(args.requests)]
        )
        threads, statuses = fire([thumbnail(server, upstream, name) for name in names])
        time.sleep(1.0)  # let every request reach the server
        refused_at_once = Counter(statuses)
        waiting = upstream.in_flight
        busy = latencies([health] * SAMPLES), latencies([hit] * SAMPLES)
        upstream.open.set()
        for thread in threads:
            thread.join(300)
        same = server.worker_pids() == {pid}
    kind = "one URL" if args.same else "distinct URLs"
    print(
        f"{args.requests} requests for a source that does not answer ({kind}); "
        f"WORKERS 2, QUEUE_SIZE 32, SOURCE_READS 4, gunicorn threads 64"
    )
    print(
        f"answered while waiting: {sorted(refused_at_once.items())}; reads waiting at the source: "
        f"{waiting}; finally: {sorted(Counter(statuses).items())}; same worker: {same}"
    )
    print(f"/health idle: {describe(idle[0])}; while waiting: {describe(busy[0])}")
    print(f"cache hit idle: {describe(idle[1])}; while waiting: {describe(busy[1])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    downloads = commands.add_parser("downloads", help="RSS during concurrent large downloads")
    downloads.add_argument("--budget-mib", type=int, default=200)
    downloads.add_argument("--requests", type=int, default=12)
    slow = commands.add_parser("slow", help="/health and hits while a source is slow")
    slow.add_argument("--requests", type=int, default=40)
    slow.add_argument("--same", action="store_true", help="all requests for one URL")
    args = parser.parse_args()
    if args.command == "downloads":
        run_downloads(args)
    else:
        run_slow(args)


if __name__ == "__main__":
    main()
