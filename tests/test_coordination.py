"""Cross-process single-flight: one render per hot key across thumbnailers.

Two :class:`Thumbnailer` objects sharing a result cache and a
:class:`CacheCoordinator` on one Django cache stand for two processes behind
a load balancer. The real thing, gunicorn nodes on Redis with a node killed
and Redis frozen, is in tests/test_redis_coordination.py and
tests/test_production_faults.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import caches

from django_oximg.core.limits.executor import Executor
from django_oximg.core.serving.coordination import (
    LEASE_PREFIX,
    CacheCoordinator,
    Coordinator,
    LeaseState,
    LocalCoordinator,
)
from django_oximg.core.serving.faults import COORDINATION_CACHE, Faults
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.core.stores.protocols import CachedResult
from tests import images
from tests.constants import JOIN_TIMEOUT, SIGNER

PATH = "/rs:fit:120:120/plain/photo.jpg@jpeg"


class WatchedCache:
    """A Django cache that tells when a lease was refused (``add`` returned False)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.refused = threading.Event()
        self.calls: list[str] = []

    def add(self, key: str, value: Any, timeout: float | None = None) -> bool:
        self.calls.append("add")
        added = bool(self.cache.add(key, value, timeout=timeout))
        if not added:
            self.refused.set()
        return added

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.cache, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


class GatedSourceStore(FileSystemSourceStore):
    """Reads wait for ``gate``, so the first render is still running when peers arrive."""

    def __init__(self, root: Path, gate: threading.Event) -> None:
        super().__init__(root)
        self.gate = gate
        self.reads = 0
        self.lock = threading.Lock()

    def read(self, name: str, max_bytes: int, reserve: Any = None) -> bytes:
        with self.lock:
            self.reads += 1
        assert self.gate.wait(JOIN_TIMEOUT)
        return super().read(name, max_bytes, reserve)


class CountingCacheStore(FileSystemCacheStore):
    """Counts lookups, as a paid S3 request would be counted."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.lookups = 0

    def get(self, key: str) -> CachedResult | None:
        self.lookups += 1
        return super().get(key)


def make(
    sources: Path,
    cache: FileSystemCacheStore | Path,
    coordinator: Coordinator,
    store: FileSystemSourceStore | None = None,
    executor: Executor | None = None,
    faults: Faults | None = None,
    **config: float,
) -> Thumbnailer:
    return Thumbnailer(
        ThumbnailerConfig(**config),  # type: ignore[arg-type]
        SIGNER,
        {"": store or FileSystemSourceStore(sources)},
        cache if isinstance(cache, FileSystemCacheStore) else FileSystemCacheStore(cache),
        executor or Executor(workers=2, queue_size=16, queue_timeout=30.0, memory_budget=1 << 30),
        coordinator=coordinator,
        faults=faults,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    sources, cache = tmp_path / "src", tmp_path / "cache"
    sources.mkdir()
    (sources / "photo.jpg").write_bytes(images.jpeg(800, 600))
    return sources, cache


@pytest.fixture
def shared_cache() -> Any:
    cache = caches["default"]
    cache.clear()
    yield cache
    cache.clear()


def status_of(thumbnailer: Thumbnailer, path: str = PATH) -> int:
    reply = thumbnailer.reply(SIGNER.signed_path(path), "GET", {})
    if reply.file is not None:
        reply.file.close()
    return reply.status


def test_a_hot_key_is_rendered_once_across_two_processes(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    sources, cache = dirs
    gate = threading.Event()
    watched = WatchedCache(shared_cache)
    stores = [GatedSourceStore(sources, gate), GatedSourceStore(sources, gate)]
    processes = [
        make(sources, cache, CacheCoordinator(watched, timeout=5.0), store) for store in stores
    ]
    statuses: list[int] = []
    threads = [
        threading.Thread(target=lambda p=processes[index % 2]: statuses.append(status_of(p)))
        for index in range(20)
    ]
    for thread in threads:
        thread.start()
    # Hold the first render until the other process has found the lease taken.
    assert watched.refused.wait(JOIN_TIMEOUT)
    gate.set()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)

    assert statuses == [200] * 20
    assert sum(p.renders for p in processes) == 1
    assert sum(s.reads for s in stores) == 1
    assert sum(p.peer_results for p in processes) == 1  # the waiting process's one flight


def test_a_miss_under_a_lease_looks_the_cache_up_once(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    """The lease, not a second lookup (a paid S3 request), says whether a peer stored it."""
    sources, cache_dir = dirs
    cache = CountingCacheStore(cache_dir)
    thumbnailer = make(sources, cache, CacheCoordinator(shared_cache, timeout=5.0))

    assert status_of(thumbnailer) == 200

    assert cache.lookups == 1
    assert thumbnailer.renders == 1


def test_a_result_a_peer_just_stored_is_read_once_not_made_again(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    """A miss that raced a peer's store: the lease says "done", so one lookup finds it."""
    sources, cache_dir = dirs
    peer = make(sources, cache_dir, CacheCoordinator(shared_cache, timeout=5.0))
    cache = CountingCacheStore(cache_dir)
    late = make(sources, cache, CacheCoordinator(shared_cache, timeout=5.0))
    job = late.job_for(SIGNER.signed_path(PATH), "")
    assert status_of(peer) == 200  # stored after `late` missed, and the lease says so

    with late.executor.admit() as admission:
        content = late.lookup.cached_or_made(job, late.maker.made, admission)

    assert content.size > 0
    assert late.renders == 0
    assert late.peer_results == 1
    assert cache.lookups == 1


def test_a_searched_result_a_peer_stored_comes_with_its_quality(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    sources, cache_dir = dirs
    searched = "/rs:fit:120:120/aq:size:3000:40:90/plain/photo.jpg@jpeg"
    peer = make(sources, cache_dir, CacheCoordinator(shared_cache, timeout=5.0))
    late = make(sources, cache_dir, CacheCoordinator(shared_cache, timeout=5.0))
    job = late.job_for(SIGNER.signed_path(searched), "")
    made = peer.reply(SIGNER.signed_path(searched), "GET", {})
    quality = dict(made.headers)["X-Oximg-Quality"]

    with late.executor.admit() as admission:
        content = late.lookup.cached_or_made(job, late.maker.made, admission)

    assert late.peer_results == 1 and late.renders == 0
    assert content.size == len(made.body) and str(content.quality) == quality


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LapsingLeases:
    """A peer's lease that lapses (its holder was killed) the first time it is read,
    after a wait longer than the queue timeout on the executor's clock."""

    def __init__(self, cache: Any, clock: FakeClock, waited: float) -> None:
        self.cache = cache
        self.clock = clock
        self.waited = waited
        self.reads = 0

    def add(self, key: str, value: Any, timeout: float | None = None) -> bool:
        return bool(self.cache.add(key, value, timeout=timeout))

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        self.clock.now += self.waited
        self.cache.delete(key)  # the dead holder stopped renewing it
        return self.cache.get(key, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cache, name)


def test_a_lapsed_lease_is_taken_over_under_a_fresh_admission(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    """kill -9 of the holder costs its peers a wait, never a 503 for the wait."""
    sources, cache = dirs
    clock = FakeClock()
    leases = LapsingLeases(shared_cache, clock, waited=60.0)
    executor = Executor(
        workers=1, queue_size=4, queue_timeout=5.0, memory_budget=1 << 30, clock=clock
    )
    thumbnailer = make(sources, cache, CacheCoordinator(leases, timeout=5.0), executor=executor)
    job = thumbnailer.job_for(SIGNER.signed_path(PATH), "")
    shared_cache.add(LEASE_PREFIX + job.key, "busy", timeout=60)  # the holder, then killed

    assert status_of(thumbnailer) == 200

    assert leases.reads == 1
    assert thumbnailer.renders == 1


def test_a_holder_that_keeps_its_lease_past_peer_wait_is_rendered_around(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    sources, cache = dirs
    thumbnailer = make(sources, cache, CacheCoordinator(shared_cache, timeout=5.0), peer_wait=0.1)
    job = thumbnailer.job_for(SIGNER.signed_path(PATH), "")
    shared_cache.add(LEASE_PREFIX + job.key, "busy", timeout=3600)  # stuck, yet renewing

    assert status_of(thumbnailer) == 200
    assert thumbnailer.renders == 1


def test_the_holder_renews_its_lease_while_it_works_and_marks_it_done(
    shared_cache: Any,
) -> None:
    watched = WatchedCache(shared_cache)
    coordinator = CacheCoordinator(watched, timeout=5.0, renew_every=0.01)
    assert coordinator.acquire("k")
    assert coordinator.state("k") is LeaseState.BUSY
    renewed = threading.Event()
    real_renew = coordinator.renew

    def renew(key: str) -> None:
        real_renew(key)
        renewed.set()

    coordinator.renew = renew  # type: ignore[method-assign]
    assert renewed.wait(JOIN_TIMEOUT)
    assert "touch" in watched.calls

    coordinator.finish("k")
    assert coordinator.state("k") is LeaseState.DONE
    assert not coordinator.acquire("k")
    assert coordinator.keeper.held() == set()


def test_a_lease_is_granted_once_and_given_back_when_making_fails(shared_cache: Any) -> None:
    coordinator = CacheCoordinator(shared_cache, timeout=5.0)
    assert coordinator.state("k") is LeaseState.FREE
    assert coordinator.acquire("k")
    assert not coordinator.acquire("k")
    coordinator.release("k")
    assert coordinator.state("k") is LeaseState.FREE
    assert coordinator.acquire("k")
    coordinator.release("k")


def test_a_failed_make_frees_the_lease_for_the_next_process(
    dirs: tuple[Path, Path], shared_cache: Any
) -> None:
    sources, cache = dirs
    coordinator = CacheCoordinator(shared_cache, timeout=5.0)
    thumbnailer = make(sources, cache, coordinator)
    path = "/rs:fit:120:120/plain/missing.jpg@jpeg"
    job = thumbnailer.job_for(SIGNER.signed_path(path), "")

    assert status_of(thumbnailer, path) == 404
    assert coordinator.state(job.key) is LeaseState.FREE


class FrozenCache:
    """A cache server that, once frozen, accepts calls and never answers (SIGSTOP, a partition)."""

    def __init__(self) -> None:
        self.thaw = threading.Event()
        self.thaw.set()
        self.calls = 0
        self.answered = threading.Semaphore(0)

    def _hang(self, answer: Any) -> Any:
        self.calls += 1
        assert self.thaw.wait(JOIN_TIMEOUT)
        self.answered.release()
        return answer

    def add(self, key: str, value: Any, timeout: float | None = None) -> bool:
        return bool(self._hang(True))

    def get(self, key: str, default: Any = None) -> Any:
        return self._hang(default)

    def set(self, key: str, value: Any, timeout: float | None = None) -> None:
        self._hang(None)

    def touch(self, key: str, timeout: float | None = None) -> bool:
        return bool(self._hang(True))

    def delete(self, key: str) -> bool:
        return bool(self._hang(True))


def test_a_frozen_coordination_cache_is_waited_for_briefly_then_left_alone(
    dirs: tuple[Path, Path],
) -> None:
    sources, cache = dirs
    frozen = FrozenCache()
    faults = Faults()
    coordinator = CacheCoordinator(frozen, timeout=0.05, faults=faults)
    thumbnailer = make(sources, cache, coordinator, faults=faults)
    coordinator.check()  # a process that has been answered before (its client loaded)
    assert frozen.answered.acquire(timeout=JOIN_TIMEOUT)
    frozen.calls = 0
    frozen.thaw.clear()
    try:
        assert status_of(thumbnailer) == 200  # rendered without a lease
        other = "/rs:fit:80:80/plain/photo.jpg@jpeg"
        assert status_of(thumbnailer, other) == 200
        # Only the first request waited: the breaker kept the second from asking.
        assert frozen.calls == 1
        assert thumbnailer.renders == 2
        assert COORDINATION_CACHE in faults.failing()
        assert any(p.startswith(COORDINATION_CACHE) for p in thumbnailer.health_problems())
    finally:
        frozen.thaw.set()
    # The health check asks once more; now that the cache answers, the fault clears.
    for _ in range(frozen.calls):
        assert frozen.answered.acquire(timeout=JOIN_TIMEOUT)
    # Within a bound for a busy machine: this answer is not meant to be late,
    # and 0.05 s is less than a hand-over between threads may take there.
    coordinator.calls.timeout = JOIN_TIMEOUT
    assert thumbnailer.health_problems() == []
    assert COORDINATION_CACHE not in faults.failing()


class BrokenCache:
    """A cache whose server is down, as Django's RedisCache raises then."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def refuse(*args: object, **kwargs: object) -> Any:
            raise ConnectionError("Error 111 connecting to redis")

        return refuse


def test_an_unreachable_coordination_cache_degrades_to_rendering_here(
    caplog: pytest.LogCaptureFixture,
) -> None:
    faults = Faults()
    coordinator = CacheCoordinator(BrokenCache(), timeout=5.0, faults=faults)
    assert coordinator.acquire("k")
    assert coordinator.state("k") is LeaseState.UNKNOWN
    coordinator.release("k")
    assert "coordination cache failed" in caplog.text
    assert "Error 111" in faults.failing()[COORDINATION_CACHE].reason


def test_one_process_coordinates_nothing() -> None:
    local = LocalCoordinator()
    assert local.acquire("k") and local.acquire("k")
    assert local.state("k") is LeaseState.FREE
    assert not local.shared
