"""Cross-process single-flight: one render per hot key across thumbnailers.

Two :class:`Thumbnailer` objects sharing a result cache and a coordinator stand
for two processes behind a load balancer (the real thing, two gunicorn workers
on Redis, is in tests/test_redis_coordination.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.core.cache import caches

from django_oximg.coordination import CacheCoordinator
from django_oximg.core.coordination import LocalCoordinator
from django_oximg.core.executor import Executor
from django_oximg.core.stores import FileSystemCacheStore, FileSystemSourceStore, Reserve
from django_oximg.core.thumbnailer import Thumbnailer, ThumbnailerConfig
from tests import images
from tests.constants import JOIN_TIMEOUT, SIGNER

PATH = "/rs:fit:120:120/plain/photo.jpg@jpeg"


class SharedLeases:
    """A thread-safe stand-in for Redis ``SET NX`` with expiry, counting refusals."""

    shared = True

    def __init__(self) -> None:
        self.leases: dict[str, float] = {}
        self.refused = 0
        self.lock = threading.Lock()

    def acquire(self, key: str, ttl: float) -> bool:
        with self.lock:
            now = time.monotonic()
            if self.leases.get(key, 0.0) > now:
                self.refused += 1
                return False
            self.leases[key] = now + ttl
            return True

    def release(self, key: str) -> None:
        with self.lock:
            self.leases.pop(key, None)


class GatedSourceStore(FileSystemSourceStore):
    """Reads wait for ``gate``, so the first render is still running when peers arrive.

    Slow like a remote store, so read like one: on the request thread, where
    concurrent reads of one source are shared (a local store is read on the
    render worker instead, and only reads running together share).
    """

    read_on_worker = False

    def __init__(self, root: Path, gate: threading.Event) -> None:
        super().__init__(root)
        self.gate = gate
        self.reads = 0
        self.lock = threading.Lock()

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        with self.lock:
            self.reads += 1
        assert self.gate.wait(JOIN_TIMEOUT)
        return super().read(name, max_bytes, reserve)


def make(
    sources: Path, cache: Path, store: FileSystemSourceStore, leases: object, **config: float
) -> Thumbnailer:
    return Thumbnailer(
        ThumbnailerConfig(**config),  # type: ignore[arg-type]
        SIGNER,
        {"": store},
        FileSystemCacheStore(cache),
        Executor(workers=2, queue_size=16, queue_timeout=30.0, memory_budget=1 << 30),
        coordinator=leases,  # type: ignore[arg-type]
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    sources, cache = tmp_path / "src", tmp_path / "cache"
    sources.mkdir()
    (sources / "photo.jpg").write_bytes(images.jpeg(800, 600))
    return sources, cache


def request(thumbnailer: Thumbnailer, statuses: list[int], bodies: list[bytes]) -> None:
    reply = thumbnailer.reply(SIGNER.signed_path(PATH), "GET", {})
    statuses.append(reply.status)
    if reply.file is not None:
        with reply.file:
            bodies.append(reply.file.read())
    else:
        bodies.append(reply.body)


def test_a_hot_key_is_rendered_once_across_two_processes(dirs: tuple[Path, Path]) -> None:
    sources, cache = dirs
    gate = threading.Event()
    leases = SharedLeases()
    stores = [GatedSourceStore(sources, gate), GatedSourceStore(sources, gate)]
    processes = [make(sources, cache, store, leases, peer_wait=30.0) for store in stores]
    statuses: list[int] = []
    bodies: list[bytes] = []
    threads = [
        threading.Thread(target=request, args=(processes[index % 2], statuses, bodies))
        for index in range(20)
    ]
    for thread in threads:
        thread.start()
    # Hold the first render until the other process has found the lease taken.
    deadline = time.monotonic() + JOIN_TIMEOUT
    while leases.refused == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)

    assert statuses == [200] * 20
    assert len(set(bodies)) == 1
    assert sum(p.renders for p in processes) == 1
    assert sum(s.reads for s in stores) == 1
    assert sum(p.peer_results for p in processes) == 1  # the waiting process's one flight


def test_a_stuck_lease_holder_delays_but_does_not_fail_its_peers(dirs: tuple[Path, Path]) -> None:
    sources, cache = dirs
    leases = SharedLeases()
    thumbnailer = make(sources, cache, FileSystemSourceStore(sources), leases, peer_wait=0.2)
    job = thumbnailer.job_for(SIGNER.signed_path(PATH), "")
    assert leases.acquire(job.key, 3600)  # a process that took the lease and was killed

    statuses: list[int] = []
    request(thumbnailer, statuses, [])

    assert statuses == [200]
    assert thumbnailer.renders == 1
    assert leases.refused >= 1


def test_different_sizes_of_one_source_share_one_read(dirs: tuple[Path, Path]) -> None:
    sources, cache = dirs
    gate = threading.Event()
    store = GatedSourceStore(sources, gate)
    thumbnailer = make(sources, cache, store, LocalCoordinator())
    paths = [f"/rs:fit:{100 + index}:{100 + index}/plain/photo.jpg@jpeg" for index in range(6)]
    statuses: list[int] = []

    def fetch(path: str) -> None:
        statuses.append(thumbnailer.reply(SIGNER.signed_path(path), "GET", {}).status)

    threads = [threading.Thread(target=fetch, args=(path,)) for path in paths]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_TIMEOUT
    while thumbnailer.source_reads.stats().coalesced < len(paths) - 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gate.set()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)

    assert statuses == [200] * len(paths)
    assert store.reads == 1
    assert thumbnailer.renders == len(paths)


def test_cache_coordinator_grants_one_lease_until_released() -> None:
    coordinator = CacheCoordinator(caches["default"])
    assert coordinator.acquire("k", 10)
    assert not coordinator.acquire("k", 10)
    coordinator.release("k")
    assert coordinator.acquire("k", 10)
    coordinator.release("k")


class BrokenCache:
    """A cache whose server is down, as Django's RedisCache raises then."""

    def add(self, *args: object, **kwargs: object) -> bool:
        raise ConnectionError("Error 111 connecting to redis")

    def delete(self, *args: object, **kwargs: object) -> None:
        raise ConnectionError("Error 111 connecting to redis")


def test_an_unreachable_coordination_cache_degrades_to_rendering_here(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coordinator = CacheCoordinator(BrokenCache())  # type: ignore[arg-type]
    assert coordinator.acquire("k", 10)
    coordinator.release("k")
    assert "coordination cache failed" in caplog.text
