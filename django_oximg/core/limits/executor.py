"""The bounded processing layer: a thread pool with a bounded queue and a memory budget.

Request threads (gunicorn gthread workers, Django view threads) call
:meth:`Executor.run` and block until their job is done. The executor protects the
process in three ways:

* **Admission.** At most ``workers + queue_size`` requests are admitted at once
  (:meth:`Executor.admit`; a plain :meth:`Executor.run` takes a place for
  itself). One that finds every place taken is refused at once with
  :class:`~django_oximg.core.errors.Overloaded` (a 429), because making a client wait
  for a place in the queue only moves the queue into the socket backlog. A
  request takes its place *before* it reads its source, and holds it while
  it downloads, waits for a worker and renders: so the requests a process
  is busy with, and the threads they hold, are bounded, and a refused one
  has read nothing.
* **Queue deadline.** A job that has not *started* ``queue_timeout`` seconds after its
  request was admitted is taken out of the queue and its caller gets
  :class:`~django_oximg.core.errors.ProcessingTimeout` (a 503). Removal and start
  happen under one lock, so an abandoned job never runs later. One deadline covers
  all of a request's waits (a read slot, budget, a worker); time spent reading its
  source pushes it back (:meth:`Admission.extend`), so the whole request waits at
  most ``queue_timeout`` in all, besides the read itself.
* **Memory budget.** Each job declares its estimated peak memory as ``cost``; it
  starts only once that many bytes can be reserved from ``memory_budget``, so many
  large images arriving together wait rather than exhaust the process. An
  admitted request reserves the bytes of a source as it downloads them
  (:meth:`Admission.reserve`); its job's cost then covers them.
* **Staged jobs** (:meth:`Executor.run_staged`) learn their cost only once they
  run: a worker first runs the job's ``prepare`` (read the source, read its
  header, estimate), which returns a :class:`Staged` work, then reserves the
  work's cost, then runs it.
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
the pipeline (a watchdog thread kills libvips work, or the child process of a render
whose encoder libvips cannot stop), where the work can actually be stopped. What is
kept here is when each running job started (:meth:`Executor.stuck_workers`), so the
health check can tell when every worker has been busy for longer than any job may
take.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, cast

from django_oximg.core.errors import Overloaded, ProcessingTimeout, SourceTooLarge
from django_oximg.core.limits.sources import check_memory

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: The share of the memory budget downloads may hold at once (see
#: ``Executor._download_can_reserve``): the rest is always there for jobs.
DOWNLOAD_SHARE = 0.5


class ExecutorStats(NamedTuple):
    """A consistent snapshot of an executor's counters, taken under its lock.

    ``completed`` counts jobs that ran to the end, whether they returned or raised.
    ``rejected_full`` counts :class:`Overloaded` refusals and ``rejected_timeout``
    counts jobs abandoned at the queue deadline.
    """

    workers: int
    #: Requests holding a place (running, queued, or reading their source).
    admitted: int
    queued: int
    running: int
    reserved_bytes: int
    peak_reserved_bytes: int
    rejected_full: int
    rejected_timeout: int
    completed: int


class Staged(Protocol[T_co]):
    """A job's work once it is known: its estimated peak memory, and the work itself.

    What the ``prepare`` step of :meth:`Executor.run_staged` returns; the
    worker reserves :attr:`cost` before it calls :meth:`run`.
    """

    @property
    def cost(self) -> int:
        """Peak memory in bytes, reserved from the budget while :meth:`run` runs."""
        ...

    def run(self) -> T_co:
        """Do the work (on a worker thread) and return its result."""
        ...


class Ready(NamedTuple, Generic[T]):
    """A :class:`Staged` work that is a function: a plain :meth:`Executor.run` job's."""

    cost: int
    work: Callable[[], T]

    def run(self) -> T:
        return self.work()


class _State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class Admission:
    """A request's place among the ``workers + queue_size`` an executor admits.

    Taken with :meth:`Executor.admit` before the request reads anything and
    given back when it is done with (``with``, or :meth:`close`). Meanwhile
    the request may reserve budget for bytes it is about to hold
    (:meth:`reserve`: a source being downloaded), and hands the place to
    its job (``admission=`` of :meth:`Executor.run`), whose cost then covers
    those bytes. Every wait (for memory, for a read slot, for a worker)
    ends at :attr:`deadline`, the queue timeout after admission, pushed back
    by the time spent reading the source (:meth:`extend`), or started afresh
    after waiting for a peer process (:meth:`restart`).
    """

    def __init__(self, executor: Executor, deadline: float) -> None:
        self._executor = executor
        self.deadline = deadline
        #: Bytes reserved through :meth:`reserve`, held until :meth:`close`.
        self.held = 0
        self.closed = False

    def reserve(self, nbytes: int) -> None:
        """Reserve ``nbytes`` more of the budget, waiting in arrival order behind jobs.

        Raises :class:`SourceTooLarge` when the bytes held would exceed the
        share of the budget downloads may hold (:data:`DOWNLOAD_SHARE`),
        :class:`ProcessingTimeout` when no room appears by :attr:`deadline`
        or the admission was closed already (a read that went on after its
        request gave up).
        """
        self._executor._reserve_held(self, nbytes)

    def restart(self) -> None:
        """Start the queue timeout afresh, as for a request admitted now.

        For a request that waited on something that is not this process's
        queue (a peer process's render of the same key): that wait has its
        own bound, and must not leave the request too little time to be
        served itself.
        """
        self._executor._move_deadline(self, None)

    def extend(self, seconds: float) -> None:
        """Push the deadline back by ``seconds`` spent working, not waiting (a source read)."""
        self._executor._move_deadline(self, seconds)

    def close(self) -> None:
        """Give the place and every byte held back (once; later calls do nothing)."""
        self._executor._release(self)

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


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
        prepare: Callable[[], Staged[T]],
        staged: bool,
        admission: Admission,
    ) -> None:
        #: Returns the job's work and its cost; for a plain job, the function
        #: itself with ``cost``, both known before the job starts.
        self.prepare = prepare
        #: Whether the cost is reserved only after ``prepare`` (:meth:`Executor.run_staged`).
        self.staged = staged
        self.cost = cost
        self.admission = admission
        #: Bytes reserved for the job beyond what its admission holds already.
        self.extra = 0
        #: When the job must have started (set when queued), and when it did.
        self.deadline = math.inf
        self.started = math.inf
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
        #: Downloads (admitted requests reserving their source's bytes), waiting
        #: in order for theirs, after every job.
        self._download_waiters: deque[Admission] = deque()
        #: Bytes downloads hold (:attr:`Admission.held`, summed).
        self._held = 0
        self._threads: list[threading.Thread] = []
        self._shutting_down = False
        self._running_jobs: set[_Job[Any]] = set()
        self._admitted = 0
        self._reserved = 0
        self._peak_reserved = 0
        self._rejected_full = 0
        self._rejected_timeout = 0
        self._completed = 0

    def admit(self) -> Admission:
        """A place for one request, or :class:`Overloaded` at once when none is free."""
        with self._lock:
            self._refuse_if_full()
            self._admitted += 1
            return Admission(self, self._clock() + self.queue_timeout)

    def run(self, fn: Callable[[], T], *, cost: int = 0, admission: Admission | None = None) -> T:
        """Run ``fn`` on a worker thread and return its result or raise its exception.

        ``cost`` is the job's estimated peak memory in bytes, reserved from the budget
        before the job starts and released when it ends, whatever the outcome
        (less what ``admission`` holds already). ``admission`` is the caller's
        place (:meth:`admit`); without one the job takes a place of its own.
        Do not call ``run`` from inside a job: the inner call would wait for a
        worker that the outer one holds.
        """
        if cost < 0:
            raise ValueError("cost must not be negative")
        self._check_fits(cost)
        if admission is None:
            with self.admit() as own:
                return self.run(fn, cost=cost, admission=own)
        ready = Ready(cost, fn)
        return self._submit(_Job(self._lock, cost, lambda: ready, False, admission))

    def run_staged(
        self,
        prepare: Callable[[], Staged[T]],
        *,
        admission: Admission | None = None,
    ) -> T:
        """Run ``prepare`` on a worker, reserve the cost of the work it returns, then run it.

        ``prepare()`` returns a :class:`Staged` work. It runs once a worker
        takes the job (in arrival order, like :meth:`run`); the worker then
        waits for the work's ``cost`` bytes of budget (in arrival order among
        staged jobs, until the job's queue deadline: :class:`ProcessingTimeout`),
        runs it and frees the budget. A cost above the whole budget raises
        :class:`SourceTooLarge` without running the work. For jobs that must
        read something big before their cost is known, so that waiting
        requests hold nothing. ``admission`` as for :meth:`run`.
        """
        if admission is None:
            with self.admit() as own:
                return self.run_staged(prepare, admission=own)
        return self._submit(_Job(self._lock, 0, prepare, True, admission))

    def _check_fits(self, cost: int) -> None:
        check_memory(cost, self.memory_budget)

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

    def stats(self) -> ExecutorStats:
        """Return the current counters as one consistent snapshot."""
        with self._lock:
            return ExecutorStats(
                workers=self.workers,
                admitted=self._admitted,
                queued=len(self._waiting),
                running=len(self._running_jobs),
                reserved_bytes=self._reserved,
                peak_reserved_bytes=self._peak_reserved,
                rejected_full=self._rejected_full,
                rejected_timeout=self._rejected_timeout,
                completed=self._completed,
            )

    def stuck_workers(self, longer_than: float) -> int:
        """How many workers have been on their current job for more than ``longer_than`` s."""
        with self._lock:
            since = self._clock() - longer_than
            return sum(1 for job in self._running_jobs if job.started < since)

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
        if self._admitted >= self.workers + self.queue_size:
            self._rejected_full += 1
            raise Overloaded(
                f"{self._admitted} requests admitted: {len(self._running_jobs)} jobs running and "
                f"{len(self._waiting)} waiting (limit {self.workers} + {self.queue_size})"
            )

    def _admit(self, job: _Job[T]) -> None:
        """Queue ``job`` (its request is admitted already); the caller holds the lock."""
        if self._shutting_down:
            raise Overloaded("the executor is shut down")
        if job.admission.closed:
            raise ValueError("the job's admission is closed")
        self._start_workers()
        # The admission's deadline: one queue timeout covers every wait of a
        # request (a read slot, budget for its download, a worker), not one each.
        job.deadline = job.admission.deadline
        self._waiting.append(job)
        # Downloads waiting for budget sleep on the same condition: one
        # notify() could wake one of them instead of an idle worker.
        if self._download_waiters:
            self._work_ready.notify_all()
        else:
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

        Nothing starts while a staged job waits for budget: it came first.
        Downloads waiting for budget do not hold jobs back (below).
        """
        return (
            bool(self._waiting)
            and not self._budget_waiters
            and self._extra_for(self._waiting[0], self._waiting[0].cost)
            <= self.memory_budget - self._reserved
        )

    def _download_can_reserve(self, admission: Admission, nbytes: int) -> bool:
        """Whether a download may take ``nbytes`` now; the caller holds the lock.

        Jobs go first: none may be waiting for budget, at the head of the
        queue or on a worker, because a job gives bytes back when it ends
        and a download only takes more. And downloads together hold at most
        :data:`DOWNLOAD_SHARE` of the budget: requests that have downloaded
        their source wait for a worker holding it, and were they allowed to
        fill the budget, the job at the head of the queue would find no room
        while no job runs to make any, a deadlock the queue timeout would
        break with 503s.
        """
        head_blocked = bool(self._waiting) and not self._head_can_start()
        return (
            self._download_waiters[0] is admission
            and not self._budget_waiters
            and not head_blocked
            and self._held + nbytes <= self.memory_budget * DOWNLOAD_SHARE
            and nbytes <= self.memory_budget - self._reserved
        )

    @staticmethod
    def _extra_for(job: _Job[Any], cost: int) -> int:
        """What ``job`` must reserve for ``cost`` beyond the bytes its admission holds."""
        return max(0, cost - job.admission.held)

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
            extra = self._extra_for(job, cost)
            self._budget_waiters.append(job)
            try:
                self._wait(
                    lambda: (
                        self._budget_waiters[0] is job
                        and extra <= self.memory_budget - self._reserved
                    ),
                    job.deadline,
                    f"no memory budget for {extra} bytes",
                )
            finally:
                self._budget_waiters.remove(job)
                self._work_ready.notify_all()  # the next waiter, or the queue's head
            job.cost, job.extra = cost, extra
            self._take_budget(extra)

    def _reserve_held(self, admission: Admission, nbytes: int) -> None:
        """:meth:`Admission.reserve`: ``nbytes`` more for an admitted request."""
        if nbytes < 0:
            raise ValueError("nbytes must not be negative")
        with self._lock:
            if admission.closed:
                raise ProcessingTimeout("the request gave up its place")
            if admission.held + nbytes > self.memory_budget * DOWNLOAD_SHARE:
                raise SourceTooLarge(
                    f"{admission.held + nbytes} bytes of source would exceed the share of "
                    f"the memory budget ({self.memory_budget} bytes) downloads may hold"
                )
            self._download_waiters.append(admission)
            try:
                self._wait(
                    lambda: admission.closed or self._download_can_reserve(admission, nbytes),
                    admission.deadline,
                    f"no memory budget for {nbytes} bytes of a download",
                )
            finally:
                self._download_waiters.remove(admission)
                self._work_ready.notify_all()
            if admission.closed:  # closed while it waited
                raise ProcessingTimeout("the request gave up its place")
            admission.held += nbytes
            self._held += nbytes
            self._take_budget(nbytes)

    def _wait(self, ready: Callable[[], bool], deadline: float, refusal: str) -> None:
        """Wait until ``ready()``; the caller holds the lock.

        Gives up at ``deadline`` with :class:`ProcessingTimeout`, saying ``refusal``.
        """
        while not ready():
            remaining = deadline - self._clock()
            if remaining <= 0:
                self._rejected_timeout += 1
                raise ProcessingTimeout(
                    f"{refusal} within {self.queue_timeout:g} s ({self._reserved} bytes reserved)"
                )
            self._work_ready.wait(remaining)

    def _take_budget(self, nbytes: int) -> None:
        self._reserved += nbytes
        self._peak_reserved = max(self._peak_reserved, self._reserved)

    def _move_deadline(self, admission: Admission, seconds: float | None) -> None:
        """:meth:`Admission.restart` (``seconds`` None) and :meth:`Admission.extend`."""
        with self._lock:
            if seconds is None:
                admission.deadline = self._clock() + self.queue_timeout
            else:
                admission.deadline += seconds

    def _release(self, admission: Admission) -> None:
        """:meth:`Admission.close`: the place and the bytes it holds back to the pool."""
        with self._lock:
            if admission.closed:
                return
            admission.closed = True
            self._admitted -= 1
            self._reserved -= admission.held
            self._held -= admission.held
            admission.held = 0
            self._work_ready.notify_all()  # freed budget may let someone start

    def _take_head(self) -> _Job[Any]:
        """Reserve the head job's cost and mark it running; the caller holds the lock."""
        job = self._waiting.popleft()
        job.state = _State.RUNNING
        job.started = self._clock()
        self._running_jobs.add(job)
        job.extra = self._extra_for(job, job.cost)
        self._take_budget(job.extra)
        job.changed.notify()
        if self._download_waiters:
            self._work_ready.notify_all()  # the head moved on: a download may go now
        elif self._head_can_start():
            self._work_ready.notify()  # the next job fits too: wake another idle worker
        return job

    def _execute(self, job: _Job[Any]) -> None:
        """Run one job outside the lock, then record its outcome and free its slot."""
        try:
            work = job.prepare()
            if job.staged:
                self._check_fits(work.cost)
                self._reserve(job, work.cost)
            job.result = work.run()
        except BaseException as error:  # not swallowed: run() re-raises it in the caller
            job.error = error
        finally:
            with self._lock:
                job.state = _State.DONE
                self._running_jobs.discard(job)
                self._reserved -= job.extra
                self._completed += 1
                job.changed.notify()
                # Released budget may let the head start, possibly on another worker.
                self._work_ready.notify_all()
