"""Reads of remote sources: how many at once, and how long each may take.

Part of step 5 of a request (the map: :mod:`django_oximg.core.serving`).

Sources on local disk are read on the render workers. Every other store (an
HTTP source, S3, any other Django storage) is read on the request thread,
so a network wait never holds a render slot; :class:`SourceReads` bounds
those reads per process:

* **Slots.** At most ``slots`` reads run at once; a request that finds none
  free waits for one until its admission's deadline (the queue timeout:
  503), holding nothing. The requests themselves are admitted first
  (:meth:`~django_oximg.core.limits.executor.Executor.admit`), so at most
  ``workers + queue_size`` wait here.
* **Memory.** The store reserves the bytes it is about to hold from the
  memory budget as it reads (the ``reserve`` argument of
  :meth:`~django_oximg.core.stores.SourceStore.read`, bound to the request's
  admission), so downloads in flight count against ``MEMORY_BUDGET``.
* **Time.** Each read runs on a thread of its own, and the request waits
  for it at most ``timeout`` seconds (504 after). The read's time does not
  count against the request's queue timeout (:meth:`Admission.extend
  <django_oximg.core.limits.executor.Admission.extend>`). Python cannot stop a
  thread, so a read that hangs (a storage that never answers, a DNS lookup
  that never returns) keeps its thread *and its slot* until it returns:
  hung reads cannot pile up threads beyond ``slots``, and the health check
  reports the process degraded once every slot is held by one
  (:meth:`SourceReads.stuck`). HTTP sources stop themselves at
  ``HTTP_TIMEOUT``, sooner than this.

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django_oximg.core.errors import ProcessingTimeout, SourceTimeout
from django_oximg.core.limits.executor import Admission
from django_oximg.core.stores.protocols import SourceStore

#: Told how a read ended that its request stopped waiting for: None when it
#: returned the bytes (too late), else its error.
LateOutcome = Callable[[BaseException | None], None]


class _Read:
    """One read on its own thread: its outcome, and when it must have finished."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.done = threading.Event()
        self.data: bytes | None = None
        self.error: BaseException | None = None
        #: Set when the request stopped waiting: then ``late`` hears the outcome.
        self.abandoned = False
        self.late: LateOutcome | None = None


class SourceReads:
    """Bounds the remote source reads of one process (thread-safe)."""

    def __init__(
        self, slots: int, timeout: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.slots = slots
        self.timeout = timeout
        self._clock = clock
        self._changed = threading.Condition()
        self._running: set[_Read] = set()

    def read(
        self,
        store: SourceStore,
        name: str,
        max_bytes: int,
        admission: Admission,
        late: LateOutcome | None = None,
    ) -> bytes:
        """``store.read(name, max_bytes)`` in a slot, within the timeout, its bytes reserved.

        Raises what the store raises, :class:`SourceTimeout` after
        ``timeout`` seconds, or :class:`ProcessingTimeout` when no slot was
        free by the admission's deadline. A read given up on goes on in its
        thread; ``late`` hears how it ended (a storage that hung, then
        answered, is working again).
        """
        read = self._take_slot(admission.deadline)
        read.late = late
        started = self._clock()
        thread = threading.Thread(
            target=self._run,
            args=(read, store, name, max_bytes, admission),
            name="oximg-source-read",
            daemon=True,
        )
        thread.start()
        if not read.done.wait(max(0.0, read.deadline - self._clock())):
            with self._changed:
                read.abandoned = not read.done.is_set()
            if read.abandoned:
                # The thread goes on, holding its slot, until the store returns.
                raise SourceTimeout(f"reading {name[:300]!r} took longer than {self.timeout:g} s")
        # Reading is not waiting: the request's queue timeout is for its waits.
        admission.extend(self._clock() - started)
        if read.error is not None:
            error, read.error = read.error, None  # no read -> traceback -> frame cycle
            raise error
        assert read.data is not None
        return read.data

    def stuck(self) -> int:
        """How many slots are held by reads that outlived their timeout."""
        with self._changed:
            now = self._clock()
            return sum(1 for read in self._running if read.deadline < now)

    def in_use(self) -> int:
        with self._changed:
            return len(self._running)

    def _take_slot(self, until: float) -> _Read:
        with self._changed:
            while len(self._running) >= self.slots:
                remaining = until - self._clock()
                if remaining <= 0:
                    raise ProcessingTimeout(
                        f"no free source read slot within the queue timeout "
                        f"({self.slots} reads running)"
                    )
                self._changed.wait(remaining)
            read = _Read(self._clock() + self.timeout)
            self._running.add(read)
            return read

    def _run(
        self, read: _Read, store: SourceStore, name: str, max_bytes: int, admission: Admission
    ) -> None:
        try:
            read.data = store.read(name, max_bytes, reserve=admission.reserve)
        except BaseException as error:  # handed to the request thread, which re-raises it
            read.error = error
        finally:
            with self._changed:
                self._running.discard(read)
                self._changed.notify()
                read.done.set()
                abandoned = read.abandoned
        if abandoned and read.late is not None:
            outcome, read.error, read.data = read.error, None, None
            read.late(outcome)
