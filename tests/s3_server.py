"""moto's S3 in a process of its own on 127.0.0.1, with a request log and a fault switch.

The server is moto's standalone server application (``moto.server``'s
``DomainDispatcherApplication``, as ``ThreadedMotoServer`` runs it) on a
werkzeug threaded server, wrapped in a small WSGI layer (:class:`Control`).
It runs as ``python -m tests.s3_server FD`` on a listening socket the test
process bound and handed over, so the port is known before it starts and no
other process can take it in between. In a process of its own it does not
compete with the tests (or the servers under test) for their GIL, and a
test can stall it, slow it or put a proxy in front of it like any remote S3.

The layer answers under :data:`CONTROL` and passes everything else to moto:

- ``GET /_oximg/requests``: the log, a JSON list of ``[method, path]`` of
  every S3 request received (from any client or process), in arrival order,
  the path as the server saw it (``PATH_INFO``, no query string);
- ``DELETE /_oximg/requests``: empty the log;
- ``PUT /_oximg/failing-puts`` with the body ``1`` or ``0``: while on, every
  object PUT (``/bucket/key``) is answered with a 500 ``InternalError``
  (an S3 outage for writes); bucket PUTs still succeed.

Control requests are not logged. :class:`S3Server` is the test side;
:func:`s3_server_process` starts and always stops the process, and the
session fixture :func:`s3_server` wraps it (a module that imports the fixture
gets a server of its own: pytest registers a fixture per module).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.error import URLError

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Path prefix of the control endpoints: no S3 bucket name can start with "_".
CONTROL = "/_oximg/"

#: Bound on the server's start (importing moto takes a second or two) and on
#: each control request.
STARTUP_TIMEOUT = 30.0
CONTROL_TIMEOUT = 10.0

#: Bound on a stop before the server is killed.
STOP_TIMEOUT = 10.0

CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region_name": "us-east-1"}

INTERNAL_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b"<Error><Code>InternalError</Code><Message>injected by the test</Message></Error>"
)


def client_config() -> Any:
    """One attempt per request (an injected 500 fails at once); short timeouts.

    A dead endpoint then fails the test quickly instead of after retries.
    """
    from botocore.config import Config

    return Config(
        s3={"addressing_style": "path"},
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=10,
    )


# -- the server process ------------------------------------------------------------------


class Control:
    """The WSGI layer in front of moto: the request log and the failing-PUT switch."""

    def __init__(self, app: Callable[[dict[str, Any], Any], Iterable[bytes]]) -> None:
        self.app = app
        self.requests: list[tuple[str, str]] = []
        self.failing_puts = False
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        if path.startswith(CONTROL):
            return self.control(method, path[len(CONTROL) :], environ, start_response)
        with self.lock:
            self.requests.append((method, path))
            failing = self.failing_puts
        if failing and method == "PUT" and path.strip("/").count("/") >= 1:
            start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
            return [INTERNAL_ERROR]
        return self.app(environ, start_response)

    def control(
        self, method: str, name: str, environ: dict[str, Any], start_response: Any
    ) -> Iterable[bytes]:
        if name == "requests" and method == "GET":
            with self.lock:
                body = json.dumps(self.requests).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        if name == "requests" and method == "DELETE":
            with self.lock:
                self.requests.clear()
            start_response("204 No Content", [])
            return []
        if name == "failing-puts" and method == "PUT":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            value = environ["wsgi.input"].read(length).strip()
            if value in (b"0", b"1"):
                with self.lock:
                    self.failing_puts = value == b"1"
                start_response("204 No Content", [])
                return []
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no such control endpoint\n"]


def serve(fd: int) -> None:
    """Serve moto behind :class:`Control` on the listening socket ``fd`` until killed."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        """No access log line per request."""

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    app = Control(DomainDispatcherApplication(create_backend_app))
    httpd = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler, fd=fd)
    os.close(fd)  # werkzeug serves a duplicate of it
    httpd.serve_forever()


# -- the test side -----------------------------------------------------------------------


class S3Server:
    """A running server: its endpoint, its request log, its fault switch, a boto3 client."""

    def __init__(self, endpoint: str, process: subprocess.Popen[bytes]) -> None:
        self.endpoint = endpoint
        self.process = process
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def port(self) -> int:
        """The port on 127.0.0.1 (a proxy in front of the server forwards to it)."""
        return int(self.endpoint.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.process.pid

    def _control(
        self, method: str, name: str, body: bytes | None = None, timeout: float = CONTROL_TIMEOUT
    ) -> bytes:
        outgoing = urllib.request.Request(
            f"{self.endpoint}{CONTROL}{name}", data=body, method=method
        )
        with urllib.request.urlopen(outgoing, timeout=timeout) as response:
            return response.read()  # type: ignore[no-any-return]

    @property
    def requests(self) -> list[tuple[str, str]]:
        """Every S3 request the server received so far: ``(method, path)``, in order."""
        return [(method, path) for method, path in json.loads(self._control("GET", "requests"))]

    def reset_requests(self) -> None:
        """Empty the request log (for every client: the log is the server's)."""
        self._control("DELETE", "requests")

    def count(self, method: str, bucket: str) -> int:
        """Requests with ``method`` on objects of ``bucket`` (bucket operations excluded)."""
        prefix = f"/{bucket}/"
        return sum(1 for m, p in self.requests if m == method and p.startswith(prefix))

    def set_failing_puts(self, on: bool) -> None:
        """Answer object PUTs with a 500 ``InternalError`` (on) or normally (off)."""
        self._control("PUT", "failing-puts", b"1" if on else b"0")

    @contextmanager
    def failing_puts(self) -> Iterator[None]:
        """Object PUTs fail with a 500 inside the block, and succeed again after it."""
        self.set_failing_puts(True)
        try:
            yield
        finally:
            self.set_failing_puts(False)

    def client(self) -> Any:
        """The one boto3 S3 client of this server (built once: building one takes ~50 ms)."""
        with self._client_lock:
            if self._client is None:
                import boto3

                self._client = boto3.client(
                    "s3",
                    endpoint_url=self.endpoint,
                    aws_access_key_id=CREDENTIALS["access_key"],
                    aws_secret_access_key=CREDENTIALS["secret_key"],
                    region_name=CREDENTIALS["region_name"],
                    config=client_config(),
                )
            return self._client

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name and return the name."""
        name = f"oximg-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def close(self) -> None:
        """Close the boto3 client's connections (the process is stopped separately)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None


@contextmanager
def s3_server_process() -> Iterator[S3Server]:
    """Start the server on a free port of 127.0.0.1; stop it (and close the client) on exit.

    Returns once the server answers: the first control request waits in the
    listening socket's backlog until the server takes it, so there is no
    polling; it fails at once if the process dies first (the socket closes
    with it).
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with tempfile.TemporaryFile() as log, listener:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.s3_server", str(listener.fileno())],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
        )
        listener.close()  # the server's copy is the only one left
        server = S3Server(endpoint, process)
        try:
            try:
                server._control("GET", "requests", timeout=STARTUP_TIMEOUT)
            except (URLError, ConnectionError, TimeoutError) as error:
                log.seek(0)
                output = log.read().decode(errors="replace")
                raise RuntimeError(f"the S3 server did not start: {error}\n{output}") from error
            yield server
        finally:
            server.close()
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT."""
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 on 127.0.0.1 (a free port) in its own process, for the whole session."""
    with s3_server_process() as server:
        yield server


if __name__ == "__main__":
    serve(int(sys.argv[1]))
