"""Overload and render deadlines over real HTTP: gunicorn (gthread, 1 process) on 127.0.0.1.

The executor is made tiny (one render at a time, two waiting) and every render
slow (a 4000x3000 source sharpened at 3000x2250 takes well over half a second
here), so a burst of distinct URLs must overflow it: the excess has to be
refused with 429 at once, the admitted ones served, nothing else returned, and
the same worker process has to go on serving afterwards. A second server with
a tiny render deadline checks that a killed render answers 503 and frees its
place in the executor.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import pyvips

from tests import images
from tests.servers import Fetched, Server, fetch, gunicorn, imgproxy_url, request

pytestmark = pytest.mark.one_django(
    reason=(
        "the subject is one gunicorn worker process under a burst, not Django: the app's "
        "Django side runs on both Djangos in process (test_wsgi.py, test_views.py)"
    )
)

#: Requests fired at once; gunicorn has more threads than this, so all of them
#: reach the executor together and the 429 decisions are the executor's own.
BURST = 24

#: Per request in the burst: bounded, but far above the worst case of three
#: queued-or-running renders on a loaded machine.
BURST_TIMEOUT = 45.0

#: Every status an overloaded server may give a valid request.
OVERLOAD_STATUSES = {200, 429, 503}

#: One render: a big source kept big and sharpened (sharpen is a large
#: convolution on every output pixel; a blur here would be much cheaper).
SLOW_RENDER = "rs:fit:{width}:3000/sh:3"

#: A cheap render of a small source, to check the server still answers.
QUICK_RENDER = "/rs:fit:60:60/plain/photos/small.jpg@jpeg"


def draw_sources(media: Path) -> None:
    (media / "photos").mkdir(parents=True)
    (media / "photos" / "big.jpg").write_bytes(images.jpeg(4000, 3000))
    (media / "photos" / "small.jpg").write_bytes(images.jpeg(120, 90))


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory of drawn sources, copied into each server's media root."""
    root = tmp_path_factory.mktemp("overload-sources")
    draw_sources(root)
    return root / "photos"


def media_with(sources: Path, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    media = tmp_path_factory.mktemp(name) / "media"
    (media / "photos").mkdir(parents=True)
    for source in sources.iterdir():
        (media / "photos" / source.name).write_bytes(source.read_bytes())
    return media


@pytest.fixture(scope="module")
def crowded(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One render at a time, two more may wait up to 2 s; 32 request threads."""
    media = media_with(sources, tmp_path_factory, "overload")
    limits = {"WORKERS": 1, "QUEUE_SIZE": 2, "QUEUE_TIMEOUT": 2.0, "LIBVIPS_CONCURRENCY": 1}
    with gunicorn(media, workers=1, threads=32, oximg=limits) as server:
        yield server


@pytest.fixture(scope="module")
def hurried(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Renders are killed after 50 ms; one render at a time, one waiting.

    (QUEUE_SIZE 0 means "choose for me", so 1 is the smallest queue.) A
    render whose place was not given back would leave every later job
    waiting for a worker that never comes: 429 or a 503 at the queue deadline,
    never the 200 the tests expect of the quick render.
    """
    media = media_with(sources, tmp_path_factory, "deadline")
    limits = {"WORKERS": 1, "QUEUE_SIZE": 1, "QUEUE_TIMEOUT": 2.0, "RENDER_TIMEOUT": 0.05}
    with gunicorn(media, workers=1, threads=4, oximg=limits) as server:
        yield server


def slow_url(base: str, width: int) -> str:
    return imgproxy_url(base, f"/{SLOW_RENDER.format(width=width)}/plain/photos/big.jpg@jpeg")


def fire_together(urls: list[str]) -> list[Fetched | BaseException]:
    """Request every URL from its own thread, released at the same moment."""
    answers: list[Fetched | BaseException] = [RuntimeError("no answer")] * len(urls)
    start = threading.Barrier(len(urls))

    def one(index: int) -> None:
        start.wait()
        try:
            answers[index] = request(urls[index], timeout=BURST_TIMEOUT)
        except OSError as error:  # a timeout or reset is recorded, and fails below
            answers[index] = error

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(urls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BURST_TIMEOUT + 5)
    return answers


@pytest.fixture(scope="module")
def burst(crowded: Server) -> tuple[list[Fetched], set[int]]:
    """BURST distinct slow URLs at once (the i-th is 3000 - i wide): answers in
    URL order, and the worker pids from before the burst."""
    pids = crowded.worker_pids()
    urls = [slow_url(crowded.base, 3000 - index) for index in range(BURST)]
    answers = fire_together(urls)
    failures = [answer for answer in answers if not isinstance(answer, Fetched)]
    assert failures == []
    return [answer for answer in answers if isinstance(answer, Fetched)], pids


def test_a_burst_gets_only_served_refused_or_timed_out(
    burst: tuple[list[Fetched], set[int]],
) -> None:
    answers, _ = burst
    statuses = [answer.status for answer in answers]
    assert len(statuses) == BURST
    assert set(statuses) <= OVERLOAD_STATUSES, statuses


def test_a_burst_larger_than_the_queue_is_partly_refused_and_partly_served(
    burst: tuple[list[Fetched], set[int]],
) -> None:
    """One running plus two waiting, 24 arriving: the first is served, some are refused."""
    statuses = [answer.status for answer in burst[0]]
    assert statuses.count(429) >= 1, statuses
    assert statuses.count(200) >= 1, statuses


def test_refusals_say_when_to_retry_and_are_not_stored(
    burst: tuple[list[Fetched], set[int]],
) -> None:
    refusals = [answer for answer in burst[0] if answer.status in (429, 503)]
    assert refusals
    for answer in refusals:
        assert int(answer.headers["retry-after"]) > 0
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["content-type"].startswith("text/plain")


def test_admitted_requests_get_the_whole_image(burst: tuple[list[Fetched], set[int]]) -> None:
    served = [(i, answer) for i, answer in enumerate(burst[0]) if answer.status == 200]
    assert served
    for index, answer in served:
        image = pyvips.Image.new_from_buffer(answer.body, "")
        assert image.width == 3000 - index
        assert answer.headers["cache-control"].startswith("public")


def test_the_same_worker_serves_after_the_burst(
    crowded: Server, burst: tuple[list[Fetched], set[int]]
) -> None:
    _, pids_before = burst
    after = fetch(imgproxy_url(crowded.base, QUICK_RENDER))
    assert after.status == 200
    assert pyvips.Image.new_from_buffer(after.body, "").width == 60
    assert crowded.worker_pids() == pids_before


def test_a_render_past_its_deadline_is_a_503_that_frees_its_place(hurried: Server) -> None:
    pids = hurried.worker_pids()
    for width in (3000, 2999):  # twice: the first kill must have released the slot
        answer = fetch(slow_url(hurried.base, width))
        assert answer.status == 503
        assert answer.body == b"Processing timed out\n"
        assert answer.headers["cache-control"] == "no-store"
        assert int(answer.headers["retry-after"]) > 0
    after = fetch(imgproxy_url(hurried.base, QUICK_RENDER))
    assert after.status == 200
    assert hurried.worker_pids() == pids


def cached_files(media: Path) -> list[Path]:
    root = media / "oximg"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_killed_render_leaves_nothing_in_the_cache(hurried: Server) -> None:
    assert fetch(slow_url(hurried.base, 2998)).status == 503
    assert fetch(imgproxy_url(hurried.base, QUICK_RENDER)).status == 200
    files = cached_files(hurried.media)
    assert files  # the quick render was stored
    for path in files:
        assert not path.name.startswith("tmp-")
        assert pyvips.Image.new_from_buffer(path.read_bytes(), "").width == 60
