"""Tests for the bounded executor.

Jobs are held and released with ``threading.Event`` gates rather than sleeps, so
each test decides exactly which jobs are running and which are waiting.
``wait_until`` only bounds how long a test waits for a state it expects; no test
asserts on elapsed time.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from django_oximg.core.errors import Overloaded, ProcessingTimeout, SourceTooLarge
from django_oximg.core.limits.executor import Executor, Ready

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

# Upper bound on any wait in these tests: long enough never to trip on a slow CI
# machine, short enough that a bug fails the test instead of hanging it.
PATIENCE = 10.0


def wait_until(predicate: Callable[[], bool]) -> None:
    """Wait for a state the test expects to reach (bounded, never asserted on time)."""
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("state not reached")
        time.sleep(0.001)


class Gate:
    """A job that reports it started and then holds its worker until released."""

    def __init__(self, name: str = "gate", log: list[str] | None = None) -> None:
        self.name = name
        self.log = log
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        if self.log is not None:
            self.log.append(self.name)
        self.started.set()
        if not self.release.wait(PATIENCE):
            raise AssertionError(f"{self.name} was never released")
        return self.name


class Caller(threading.Thread):
    """A request thread: calls ``executor.run`` and keeps the outcome."""

    def __init__(self, executor: Executor, fn: Callable[[], Any], cost: int = 0) -> None:
        super().__init__(daemon=True)
        self.executor = executor
        self.fn = fn
        self.cost = cost
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.executor.run(self.fn, cost=self.cost)
        except BaseException as error:  # kept for the test to inspect
            self.error = error

    def outcome(self) -> Any:
        self.join(PATIENCE)
        assert not self.is_alive(), "caller still blocked"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def make_executor() -> Iterator[Callable[..., Executor]]:
    """Build executors that are shut down (and their workers joined) after the test."""
    made: list[Executor] = []

    def make(
        workers: int = 2,
        queue_size: int = 4,
        queue_timeout: float = PATIENCE,
        memory_budget: int = 100,
        **kwargs: Any,
    ) -> Executor:
        executor = Executor(workers, queue_size, queue_timeout, memory_budget, **kwargs)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.shutdown(wait=True)


def queued_and_running(executor: Executor) -> int:
    stats = executor.stats()
    return stats.queued + stats.running


# --- results and errors ------------------------------------------------------------


def test_run_returns_the_result_from_a_worker_thread(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor()
    caller = threading.current_thread()

    assert executor.run(lambda: threading.current_thread() is not caller) is True
    assert executor.stats().completed == 1


def test_run_reraises_the_jobs_exception_in_the_caller(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor()
    raised = KeyError("boom")

    def fail() -> None:
        raise raised

    with pytest.raises(KeyError) as info:
        executor.run(fail)
    assert info.value is raised


# --- admission ---------------------------------------------------------------------


def test_full_queue_is_refused_at_once_while_workers_are_blocked(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=2, queue_size=1)
    gates = [Gate("a"), Gate("b")]
    running = [Caller(executor, gate) for gate in gates]
    for caller in running:
        caller.start()
    for gate in gates:
        assert gate.started.wait(PATIENCE)
    waiting = Caller(executor, lambda: "queued")
    waiting.start()
    wait_until(lambda: executor.stats().queued == 1)

    # The refusal must come back while every worker is still held: it did not wait.
    refused = Caller(executor, lambda: "never")
    refused.start()
    with pytest.raises(Overloaded):
        refused.outcome()
    assert executor.stats().rejected_full == 1

    for gate in gates:
        gate.release.set()
    assert [caller.outcome() for caller in running] == ["a", "b"]
    assert waiting.outcome() == "queued"
    assert executor.stats().completed == 3


def test_queue_size_zero_still_admits_one_job_per_worker(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=1, queue_size=0)
    gate = Gate()
    holder = Caller(executor, gate)
    holder.start()
    assert gate.started.wait(PATIENCE)

    with pytest.raises(Overloaded):
        executor.run(lambda: "never")
    gate.release.set()
    assert holder.outcome() == "gate"
    assert executor.run(lambda: "free again") == "free again"


# --- queue deadline ----------------------------------------------------------------


def test_job_not_started_by_the_deadline_times_out_and_never_runs(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=1, queue_size=4, queue_timeout=PATIENCE)
    gate = Gate()
    holder = Caller(executor, gate)
    holder.start()
    assert gate.started.wait(PATIENCE)
    # The short deadline is for the job meant to miss it: the holder, given
    # 0.05 s too, could miss its own start on a busy machine.
    executor.queue_timeout = 0.05
    ran = threading.Event()

    with pytest.raises(ProcessingTimeout):
        executor.run(ran.set)

    stats = executor.stats()
    assert (stats.queued, stats.rejected_timeout) == (0, 1)
    gate.release.set()
    assert holder.outcome() == "gate"
    executor.shutdown(wait=True)  # the worker has drained everything it will ever run
    assert not ran.is_set()
    assert executor.stats().completed == 1


def test_deadline_is_measured_on_the_injected_clock(
    make_executor: Callable[..., Executor],
) -> None:
    # The clock jumps past the deadline right after arrival (read once, on
    # admission, which sets the deadline): even with an idle worker the caller
    # sees its job still queued, abandons it, and the job never runs.
    readings = iter([0.0])
    executor = make_executor(workers=1, queue_timeout=5.0, clock=lambda: next(readings, 99.0))
    ran = threading.Event()

    with pytest.raises(ProcessingTimeout):
        executor.run(ran.set)
    executor.shutdown(wait=True)
    assert not ran.is_set()
    assert executor.stats().rejected_timeout == 1


def test_waiting_for_budget_counts_against_the_queue_deadline(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=2, queue_timeout=PATIENCE, memory_budget=100)
    gate = Gate()
    holder = Caller(executor, gate, cost=100)
    holder.start()
    assert gate.started.wait(PATIENCE)
    # The short deadline is for the job meant to miss it: the holder, given
    # 0.05 s too, could miss its own start on a busy machine.
    executor.queue_timeout = 0.05
    ran = threading.Event()

    # A worker is idle, but the budget is not: the job waits, then times out.
    with pytest.raises(ProcessingTimeout):
        executor.run(ran.set, cost=1)

    gate.release.set()
    assert holder.outcome() == "gate"
    executor.shutdown(wait=True)
    assert not ran.is_set()
    assert executor.stats().reserved_bytes == 0


# --- releasing slots and budget ----------------------------------------------------


def test_slots_and_budget_are_released_after_exceptions(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=2, queue_size=0, memory_budget=100)

    def fail() -> None:
        raise ValueError("bad image")

    for _ in range(50):
        with pytest.raises(ValueError):
            executor.run(fail, cost=100)

    # Had a single slot or byte leaked, this would be refused or time out.
    assert executor.run(lambda: "ok", cost=100) == "ok"
    stats = executor.stats()
    assert (stats.running, stats.queued, stats.reserved_bytes) == (0, 0, 0)
    assert stats.completed == 51


def test_concurrent_failures_release_everything(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=3, queue_size=40, memory_budget=90)

    def fail() -> None:
        raise RuntimeError("decoder crashed")

    callers = [Caller(executor, fail, cost=30) for _ in range(40)]
    for caller in callers:
        caller.start()
    for caller in callers:
        with pytest.raises(RuntimeError):
            caller.outcome()
    stats = executor.stats()
    assert (stats.running, stats.queued, stats.reserved_bytes, stats.completed) == (0, 0, 0, 40)


# --- memory budget -----------------------------------------------------------------


def test_budget_is_never_exceeded_under_concurrency(
    make_executor: Callable[..., Executor],
) -> None:
    budget = 1000
    executor = make_executor(workers=4, queue_size=200, memory_budget=budget)
    costs = [random.Random(seed).randint(0, budget) for seed in range(200)]
    lock = threading.Lock()
    live_cost = 0
    seen: dict[str, int] = {"live_cost": 0, "reserved": 0, "overlap": 0}
    running = 0

    def job(cost: int) -> int:
        nonlocal live_cost, running
        with lock:
            live_cost += cost
            running += 1
            seen["live_cost"] = max(seen["live_cost"], live_cost)
            seen["overlap"] = max(seen["overlap"], running)
        seen["reserved"] = max(seen["reserved"], executor.stats().reserved_bytes)
        time.sleep(0.001)  # lets jobs overlap; nothing is asserted on timing
        with lock:
            live_cost -= cost
            running -= 1
        return cost

    callers = [Caller(executor, partial(job, cost), cost=cost) for cost in costs]
    for caller in callers:
        caller.start()
    assert [caller.outcome() for caller in callers] == costs

    stats = executor.stats()
    assert seen["live_cost"] <= budget
    assert seen["reserved"] <= budget
    assert stats.peak_reserved_bytes <= budget
    assert seen["overlap"] > 1  # the jobs really ran side by side
    assert (stats.completed, stats.reserved_bytes, stats.rejected_timeout) == (200, 0, 0)


def test_cost_above_the_budget_is_refused_at_once(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(memory_budget=100)
    ran = threading.Event()

    with pytest.raises(SourceTooLarge, match="exceeds the memory budget"):
        executor.run(ran.set, cost=101)
    assert not ran.is_set()
    assert executor.run(lambda: "fits", cost=100) == "fits"


def test_negative_cost_is_a_programming_error(make_executor: Callable[..., Executor]) -> None:
    with pytest.raises(ValueError):
        make_executor().run(lambda: None, cost=-1)


def test_big_job_is_not_starved_by_small_ones(make_executor: Callable[..., Executor]) -> None:
    executor = make_executor(workers=2, queue_size=10, memory_budget=100)
    order: list[str] = []
    first = Gate("small-first", order)
    holder = Caller(executor, first, cost=60)
    holder.start()
    assert first.started.wait(PATIENCE)

    big = Caller(executor, lambda: order.append("big"), cost=100)
    big.start()
    wait_until(lambda: queued_and_running(executor) == 2)
    # Each of these would fit next to the first job on the idle worker; strict
    # arrival order makes them wait behind the big job instead.
    smalls = [Caller(executor, partial(order.append, f"small-{i}"), cost=10) for i in range(5)]
    for caller in smalls:
        caller.start()
    wait_until(lambda: queued_and_running(executor) == 7)
    assert order == ["small-first"]

    first.release.set()
    for caller in [holder, big, *smalls]:
        caller.outcome()
    assert order[:2] == ["small-first", "big"]
    assert sorted(order[2:]) == [f"small-{i}" for i in range(5)]


# --- staged jobs: cost known only once the job runs --------------------------------


class Staged(threading.Thread):
    """A request thread calling ``run_staged``; its prepare step and work are gated."""

    def __init__(self, executor: Executor, cost: int, name: str, log: list[str]) -> None:
        super().__init__(daemon=True)
        self.executor = executor
        self.cost = cost
        self.log = log
        self.prepared = threading.Event()
        self.work = Gate(f"{name}-work", log)
        self.label = name
        self.result: Any = None
        self.error: BaseException | None = None

    def prepare(self) -> Ready[str]:
        self.log.append(f"{self.label}-prepare")
        self.prepared.set()
        return Ready(self.cost, self.work)

    def run(self) -> None:
        try:
            self.result = self.executor.run_staged(self.prepare)
        except BaseException as error:  # kept for the test to inspect
            self.error = error


def started_staged(
    executor: Executor, cost: int, name: str, log: list[str], reached: str
) -> Staged:
    """A started :class:`Staged` caller, once it has ``reached`` "prepared" or "work"."""
    job = Staged(executor, cost, name, log)
    job.start()
    event = job.prepared if reached == "prepared" else job.work.started
    assert event.wait(PATIENCE), f"{name} never {reached}"
    return job


def test_staged_jobs_prepare_only_on_a_free_worker(
    make_executor: Callable[..., Executor],
) -> None:
    """Queued staged jobs have not read anything: at most ``workers`` prepares run."""
    executor = make_executor(workers=2, queue_size=10, memory_budget=100)
    log: list[str] = []
    jobs = [Staged(executor, 10, f"j{i}", log) for i in range(5)]
    for job in jobs:
        job.start()
    wait_until(lambda: queued_and_running(executor) == 5)
    wait_until(lambda: sum(job.work.started.is_set() for job in jobs) == 2)
    assert sum(job.prepared.is_set() for job in jobs) == 2
    assert executor.stats().reserved_bytes == 20
    for job in jobs:
        job.work.release.set()
    for job in jobs:
        job.join(PATIENCE)
        assert job.error is None and job.result == f"{job.label}-work"
    assert executor.stats().reserved_bytes == 0


def test_staged_job_waits_for_budget_in_arrival_order(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=3, queue_size=10, memory_budget=100)
    log: list[str] = []
    holder = started_staged(executor, 60, "holder", log, reached="work")
    # prepared, now waiting for 90 of the 40 free
    big = started_staged(executor, 90, "big", log, reached="prepared")
    small = Staged(executor, 10, "small", log)
    small.start()
    wait_until(lambda: queued_and_running(executor) == 3)
    # small would fit, but big asked first and a waiting worker blocks the queue.
    assert not small.prepared.is_set() and not big.work.started.is_set()
    holder.work.release.set()
    assert big.work.started.wait(PATIENCE)
    big.work.release.set()
    small.work.release.set()
    for job in (holder, big, small):
        job.join(PATIENCE)
        assert job.error is None
    stats = executor.stats()
    assert stats.reserved_bytes == 0 and stats.peak_reserved_bytes <= 100


def test_staged_job_over_the_whole_budget_is_refused_without_its_work(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(memory_budget=100)
    log: list[str] = []
    job = Staged(executor, 101, "huge", log)
    job.start()
    job.join(PATIENCE)
    assert isinstance(job.error, SourceTooLarge)
    assert log == ["huge-prepare"]
    assert executor.stats().reserved_bytes == 0


def test_staged_budget_wait_ends_at_the_queue_deadline(
    make_executor: Callable[..., Executor],
) -> None:
    clock = [0.0]
    executor = make_executor(
        workers=2, memory_budget=100, queue_timeout=5.0, clock=lambda: clock[0]
    )
    log: list[str] = []
    holder = started_staged(executor, 80, "holder", log, reached="work")
    waiting = started_staged(executor, 50, "waiting", log, reached="prepared")
    clock[0] = 6.0
    with executor._lock:  # wake the waiter so it reads the moved clock
        executor._work_ready.notify_all()
    waiting.join(PATIENCE)
    assert isinstance(waiting.error, ProcessingTimeout)
    assert "waiting-work" not in log
    assert executor.stats().rejected_timeout == 1
    holder.work.release.set()
    holder.join(PATIENCE)
    assert holder.error is None and executor.stats().reserved_bytes == 0


def test_staged_errors_reach_the_caller_and_free_the_slot(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=1, memory_budget=100)

    def failing_prepare() -> Ready[str]:
        raise ValueError("unreadable source")

    def failing_work() -> str:
        raise KeyError("render failed")

    with pytest.raises(ValueError, match="unreadable"):
        executor.run_staged(failing_prepare)
    with pytest.raises(KeyError, match="render failed"):
        executor.run_staged(lambda: Ready(40, failing_work))
    assert executor.run_staged(lambda: Ready(100, lambda: "fits")) == "fits"
    stats = executor.stats()
    assert (stats.running, stats.reserved_bytes, stats.completed) == (0, 0, 3)


# --- lifecycle ---------------------------------------------------------------------


def test_shutdown_refuses_new_jobs_but_finishes_admitted_ones(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(workers=1, queue_size=2)
    gate = Gate()
    holder = Caller(executor, gate)
    holder.start()
    assert gate.started.wait(PATIENCE)
    queued = Caller(executor, lambda: "queued")
    queued.start()
    wait_until(lambda: executor.stats().queued == 1)

    executor.shutdown(wait=False)
    with pytest.raises(Overloaded):
        executor.run(lambda: "late")
    gate.release.set()
    assert holder.outcome() == "gate"
    assert queued.outcome() == "queued"
    executor.shutdown(wait=True)
    assert executor.stats().completed == 2


@pytest.mark.parametrize(
    ("workers", "queue_size", "queue_timeout", "memory_budget"),
    [(0, 1, 1.0, 1), (1, -1, 1.0, 1), (1, 1, 0.0, 1), (1, 1, 1.0, 0)],
)
def test_invalid_configuration_is_rejected(
    workers: int, queue_size: int, queue_timeout: float, memory_budget: int
) -> None:
    with pytest.raises(ValueError):
        Executor(workers, queue_size, queue_timeout, memory_budget)


# --- admissions: a place before the source is read ------------------------------------


def test_admitted_requests_count_against_workers_plus_queue(
    make_executor: Callable[..., Executor],
) -> None:
    """A request holds its place while it reads its source, before any job exists."""
    executor = make_executor(workers=1, queue_size=1)
    first, second = executor.admit(), executor.admit()
    assert (executor.stats().admitted, queued_and_running(executor)) == (2, 0)
    with pytest.raises(Overloaded):
        executor.admit()
    with pytest.raises(Overloaded):
        executor.run(lambda: "no place left")
    first.close()
    first.close()  # a second close gives back nothing more
    assert executor.run(lambda: "ran", admission=second) == "ran"
    second.close()
    assert executor.stats().admitted == 0
    assert executor.run(lambda: "own place") == "own place"


def test_a_job_takes_over_the_bytes_its_admission_reserved(
    make_executor: Callable[..., Executor],
) -> None:
    """The job's cost covers the downloaded source: reserved is the larger, not the sum."""
    executor = make_executor(memory_budget=100)
    seen: list[int] = []
    with executor.admit() as admission:
        admission.reserve(30)
        executor.run(
            lambda: seen.append(executor.stats().reserved_bytes), cost=80, admission=admission
        )
        executor.run(
            lambda: seen.append(executor.stats().reserved_bytes), cost=10, admission=admission
        )
        assert executor.stats().reserved_bytes == 30  # held until the request is done
    assert seen == [80, 30]
    assert executor.stats().reserved_bytes == 0


def test_downloads_hold_at_most_half_the_budget_and_wait_in_order_until_their_deadline(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(memory_budget=100, queue_timeout=0.3)
    holder = executor.admit()
    holder.reserve(40)
    waiting = executor.admit()
    with pytest.raises(ProcessingTimeout):
        waiting.reserve(20)  # 60 would be over half the budget, until the deadline
    assert executor.stats().rejected_timeout == 1
    # The next waiter's deadline is not what is tested: it must not pass while
    # this thread, on a busy machine, gets round to closing the holder.
    executor.queue_timeout = PATIENCE
    later = executor.admit()
    done = threading.Event()

    def reserve_later() -> None:
        later.reserve(20)
        done.set()

    thread = threading.Thread(target=reserve_later, daemon=True)
    thread.start()
    holder.close()  # gives its 40 back: the waiter gets its 20
    assert done.wait(PATIENCE)
    assert executor.stats().reserved_bytes == 20
    for admission in (waiting, later):
        admission.close()
    assert executor.stats().reserved_bytes == 0


def test_a_download_beyond_the_share_of_the_budget_is_refused_at_once(
    make_executor: Callable[..., Executor],
) -> None:
    executor = make_executor(memory_budget=100)
    with executor.admit() as admission:
        admission.reserve(30)
        with pytest.raises(SourceTooLarge):
            admission.reserve(21)
        assert admission.held == 30


def test_a_job_waiting_for_budget_goes_before_downloads(
    make_executor: Callable[..., Executor],
) -> None:
    """Downloads only take; a job gives back when it ends: the job at the head goes first.

    And with downloads at most half the budget, the head finds room once the
    jobs running before it are done, whatever is being downloaded.
    """
    executor = make_executor(workers=2, memory_budget=100)
    gate = Gate("running")
    running = Caller(executor, gate, cost=40)
    running.start()
    assert gate.started.wait(PATIENCE)
    downloaded = executor.admit()
    downloaded.reserve(30)  # 70 reserved: 30 free
    head = Caller(executor, lambda: "head", cost=50)
    head.start()
    wait_until(lambda: executor.stats().queued == 1)  # 50 does not fit yet
    downloading = executor.admit()
    reserved = threading.Event()
    thread = threading.Thread(target=lambda: (downloading.reserve(20), reserved.set()), daemon=True)
    thread.start()
    assert not reserved.wait(0.2)  # 20 would fit, but the head job came first
    gate.release.set()
    assert running.outcome() == "running"
    assert head.outcome() == "head"
    assert reserved.wait(PATIENCE)
    for admission in (downloaded, downloading):
        admission.close()
    assert executor.stats().reserved_bytes == 0


def test_stuck_workers_are_those_on_one_job_longer_than_the_limit(
    make_executor: Callable[..., Executor],
) -> None:
    now = [0.0]
    executor = make_executor(workers=2, clock=lambda: now[0])
    gates = [Gate("a"), Gate("b")]
    callers = [Caller(executor, gate) for gate in gates]
    callers[0].start()
    assert gates[0].started.wait(PATIENCE)
    now[0] = 5.0
    callers[1].start()
    assert gates[1].started.wait(PATIENCE)
    now[0] = 12.0
    assert [executor.stuck_workers(limit) for limit in (13.0, 10.0, 6.0)] == [0, 1, 2]
    for gate in gates:
        gate.release.set()
    for caller in callers:
        caller.outcome()
    assert executor.stuck_workers(0.0) == 0


def test_an_admission_restarts_its_deadline_after_waiting_elsewhere() -> None:
    """A request that waited for a peer process gets the whole queue timeout again."""
    now = [0.0]
    executor = Executor(1, 1, 5.0, 1024, clock=lambda: now[0])
    with executor.admit() as admission:
        assert admission.deadline == 5.0
        now[0] = 30.0  # a peer's lease was waited for
        admission.restart()
        assert admission.deadline == 35.0
        assert executor.run(lambda: "made", admission=admission) == "made"
    executor.shutdown()


def test_reading_the_source_does_not_count_against_the_queue_timeout() -> None:
    now = [0.0]
    executor = Executor(1, 1, 5.0, 1024, clock=lambda: now[0])
    with executor.admit() as admission:
        now[0] = 8.0  # 8 s spent reading a source from S3
        admission.extend(8.0)
        assert admission.deadline == 13.0
        assert executor.run(lambda: "made", admission=admission) == "made"
    executor.shutdown()
