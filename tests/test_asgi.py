"""The async view under a real ASGI server: uvicorn on 127.0.0.1 serving tests/asgi_app.py.

``django_oximg.urls_async`` is mounted at ``/img/``; URLs are signed by the
independent imgproxy-style signer of tests/servers.py. The server's socket
is bound here and handed over with ``--fd``, so no other process can take the
port in between. Renders are held in flight with gate files (see
``tests.asgi_app.GatedStorage``), so the tests assert orderings, never times.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pyvips

from tests import images
from tests.servers import (
    HTTP_TIMEOUT,
    REPO_ROOT,
    STARTUP_TIMEOUT,
    STOP_TIMEOUT,
    Fetched,
    fetch,
    imgproxy_signature,
    imgproxy_url,
    request,
)

pytest.importorskip("uvicorn")

THUMBNAIL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"

#: Bound on waiting for the server to show a request in flight: far above
#: any real delay, and only reached when the code is broken.
IN_FLIGHT_TIMEOUT = 30.0


@dataclass
class AsgiServer:
    base: str
    media: Path
    gates: Path
    process: subprocess.Popen[bytes]
    log: Path

    def gate(self, name: str, state: str) -> Path:
        """The marker for gated source ``name``: "waiting", "open" or "done"."""
        return self.gates / f"{name}.{state}"


def uvicorn_command(fd: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--fd",
        str(fd),
        "--lifespan",
        "off",  # Django has no lifespan handler
        "--no-access-log",
        "tests.asgi_app:application",
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    """uvicorn serving tests.asgi_app from a media root made here; stopped in a finally."""
    root = tmp_path_factory.mktemp("asgi")
    media, gates = root / "media", root / "gates"
    (media / "photos").mkdir(parents=True)
    (media / "gated").mkdir()
    gates.mkdir()
    (media / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
    (media / "photos" / "a~b.jpg").write_bytes(images.jpeg(320, 240))
    for name in ("one.jpg", "two.jpg", "three.jpg"):
        (media / "gated" / name).write_bytes(images.jpeg(640, 480))
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.asgi_settings",
        OXIMG_E2E_MEDIA_ROOT=str(media),
        OXIMG_E2E_OVERRIDES="{}",
        OXIMG_ASGI_GATES=str(gates),
        PYTHONPATH=str(REPO_ROOT),
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    log_path = root / "uvicorn.log"
    with log_path.open("wb") as log, listener:
        process = subprocess.Popen(
            uvicorn_command(listener.fileno()),
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
        )
    running = AsgiServer(f"http://127.0.0.1:{port}", media, gates, process, log_path)
    try:
        wait_until_answering(running)
        yield running
    finally:
        stop(running)


def wait_until_answering(server: AsgiServer) -> None:
    """Poll /ping until it answers, for at most STARTUP_TIMEOUT seconds."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if server.process.poll() is not None:
            raise RuntimeError("uvicorn exited:\n" + server.log.read_text(errors="replace"))
        try:
            if request(server.base + "/ping", timeout=5.0).status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not answer:\n" + server.log.read_text())
        time.sleep(0.1)


def stop(server: AsgiServer) -> None:
    """SIGTERM (graceful), then SIGKILL after STOP_TIMEOUT; print the log if unclean."""
    server.process.terminate()
    try:
        server.process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    if server.process.returncode not in (0, -15):
        print(server.log.read_text(errors="replace"))


def wait_for(path: Path) -> None:
    """Until ``path`` exists (the server reached that point), bounded."""
    give_up = time.monotonic() + IN_FLIGHT_TIMEOUT
    while not path.exists():
        assert time.monotonic() < give_up, f"the server never reached {path.name}"
        time.sleep(0.01)


def decode(body: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(body, "")


class InFlight:
    """A request sent from a thread of its own; ``done`` lists names as they finish."""

    def __init__(self, url: str, name: str, done: list[str], lock: threading.Lock) -> None:
        self.answer: Fetched | None = None
        self.thread = threading.Thread(target=self._fetch, args=(url, name, done, lock))
        self.thread.start()

    def _fetch(self, url: str, name: str, done: list[str], lock: threading.Lock) -> None:
        self.answer = fetch(url)
        with lock:
            done.append(name)

    def join(self) -> Fetched:
        self.thread.join(HTTP_TIMEOUT + 10)
        assert self.answer is not None, "the request did not finish"
        return self.answer


# -- thumbnails over ASGI ---------------------------------------------------------------


def test_a_thumbnail_is_served_then_cached_and_revalidated(server: AsgiServer) -> None:
    url = imgproxy_url(server.base, THUMBNAIL)
    first = fetch(url)
    assert first.status == 200
    assert first.headers["content-type"] == "image/jpeg"
    assert first.headers["content-length"] == str(len(first.body))
    assert (decode(first.body).width, decode(first.body).height) == (200, 150)

    hit = fetch(url)  # from the result cache on disk, read in a worker thread
    assert hit.status == 200
    assert hit.body == first.body
    assert hit.headers["etag"] == first.headers["etag"]
    assert hit.headers["cache-control"] == "public, max-age=31536000, immutable"

    not_modified = fetch(url, **{"If-None-Match": first.headers["etag"]})
    assert not_modified.status == 304
    assert not_modified.body == b""


def test_a_bad_signature_is_403(server: AsgiServer) -> None:
    url = f"{server.base}/img/{'A' * 43}{THUMBNAIL}"
    answer = fetch(url)
    assert answer.status == 403
    assert answer.headers["cache-control"] == "no-store"


def test_the_signature_is_checked_on_the_raw_path(server: AsgiServer) -> None:
    """``%7E`` decodes to "~", which re-encoding would leave bare: only the raw path verifies."""
    path = "/rs:fit:100:100/plain/photos/a%7Eb.jpg@png"
    answer = fetch(imgproxy_url(server.base, path))
    assert answer.status == 200
    assert decode(answer.body).width == 100


def test_info_is_answered_over_asgi(server: AsgiServer) -> None:
    path = "/plain/photos/landscape.jpg"
    answer = fetch(f"{server.base}/img/info/{imgproxy_signature(path)}{path}")
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    found = json.loads(answer.body)
    assert (found["width"], found["height"]) == (640, 480)


# -- the event loop ---------------------------------------------------------------------


def test_the_loop_answers_while_a_render_is_in_flight(server: AsgiServer) -> None:
    """A cheap async view answers before a held render finishes: the loop is not blocked.

    Were the thumbnailer called on the loop, ``/ping`` could only be answered
    after the render, which waits for its gate: the order would be reversed.
    """
    done: list[str] = []
    lock = threading.Lock()
    slow = InFlight(
        imgproxy_url(server.base, "/rs:fit:100:100/plain/gated/one.jpg@jpeg"), "render", done, lock
    )
    try:
        wait_for(server.gate("one.jpg", "waiting"))
        pong = fetch(server.base + "/ping")
        with lock:
            done.append("pong")
        assert not server.gate("one.jpg", "done").exists()
    finally:
        server.gate("one.jpg", "open").touch()
    rendered = slow.join()
    assert (pong.status, pong.body) == (200, b"pong")
    assert rendered.status == 200
    assert done == ["pong", "render"]


def test_two_renders_are_in_flight_at_once(server: AsgiServer) -> None:
    """Each request gets a pooled thread of its own: renders are not serialised.

    The second render reaches the source while the first is still held there;
    serialised (one shared thread, or a lock), it could only start after the
    first finished.
    """
    done: list[str] = []
    lock = threading.Lock()
    urls = {
        name: imgproxy_url(server.base, f"/rs:fit:90:90/plain/gated/{name}@jpeg")
        for name in ("two.jpg", "three.jpg")
    }
    first = InFlight(urls["two.jpg"], "two", done, lock)
    try:
        wait_for(server.gate("two.jpg", "waiting"))
        second = InFlight(urls["three.jpg"], "three", done, lock)
        try:
            wait_for(server.gate("three.jpg", "waiting"))
            assert not server.gate("two.jpg", "done").exists()
        finally:
            server.gate("three.jpg", "open").touch()
        assert second.join().status == 200
    finally:
        server.gate("two.jpg", "open").touch()
    assert first.join().status == 200
    assert done == ["three", "two"]
