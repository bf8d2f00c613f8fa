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
Each runs in a process group of its own and is stopped as one, by
``django_oximg.benchmarking.gunicorn`` (which also builds gunicorn's
command line).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One start and stop for every server of the benchmarks, shared with
# ``manage.py oximg_bench --gunicorn``: the same gunicorn command line, the
# same wait for the first answer, the same process-group stop.
from django_oximg.benchmarking.gunicorn import (
    free_port,
    gunicorn_command,
    stop,
    wait_for_answer,
)

__all__ = ["free_port", "gunicorn_command", "stop"]

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


def wait_for_first(process: subprocess.Popen[bytes], port: int, path: str, log: Path) -> float:
    """Poll ``path`` until it answers 200; seconds since the call (the cold start)."""
    return wait_for_answer(process, port, path, timeout=STARTUP_TIMEOUT, ok_only=True, log=log)


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
        bytecode_environment(),
        DJANGO_SETTINGS_MODULE="bench.bench_settings",
        OXIMG_BENCH_MEDIA_ROOT=str(media),
        OXIMG_BENCH_OVERRIDES=json.dumps(dict(oximg_settings or {})),
        PYTHONPATH=os.pathsep.join([*path, str(ROOT)]),
    )


def s3_environment(endpoint: str, source_bucket: str, cache_bucket: str) -> dict[str, str]:
    """What makes bench/bench_settings.py offer S3 storages "s3source" and "s3cache"."""
    return {
        "OXIMG_BENCH_S3_ENDPOINT": endpoint,
        "OXIMG_BENCH_S3_SOURCE_BUCKET": source_bucket,
        "OXIMG_BENCH_S3_CACHE_BUCKET": cache_bucket,
    }


@contextmanager
def redis(directory: Path) -> Iterator[dict[str, str]]:
    """A private redis-server (tests/services.py's) on a Unix socket in ``directory``.

    Yields the environment that makes bench/bench_settings.py offer it as
    CACHES["coordination"]; stopped on exit.
    """
    if not (shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/sbin")):
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    from tests.services import redis_process

    with redis_process(directory) as server:
        yield {"OXIMG_BENCH_REDIS_URL": server.url}


def bytecode_environment() -> dict[str, str]:
    """This environment with bytecode caches on, as in any deployment.

    A shell with ``PYTHONDONTWRITEBYTECODE`` set makes an editable checkout
    compile every module it imports at each start: about 35 modules on a
    first miss, a fifth of a new process's instructions before its first
    answer. An installed wheel, like the peers' packages, was compiled by pip.
    """
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def compile_sources(package_root: Path | None = None) -> None:
    """Byte-compile the package and the benchmark once, so no timed process compiles them."""
    command = [sys.executable, "-m", "compileall", "-q", "django_oximg", "bench"]
    subprocess.run(command, check=True, cwd=package_root or ROOT, env=bytecode_environment())


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
