"""The bounded processing layer: a thread pool with a bounded queue and a memory budget.

Request threads (gunicorn gthread workers, Django view threads) call
:meth:`Executor.run` and block until their job is done. The executor protects the
process in three ways:

* **Admission.** At most ``workers + queue_size`` jobs are in the executor at once
  (running plus waiting). A call that finds it full is refused at once with
  :class:`~django_oximg.core.errors.Overloaded` (a 429), because making a client wait
  for a place in the queue only moves the queue into the socket backlog.
* **Queue deadline.** A job that has not *started* ``queue_timeout`` seconds after it
  arrived is taken out of the queue and its caller gets
  :class:`~django_oximg.core.errors.ProcessingTimeout` (a 503). Removal and start
  happen under one lock, so an abandoned job never runs later.
* **Memory budget.** Each job declares its estimated peak memory as ``cost``; it
  starts only once that many bytes can be reserved from ``memory_budget``, so many
  large images arriving together wait rather than exhaust the process.
* **Staged jobs** (:meth:`Executor.run_staged`) learn their cost only once they
  run: a worker first runs the job's ``prepare`` (read the source, read its
  header, estimate), then reserves the cost it returned, then runs the work.
  Queued requests therefore hold nothing: at most ``workers`` sources are in
  memory, not one per queued request (a deep queue of 13.5 MB photos held
  600-800 MiB before this). While a worker waits for budget, no other job
  starts, so the waits stay in arrival order.

Fairness: jobs start strictly in arrival order. When the job at the head of the
queue is waiting for budget, the jobs behind it wait too, even small ones that would
fit. That wastes some budget while a large job waits for room, but a large job can
never be starved by a stream of small ones, and its wait is bounded by the queue
deadline like everyone else's.

The running time of a job is not bounded here: the render deadline is enforced inside
the pipeline (a watchdog thread kills libvips work), where the work can actually be
stopped.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from django_oximg.core.errors import Overloaded, ProcessingTimeout, SourceTooLarge

T = TypeVar("T")


@dataclass(frozen=True)
class ExecutorStats:
    """A consistent snapshot of an executor's counters, taken under its lock.

    ``completed`` counts jobs that ran to the end, whether they returned or raised.
    ``rejected_full`` counts :class:`Overloaded` refusals and ``rejected_timeout``
    counts jobs abandoned at the queue deadline.
    """

    workers: int
    queued: int
    running: int
    reserved_bytes: int
    peak_reserved_bytes: int
    rejected_full: int
    rejected_timeout: int
    completed: int


class _State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class _Job(Generic[T]):
    """One call to :meth:`Executor.run` or :meth:`Executor.run_staged`: its steps, cost,
    outcome and wake-up condition.

    ``changed`` shares the executor's lock, so the caller can wait for its own job
    without being woken by every other job's progress.
    """

    def __init__(
        self,
        lock: threading.Lock,
        cost: int,
        prepare: Callable[[], tuple[int, Callable[[], T]]],
        staged: bool,
    ) -> None:
        #: Returns the job's cost and its work; for a plain job, ``cost`` and the
        #: function itself, known before the job starts.
        self.prepare = prepare
        #: Whether the cost is reserved only after ``prepare`` (:meth:`Executor.run_staged`).
        self.staged = staged
        self.cost = cost
        #: When the job must have started (set at admission).
        self.deadline = math.inf
        self.changed = threading.Condition(lock)
        self.state = _State.QUEUED
        self.result: T | None = None
        self.error: BaseException | None = None


class Executor:
    """A fixed pool of worker threads behind a bounded FIFO queue and a memory budget.

    All state is guarded by one lock. Workers wait on ``_work_ready`` and each job's
    caller waits on its own condition over the same lock, so nothing polls.
    ``clock`` is the monotonic clock used for deadlines; tests may inject one.
    Worker threads start on first use (so an executor built before a fork does not
    carry dead threads) and are daemons, so a forgotten :meth:`shutdown` cannot keep
    the interpreter alive.
    """

    def __init__(
        self,
        workers: int,
        queue_size: int,
        queue_timeout: float,
        memory_budget: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        if queue_size < 0:
            raise ValueError("queue_size must not be negative")
        if queue_timeout <= 0:
            raise ValueError("queue_timeout must be positive")
        if memory_budget < 1:
            raise ValueError("memory_budget must be positive")
        self.workers = workers
        self.queue_size = queue_size
        self.queue_timeout = queue_timeout
        self.memory_budget = memory_budget
        self._clock = clock
        self._lock = threading.Lock()
        self._work_ready = threading.Condition(self._lock)
        self._waiting: deque[_Job[Any]] = deque()
        #: Staged jobs, prepared on a worker, waiting in order for their budget.
        self._budget_waiters: deque[_Job[Any]] = deque()
        self._threads: list[threading.Thread] = []
        self._shutting_down = False
        self._running = 0
        self._reserved = 0
        self._peak_reserved = 0
        self._rejected_full = 0
        self._rejected_timeout = 0
        self._completed = 0

    def run(self, fn: Callable[[], T], *, cost: int = 0) -> T:
        """Run ``fn`` on a worker thread and return its result or raise its exception.

        ``cost`` is the job's estimated peak memory in bytes, reserved from the budget
        before the job starts and released when it ends, whatever the outcome.
        Do not call ``run`` from inside a job: the inner call would wait for a
        worker that the outer one holds.
        """
        if cost < 0:
            raise ValueError("cost must not be negative")
        self._check_fits(cost)
        return self._submit(_Job(self._lock, cost, lambda: (cost, fn), staged=False))

    def run_staged(self, prepare: Callable[[], tuple[int, Callable[[], T]]]) -> T:
        """Run ``prepare`` on a worker, reserve the cost it returns, then run its work.

        ``prepare()`` returns ``(cost, work)``. It runs once a worker takes the
        job (in arrival order, like :meth:`run`); the worker then waits for
        ``cost`` bytes of budget (in arrival order among staged jobs, until the
        job's queue deadline: :class:`ProcessingTimeout`), runs ``work()`` and
        frees the budget. A cost above the whole budget raises
        :class:`SourceTooLarge` without running ``work``. For jobs that must
        read something big before their cost is known, so that waiting
        requests hold nothing.
        """
        return self._submit(_Job(self._lock, 0, prepare, staged=True))

    def _check_fits(self, cost: int) -> None:
        if cost > self.memory_budget:
            raise SourceTooLarge(
                f"job needs {cost} bytes, which exceeds the memory budget "
                f"of {self.memory_budget} bytes"
            )

    def _submit(self, job: _Job[T]) -> T:
        """Admit ``job``, wait until it is done and hand back its result or error."""
        with self._lock:
            self._admit(job)
            try:
                self._wait_for_start(job)
                while job.state is not _State.DONE:
                    job.changed.wait()
            except BaseException:
                # The caller was interrupted while waiting: a queued job must not
                # run for nobody. A running one finishes and frees its own budget.
                self._abandon(job)
                raise
        if job.error is not None:
            error = job.error
            job.error = None  # break the job -> traceback -> frame -> job cycle
            raise error
        return cast(T, job.result)

    def check_capacity(self) -> None:
        """Raise :class:`Overloaded` now if a job arriving now would be refused.

        Lets a caller shed load before it spends time reading a source; the
        authoritative check is still made in :meth:`run`.
        """
        with self._lock:
            self._refuse_if_full()

    def stats(self) -> ExecutorStats:
        """Return the current counters as one consistent snapshot."""
        with self._lock:
            return ExecutorStats(
                workers=self.workers,
                queued=len(self._waiting),
                running=self._running,
                reserved_bytes=self._reserved,
                peak_reserved_bytes=self._peak_reserved,
                rejected_full=self._rejected_full,
                rejected_timeout=self._rejected_timeout,
                completed=self._completed,
            )

    def is_alive(self) -> bool:
        """Whether jobs are still admitted: not shut down, and no started worker has died."""
        with self._lock:
            return not self._shutting_down and all(t.is_alive() for t in self._threads)

    def shutdown(self, wait: bool = True) -> None:
        """Stop admitting jobs; with ``wait``, block until the workers have exited.

        Jobs already admitted still run (or reach their queue deadline), so requests
        in flight while the runtime is rebuilt are served rather than dropped.
        """
        with self._lock:
            self._shutting_down = True
            self._work_ready.notify_all()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                thread.join()

    def _refuse_if_full(self) -> None:
        """Raise :class:`Overloaded` when no job may be admitted; the caller holds the lock."""
        if self._shutting_down:
            raise Overloaded("the executor is shut down")
        if self._running + len(self._waiting) >= self.workers + self.queue_size:
            self._rejected_full += 1
            raise Overloaded(
                f"{self._running} jobs running and {len(self._waiting)} waiting "
                f"(limit {self.workers} + {self.queue_size})"
            )

    def _admit(self, job: _Job[T]) -> None:
        """Queue ``job`` or refuse it at once; the caller holds the lock."""
        self._refuse_if_full()
        self._start_workers()
        job.deadline = self._clock() + self.queue_timeout
        self._waiting.append(job)
        self._work_ready.notify()

    def _wait_for_start(self, job: _Job[T]) -> None:
        """Block until a worker takes ``job``, or abandon it at the queue deadline."""
        deadline = job.deadline
        while job.state is _State.QUEUED:
            remaining = deadline - self._clock()
            if remaining <= 0:
                self._abandon(job)
                self._rejected_timeout += 1
                raise ProcessingTimeout(
                    f"job did not start within {self.queue_timeout:g} s "
                    f"({len(self._waiting)} waiting, {self._reserved} bytes reserved)"
                )
            job.changed.wait(remaining)

    def _abandon(self, job: _Job[T]) -> None:
        """Take a still-queued job out of the queue; the caller holds the lock."""
        if job.state is _State.QUEUED:
            self._waiting.remove(job)
            job.state = _State.DONE
            # The next job may now be at the head, and may fit the budget.
            self._work_ready.notify_all()

    def _start_workers(self) -> None:
        if self._threads:
            return
        for number in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"oximg-worker-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _head_can_start(self) -> bool:
        """Whether the oldest waiting job fits the free budget (strict FIFO).

        Nothing starts while a staged job waits for budget: it arrived first.
        """
        return (
            bool(self._waiting)
            and not self._budget_waiters
            and self._waiting[0].cost <= self.memory_budget - self._reserved
        )

    def _work(self) -> None:
        """A worker's loop: take the head job when it fits, run it, release its budget."""
        while True:
            with self._lock:
                while not self._head_can_start():
                    if self._shutting_down and not self._waiting:
                        return
                    self._work_ready.wait()
                job = self._take_head()
            self._execute(job)

    def _reserve(self, job: _Job[Any], cost: int) -> None:
        """Wait, in arrival order, until ``cost`` fits the budget; reserve it for ``job``.

        Called on the worker running a staged job, outside the lock. Gives up
        at the job's queue deadline. No deadlock: a waiting worker holds no
        budget, so once every running job has finished the first waiter fits
        (its cost is within the whole budget).
        """
        with self._lock:
            self._budget_waiters.append(job)
            try:
                while not (
                    self._budget_waiters[0] is job and cost <= self.memory_budget - self._reserved
                ):
                    remaining = job.deadline - self._clock()
                    if remaining <= 0:
                        self._rejected_timeout += 1
                        raise ProcessingTimeout(
                            f"no memory budget for {cost} bytes within {self.queue_timeout:g} s "
                            f"({self._reserved} bytes reserved)"
                        )
                    self._work_ready.wait(remaining)
            finally:
                self._budget_waiters.remove(job)
                self._work_ready.notify_all()  # the next waiter, or the queue's head
            job.cost = cost
            self._reserved += cost
            self._peak_reserved = max(self._peak_reserved, self._reserved)

    def _take_head(self) -> _Job[Any]:
        """Reserve the head job's cost and mark it running; the caller holds the lock."""
        job = self._waiting.popleft()
        job.state = _State.RUNNING
        self._running += 1
        self._reserved += job.cost
        self._peak_reserved = max(self._peak_reserved, self._reserved)
        job.changed.notify()
        if self._head_can_start():
            self._work_ready.notify()  # the next job fits too: wake another idle worker
        return job

    def _execute(self, job: _Job[Any]) -> None:
        """Run one job outside the lock, then record its outcome and free its slot."""
        try:
            cost, work = job.prepare()
            if job.staged:
                self._check_fits(cost)
                self._reserve(job, cost)
            job.result = work()
        except BaseException as error:  # not swallowed: run() re-raises it in the caller
            job.error = error
        finally:
            with self._lock:
                job.state = _State.DONE
                self._running -= 1
                self._reserved -= job.cost
                self._completed += 1
                job.changed.notify()
                # Released budget may let the head start, possibly on another worker.
                self._work_ready.notify_all()
