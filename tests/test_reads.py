"""Remote source reads: a bounded number at once, each within its timeout, bytes reserved.

Through :class:`~django_oximg.core.stores.reads.SourceReads` with an executor's
admissions and stores made here; the same bounds through gunicorn are in
tests/test_e2e_bounds.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from django_oximg.core.errors import ProcessingTimeout, SourceNotFound, SourceTimeout
from django_oximg.core.limits.executor import Executor
from django_oximg.core.stores.protocols import Reserve
from django_oximg.core.stores.reads import SourceReads
from tests.test_executor import PATIENCE, wait_until

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

MIB = 1024 * 1024


class GatedStore:
    """A remote store whose reads wait for the test; it reserves the size first."""

    read_on_worker = False

    def __init__(self, data: bytes = b"x" * 1000) -> None:
        self.data = data
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def check_name(self, name: str) -> None:
        pass

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        if name == "missing":
            raise SourceNotFound(name)
        if reserve is not None:
            reserve(len(self.data))
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started.release()
        try:
            assert self.release.wait(PATIENCE), "the test never released the read"
        finally:
            with self._lock:
                self.running -= 1
        return self.data

    def version(self, name: str) -> str:
        return ""


@pytest.fixture
def executor() -> Iterator[Executor]:
    made = Executor(workers=2, queue_size=8, queue_timeout=0.5, memory_budget=64 * MIB)
    yield made
    made.shutdown()


def read_in_thread(
    reads: SourceReads, store: GatedStore, executor: Executor, outcomes: list[object]
) -> threading.Thread:
    def run() -> None:
        with executor.admit() as admission:
            try:
                outcomes.append(reads.read(store, "x", 10 * MIB, admission))
            except Exception as error:  # kept for the test to inspect
                outcomes.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_read_returns_the_bytes_and_reserves_them_on_the_admission(
    executor: Executor,
) -> None:
    store = GatedStore()
    store.release.set()
    reads = SourceReads(slots=2, timeout=PATIENCE)
    with executor.admit() as admission:
        assert reads.read(store, "x", MIB, admission) == store.data
        assert admission.held == len(store.data)
        assert executor.stats().reserved_bytes == len(store.data)
    assert executor.stats().reserved_bytes == 0
    assert reads.in_use() == 0


def test_the_store_error_reaches_the_caller(executor: Executor) -> None:
    reads = SourceReads(slots=1, timeout=PATIENCE)
    with executor.admit() as admission, pytest.raises(SourceNotFound):
        reads.read(GatedStore(), "missing", MIB, admission)
    assert reads.in_use() == 0


def test_no_more_reads_run_at_once_than_there_are_slots(executor: Executor) -> None:
    store = GatedStore()
    reads = SourceReads(slots=2, timeout=PATIENCE)
    outcomes: list[object] = []
    # Two reads take the slots, with time to reach them on a busy machine ...
    queue_timeout, executor.queue_timeout = executor.queue_timeout, PATIENCE
    threads = [read_in_thread(reads, store, executor, outcomes) for _ in range(2)]
    for _ in range(2):
        assert store.started.acquire(timeout=PATIENCE)
    # ... three more wait for a slot, holding nothing, until the queue timeout.
    executor.queue_timeout = queue_timeout
    threads += [read_in_thread(reads, store, executor, outcomes) for _ in range(3)]
    wait_until(lambda: len(outcomes) == 3)
    assert all(isinstance(outcome, ProcessingTimeout) for outcome in outcomes)
    store.release.set()
    for thread in threads:
        thread.join(PATIENCE)
    assert store.most_at_once == 2
    assert outcomes[3:] == [store.data] * 2


def test_a_read_past_its_timeout_is_a_504_and_keeps_its_slot_until_it_returns(
    executor: Executor,
) -> None:
    store = GatedStore()
    reads = SourceReads(slots=1, timeout=0.2)
    with executor.admit() as admission, pytest.raises(SourceTimeout):
        reads.read(store, "x", MIB, admission)
    # The request gave its place and bytes back; the read still holds its slot.
    assert executor.stats().admitted == 0
    assert executor.stats().reserved_bytes == 0
    assert (reads.in_use(), reads.stuck()) == (1, 1)
    with executor.admit() as admission, pytest.raises(ProcessingTimeout):
        reads.read(store, "x", MIB, admission)  # no slot within the queue timeout
    store.release.set()
    wait_until(lambda: reads.in_use() == 0)
    assert reads.stuck() == 0


def test_a_read_that_goes_on_after_its_request_left_cannot_reserve_more(
    executor: Executor,
) -> None:
    admission = executor.admit()
    admission.reserve(100)
    admission.close()
    assert executor.stats().reserved_bytes == 0
    with pytest.raises(ProcessingTimeout):
        admission.reserve(100)
    assert executor.stats().reserved_bytes == 0


@pytest.mark.parametrize(("slots", "timeout"), [(0, 1.0), (1, 0.0)])
def test_bad_limits_are_refused(slots: int, timeout: float) -> None:
    with pytest.raises(ValueError):
        SourceReads(slots=slots, timeout=timeout)
