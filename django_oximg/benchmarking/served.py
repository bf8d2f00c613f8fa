"""``--gunicorn``: the same misses over HTTP, through the site's own WSGI application.

gunicorn (gthread, one process) serves ``settings.WSGI_APPLICATION`` on
127.0.0.1 with more threads than the executor admits (``WORKERS +
QUEUE_SIZE``, as docs/deployment.md asks), and keep-alive clients each walk
their own share of distinct signed URLs, so every request is a miss. CPU is
the server's: its master's and worker's, from ``/proc``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.management.base import CommandError

from django_oximg import conf, runtime
from django_oximg.benchmarking import gunicorn
from django_oximg.benchmarking.measure import summary, timed_loop, width_for
from django_oximg.benchmarking.sources import Source
from django_oximg.core.options import Options, build_path

#: Seconds the gunicorn server may take to answer its first request.
STARTUP_TIMEOUT = 60.0

#: Distinct URLs per round and concurrency: more than any client reaches.
PATHS_PER_ROUND = 4000


def over_http(
    sources: list[Source],
    box: tuple[int, int],
    options: dict[str, Any],
    concurrency: list[int],
    notes: list[str],
) -> list[dict[str, Any]]:
    """One summary row per source and concurrency, each over ``options["rounds"]`` rounds."""
    settings = conf.get_settings()
    workers = runtime.get_thumbnailer().executor.workers
    queue = settings.QUEUE_SIZE or workers * 16
    with gunicorn_server(workers + queue + 16) as (port, pid):
        results = []
        for source in sources:
            for clients in concurrency:
                values = []
                for round_ in range(options["rounds"]):
                    paths = http_paths(source, box, options["format"], f"h{round_}c{clients}")
                    values.append(http_loop(port, pid, paths, clients, options["seconds"]))
                results.append(summary(source.label, "gunicorn", "http", clients, values))
        notes.append(f"gunicorn gthread, 1 process, {workers + queue + 16} threads")
        return results


def http_paths(source: Source, box: tuple[int, int], fmt: str, tag: str) -> list[str]:
    """Distinct signed thumbnail paths of ``source`` under the site's URL prefix."""
    from django_oximg.thumbnails import url_prefix

    signer = runtime.get_signer()
    prefix = url_prefix().rstrip("/")
    width, height = box
    paths = []
    for index in range(PATHS_PER_ROUND):
        options = Options(
            width=width_for(index) * width // 500,
            height=height,
            format=fmt,
            cachebuster=f"{tag}-{index}",
        )
        paths.append(prefix + signer.signed_path(build_path(options, source.name)))
    return paths


def wsgi_target() -> str:
    """``module:attribute`` of the site's WSGI application for gunicorn."""
    dotted = str(getattr(django_settings, "WSGI_APPLICATION", "") or "")
    module, _, attribute = dotted.rpartition(".")
    if not module:
        raise CommandError("--gunicorn needs settings.WSGI_APPLICATION")
    return f"{module}:{attribute}"


@contextlib.contextmanager
def gunicorn_server(threads: int) -> Iterator[tuple[int, int]]:
    """gunicorn (gthread, 1 process) with the site's WSGI app on 127.0.0.1; stopped after."""
    port = gunicorn.free_port()
    try:
        command = gunicorn.gunicorn_command(wsgi_target(), port, threads)
    except RuntimeError as error:
        raise CommandError(f"--gunicorn: {error}") from error
    # This process's import path, so that gunicorn imports the same site.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    process: subprocess.Popen[bytes] = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        try:
            gunicorn.wait_for_answer(process, port, "/", timeout=STARTUP_TIMEOUT, ok_only=False)
        except RuntimeError as error:
            raise CommandError(f"gunicorn: {error}") from error
        yield port, process.pid
    finally:
        gunicorn.stop(process)


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (gunicorn master and worker), Linux only."""
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for one in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def http_loop(
    port: int, pid: int, paths: list[str], clients: int, seconds: float
) -> dict[str, float]:
    """``clients`` keep-alive connections, each walking its own share of ``paths``."""
    shares = [paths[i::clients] for i in range(clients)]
    connections: list[http.client.HTTPConnection] = []

    def client_for(index: int) -> Callable[[int], int]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connections.append(connection)
        share = shares[index]
        position = iter(range(10**9))

        def one(_: int) -> int:
            connection.request("GET", share[next(position) % len(share)])
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise CommandError(
                    f"gunicorn answered {response.status}; is the thumbnail URLconf "
                    "or OximgMiddleware in the WSGI app?"
                )
            return len(body)

        return one

    renders = [client_for(i) for i in range(clients)]
    lock = threading.Lock()
    assigned: dict[int, Callable[[int], int]] = {}

    def render(index: int) -> int:
        ident = threading.get_ident()
        with lock:
            if ident not in assigned:
                assigned[ident] = renders[len(assigned)]
        return assigned[ident](index)

    try:
        measured = timed_loop(render, clients, seconds, lambda: tree_cpu(pid))
    finally:
        for connection in connections:
            connection.close()
    return measured.figures()
