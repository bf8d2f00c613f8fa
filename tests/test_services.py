"""The services the tests start themselves (tests/services.py): a Redis that can be
frozen, a disk that fills up, and nginx in front of an upstream.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis

from tests.servers import fetch
from tests.services import (
    nginx_server,
    process_state,
    redis_process,
    small_disk,
)

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is the services the tests start (redis-server, a tmpfs, nginx), not "
        "Django: no Django is involved"
    )
)

#: How long a paused Redis is watched for an answer that must not come.
QUIET = 0.2

# -- Redis --------------------------------------------------------------------------------


def test_a_paused_redis_answers_nothing_until_resumed(tmp_path: Path) -> None:
    with redis_process(tmp_path) as server:
        client = redis.Redis.from_url(server.url, socket_timeout=QUIET)
        try:
            assert client.ping()
            server.pause()
            assert process_state(server.pid) == "T"
            with pytest.raises(redis.exceptions.TimeoutError):
                client.ping()
            server.resume()
            assert process_state(server.pid) != "T"
            assert client.ping()
        finally:
            client.close()


def test_a_redis_left_paused_is_continued_and_stopped_gracefully(tmp_path: Path) -> None:
    with redis_process(tmp_path) as server:
        server.pause()
    assert server.process.returncode == 0  # SIGTERM handled, not SIGKILLed after a timeout


# -- a disk that fills up -----------------------------------------------------------------


def test_a_filled_disk_refuses_writes_with_enospc_until_freed() -> None:
    with small_disk() as disk:
        assert os.path.ismount(disk.path)
        disk.fill()
        with pytest.raises(OSError) as caught:
            (disk.path / "result.jpg").write_bytes(b"x")
        assert caught.value.errno == errno.ENOSPC
        disk.free()
        (disk.path / "result.jpg").write_bytes(b"x" * 4096)
        assert (disk.path / "result.jpg").read_bytes() == b"x" * 4096
    assert not disk.path.exists()


def test_a_disk_with_a_file_still_open_is_unmounted_lazily() -> None:
    with contextlib.ExitStack() as stack:
        with small_disk() as disk:
            held = stack.enter_context((disk.path / "held").open("wb"))
        assert not disk.path.exists()
        held.write(b"still open")  # the file lives on, detached from the tree
        held.flush()


# -- nginx --------------------------------------------------------------------------------


class Upstream(BaseHTTPRequestHandler):
    """Answers "answer N" for its Nth request, cacheable for a minute."""

    served = 0
    lock = threading.Lock()

    def do_GET(self) -> None:
        with Upstream.lock:
            Upstream.served += 1
            body = f"answer {Upstream.served} for {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "public, max-age=60")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1 in a thread: its ``host:port``."""
    Upstream.served = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


CACHING_PROXY = """
upstream app {
    server UPSTREAM;
}
proxy_cache_path {dir}/cache levels=1:2 keys_zone=answers:1m max_size=8m inactive=1m;
map $upstream_cache_status $cache_status {
    ""      NONE;
    default $upstream_cache_status;
}
server {
    listen {listen};
    location / {
        proxy_pass http://app;
        proxy_cache answers;
        add_header X-Cache-Status $cache_status always;
    }
}
"""


def test_nginx_proxies_to_an_upstream_and_caches_its_answers(upstream: str, tmp_path: Path) -> None:
    directory = tmp_path / "nginx"
    with nginx_server(CACHING_PROXY.replace("UPSTREAM", upstream), directory) as base:
        pid = int((directory / "nginx.pid").read_text())
        first = fetch(f"{base}/a")
        second = fetch(f"{base}/a")
        # Read once a worker has answered: nginx writes its pid file before it
        # forks the workers, so right after the start there may be none yet.
        workers = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert (first.status, first.body) == (200, b"answer 1 for /a")
    assert first.headers["x-cache-status"] == "MISS"
    assert (second.status, second.body) == (200, b"answer 1 for /a")
    assert second.headers["x-cache-status"] == "HIT"
    assert Upstream.served == 1
    assert "GET /a" in (directory / "access.log").read_text()
    assert workers
    assert not [p for p in [pid, *workers] if Path(f"/proc/{p}").exists()]


def test_an_nginx_that_cannot_start_says_why(tmp_path: Path) -> None:
    body = "server { listen {listen}; no_such_directive on; }"
    with pytest.raises(RuntimeError, match="no_such_directive"), nginx_server(body, tmp_path):
        pass
    with pytest.raises(ValueError), nginx_server("server { listen 127.0.0.1:8080; }"):
        pass
