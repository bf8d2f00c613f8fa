"""Bounds for every format and every source, and the hardening, through a real gunicorn worker.

Each test drives gunicorn (gthread, one worker process) on 127.0.0.1 with
signed URLs, as an attacker holding them would, and checks that the same
worker process serves on afterwards (its pid is unchanged):

* the render deadline holds for renders whose encoder libvips cannot stop
  (AVIF, GIF: run in a child process that is killed), an encoder that
  would outlast it is refused up front, and ``/health`` reports a process
  whose every worker hangs;
* remote sources are admitted before they are read, read in a bounded
  number of slots, their bytes counted in the memory budget, a storage
  that hangs is cut off, and ``/health`` and cache hits answer while
  sources are slow;
* the HTTP allowlist refuses ``..;`` in every spelling; log lines escape
  what the request carries; over-long names are quiet 404s; ``/metrics``
  is off by default and answers only its bearer token when on.

Timings are never asserted: the measured figures are in docs/security.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import pyvips

from tests import images
from tests.servers import Fetched, Server, fetch, gunicorn, imgproxy_url, request
from tests.test_overload import media_with
from tests.upstream import ImageServer, image_server

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is the bounds of a gunicorn worker process (deadlines, child renders, "
        "read slots, memory), not Django: the app's Django side runs on both Djangos in "
        "process (test_wsgi.py, test_views.py)"
    )
)

#: Bound on waiting for a state the test expects (never reached when the code works).
PATIENCE = 60.0

#: A cheap render of a small local source: the server still answers.
QUICK = "/rs:fit:60:60/plain/photos/small.jpg@jpeg"

AVIF = {"Accept": "image/avif,image/webp,*/*"}


def wait_for(condition: Callable[[], bool]) -> None:
    give_up = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < give_up, "the expected state was never reached"
        time.sleep(0.05)


def children_of(pid: int) -> set[int]:
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def cached_files(media: Path) -> list[Path]:
    root = media / "oximg"
    return [path for path in root.rglob("*") if path.is_file()] if root.exists() else []


def assert_refusal(answer: Fetched, status: int) -> None:
    assert answer.status == status, answer.body
    assert answer.headers["cache-control"] == "no-store"


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounds-sources")
    (root / "big.jpg").write_bytes(images.jpeg(2048, 2048))
    (root / "small.jpg").write_bytes(images.jpeg(120, 90))
    return root


# -- the render deadline -------------------------------------------------------------


@pytest.fixture(scope="module")
def hurried(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One render worker, a 0.3 s deadline, a one-second queue timeout."""
    media = media_with(photos, tmp_path_factory, "deadline")
    os.mkfifo(media / "photos" / "hang.jpg")  # a read of it blocks: a hung local disk
    limits = {"WORKERS": 1, "QUEUE_SIZE": 2, "QUEUE_TIMEOUT": 1.0, "RENDER_TIMEOUT": 0.3}
    with gunicorn(media, workers=1, threads=8, oximg=limits) as server:
        yield server


def test_a_render_in_a_child_process_is_killed_at_the_deadline(hurried: Server) -> None:
    """A negotiated AVIF of 2.25 MP: its encoder is predicted to take a little
    over 0.25 s (so the render runs in a child) and under the 0.3 s deadline (so
    it is not refused). Starting the child, the blur and the sharpen then take
    it well past the deadline (about a second of CPU on the reference
    machine, against 0.3 s); the kill frees the worker, leaves no child
    process and caches nothing. (GIF: tests/test_isolated.py.)"""
    [worker] = hurried.worker_pids()
    path = "/rs:fit:1500:1500/bl:100/sh:100/plain/photos/big.jpg"
    answer = request(imgproxy_url(hurried.base, path), headers=AVIF)
    assert_refusal(answer, 503)
    assert answer.body == b"Processing timed out\n"
    assert children_of(worker) == set()  # killed and reaped
    assert fetch(imgproxy_url(hurried.base, QUICK)).status == 200  # the worker is free
    assert all(path.suffix != ".avif" for path in cached_files(hurried.media))
    assert hurried.worker_pids() == {worker}


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/rs:fit:8192:8192/el:1/plain/photos/big.jpg", AVIF),
        ("/rs:fit:2048:2048/plain/photos/big.jpg@gif", {}),
    ],
    ids=["avif", "gif"],
)
def test_an_encode_that_would_outlast_the_deadline_is_refused_at_once(
    hurried: Server, path: str, headers: dict[str, str]
) -> None:
    pids = hurried.worker_pids()
    answer = request(imgproxy_url(hurried.base, path), headers=headers)
    assert_refusal(answer, 422)
    assert answer.body == b"Result image is too large\n"
    assert hurried.worker_pids() == pids


def test_health_reports_a_process_whose_every_worker_hangs(hurried: Server) -> None:
    """A local read that never returns (here: a FIFO nobody writes) holds the one worker."""
    pids = hurried.worker_pids()
    assert fetch(hurried.base + "/img/health").status == 200
    hung: list[Fetched] = []
    client = threading.Thread(
        target=lambda: hung.append(
            fetch(imgproxy_url(hurried.base, "/rs:fit:50:50/plain/photos/hang.jpg@jpeg"))
        ),
        daemon=True,
    )
    client.start()
    wait_for(lambda: fetch(hurried.base + "/img/health").status == 503)
    health = fetch(hurried.base + "/img/health")
    assert health.body == b"unhealthy: all 1 render workers busy for more than 2.3 s\n"
    with open(os.open(hurried.media / "photos" / "hang.jpg", os.O_WRONLY), "wb"):
        pass  # a writer that closes at once: the read ends with nothing
    client.join(PATIENCE)
    assert [answer.status for answer in hung] == [422]
    assert fetch(hurried.base + "/img/health").status == 200
    assert hurried.worker_pids() == pids


# -- remote sources ------------------------------------------------------------------

METRICS_TOKEN = "scraper-token"
BUDGET = 64 * 1024 * 1024


def remote_limits(upstream: ImageServer, **limits: object) -> dict[str, object]:
    """Two workers, a 64 MiB budget, ``upstream`` allowed; generous waits; metrics with a token."""
    return {
        "WORKERS": 2,
        "QUEUE_TIMEOUT": 30.0,
        "MEMORY_BUDGET": BUDGET,
        "HTTP_SOURCES": [upstream.prefix],
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
        "HTTP_TIMEOUT": 30.0,
        "SOURCE_TIMEOUT": 40.0,
        "METRICS": True,
        "METRICS_TOKEN": METRICS_TOKEN,
        **limits,
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[ImageServer]:
    with image_server(images.jpeg(1600, 1200), hold="body") as server:
        yield server


@pytest.fixture(scope="module")
def remote(
    photos: Path, upstream: ImageServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Two workers, four queue places, two read slots, a small budget; metrics with a token."""
    media = media_with(photos, tmp_path_factory, "remote")
    limits = remote_limits(upstream, QUEUE_SIZE=4, SOURCE_READS=2)
    with gunicorn(media, workers=1, threads=64, oximg=limits) as server:
        yield server


def remote_url(server: Server, upstream: ImageServer, name: str, width: int = 100) -> str:
    return imgproxy_url(server.base, f"/rs:fit:{width}:{width}/plain/{upstream.url(name)}@jpeg")


def fire(urls: list[str]) -> tuple[list[threading.Thread], list[Fetched]]:
    answers: list[Fetched] = []

    def one(url: str) -> None:
        answers.append(request(url, timeout=PATIENCE))

    threads = [threading.Thread(target=one, args=(url,), daemon=True) for url in urls]
    for thread in threads:
        thread.start()
    return threads, answers


def test_slow_sources_are_admitted_first_read_in_slots_and_leave_health_and_hits_alone(
    remote: Server, upstream: ImageServer
) -> None:
    """40 requests for 40 slow sources: 2 + 4 are admitted, 2 of them read, the rest get
    429 at once; meanwhile ``/health`` and a cached result answer."""
    pids = remote.worker_pids()
    hit = remote_url(remote, upstream, "/photos/cached.jpg")
    assert fetch(hit).status == 200  # rendered and cached while the source is fast
    upstream.open.clear()
    before = upstream.requests
    threads, answers = fire([remote_url(remote, upstream, f"/photos/{n}.jpg") for n in range(40)])
    try:
        wait_for(lambda: sum(answer.status == 429 for answer in answers) == 34)
        wait_for(lambda: upstream.in_flight == 2)  # two read slots: four wait for one
        assert fetch(remote.base + "/img/health").status == 200
        assert fetch(hit).status == 200  # the cached result, without a render
    finally:
        upstream.open.set()
    for thread in threads:
        thread.join(PATIENCE)
    statuses = sorted(answer.status for answer in answers)
    assert statuses == [200] * 6 + [429] * 34
    assert upstream.requests - before == 6
    assert upstream.most_in_flight <= 2
    assert remote.worker_pids() == pids


def scraped(server: Server) -> dict[str, float]:
    answer = request(
        server.base + "/img/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    assert answer.status == 200
    found = {}
    for line in answer.body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


@pytest.fixture(scope="module")
def large_upstream() -> Iterator[ImageServer]:
    """A source of about 15 MB (noise at q100 compresses badly), slow to send its body."""
    noise = pyvips.Image.gaussnoise(2500, 2500, sigma=60, mean=128)
    body = bytes(noise.bandjoin([noise, noise]).cast("uchar").jpegsave_buffer(Q=100))
    with image_server(body, hold="body") as server:
        yield server


@pytest.fixture(scope="module")
def budgeted(
    photos: Path, large_upstream: ImageServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Six read slots, but a 64 MiB budget: downloads may hold half of it."""
    media = media_with(photos, tmp_path_factory, "budgeted")
    limits = remote_limits(large_upstream, QUEUE_SIZE=8, SOURCE_READS=6)
    with gunicorn(media, workers=1, threads=16, oximg=limits) as server:
        yield server


def test_downloads_reserve_their_bytes_before_they_arrive(
    budgeted: Server, large_upstream: ImageServer
) -> None:
    """Six downloads whose headers say 15 MB each: downloads may hold half the 64 MiB
    budget, so two reserve their bodies and four wait for room, holding nothing."""
    pids = budgeted.worker_pids()
    size = len(large_upstream.body)
    held = min(6, BUDGET // 2 // size) * size
    large_upstream.open.clear()
    urls = [remote_url(budgeted, large_upstream, f"/photos/{n}.jpg") for n in range(6)]
    threads, answers = fire(urls)
    try:
        wait_for(lambda: large_upstream.in_flight == 6)  # every body is on its way
        wait_for(lambda: scraped(budgeted)["oximg_memory_reserved_bytes"] == held)
    finally:
        large_upstream.open.set()
    for thread in threads:
        thread.join(PATIENCE)
    assert [answer.status for answer in answers] == [200] * 6
    assert scraped(budgeted)["oximg_memory_peak_reserved_bytes"] <= BUDGET
    assert budgeted.worker_pids() == pids


@pytest.fixture(scope="module")
def hanging_storage(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A generic Django storage whose every open takes 6 s; reads may take 1 s, one at a time."""
    media = media_with(photos, tmp_path_factory, "hanging")
    log = media.parent / "reads.log"
    env = {"OXIMG_E2E_READ_LOG": str(log), "OXIMG_E2E_READ_DELAY": "6"}
    limits = {"SOURCE_TIMEOUT": 1.0, "SOURCE_READS": 1}
    with gunicorn(media, workers=1, threads=8, oximg=limits, env=env) as server:
        yield server


def test_a_storage_read_that_hangs_is_a_504_and_health_tells_until_it_returns(
    hanging_storage: Server,
) -> None:
    pids = hanging_storage.worker_pids()
    answer = fetch(imgproxy_url(hanging_storage.base, QUICK))
    assert_refusal(answer, 504)
    health = fetch(hanging_storage.base + "/img/health")
    assert health.status == 503
    assert health.body.startswith(b"unhealthy: source failing for ")
    assert b"took longer than 1 s" in health.body
    assert health.body.endswith(b"all 1 source read slots held by reads past their 1 s timeout\n")
    # The read that hung returns in the end: the storage answers again.
    wait_for(lambda: fetch(hanging_storage.base + "/img/health").status == 200)
    assert cached_files(hanging_storage.media) == []
    assert hanging_storage.worker_pids() == pids


# -- the allowlist, log lines, names, metrics -----------------------------------------


@pytest.mark.parametrize(
    "path", ["/photos/..;/secret.jpg", "/photos/%2e%2e;/secret.jpg", "/photos/%2E%2E%3B/secret.jpg"]
)
def test_dot_segments_with_parameters_never_leave_the_allowed_prefix(
    remote: Server, upstream: ImageServer, path: str
) -> None:
    pids = remote.worker_pids()
    source = upstream.url("") + path
    signed = f"/rs:fit:50:50/plain/{quote(source, safe=':/%;')}@jpeg"
    assert_refusal(fetch(imgproxy_url(remote.base, signed)), 404)
    assert upstream.others == []
    assert remote.worker_pids() == pids


@pytest.fixture(scope="module")
def logged(
    photos: Path, upstream: ImageServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Default settings, but django_oximg's log at INFO in gunicorn's log, and an HTTP source."""
    media = media_with(photos, tmp_path_factory, "logged")
    limits = {"HTTP_SOURCES": [upstream.prefix], "HTTP_ALLOW_PRIVATE_NETWORKS": True}
    env = {"OXIMG_E2E_LOG_LEVEL": "INFO"}
    with gunicorn(media, workers=1, threads=4, oximg=limits, env=env) as server:
        yield server


@pytest.mark.parametrize(
    "source",
    [
        "photos/x.jpg\r\nERROR forged-local\x1b[2J.jpg",
        "{upstream}/photos/x\r\nERROR forged-remote.jpg",
    ],
    ids=["local-name", "http-source"],
)
def test_a_url_cannot_write_its_own_log_line(
    logged: Server, upstream: ImageServer, source: str
) -> None:
    """Every line that quotes the forged text is the server's own (it starts with a level)."""
    pids = logged.worker_pids()
    source = source.format(upstream=upstream.url(""))
    signed = f"/rs:fit:50:50/plain/{quote(source, safe=':/')}@jpeg"
    assert_refusal(fetch(imgproxy_url(logged.base, signed)), 404)
    wait_for(lambda: "forged" in logged.log.read_text(errors="replace"))
    forged = [line for line in logged.log.read_text().splitlines() if "forged" in line]
    assert forged and all(line.startswith(("INFO ", "WARNING ")) for line in forged)
    assert all("\x1b" not in line for line in forged)
    assert logged.worker_pids() == pids


def test_an_over_long_name_is_a_quiet_404(logged: Server) -> None:
    pids = logged.worker_pids()
    name = "photos/" + "a" * 300 + ".jpg"
    assert_refusal(fetch(imgproxy_url(logged.base, f"/rs:fit:50:50/plain/{name}@jpeg")), 404)
    wait_for(lambda: "a" * 50 in logged.log.read_text(errors="replace"))
    lines = [line for line in logged.log.read_text().splitlines() if "a" * 50 in line]
    assert lines and all(line.startswith("INFO SourceNotFound") for line in lines)
    assert logged.worker_pids() == pids


def test_metrics_are_off_by_default(logged: Server) -> None:
    pids = logged.worker_pids()
    assert_refusal(fetch(logged.base + "/img/metrics"), 404)
    assert fetch(logged.base + "/img/health").status == 200
    assert logged.worker_pids() == pids


def test_metrics_answer_only_their_bearer_token(remote: Server) -> None:
    pids = remote.worker_pids()
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = request(remote.base + "/img/metrics", headers=headers)
        assert_refusal(answer, 401)
        assert answer.headers["www-authenticate"] == 'Bearer realm="metrics"'
    assert scraped(remote)["oximg_workers"] == 2
    assert remote.worker_pids() == pids
