"""A real gunicorn serving the test project on 127.0.0.1, and a client for it.

Shared by the end-to-end tests and the load benchmarks (bench/overload.py), so
they start the server the same way. URLs are signed by an independent
imgproxy-style signer written here (plain ``hmac`` + ``base64``), so the
server is checked against the published scheme, not against itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError

from tests.constants import KEY, SALT

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Bound on waiting for gunicorn to answer at all; a cold start takes ~1-2 s.
STARTUP_TIMEOUT = 30.0

#: Per request, unless the caller says otherwise: generous, so a slow shared
#: machine fails an assertion rather than a timeout.
HTTP_TIMEOUT = 60.0

#: Bound on a graceful stop before the server is killed.
STOP_TIMEOUT = 30.0


def imgproxy_signature(path: str) -> str:
    """imgproxy's scheme: base64url, unpadded, of HMAC-SHA256(key, salt + path)."""
    digest = hmac.new(bytes.fromhex(KEY), bytes.fromhex(SALT) + path.encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def imgproxy_url(base: str, path: str) -> str:
    return f"{base}/img/{imgproxy_signature(path)}{path}"


@dataclass
class Fetched:
    status: int
    headers: dict[str, str]
    body: bytes


def fetch(url: str, method: str = "GET", **headers: str) -> Fetched:
    """One request with urllib and the default timeout; see :func:`request`."""
    return request(url, method=method, headers=headers)


def request(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    timeout: float = HTTP_TIMEOUT,
) -> Fetched:
    """One request with urllib; error statuses are answers too, not exceptions."""
    outgoing = urllib.request.Request(url, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(outgoing, timeout=timeout) as response:
            return Fetched(response.status, lower_keys(response.headers), response.read())
    except HTTPError as error:
        with error:
            return Fetched(error.code, lower_keys(error.headers), error.read())


def lower_keys(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def without_control_socket() -> list[str]:
    """Gunicorn 25+ opens a control socket at a fixed path in $HOME; not needed here."""
    from gunicorn.config import Config

    return ["--no-control-socket"] if "control_socket_disable" in Config().settings else []


@dataclass
class Server:
    base: str
    media: Path
    process: subprocess.Popen[bytes]
    log: Path

    def worker_pids(self) -> set[int]:
        """The gunicorn master's child processes: its workers (Linux ``/proc``).

        Unchanged across a test means no worker died and was replaced.
        """
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return {int(child) for child in children}


def wait_until_answering(server: Server) -> None:
    """Poll until gunicorn answers any request, for at most STARTUP_TIMEOUT seconds."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(
                "gunicorn exited at start-up:\n" + server.log.read_text(errors="replace")
            )
        try:
            request(server.base + "/ready", timeout=5.0)
            return
        except (URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def gunicorn_command(
    fd: int,
    workers: int,
    threads: int,
    worker_class: str = "gthread",
    app: str = "tests.e2e_app:application",
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--chdir",
        str(REPO_ROOT),
        "--bind",
        f"fd://{fd}",
        "--worker-class",
        worker_class,
        "--threads",
        str(threads),
        "--workers",
        str(workers),
        *without_control_socket(),
        app,
    ]


@contextmanager
def gunicorn(
    media: Path,
    *,
    workers: int = 2,
    threads: int = 4,
    oximg: Mapping[str, Any] | None = None,
    backlog: int = 256,
    env: Mapping[str, str] | None = None,
    worker_class: str = "gthread",
    log_name: str = "gunicorn.log",
    app: str = "tests.e2e_app:application",
) -> Iterator[Server]:
    """gunicorn (gthread) serving tests.e2e_app from ``media``, stopped on exit.

    ``oximg`` holds OXIMG keys that replace those of tests/settings.py (passed
    to tests/e2e_settings.py as JSON). The socket is bound here before gunicorn
    starts and handed over as ``fd://``, so no other process can take the port
    in between. The log goes to ``log_name`` beside ``media`` and is
    printed if the server did not stop cleanly. ``env`` adds environment
    variables (tests/e2e_settings.py reads a few). ``app`` is the WSGI
    application gunicorn serves (tests/e2e_app.py has two).
    """
    extra_env = dict(env or {})
    env = dict(os.environ)
    env.update(extra_env)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.e2e_settings",
        OXIMG_E2E_MEDIA_ROOT=str(media),
        OXIMG_E2E_OVERRIDES=json.dumps(dict(oximg or {})),
        PYTHONPATH=str(REPO_ROOT),
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    port = listener.getsockname()[1]
    log_path = media.parent / log_name
    with log_path.open("wb") as log, listener:
        process = subprocess.Popen(
            gunicorn_command(listener.fileno(), workers, threads, worker_class, app),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
        )
    server = Server(f"http://127.0.0.1:{port}", media, process, log_path)
    try:
        wait_until_answering(server)
        yield server
    finally:
        stop(server)


def stop(server: Server) -> None:
    """SIGTERM (graceful), then SIGKILL after STOP_TIMEOUT; print the log if unclean."""
    process = server.process
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.returncode not in (0, -15):
        print(server.log.read_text(errors="replace"))
