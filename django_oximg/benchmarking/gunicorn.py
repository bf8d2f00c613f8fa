"""A server started on 127.0.0.1 for a benchmark, waited for, and always stopped.

``oximg_bench --gunicorn`` and the repository's ``bench/servers.py`` (which
starts gunicorn and thumbor) start their servers with these, so both give
gunicorn the same command line and stop it the same way. Django-free: the
bench scripts import it before any settings exist.

A server runs in a process group of its own (``start_new_session``), so a
stop reaches gunicorn's workers and thumbor's forked processes too.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.error import HTTPError, URLError

#: Seconds a graceful stop (SIGTERM) may take before the group is killed.
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def without_control_socket() -> list[str]:
    """gunicorn 25+ opens a control socket at a fixed path in $HOME; a benchmark needs none."""
    from gunicorn.config import Config

    return ["--no-control-socket"] if "control_socket_disable" in Config().settings else []


def gunicorn_command(
    app: str, port: int, threads: int, workers: int = 1, worker_class: str = "gthread"
) -> list[str]:
    """gunicorn's command line; a ``sync`` worker gets one thread (more would make it gthread).

    A long keep-alive, so that a benchmark's connections are not closed
    between its rounds, and a backlog deep enough for its largest
    concurrency.
    """
    if not importlib.util.find_spec("gunicorn"):
        raise RuntimeError("gunicorn is not installed: pip install 'django-oximg[server]'")
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


def status_of(port: int, path: str, timeout: float = 30.0) -> int:
    """The status ``path`` answers on 127.0.0.1:``port``, its body read and dropped."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            answer.read()
            return int(answer.status)
    except HTTPError as error:
        with error:
            return int(error.code)


def wait_for_answer(
    process: subprocess.Popen[bytes],
    port: int,
    path: str,
    *,
    timeout: float,
    ok_only: bool,
    log: Path | None = None,
) -> float:
    """Poll ``path`` until the server answers; the seconds it took.

    ``ok_only``: only a 200 will do (another status is an error), as when
    the first answer is the thumbnail whose cold start is measured.
    Otherwise any status shows the server is up. Raises RuntimeError with
    the server's log if it exits or stays silent for ``timeout`` seconds.
    """
    start = time.perf_counter()
    deadline = start + timeout

    def logged() -> str:
        return log.read_text(errors="replace") if log is not None else ""

    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited at start-up:\n{logged()}")
        try:
            status = status_of(port, path)
        except (URLError, ConnectionError, TimeoutError):
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"the server did not answer in {timeout} s:\n{logged()}"
                ) from None
            time.sleep(0.05)
            continue
        if ok_only and status != 200:
            raise RuntimeError(f"{path} answered {status}:\n{logged()}")
        return time.perf_counter() - start


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL after :data:`STOP_TIMEOUT`."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
