"""Limits end to end: one real gunicorn worker on 127.0.0.1, whose pid must not change.

Each test here pins a promise that the core tests prove in-process, through
the served path as a deployment runs it: a render killed at its deadline, a
local source read only once its job may start, the HTTP allowlist checked at
every redirect, and the HTTP body limit.
"""

from __future__ import annotations

import errno
import http.server
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import images
from tests.servers import Fetched, Server, fetch, gunicorn, imgproxy_url, request

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is a gunicorn worker process that must survive its limits, not Django: "
        "the app's Django side runs on both Djangos in process (test_wsgi.py, test_views.py)"
    )
)

#: Generous bound on waiting for a condition; never reached when the code works.
WAIT = 60.0

PHOTO = images.jpeg(640, 480)


def pid_of(answer: Fetched) -> int:
    return int(answer.headers["x-worker-pid"])


def wait_for(condition: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < give_up, what
        time.sleep(0.02)


def metric(server: Server, name: str) -> float:
    text = fetch(server.base + "/img/metrics").body.decode()
    [line] = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[1])


def cached(media: Path) -> list[Path]:
    root = media / "oximg"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


# -- a render killed at its deadline, a local source read when its turn comes ------------


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One process with one render thread and a short render deadline."""
    media = tmp_path_factory.mktemp("limits") / "media"
    media.mkdir()
    (media / "big.png").write_bytes(bytes(images.photo(3000, 2000).pngsave_buffer()))
    (media / "small.jpg").write_bytes(PHOTO)
    oximg = {"WORKERS": 1, "RENDER_TIMEOUT": 2.0, "QUEUE_TIMEOUT": 30.0, "METRICS": True}
    with gunicorn(media, workers=1, threads=8, oximg=oximg) as server:
        yield server


#: A render that runs far past the deadline (over 5 s of CPU): a large blur
#: and sharpening of a 6 MP image, as PNG.
SLOW = "/rs:fit:3000:3000/bl:100/sh:5/plain/big.png@png"


def test_a_render_past_its_deadline_is_killed_and_the_worker_serves_on(
    one_worker: Server,
) -> None:
    before = fetch(imgproxy_url(one_worker.base, "/w:60/plain/small.jpg@jpeg"))
    killed = fetch(imgproxy_url(one_worker.base, SLOW))
    assert killed.status == 503
    assert killed.headers["cache-control"] == "no-store"
    assert "retry-after" in killed.headers
    after = fetch(imgproxy_url(one_worker.base, "/w:70/plain/small.jpg@jpeg"))
    assert after.status == 200
    assert pid_of(before) == pid_of(after)
    assert one_worker.worker_pids() == {pid_of(after)}
    assert not [p for p in cached(one_worker.media) if p.suffix == ".png"]


def test_a_queued_local_source_is_not_read_before_its_job_starts(one_worker: Server) -> None:
    """The source is a FIFO: whether anyone has opened it shows whether it was read."""
    fifo = one_worker.media / f"waiting-{time.monotonic_ns()}.jpg"
    os.mkfifo(fifo)
    answers: dict[str, Fetched] = {}

    def ask(name: str, path: str) -> None:
        answers[name] = request(imgproxy_url(one_worker.base, path), timeout=WAIT)

    blocker = threading.Thread(target=ask, args=("blocker", SLOW.replace("bl:100", "bl:99")))
    blocker.start()
    wait_for(lambda: metric(one_worker, "oximg_jobs_running") == 1, "the blocker never ran")
    queued = threading.Thread(target=ask, args=("queued", f"/w:50/plain/{fifo.name}@jpeg"))
    queued.start()
    wait_for(lambda: metric(one_worker, "oximg_queue_depth") == 1, "the request never queued")
    with pytest.raises(OSError) as nobody_reads:
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    assert nobody_reads.value.errno == errno.ENXIO  # queued, and its source unread

    def reader_opened() -> bool:
        try:
            descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return False
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "wb") as writer:
            writer.write(PHOTO)
        return True

    wait_for(reader_opened, "the source was never read")
    blocker.join(WAIT)
    queued.join(WAIT)
    assert answers["blocker"].status == 503
    assert answers["queued"].status == 200


# -- HTTP sources: the allowlist at every hop, the body limit ------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Upstream

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.path == "/photos/moved.jpg":
            self.answer(302, b"", {"Location": "/secret/photo.jpg", "Content-Length": "0"})
        elif self.path in ("/photos/a.jpg", "/secret/photo.jpg"):
            self.answer(200, PHOTO, {"Content-Length": str(len(PHOTO))})
        elif self.path == "/photos/huge.jpg":  # chunked: no length to refuse it by
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = PHOTO[:4096]
            for _ in range(2 * len(PHOTO) // len(chunk)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.answer(404, b"missing", {"Content-Length": "7"})

    def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Upstream(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.paths: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    thread.join(WAIT)
    server.server_close()


@pytest.fixture(scope="module")
def http_sources(tmp_path_factory: pytest.TempPathFactory, upstream: Upstream) -> Iterator[Server]:
    media = tmp_path_factory.mktemp("http") / "media"
    media.mkdir()
    oximg = {
        "HTTP_SOURCES": [upstream.url("/photos/")],
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,  # the upstream is on loopback
        "MAX_SRC_FILE_SIZE": len(PHOTO) + 1000,
    }
    with gunicorn(media, workers=1, threads=4, oximg=oximg) as server:
        yield server


def test_an_allowed_source_is_served(http_sources: Server, upstream: Upstream) -> None:
    answer = fetch(imgproxy_url(http_sources.base, f"/w:80/plain/{upstream.url('/photos/a.jpg')}"))
    assert answer.status == 200


def test_a_redirect_out_of_the_allowed_prefix_is_not_followed(
    http_sources: Server, upstream: Upstream
) -> None:
    pid = http_sources.worker_pids()
    url = upstream.url("/photos/moved.jpg")
    answer = fetch(imgproxy_url(http_sources.base, f"/w:80/plain/{url}@jpeg"))
    assert answer.status == 404
    assert answer.headers["cache-control"] == "no-store"
    assert "/secret/photo.jpg" not in upstream.paths  # checked before the hop, not after
    assert http_sources.worker_pids() == pid


def test_a_body_over_the_limit_is_refused_as_too_large(
    http_sources: Server, upstream: Upstream
) -> None:
    """Chunked, so only the byte count can stop it; not "invalid" (a truncated body is)."""
    pid = http_sources.worker_pids()
    before = cached(http_sources.media)
    url = upstream.url("/photos/huge.jpg")
    answer = fetch(imgproxy_url(http_sources.base, f"/w:80/plain/{url}@jpeg"))
    assert answer.status == 422
    assert answer.body == b"Source image is too large\n"
    assert http_sources.worker_pids() == pid
    assert cached(http_sources.media) == before
