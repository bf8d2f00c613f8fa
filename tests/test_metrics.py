"""Tests for django_oximg.core.serving.metrics: ``/metrics`` and ``/health``.

Through the core thumbnailer (no Django), then through the Django view and the
WSGI middleware, which must both answer the two paths. The exposition is parsed
with prometheus-client's own parser and values are compared, never text.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from django_oximg.core import pipeline
from django_oximg.core.errors import Overloaded, ProcessingTimeout
from django_oximg.core.limits.executor import Executor
from django_oximg.core.serving import metrics
from django_oximg.core.serving.coordination import LeaseState, LocalCoordinator
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.disk import (
    FileSystemCacheStore,
    FileSystemSourceStore,
    directory_is_writable,
)
from django_oximg.core.stores.protocols import CachedResult, Reserve
from tests import images
from tests.constants import JOIN_TIMEOUT, KEY, MIB, SALT, SIGNER
from tests.test_wsgi import call, environ_for

CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"
OTHER = "/rs:fit:100:100/plain/photos/landscape.jpg@jpeg"

BUDGET = 64 * MIB

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


# -- helpers --------------------------------------------------------------------------


def parse(body: bytes) -> Series:
    """Every sample of an exposition, by name and labels."""
    found: Series = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(series: Series, name: str, **labels: str) -> float:
    """A sample's value; a labelled series never incremented counts as 0."""
    return series.get((name, frozenset(labels.items())), 0.0)


def get(thumbnailer: Thumbnailer, path: str, method: str = "GET", **headers: str) -> Reply:
    """Ask for ``path`` (signed unless it is an endpoint), with any file read and closed."""
    if path not in metrics.ENDPOINTS and not path.startswith("/bad"):
        path = SIGNER.signed_path(path)
    reply = thumbnailer.reply(path, method, headers)
    if reply.file is not None:
        with reply.file:
            reply.body = reply.file.read()
        reply.file = None
    return reply


def scrape(thumbnailer: Thumbnailer) -> Series:
    reply = get(thumbnailer, "/metrics")
    assert reply.status == 200
    return parse(reply.body)


def header(reply: Reply, name: str) -> str | None:
    found = [v for k, v in reply.headers if k.lower() == name.lower()]
    return found[0] if found else None


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.005)


class GatedSourceStore(FileSystemSourceStore):
    """Reads wait for ``gate``, so a render is still running when others arrive."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gate.set()

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        assert self.gate.wait(JOIN_TIMEOUT)
        return super().read(name, max_bytes, reserve)


class UnwritableCache(FileSystemCacheStore):
    """A store that says it cannot take writes (a full disk, a failing bucket)."""

    def writable(self) -> bool:
        return False


class OldProtocolCache:
    """A cache store written before ``writable`` was part of the protocol."""

    def get(self, key: str) -> CachedResult | None:
        return None

    def put(self, key: str, data: bytes) -> None:
        pass


@pytest.fixture
def make(make: Callable[..., Thumbnailer]) -> Callable[..., Thumbnailer]:
    """conftest's ``make`` (keywords replace stores, executor or config), with
    metrics on unless a test says otherwise (the setting's default is off)."""
    return functools.partial(make, metrics=True, queue_timeout=30.0, budget=BUDGET)


# -- counting through the core --------------------------------------------------------


def test_requests_cache_lookups_renders_and_render_time_are_counted(
    thumbnailer: Thumbnailer,
) -> None:
    miss = get(thumbnailer, CONTROL)
    hit = get(thumbnailer, CONTROL)
    not_modified = get(thumbnailer, CONTROL, HTTP_IF_NONE_MATCH=str(header(miss, "ETag")))
    assert [miss.status, hit.status, not_modified.status] == [200, 200, 304]
    assert get(thumbnailer, CONTROL, method="POST").status == 405
    assert get(thumbnailer, "/bad-signature/rs:fit:9:9/plain/x.jpg").status == 403
    assert get(thumbnailer, "/rs:fit:200:200/plain/photos/missing.jpg@jpeg").status == 404

    series = scrape(thumbnailer)
    assert value(series, "oximg_requests_total", status="200") == 2
    assert value(series, "oximg_requests_total", status="304") == 1
    assert value(series, "oximg_requests_total", status="405") == 1
    assert value(series, "oximg_requests_total", status="403") == 1
    assert value(series, "oximg_requests_total", status="404") == 1
    # The 405 and 403 never reach the cache; the missing source is a miss.
    assert value(series, "oximg_cache_hits_total") == 2
    assert value(series, "oximg_cache_misses_total") == 2
    assert value(series, "oximg_renders_total") == thumbnailer.renders == 1
    assert value(series, "oximg_source_loads_total") == thumbnailer.source_loads == 1
    assert value(series, "oximg_render_seconds_count") == 1
    assert value(series, "oximg_render_seconds_bucket", le="+Inf") == 1
    assert value(series, "oximg_render_seconds_sum") > 0


def test_autoquality_searches_and_their_encodes_are_counted_by_method(
    thumbnailer: Thumbnailer,
) -> None:
    fits_at_once = "/rs:fit:200:200/aq:size:1000000:40:90/plain/photos/landscape.jpg@jpeg"
    dssim = "/rs:fit:120:120/aq:dssim:0.02:40:90/plain/photos/landscape.jpg@webp"
    for path in (fits_at_once, fits_at_once, dssim, CONTROL):  # one hit: no search
        assert get(thumbnailer, path).status == 200
    series = scrape(thumbnailer)
    assert value(series, "oximg_autoquality_searches_total", method="size") == 1
    # The maximum fits: one encode.
    assert value(series, "oximg_autoquality_encodes_total", method="size") == 1
    assert value(series, "oximg_autoquality_searches_total", method="dssim") == 1
    assert 1 <= value(series, "oximg_autoquality_encodes_total", method="dssim") <= 7
    assert thumbnailer.renders == 3


def test_scrapes_and_health_checks_are_not_counted_as_requests(thumbnailer: Thumbnailer) -> None:
    get(thumbnailer, "/health")
    get(thumbnailer, "/metrics")
    series = scrape(thumbnailer)
    assert not any(name == "oximg_requests_total" for name, _ in series)


def test_an_unexpected_error_is_counted_as_a_500_and_raised(
    make: Callable[..., Thumbnailer], source_dir: Path
) -> None:
    class BrokenSource(FileSystemSourceStore):
        def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
            raise ValueError("a bug, not a bad request")

    thumbnailer = make(source=BrokenSource(source_dir))
    with pytest.raises(ValueError, match="a bug"):
        get(thumbnailer, CONTROL)
    assert value(scrape(thumbnailer), "oximg_requests_total", status="500") == 1


def test_identical_concurrent_requests_are_counted_as_coalesced(
    make: Callable[..., Thumbnailer], source_dir: Path
) -> None:
    source = GatedSourceStore(source_dir)
    source.gate.clear()
    thumbnailer = make(source=source)
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda: statuses.append(get(thumbnailer, CONTROL).status))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: thumbnailer.flights.stats().coalesced == 7)
    finally:
        source.gate.set()
        for thread in threads:
            thread.join(JOIN_TIMEOUT)
    assert statuses == [200] * 8
    series = scrape(thumbnailer)
    assert value(series, "oximg_coalesced_requests_total", scope="process") == 7
    assert value(series, "oximg_coalesced_requests_total", scope="peers") == 0
    assert value(series, "oximg_renders_total") == 1
    assert value(series, "oximg_cache_misses_total") == 8


class HeldElsewhere(LocalCoordinator):
    """A coordinator whose lease another process holds until ``stored`` is set, then
    says "done" (counting refusals)."""

    shared = True

    def __init__(self) -> None:
        self.refused = 0
        self.stored = threading.Event()

    def acquire(self, key: str) -> bool:
        self.refused += 1
        return False

    def state(self, key: str) -> LeaseState:
        return LeaseState.DONE if self.stored.is_set() else LeaseState.BUSY

    def release(self, key: str) -> None:
        raise AssertionError("never acquired")


def test_a_result_rendered_by_a_peer_process_is_counted(
    make: Callable[..., Thumbnailer],
) -> None:
    peer = make()
    leases = HeldElsewhere()
    waiting = make(coordinator=leases)
    replies: list[Reply] = []
    thread = threading.Thread(target=lambda: replies.append(get(waiting, CONTROL)))
    thread.start()
    try:
        wait_until(lambda: leases.refused > 0)
        assert get(peer, CONTROL).status == 200  # the lease holder renders into the cache
        leases.stored.set()
    finally:
        thread.join(JOIN_TIMEOUT)
    assert [reply.status for reply in replies] == [200]
    series = scrape(waiting)
    assert value(series, "oximg_coalesced_requests_total", scope="peers") == 1
    assert value(series, "oximg_renders_total") == 0
    assert value(scrape(peer), "oximg_renders_total") == 1


def test_queue_running_memory_and_workers_are_read_when_scraped(
    make: Callable[..., Thumbnailer],
) -> None:
    executor = Executor(workers=1, queue_size=1, queue_timeout=JOIN_TIMEOUT, memory_budget=BUDGET)
    thumbnailer = make(executor=executor)
    release = threading.Event()
    threads = [
        threading.Thread(target=executor.run, args=(release.wait,), kwargs={"cost": cost})
        for cost in (3 * MIB, MIB)
    ]
    try:
        # One at a time: the 3 MiB job must be the running one, whichever
        # thread the scheduler would have let reach the executor first.
        threads[0].start()
        wait_until(lambda: executor.stats().running == 1)
        threads[1].start()
        wait_until(lambda: executor.stats().queued == 1)
        with pytest.raises(Overloaded):
            executor.run(lambda: None)
        series = scrape(thumbnailer)
    finally:
        release.set()
        for thread in threads:
            if thread.ident is not None:
                thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert value(series, "oximg_queue_depth") == 1
    assert value(series, "oximg_jobs_running") == 1
    assert value(series, "oximg_workers") == 1
    assert value(series, "oximg_memory_reserved_bytes") == 3 * MIB
    assert value(series, "oximg_memory_peak_reserved_bytes") == 3 * MIB
    assert value(series, "oximg_memory_budget_bytes") == BUDGET
    assert value(series, "oximg_rejected_total", reason="queue_full") == 1
    assert value(series, "oximg_rejected_total", reason="queue_timeout") == 0
    after = scrape(thumbnailer)
    assert value(after, "oximg_queue_depth") == value(after, "oximg_jobs_running") == 0
    assert value(after, "oximg_memory_reserved_bytes") == 0
    assert value(after, "oximg_memory_peak_reserved_bytes") == 3 * MIB  # one job at a time


def test_a_queue_timeout_is_counted_as_rejected(make: Callable[..., Thumbnailer]) -> None:
    # The first job gets all the time it needs to start, however busy the machine;
    # the second, admitted once it runs, the short deadline that it must miss.
    executor = Executor(workers=1, queue_size=1, queue_timeout=JOIN_TIMEOUT, memory_budget=BUDGET)
    thumbnailer = make(executor=executor)
    release = threading.Event()
    running = threading.Thread(target=executor.run, args=(release.wait,))
    running.start()
    try:
        wait_until(lambda: executor.stats().running == 1)
        executor.queue_timeout = 0.05
        with pytest.raises(ProcessingTimeout):
            executor.run(lambda: None)
    finally:
        release.set()
        running.join(JOIN_TIMEOUT)
    assert value(scrape(thumbnailer), "oximg_rejected_total", reason="queue_timeout") == 1


def test_process_metrics_come_with_every_registry(thumbnailer: Thumbnailer) -> None:
    series = scrape(thumbnailer)
    assert value(series, "process_resident_memory_bytes") > 0
    assert value(series, "process_open_fds") > 0


def test_each_thumbnailer_has_its_own_registry(make: Callable[..., Thumbnailer]) -> None:
    """The runtime rebuilds thumbnailers; the global registry must not collect them."""
    first, second = make(), make()
    get(first, CONTROL)
    assert value(scrape(first), "oximg_requests_total", status="200") == 1
    assert value(scrape(second), "oximg_requests_total", status="200") == 0
    global_names = {m.name for m in prometheus_client.REGISTRY.collect()}
    assert not any(name.startswith("oximg_") for name in global_names)


# -- the /metrics answer -----------------------------------------------------------------


def test_metrics_is_the_text_format_and_never_cached(thumbnailer: Thumbnailer) -> None:
    reply = get(thumbnailer, "/metrics")
    assert reply.status == 200
    assert str(header(reply, "Content-Type")).startswith("text/plain; version=0.0.4")
    assert header(reply, "Cache-Control") == "no-store"
    assert header(reply, "Content-Length") == str(len(reply.body))


def test_metrics_answers_openmetrics_when_the_scraper_asks(thumbnailer: Thumbnailer) -> None:
    reply = get(thumbnailer, "/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert str(header(reply, "Content-Type")).startswith("application/openmetrics-text")
    assert reply.body.endswith(b"# EOF\n")


def test_head_and_other_methods_on_the_endpoints(thumbnailer: Thumbnailer) -> None:
    for path in ("/metrics", "/health"):
        head = get(thumbnailer, path, method="HEAD")
        assert head.status == 200
        assert head.body == b""
        assert int(str(header(head, "Content-Length"))) > 0
        assert get(thumbnailer, path, method="POST").status == 405


def test_only_the_exact_paths_are_endpoints(thumbnailer: Thumbnailer) -> None:
    for path in ("/metrics/", "/health/x", "/metricsx"):
        assert thumbnailer.reply(path, "GET", {}).status == 403


def test_metrics_switched_off_is_a_plain_404(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make(metrics=False)
    reply = get(thumbnailer, "/metrics")
    assert reply.status == 404
    assert header(reply, "Cache-Control") == "no-store"
    assert get(thumbnailer, "/health").status == 200
    assert get(thumbnailer, CONTROL).status == 200


def test_without_prometheus_client_metrics_is_404_and_the_rest_works(tmp_path: Path) -> None:
    """In a fresh interpreter where importing prometheus_client fails."""
    source = tmp_path / "photo.jpg"
    source.write_bytes(images.jpeg(320, 240))
    script = f"""
import json, sys
sys.modules["prometheus_client"] = None  # as if the extra were not installed
from django_oximg.core.serving import metrics
from django_oximg.core.limits.executor import Executor
from django_oximg.core.options.signing import URLSigner, pairs_from_hex
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
signer = URLSigner(pairs_from_hex([{KEY!r}], [{SALT!r}]))
executor = Executor(1, 4, 30.0, 1 << 26)
thumbnailer = Thumbnailer(
    ThumbnailerConfig(metrics=True), signer, {{"": FileSystemSourceStore({str(tmp_path)!r})}},
    FileSystemCacheStore({str(tmp_path / "cache")!r}), executor,
)
answers = {{path: thumbnailer.reply(path, "GET", {{}}) for path in ("/metrics", "/health")}}
thumb = thumbnailer.reply(signer.signed_path("/rs:fit:50:50/plain/photo.jpg@jpeg"), "GET", {{}})
executor.shutdown()
print(json.dumps({{
    "installed": metrics.PROMETHEUS_INSTALLED,
    "metrics": [answers["/metrics"].status, answers["/metrics"].body.decode()],
    "health": answers["/health"].status,
    "thumbnail": thumb.status,
}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    answer = json.loads(done.stdout)
    assert answer["installed"] is False
    assert answer["metrics"] == [404, metrics.NOT_INSTALLED + "\n"]
    assert answer["health"] == 200
    assert answer["thumbnail"] == 200


# -- /health ------------------------------------------------------------------------------


def test_health_is_ok_as_never_cached_plain_text(thumbnailer: Thumbnailer) -> None:
    reply = get(thumbnailer, "/health")
    assert (reply.status, reply.body) == (200, b"ok\n")
    assert header(reply, "Content-Type") == "text/plain; charset=utf-8"
    assert header(reply, "Cache-Control") == "no-store"


def test_health_is_503_when_the_cache_root_cannot_be_a_directory(
    make: Callable[..., Thumbnailer], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    for root in (blocker, blocker / "below"):
        reply = get(make(cache=FileSystemCacheStore(root)), "/health")
        assert (reply.status, reply.body) == (503, b"unhealthy: result cache not writable\n")
        assert header(reply, "Cache-Control") == "no-store"


def test_health_is_503_when_the_store_says_it_cannot_write(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    reply = get(make(cache=UnwritableCache(cache_dir)), "/health")
    assert (reply.status, reply.body) == (503, b"unhealthy: result cache not writable\n")


def test_a_store_without_writable_is_assumed_writable(make: Callable[..., Thumbnailer]) -> None:
    assert get(make(cache=OldProtocolCache()), "/health").status == 200


def test_health_is_503_when_the_executor_is_shut_down(thumbnailer: Thumbnailer) -> None:
    thumbnailer.executor.shutdown()
    reply = get(thumbnailer, "/health")
    assert (reply.status, reply.body) == (503, b"unhealthy: executor shut down\n")


def test_health_is_503_when_libvips_fails(
    thumbnailer: Thumbnailer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> str:
        raise RuntimeError("libvips is gone")

    monkeypatch.setattr(pipeline, "libvips_version", broken)
    reply = get(thumbnailer, "/health")
    assert (reply.status, reply.body) == (503, b"unhealthy: libvips not loaded\n")


def test_health_names_every_failure(
    make: Callable[..., Thumbnailer], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thumbnailer = make(cache=UnwritableCache(cache_dir))
    thumbnailer.executor.shutdown()
    monkeypatch.setattr(pipeline, "libvips_version", lambda: 1 / 0)
    assert get(thumbnailer, "/health").body == (
        b"unhealthy: libvips not loaded, executor shut down, result cache not writable\n"
    )


def test_health_is_503_when_every_worker_is_on_a_job_longer_than_any_job_may_take(
    make: Callable[..., Thumbnailer],
) -> None:
    """The longest a job may run: its wait for memory, the deadline, a second's slack."""
    now = [0.0]
    executor = Executor(2, 4, 5.0, BUDGET, clock=lambda: now[0])
    thumbnailer = make(executor=executor, render_timeout=10.0)
    release = threading.Event()
    started = threading.Semaphore(0)

    def job() -> None:
        started.release()
        assert release.wait(JOIN_TIMEOUT)

    callers = [threading.Thread(target=executor.run, args=(job,)) for _ in range(2)]
    for caller in callers:
        caller.start()
    for _ in callers:
        assert started.acquire(timeout=JOIN_TIMEOUT)
    try:
        now[0] = 16.0  # 5 + 10 + 1: not yet
        assert get(thumbnailer, "/health").status == 200
        now[0] = 16.5
        reply = get(thumbnailer, "/health")
        assert (reply.status, reply.body) == (
            503,
            b"unhealthy: all 2 render workers busy for more than 16 s\n",
        )
    finally:
        release.set()
        for caller in callers:
            caller.join(JOIN_TIMEOUT)
    assert get(thumbnailer, "/health").status == 200


def test_health_is_503_while_every_read_slot_is_held_by_a_read_past_its_timeout(
    make: Callable[..., Thumbnailer], source_dir: Path
) -> None:
    """A storage that hangs: the request gets 504, its read keeps the slot until it returns."""
    source = GatedSourceStore(source_dir)
    source.read_on_worker = False  # read like a remote store
    source.gate.clear()
    thumbnailer = make(source=source, source_reads=1, source_timeout=0.2)
    assert get(thumbnailer, CONTROL).status == 504
    reply = get(thumbnailer, "/health")
    assert reply.status == 503
    assert reply.body.startswith(b"unhealthy: source failing for ")
    assert b"took longer than 0.2 s" in reply.body
    assert reply.body.endswith(
        b", all 1 source read slots held by reads past their 0.2 s timeout\n"
    )
    source.gate.set()
    wait_until(lambda: thumbnailer.reads.in_use() == 0)
    # The read that hung has returned: the storage answers again. The next
    # read is not meant to time out: on a busy machine 0.2 s may pass before
    # its thread runs.
    thumbnailer.reads.timeout = JOIN_TIMEOUT
    assert get(thumbnailer, "/health").status == 200
    assert get(thumbnailer, CONTROL).status == 200


def test_metrics_with_a_token_answer_only_its_bearer(make: Callable[..., Thumbnailer]) -> None:
    thumbnailer = make(metrics_token="s3cret-token")
    for headers in (
        {},
        {"HTTP_AUTHORIZATION": "Bearer wrong"},
        {"HTTP_AUTHORIZATION": "s3cret-token"},
    ):
        reply = thumbnailer.reply("/metrics", "GET", headers)
        assert (reply.status, reply.body) == (401, b"Unauthorized\n")
        assert header(reply, "WWW-Authenticate") == 'Bearer realm="metrics"'
        assert header(reply, "Cache-Control") == "no-store"
    for given in ("Bearer s3cret-token", "bearer  s3cret-token "):
        reply = thumbnailer.reply("/metrics", "GET", {"HTTP_AUTHORIZATION": given})
        assert reply.status == 200
        assert b"oximg_workers" in reply.body
    assert get(thumbnailer, "/health").status == 200  # /health needs no token


def test_metrics_are_off_by_default_in_the_core_too() -> None:
    assert ThumbnailerConfig().metrics is False


def test_executor_is_alive_until_shut_down() -> None:
    executor = Executor(1, 1, 5.0, BUDGET)
    assert executor.is_alive()
    assert executor.run(lambda: 42) == 42
    assert executor.is_alive()
    executor.shutdown()
    assert not executor.is_alive()


def test_a_missing_cache_root_is_writable_when_its_parent_is(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet"
    assert directory_is_writable(root)
    assert FileSystemCacheStore(root).writable()
    assert not (tmp_path / "not").exists()  # checking creates nothing


class SwitchedCache(FileSystemCacheStore):
    """A result cache whose writes or lookups fail while switched (a full disk, S3 down)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failing_writes = False
        self.failing_lookups = False

    def put(self, key: str, data: bytes) -> None:
        if self.failing_writes:
            raise OSError(28, "No space left on device")
        super().put(key, data)

    def get(self, key: str) -> CachedResult | None:
        if self.failing_lookups:
            raise OSError("S3 lookup: Read timeout")
        return super().get(key)


def test_health_names_failing_cache_writes_until_one_works(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    cache = SwitchedCache(cache_dir)
    thumbnailer = make(cache=cache)
    cache.failing_writes = True
    assert get(thumbnailer, CONTROL).status == 200  # served from memory, not stored
    assert get(thumbnailer, CONTROL).status == 200  # so rendered again

    reply = get(thumbnailer, "/health")
    assert reply.status == 503
    assert b"result_cache_write failing" in reply.body
    assert b"No space left on device" in reply.body
    series = scrape(thumbnailer)
    assert value(series, "oximg_dependency_failures_total", dependency="result_cache_write") == 2
    assert value(series, "oximg_dependency_failing", dependency="result_cache_write") == 1

    cache.failing_writes = False
    assert get(thumbnailer, OTHER).status == 200  # a write that works
    assert get(thumbnailer, "/health").status == 200
    assert (
        value(scrape(thumbnailer), "oximg_dependency_failing", dependency="result_cache_write") == 0
    )
    assert thumbnailer.renders == 3


def test_a_failing_lookup_is_a_miss_and_named_by_health(
    make: Callable[..., Thumbnailer], cache_dir: Path
) -> None:
    cache = SwitchedCache(cache_dir)
    thumbnailer = make(cache=cache)
    cache.failing_lookups = True
    assert get(thumbnailer, CONTROL).status == 200
    reply = get(thumbnailer, "/health")
    assert reply.status == 503
    assert b"result_cache_lookup failing" in reply.body
    cache.failing_lookups = False
    assert get(thumbnailer, CONTROL).status == 200
    assert get(thumbnailer, "/health").status == 200


# -- through Django: the view and the middleware ----------------------------------------


def django_get(client: Client, url: str) -> tuple[int, dict[str, str], bytes]:
    response = client.get(url, RAW_URI=url)
    try:
        body = response.content  # endpoints and misses are never streamed
    finally:
        response.close()
    headers = {name.lower(): value for name, value in response.headers.items()}
    return response.status_code, headers, body


@pytest.fixture
def django_app(media: Path) -> Any:
    from django.core.wsgi import get_wsgi_application

    from django_oximg.wsgi import OximgMiddleware

    return OximgMiddleware(get_wsgi_application())


def signed_url(path: str) -> str:
    from django_oximg import runtime

    return "/img" + runtime.get_signer().signed_path(path)


@pytest.fixture
def metrics_on(settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "METRICS": True}


@pytest.mark.usefixtures("metrics_on")
def test_the_view_answers_health_and_metrics(media: Path, client: Client) -> None:
    assert django_get(client, signed_url(CONTROL))[0] == 200
    status, headers, body = django_get(client, "/img/health")
    assert (status, body, headers["cache-control"]) == (200, b"ok\n", "no-store")
    status, headers, body = django_get(client, "/img/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    series = parse(body)
    assert value(series, "oximg_requests_total", status="200") == 1
    assert value(series, "oximg_renders_total") == 1
    assert value(series, "oximg_workers") == 2  # tests/settings.py


@pytest.mark.usefixtures("metrics_on")
def test_the_middleware_answers_health_and_metrics(django_app: Any) -> None:
    assert call(django_app, environ_for(signed_url(CONTROL))).status == 200
    health = call(django_app, environ_for("/img/health"))
    assert (health.status, health.body) == (200, b"ok\n")
    scraped = call(django_app, environ_for("/img/metrics"))
    assert scraped.status == 200
    series = parse(scraped.body)
    assert value(series, "oximg_requests_total", status="200") == 1
    assert value(series, "oximg_cache_misses_total") == 1


def test_metrics_are_off_unless_the_setting_turns_them_on(
    media: Path, settings: Any, client: Client, django_app: Any
) -> None:
    assert "METRICS" not in settings.OXIMG
    assert django_get(client, "/img/metrics")[0] == 404
    assert call(django_app, environ_for("/img/metrics")).status == 404
    assert django_get(client, "/img/health")[0] == 200
    assert django_get(client, signed_url(CONTROL))[0] == 200


def test_health_through_django_is_503_when_the_cache_is_unwritable(
    media: Path, settings: Any, client: Client, django_app: Any
) -> None:
    (media / "oximg").write_bytes(b"")  # the default cache root, as a file
    assert django_get(client, "/img/health")[:3:2] == (
        503,
        b"unhealthy: result cache not writable\n",
    )
    assert call(django_app, environ_for("/img/health")).status == 503
