"""What a cache hit costs with the result cache on S3, against the local disk.

    .venv/bin/python bench/s3_hits.py [--runs 3] [--seconds 3] [--threads 1,8]

In-process (no HTTP server between): ``Thumbnailer.reply`` for one cached
thumbnail (the medium photo fitted into 500x500), its body read to the end
as a server would send it, from ``--threads`` threads for ``--seconds``,
interleaved over ``--runs``. S3 is moto's standalone server (``moto_server``
from the test dependencies) in a process of its own on 127.0.0.1, so its CPU
is counted apart from ours. The variants:

- ``disk``: a local-disk result cache, hits answered from the in-process
  map of hits (``HIT_CACHE_BYTES``, the default);
- ``disk-lookup``: the same with ``HIT_CACHE_BYTES = 0``: every hit is a
  full lookup (signature, parse, key, ``stat``) and its bytes are read
  from the file;
- ``s3``: the cache on S3: every hit is a GetObject streamed through this
  process (``CACHE_REDIRECT`` off, the default);
- ``s3-redirect``: ``CACHE_REDIRECT`` on: every hit is a HeadObject and the
  answer a 302 to the object's URL, which the client then fetches from S3
  itself (not counted here: that is S3's work, not ours).

What the figures mean: moto answers on loopback in about a millisecond of
its own CPU, where real S3 in the same region takes 10-30 ms of network
time and none of ours. So the wall times below are a floor for S3; the CPU
we spend per hit (boto3 signing the request, parsing the answer, reading
the body) carries over to real S3 as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import KEY, SALT  # noqa: E402
from bench.driver import cpu_seconds, percentile  # noqa: E402
from bench.servers import free_port, stop  # noqa: E402
from django_oximg.benchmarking.gunicorn import wait_for_answer  # noqa: E402

VARIANTS = ("disk", "disk-lookup", "s3", "s3-redirect")
CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region_name": "us-east-1"}
BUCKET = "oximg-bench-cache"


@contextlib.contextmanager
def moto_server() -> Iterator[tuple[str, int]]:
    """moto's S3 in its own process on 127.0.0.1: (endpoint URL, pid)."""
    program = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    if program is None:
        raise SystemExit("moto_server not found: install the test dependencies (make test)")
    port = free_port()
    process = subprocess.Popen(
        [program, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # stopped as one group, as bench/servers.py stops its servers
    )
    try:
        wait_for_answer(process, port, "/", timeout=30.0, ok_only=False)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop(process)


def configure_django(media: Path, endpoint: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="bench-only-not-secret",
        INSTALLED_APPS=["django_oximg"],
        MEDIA_ROOT=str(media),
        MEDIA_URL="/media/",
        USE_TZ=True,
        STORAGES={
            "default": {
                "BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(media)},
            },
            "s3cache": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {"bucket_name": BUCKET, "endpoint_url": endpoint, **CREDENTIALS},
            },
        },
        OXIMG={},
    )
    django.setup()


def use_variant(variant: str) -> None:
    """Point OXIMG at the variant's cache and rebuild the thumbnailer."""
    from django.conf import settings

    from django_oximg import runtime

    oximg: dict[str, Any] = {"KEY": KEY, "SALT": SALT}
    if variant == "disk-lookup":
        oximg["HIT_CACHE_BYTES"] = 0
    if variant.startswith("s3"):
        oximg["CACHE_STORAGE"] = "s3cache"
        oximg["CACHE_REDIRECT"] = variant == "s3-redirect"
    settings.OXIMG = oximg
    runtime.reset()


def one_hit(path: str) -> int:
    """Ask for ``path`` as a server would: the answer's bytes read, its file closed."""
    from django_oximg import runtime

    reply = runtime.get_thumbnailer().reply(path, "GET", {})
    if reply.status not in (200, 302):  # 302: CACHE_REDIRECT
        raise RuntimeError(f"answered {reply.status}")
    if reply.file is None:
        return len(reply.body)
    with reply.file as handle:
        return len(handle.read())


class Clients:
    """Threads that live for the whole run, as a server's request threads do.

    boto3 clients are made per thread (django-oximg's S3 stores keep one in
    a ``threading.local``) and making one takes tens of milliseconds, which
    a server pays once per thread; fresh threads per measurement would pay
    it again each time.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.tasks: list[queue.Queue[Any]] = [queue.Queue() for _ in range(count)]
        self.done: queue.Queue[list[float] | BaseException] = queue.Queue()
        for index in range(count):
            threading.Thread(target=self._serve, args=(index,), daemon=True).start()

    def _serve(self, index: int) -> None:
        while True:
            path, stop_at = self.tasks[index].get()
            try:
                latencies = []
                while time.perf_counter() < stop_at:
                    started = time.perf_counter()
                    one_hit(path)
                    latencies.append(time.perf_counter() - started)
                self.done.put(latencies)
            except BaseException as error:
                self.done.put(error)

    def run(self, path: str, threads: int, seconds: float) -> list[float]:
        """Latencies of ``threads`` of the threads asking for ``path`` for ``seconds``."""
        stop_at = time.perf_counter() + seconds
        for index in range(threads):
            self.tasks[index].put((path, stop_at))
        found: list[float] = []
        for _ in range(threads):
            answer = self.done.get()
            if isinstance(answer, BaseException):
                raise answer
            found.extend(answer)
        return found


def measure(
    clients: Clients, path: str, threads: int, seconds: float, moto_pid: int
) -> dict[str, float]:
    """Hits per second, latency and CPU per hit (ours and moto's) over ``seconds``."""
    ours = resource.getrusage(resource.RUSAGE_SELF)
    theirs = cpu_seconds(moto_pid)
    wall = time.perf_counter()
    latencies = sorted(clients.run(path, threads, seconds))
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    hits = len(latencies)
    our_cpu = (after.ru_utime + after.ru_stime) - (ours.ru_utime + ours.ru_stime)
    return {
        "hits_per_s": hits / wall,
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "our_cpu_ms": 1000 * our_cpu / hits,
        "moto_cpu_ms": 1000 * (cpu_seconds(moto_pid) - theirs) / hits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", default="1,8")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    from bench.cases import CASES, oximg_path
    from bench.images import write_set

    media = Path(tempfile.mkdtemp(prefix="oximg-s3-hits-"))
    write_set(media)
    case = CASES["medium-jpeg"]
    with moto_server() as (endpoint, moto_pid):
        configure_django(media, endpoint)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        from django_oximg import runtime

        use_variant("disk")
        path = runtime.get_signer().signed_path(oximg_path(case, case.width, ""))
        results: dict[tuple[str, int], list[dict[str, float]]] = {}
        clients = Clients(max(threads))
        for variant in VARIANTS:  # the miss, then every thread's client, before timing
            use_variant(variant)
            clients.run(path, clients.count, 0.5)
        for _ in range(args.runs):
            for count in threads:
                for variant in VARIANTS:
                    use_variant(variant)
                    one_hit(path)
                    figures = measure(clients, path, count, args.seconds, moto_pid)
                    results.setdefault((variant, count), []).append(figures)
    print(f"cache hits in-process, medium-jpeg 500x500, {args.runs} runs of {args.seconds} s")
    print("| threads | variant | hits/s | p50 ms | p95 ms | our CPU ms/hit | moto CPU ms/hit |")
    print("|---|---|---|---|---|---|---|")
    for (variant, count), runs in sorted(
        results.items(), key=lambda item: (item[0][1], item[0][0])
    ):

        def median(name: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(run[name] for run in runs)

        low = min(run["hits_per_s"] for run in runs)
        high = max(run["hits_per_s"] for run in runs)
        print(
            f"| {count} | {variant} | {median('hits_per_s'):.0f} ({low:.0f}-{high:.0f}) "
            f"| {median('p50_ms'):.2f} | {median('p95_ms'):.2f} | {median('our_cpu_ms'):.3f} "
            f"| {median('moto_cpu_ms'):.3f} |"
        )


if __name__ == "__main__":
    main()
