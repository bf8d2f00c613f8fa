"""The served path's own cost: CPU per request of django-oximg without its render.

    .venv/bin/python bench/overhead.py [--runs 3] [--seconds 5] [--concurrency 4]
        [--case medium-jpeg]

Three gunicorn servers, the load benchmark's settings (bench/servers.py:
gthread, one process), driven with the same diverse cache-missing URLs of
one load case (``--case``, default the medium JPEG), interleaved over ``--runs``:

- ``hello``: a WSGI app answering every request with 10 KB of bytes: what
  gunicorn, HTTP on 127.0.0.1 and the driver cost, with no application;
- ``canned``: ``OximgMiddleware`` with ``pipeline.render`` replaced by a
  ready result, everything else real (signature, parse, cache lookups,
  source read, header probe, budget, executor hand-off, atomic cache write
  with fsync, response): the serving overhead per cache miss;
- ``served``: the real thing, render included.

``canned - hello`` is django-oximg's own work per request on top of the WSGI
server; ``served - canned`` is the render as the server runs it.

``--perf`` (needs Linux ``perf``) then splits ``canned - hello`` by where
the CPU went: one more run of ``hello`` and ``canned`` each under ``perf
record``, samples per shared object (the Python interpreter, the kernel,
libc, libvips, ...) turned into ms per request, and the difference scaled
by the unsampled ``canned - hello`` (sampling itself costs CPU).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, oximg_url, url_list  # noqa: E402
from bench.driver import (  # noqa: E402
    ProcessSample,
    closed_loop,
    per_connection,
    spread,
    under_perf,
)
from bench.images import write_set  # noqa: E402

#: What ``hello`` answers: the size of a medium-case thumbnail.
HELLO_BYTES = 10_214

#: Set in the server's environment: which variant bench.overhead builds.
VARIANT_ENV = "OXIMG_BENCH_OVERHEAD"


def application() -> Any:
    """The WSGI app of this server's variant (called by gunicorn via ``bench.overhead:app``)."""
    variant = os.environ[VARIANT_ENV]
    if variant == "hello":
        body = b"x" * HELLO_BYTES

        def hello(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            start_response(
                "200 OK", [("Content-Type", "image/jpeg"), ("Content-Length", str(len(body)))]
            )
            return [body]

        return hello
    if variant == "canned":
        from django_oximg.core import pipeline

        canned = pipeline.Rendered(b"\xff\xd8" + b"x" * (HELLO_BYTES - 2), "jpeg", 490, 327)
        pipeline.render = lambda *args, **kwargs: canned
    from bench import wsgi_apps

    return wsgi_apps.middleware


def __getattr__(name: str) -> Any:
    if name == "app":
        return application()
    raise AttributeError(name)


def start(variant: str, media: Path, logs: Path) -> contextlib.AbstractContextManager[Any]:
    """gunicorn serving ``variant``, with the load benchmark's command line and settings."""
    first = oximg_url(CASES["medium-jpeg"], 500, f"cold-{variant}")
    return servers.oximg(
        media,
        "middleware",
        first,
        log_dir=logs,
        name=variant,
        app="bench.overhead:app",
        extra_env={VARIANT_ENV: variant},
    )


def measure(server: servers.Running, urls: list[str], concurrency: int, seconds: float) -> float:
    """CPU ms per request of the server's process tree over one closed-loop run."""
    sample = ProcessSample(server.pid)
    sample.start()
    stats = sample.stop(closed_loop(server.port, per_connection(urls, concurrency), seconds))
    if stats.ok != stats.requests:
        raise RuntimeError(f"{server.name}: statuses {stats.statuses}")
    return stats.cpu_ms_per_request


def sampled(
    server: servers.Running, urls: list[str], concurrency: int, seconds: float, data: Path
) -> tuple[float, dict[str, float]]:
    """CPU ms per request and its share per shared object, over one run under ``perf record``."""
    return under_perf(server.pid, data, lambda: measure(server, urls, concurrency, seconds), 1999)


def split_by_object(
    hello: tuple[float, dict[str, float]], canned: tuple[float, dict[str, float]], unsampled: float
) -> dict[str, float]:
    """``canned - hello`` in ms per request per shared object, scaled to the unsampled figure."""
    (hello_cpu, hello_shares), (canned_cpu, canned_shares) = hello, canned
    scale = unsampled / (canned_cpu - hello_cpu)
    names = set(hello_shares) | set(canned_shares)
    return {
        name: scale
        * (canned_cpu * canned_shares.get(name, 0.0) - hello_cpu * hello_shares.get(name, 0.0))
        for name in names
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--perf", action="store_true", help="split canned - hello by shared object")
    parser.add_argument("--case", choices=sorted(CASES), default="medium-jpeg")
    args = parser.parse_args()
    if args.perf and not shutil.which("perf"):
        parser.error("--perf needs Linux perf (Debian: apt-get install linux-perf)")
    work = Path(tempfile.mkdtemp(prefix="oximg-overhead-"))
    media = work / "media"
    write_set(media)
    case = CASES[args.case]
    results: dict[str, list[float]] = {"hello": [], "canned": [], "served": []}
    taken: dict[str, tuple[float, dict[str, float]]] = {}
    count = max(2000, int(args.seconds * 1500))
    with contextlib.ExitStack() as stack:
        running = [stack.enter_context(start(variant, media, work)) for variant in results]
        for run in range(args.runs):
            for server in running:
                urls = url_list(case, count, "diverse", f"r{run}{server.name}", oximg_url)
                cpu = measure(server, urls, args.concurrency, args.seconds)
                results[server.name].append(cpu)
                print(f"run {run + 1} {server.name:7s} {cpu:6.3f} CPU ms/request", flush=True)
        if args.perf:
            for server in running[:2]:  # hello, canned
                urls = url_list(case, count, "diverse", f"perf{server.name}", oximg_url)
                data = work / f"{server.name}.perf"
                taken[server.name] = sampled(server, urls, args.concurrency, args.seconds, data)
    print(f"\n{case.name}, diverse URLs, c={args.concurrency}, medians (min-max) of {args.runs}:")
    for name, values in results.items():
        s = spread(values)
        print(f"  {name:7s} {s.median:6.3f} ({s.low:.3f}-{s.high:.3f}) CPU ms/request")
    hello, canned, served = (spread(v).median for v in results.values())
    print(f"  django-oximg on top of the WSGI server (canned - hello): {canned - hello:.3f} ms")
    print(f"  render as served (served - canned): {served - canned:.3f} ms")
    if taken:
        split = split_by_object(taken["hello"], taken["canned"], canned - hello)
        print("  canned - hello by shared object (ms per request, perf-sampled run, scaled):")
        for name, ms in sorted(split.items(), key=lambda item: -abs(item[1]))[:8]:
            print(f"    {ms:6.3f}  {name}")


if __name__ == "__main__":
    main()
