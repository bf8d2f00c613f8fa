"""Single-flight: identical concurrent requests share one job.

Part of step 4 of a request (the map: :mod:`django_oximg.core.serving`).

When fifty clients ask for the same uncached thumbnail at once, the first caller
(the leader) renders it and the other forty-nine wait for and share its result,
so the source is read once and the image encoded once. Nothing is cached here:
once the leader finishes, the key is forgotten and the next call runs again (the
result cache, not this module, serves repeats). Coordination is per process;
across processes the result cache and a shared lock take over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar, cast

T = TypeVar("T")


class SingleFlightStats(NamedTuple):
    """A snapshot of a :class:`SingleFlight`'s counters.

    ``executed`` counts calls that ran their function (leaders), ``coalesced`` calls
    that shared a leader's outcome instead, ``in_flight`` the keys running now.
    """

    in_flight: int
    executed: int
    coalesced: int


class _Call(Generic[T]):
    """One leader's run: followers wait on ``done`` and then read its outcome."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None


class SingleFlight:
    """Collapse concurrent calls with the same key into one execution. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, _Call[Any]] = {}
        self._executed = 0
        self._coalesced = 0

    def do(self, key: str, fn: Callable[[], T]) -> tuple[T, bool]:
        """Return ``(value, shared)``: ``fn()``'s value, run once per key in flight.

        ``shared`` is False for the caller that ran ``fn`` and True for callers that
        waited for it. If ``fn`` raises, every caller of that flight gets the same
        exception object. Callers must use the same ``fn`` meaning for a key: a
        follower's own ``fn`` is never called.
        """
        with self._lock:
            call: _Call[T] | None = self._calls.get(key)
            if call is None:
                call = self._calls[key] = _Call()
                self._executed += 1
                leading = True
            else:
                self._coalesced += 1
                leading = False
        if leading:
            return self._lead(key, call, fn), False
        return self._follow(call), True

    def stats(self) -> SingleFlightStats:
        """Return the current counters as one consistent snapshot."""
        with self._lock:
            return SingleFlightStats(
                in_flight=len(self._calls), executed=self._executed, coalesced=self._coalesced
            )

    def _lead(self, key: str, call: _Call[T], fn: Callable[[], T]) -> T:
        """Run ``fn`` for everyone waiting on ``key``, then forget the key."""
        try:
            value = call.result = fn()
        except BaseException as error:  # not swallowed: re-raised below and by followers
            call.error = error
            raise
        finally:  # also on BaseException, so followers never wait forever
            with self._lock:
                del self._calls[key]
            call.done.set()
        return value

    @staticmethod
    def _follow(call: _Call[T]) -> T:
        """Wait for the leader and return its value or raise its exception."""
        call.done.wait()
        if call.error is not None:
            raise call.error
        return cast(T, call.result)
