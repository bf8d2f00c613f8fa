"""Calls to something that may stop answering, each waited for at most a bound.

A Redis server that is frozen (stopped, or behind a partition that drops
packets) does not refuse a call: the call waits for the client's own socket
timeout, which may be long or none at all. Python cannot interrupt a thread
blocked in a socket read, so :class:`BoundedCalls` runs each call on one of
a fixed number of threads of its own and the caller stops waiting after
``timeout`` seconds (:class:`CallTimedOut`), whether its call was still
queued (it is then dropped, never made late) or running (the thread stays
blocked until the client gives up). So a dependency that hangs costs a few
threads, never one per request, and a burst of quick calls merely queues.

The threads are started on first use and kept (a call costs a hand-over
between two threads, not a thread start), and are daemons, so a hung one
never keeps the interpreter alive. A process forked after they started
(gunicorn ``--preload``) starts its own.

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class CallTimedOut(Exception):
    """A bounded call did not return in time, or no thread was free to make it."""


class _Call(Generic[T]):
    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        #: Set when the caller stopped waiting before a thread took the call:
        #: it is then dropped rather than made late.
        self.abandoned = False
        self.result: T | None = None
        self.error: BaseException | None = None


#: Calls that may wait for a thread at once; one more fails at once (its
#: dependency is so far behind that waiting could only end in a timeout).
MAX_PENDING = 256


class BoundedCalls:
    """Runs calls on at most ``threads`` threads; callers wait at most ``timeout`` s each."""

    def __init__(self, name: str, threads: int, timeout: float, first_timeout: float = 0.0) -> None:
        """``first_timeout`` (when longer) bounds the calls made before any has
        answered: a process's first call may import the client's library and
        connect, which a busy process does slowly."""
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.name = name
        self.threads = threads
        self.timeout = timeout
        self.first_timeout = max(timeout, first_timeout)
        self._answered = False
        self._ready = threading.Condition()
        self._pending: deque[_Call[Any]] = deque()
        self._threads: list[threading.Thread] = []
        #: Threads inside a call (blocked in it, for a dependency that hangs).
        self._busy = 0

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``'s result or exception; :class:`CallTimedOut` after ``timeout`` s."""
        call = _Call(fn)
        self._submit(call)
        limit = self.timeout if self._answered else self.first_timeout
        if not call.done.wait(limit):
            with self._ready:
                call.abandoned = True
            raise CallTimedOut(f"{self.name}: no answer within {limit:g} s")
        self._answered = True
        if call.error is not None:
            error, call.error = call.error, None  # no call -> traceback -> frame cycle
            raise error
        return cast(T, call.result)

    def stuck(self) -> int:
        """Threads inside a call now (each one blocked, when the dependency hangs)."""
        with self._ready:
            return self._busy

    def queued(self) -> int:
        """Calls waiting for a thread now."""
        with self._ready:
            return len(self._pending)

    def _submit(self, call: _Call[Any]) -> None:
        with self._ready:
            self._threads = [thread for thread in self._threads if thread.is_alive()]
            idle = len(self._threads) - self._busy - len(self._pending)
            if idle <= 0 and len(self._threads) < self.threads:
                thread = threading.Thread(target=self._work, name=f"oximg-{self.name}", daemon=True)
                self._threads.append(thread)
                thread.start()
            elif len(self._pending) >= MAX_PENDING:
                raise CallTimedOut(f"{self.name}: {MAX_PENDING} calls already waiting")
            self._pending.append(call)
            self._ready.notify()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                call = self._pending.popleft()
                if call.abandoned:
                    continue
                self._busy += 1
            try:
                call.result = call.fn()
            except BaseException as error:  # handed to the caller, which re-raises it
                call.error = error
            finally:
                with self._ready:
                    self._busy -= 1
                call.done.set()


class Breaker:
    """After a failure, no calls for ``pause`` seconds: a dependency that hangs is not
    waited for by every request in turn.

    ``closed()`` says whether to call now; :meth:`opened` records a failure and
    :meth:`reset` a success. Once the pause is over, calls are tried again (the
    first that works resets it).
    """

    def __init__(self, pause: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.pause = pause
        self._clock = clock
        self._open_until = float("-inf")

    def closed(self) -> bool:
        return self._clock() >= self._open_until

    def opened(self) -> None:
        self._open_until = self._clock() + self.pause

    def reset(self) -> None:
        self._open_until = float("-inf")
