"""The served path's own cost: CPU per request of django-oximg without its render.

    .venv/bin/python bench/overhead.py [--runs 3] [--seconds 5] [--concurrency 4]

Three gunicorn servers, the load benchmark's settings (bench/servers.py:
gthread, one process), driven with the same diverse cache-missing URLs of
the medium JPEG case, interleaved over ``--runs``:

- ``hello``: a WSGI app answering every request with 10 KB of bytes: what
  gunicorn, HTTP on 127.0.0.1 and the driver cost, with no application;
- ``canned``: ``OximgMiddleware`` with ``pipeline.render`` replaced by a
  ready result, everything else real (signature, parse, cache lookups,
  source read, header probe, budget, executor hand-off, atomic cache write
  with fsync, response): the serving overhead per cache miss;
- ``served``: the real thing, render included.

``canned - hello`` is django-oximg's Python per request on top of the WSGI
server; ``served - canned`` is the render as the server runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, url_list  # noqa: E402
from bench.driver import closed_loop, cpu_seconds, per_connection, process_tree, spread  # noqa: E402
from bench.images import write_set  # noqa: E402
from bench.load import oximg_url  # noqa: E402

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
    pids = process_tree(server.pid)
    before = sum(cpu_seconds(pid) for pid in pids)
    stats = closed_loop(server.port, per_connection(urls, concurrency), seconds)
    after = sum(cpu_seconds(pid) for pid in process_tree(server.pid))
    if stats.ok != stats.requests:
        raise RuntimeError(f"{server.name}: statuses {stats.statuses}")
    return 1000 * (after - before) / stats.requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="oximg-overhead-"))
    media = work / "media"
    write_set(media)
    case = CASES["medium-jpeg"]
    results: dict[str, list[float]] = {"hello": [], "canned": [], "served": []}
    with contextlib.ExitStack() as stack:
        running = [stack.enter_context(start(variant, media, work)) for variant in results]
        for run in range(args.runs):
            for server in running:
                count = max(2000, int(args.seconds * 1500))
                urls = url_list(case, count, "diverse", f"r{run}{server.name}", oximg_url)
                cpu = measure(server, urls, args.concurrency, args.seconds)
                results[server.name].append(cpu)
                print(f"run {run + 1} {server.name:7s} {cpu:6.3f} CPU ms/request", flush=True)
    print(f"\nmedium JPEG, diverse URLs, c={args.concurrency}, medians (min-max) of {args.runs}:")
    for name, values in results.items():
        s = spread(values)
        print(f"  {name:7s} {s.median:6.3f} ({s.low:.3f}-{s.high:.3f}) CPU ms/request")
    hello, canned, served = (spread(v).median for v in results.values())
    print(f"  django-oximg on top of the WSGI server (canned - hello): {canned - hello:.3f} ms")
    print(f"  render as served (served - canned): {served - canned:.3f} ms")


if __name__ == "__main__":
    main()
