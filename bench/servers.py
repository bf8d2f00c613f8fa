"""Servers the load benchmark drives, each started on 127.0.0.1 and always stopped.

- django-oximg under gunicorn (gthread, one process, threads > WORKERS +
  QUEUE_SIZE: the documented deployment), through the Django view
  (``bench.wsgi_apps:view``) or through the WSGI middleware
  (``bench.wsgi_apps:middleware``);
- thumbor 7.8 from its own venv (bench/peers/setup_thumbor.sh): file loader,
  no source storage, no result storage, quality 80, unsafe URLs, N processes;
- whitenoise alone under the same gunicorn, serving pre-rendered files: the
  ceiling for a cache hit served from local disk by Python.

Start-up time to the first thumbnail is recorded for each (cold start).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError

ROOT = Path(__file__).resolve().parent.parent
THUMBOR_VENV = ROOT / "bench" / "peers" / ".venv-thumbor"
#: sorl-thumbnail's and easy-thumbnails' venv (bench/peers/setup_django_peers.sh).
PEERS_PYTHON = ROOT / "bench" / "peers" / ".venv-django-peers" / "bin" / "python"

#: Bound on a server's start-up (thumbor imports a lot on a loaded machine).
STARTUP_TIMEOUT = 60.0


@dataclass
class Running:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    #: Seconds from spawning the server to its first 200 for ``first_path``.
    cold_start: float

    @property
    def pid(self) -> int:
        return self.process.pid


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get_status(port: int, path: str, timeout: float = 30.0) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            answer.read()
            return int(answer.status)
    except HTTPError as error:
        with error:
            return int(error.code)


def wait_for_first(process: subprocess.Popen[bytes], port: int, path: str, log: Path) -> float:
    """Poll ``path`` until it answers 200; seconds since the call (the cold start)."""
    start = time.perf_counter()
    deadline = start + STARTUP_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited at start-up:\n{log.read_text(errors='replace')}")
        try:
            status = get_status(port, path)
            if status == 200:
                return time.perf_counter() - start
            raise RuntimeError(f"{path} answered {status}:\n{log.read_text(errors='replace')}")
        except (URLError, ConnectionError, TimeoutError):
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL after 20 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def spawn(
    name: str,
    command: list[str],
    env: Mapping[str, str],
    port: int,
    first_path: str,
    log: Path,
    cwd: Path = ROOT,
) -> Iterator[Running]:
    """Start ``command`` in ``cwd``: ``python -m`` puts it first on sys.path."""
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one
            cwd=cwd,
        )
    try:
        wait_for_first(process, port, first_path, log)
        yield Running(name, port, process, time.perf_counter() - started)
    finally:
        stop(process)


def gunicorn_command(
    app: str, port: int, threads: int, workers: int = 1, worker_class: str = "gthread"
) -> list[str]:
    """gunicorn's command line; a ``sync`` worker gets one thread (more would make it gthread)."""
    from tests.servers import without_control_socket

    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"127.0.0.1:{port}",
        "--worker-class",
        worker_class,
        "--workers",
        str(workers),
        "--threads",
        str(threads if worker_class == "gthread" else 1),
        "--backlog",
        "2048",
        "--keep-alive",
        "30",
        "--log-level",
        "warning",
        *without_control_socket(),
        app,
    ]


#: gunicorn's ``--threads`` for django-oximg's servers: above ``WORKERS +
#: QUEUE_SIZE`` so that the executor, not gunicorn's own queue, refuses.
GTHREAD_THREADS = 160


def oximg_env(
    media: Path, package_root: Path | None = None, oximg_settings: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """django-oximg's servers' environment: bench/bench_settings.py over ``media``.

    ``package_root`` holds another django_oximg, put first on the path;
    ``oximg_settings`` are OXIMG overrides.
    """
    path = [str(package_root)] if package_root else []
    return dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="bench.bench_settings",
        OXIMG_BENCH_MEDIA_ROOT=str(media),
        OXIMG_BENCH_OVERRIDES=json.dumps(dict(oximg_settings or {})),
        PYTHONPATH=os.pathsep.join([*path, str(ROOT)]),
    )


@contextmanager
def oximg(
    media: Path,
    way_in: str,
    first_path: str,
    *,
    threads: int = GTHREAD_THREADS,
    oximg_settings: Mapping[str, Any] | None = None,
    log_dir: Path,
    package_root: Path | None = None,
    name: str = "",
    app: str = "",
    extra_env: Mapping[str, str] | None = None,
    processes: int = 1,
    worker_class: str = "gthread",
) -> Iterator[Running]:
    """django-oximg under gunicorn; ``way_in`` is "view" or "middleware".

    ``package_root`` is a directory holding another ``django_oximg`` (an
    older checkout, for before/after runs) put first on the path. ``app``
    replaces ``bench.wsgi_apps:<way_in>`` (another WSGI app on the same
    settings, e.g. bench/overhead.py's); ``extra_env`` is added to the
    server's environment. ``processes`` is gunicorn's ``--workers``,
    ``worker_class`` its ``--worker-class``.
    """
    port = free_port()
    env = {**oximg_env(media, package_root, oximg_settings), **(extra_env or {})}
    name = name or f"oximg-{way_in}"
    command = gunicorn_command(
        app or f"bench.wsgi_apps:{way_in}", port, threads, processes, worker_class
    )
    # ``python -m gunicorn`` puts the working directory first on sys.path: run
    # an older package from its own directory, or the work tree's would win.
    cwd = package_root or ROOT
    with spawn(name, command, env, port, first_path, log_dir / f"{name}.log", cwd) as running:
        yield running


@contextmanager
def whitenoise(
    root: Path, first_path: str, *, log_dir: Path, app: str = "static"
) -> Iterator[Running]:
    """whitenoise alone (same gunicorn settings) serving the files under ``root``.

    ``app="canned"``: instead, one answer made once from files in ``root``
    (bench.wsgi_apps:canned).
    """
    port = free_port()
    env = dict(os.environ, OXIMG_BENCH_STATIC_ROOT=str(root), PYTHONPATH=str(ROOT))
    command = gunicorn_command(f"bench.wsgi_apps:{app}", port, GTHREAD_THREADS)
    name = "whitenoise" if app == "static" else app
    with spawn(name, command, env, port, first_path, log_dir / f"{name}.log") as run:
        yield run


def thumbor_available() -> bool:
    return (THUMBOR_VENV / "bin" / "thumbor").exists()


def thumbor_config(media: Path) -> str:
    return "\n".join(
        [
            "LOADER = 'thumbor.loaders.file_loader'",
            f"FILE_LOADER_ROOT_PATH = {str(media)!r}",
            "STORAGE = 'thumbor.storages.no_storage'",
            "RESULT_STORAGE = None",
            "QUALITY = 80",
            "WEBP_QUALITY = 75",
            "AVIF_QUALITY = 65",
            "ALLOW_UNSAFE_URL = True",
            "AUTO_WEBP = False",
            "AUTO_AVIF = False",
            "RESPECT_ORIENTATION = True",
            "MAX_AGE = 31536000",
            "",
        ]
    )


@contextmanager
def thumbor(
    media: Path, first_path: str, *, processes: int = 2, log_dir: Path
) -> Iterator[Running]:
    """thumbor from bench/peers/.venv-thumbor with ``processes`` forked processes."""
    port = free_port()
    conf = Path(tempfile.mkdtemp(prefix="thumbor-conf-")) / "thumbor.conf"
    conf.write_text(thumbor_config(media))
    command = thumbor_command(conf, port, processes)
    with spawn("thumbor", command, thumbor_env(), port, first_path, log_dir / "thumbor.log") as run:
        yield run


def thumbor_command(conf: Path, port: int, processes: int) -> list[str]:
    return [
        str(THUMBOR_VENV / "bin" / "thumbor"),
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--conf",
        str(conf),
        "--processes",
        str(processes),
        "--log-level",
        "error",
    ]


def thumbor_env() -> dict[str, str]:
    """This environment without what points Python at django-oximg's venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
