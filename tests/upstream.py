"""An HTTP image source on 127.0.0.1 that can be slow on purpose, for gunicorn tests and benchmarks.

Every path under ``/photos/`` answers the same image; any other path is a
404 that is counted (so a test can show a refused URL never arrived).
While :attr:`ImageServer.open` is clear, answers wait for it: before the
headers (a source that is slow to answer) or, with ``hold="body"``, after
them (a source that is slow to send its body, whose ``Content-Length`` the
client already knows). The server counts requests in flight and the most
ever at once.
"""

from __future__ import annotations

import contextlib
import http.server
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Bound on how long an answer is held: a test that forgets to open the gate
#: fails rather than hangs.
HOLD_LIMIT = 120.0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ImageServer

    def do_GET(self) -> None:
        if not self.path.startswith("/photos/"):
            self.server.count_other(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with self.server.answering():
            if self.server.hold == "headers":
                self.server.open.wait(HOLD_LIMIT)
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(self.server.body)))
            self.end_headers()
            self.wfile.flush()
            if self.server.hold == "body":
                self.server.open.wait(HOLD_LIMIT)
            with contextlib.suppress(OSError):  # the client gave up: nothing to tell it
                self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


class ImageServer(http.server.ThreadingHTTPServer):
    """Serves ``body`` under ``/photos/``; answers wait while :attr:`open` is clear."""

    daemon_threads = True

    def __init__(self, body: bytes, hold: str = "headers") -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.body = body
        #: "headers" or "body": where a held answer waits.
        self.hold = hold
        self.open = threading.Event()
        self.open.set()
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.others: list[str] = []
        self._lock = threading.Lock()

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse lookup of the address (no DNS in tests)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    @property
    def prefix(self) -> str:
        """The URL prefix to allow in ``HTTP_SOURCES``."""
        return f"http://127.0.0.1:{self.server_address[1]}/photos/"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    @contextmanager
    def answering(self) -> Iterator[None]:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def count_other(self, path: str) -> None:
        with self._lock:
            self.others.append(path)


@contextmanager
def image_server(body: bytes, hold: str = "headers") -> Iterator[ImageServer]:
    """An :class:`ImageServer` serving in a thread, shut down on exit (gate opened first)."""
    server = ImageServer(body, hold)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.open.set()
        server.shutdown()
        thread.join(HOLD_LIMIT)
        server.server_close()
