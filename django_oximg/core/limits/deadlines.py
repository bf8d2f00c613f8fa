"""Deadlines, and the one watchdog thread that stops work when they pass.

Part of step 7 of a request (the map: :mod:`django_oximg.core.serving`).

Two kinds of work must stop at a moment in time rather than after an
operation times out: a render (libvips is told to stop through an image's
kill flag) and a download (a source that sends one byte a second never
trips a per-read timeout, so its socket is shut down). The owner of the
work registers how to stop it with :meth:`Deadline.on_expiry`; when the
time comes, :data:`WATCHDOG` calls it.

One thread for the whole process, whatever the number of deadlines: it
sleeps until the earliest one is due, so it wakes at most once per
deadline that really passes. The alternatives cost more: a timer thread
per deadline (what downloads had) starts a thread per request, and
libvips' progress signal (what renders had) runs Python on libvips'
worker threads every few tiles, taking the GIL each time, about 0.5 ms of
CPU per medium thumbnail (docs/BENCHMARKS.md).

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Deadline:
    """A ``time.monotonic()`` value after which the work registered here is stopped.

    Use as a context manager around the work: while inside, each
    :meth:`on_expiry` callback is called (once, on the watchdog's thread)
    when the time passes, and :attr:`expired` turns true. On leaving, the
    callbacks are dropped and none is called any more. ``at`` None is a
    deadline that never passes.
    """

    def __init__(self, at: float | None) -> None:
        self.at = at
        self.expired = False
        self._finished = False
        self._stops: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds)

    def __enter__(self) -> Deadline:
        if self.at is not None:
            WATCHDOG.add(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.at is not None:
            WATCHDOG.remove(self)
        with self._lock:
            self._finished = True
            self._stops.clear()

    def on_expiry(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` when the deadline passes; at once if it has passed already.

        Also at once when the ``with`` block has been left: the work's time
        is over. Without a deadline (``at`` None), never.
        """
        if self.at is None:
            return
        with self._lock:
            if time.monotonic() >= self.at and not self._finished:
                self.expired = True
            if not self.expired and not self._finished:
                self._stops.append(stop)
                return
            stop()

    def expire(self) -> None:
        """Stop every registered piece of work (the watchdog's thread calls this).

        The callbacks run under the deadline's lock, so once :meth:`__exit__`
        has returned none is running or will run: its owner may then free
        what they would have touched (close a socket, drop an image).
        """
        with self._lock:
            if self._finished:
                return
            self.expired = True
            for stop in self._stops:
                stop()


class Watchdog:
    """One sleeping thread that expires :class:`Deadline` objects when their time comes."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._watched: dict[int, Deadline] = {}
        #: When the thread will wake next (None: it sleeps until notified).
        self._wakes_at: float | None = None
        self._thread: threading.Thread | None = None

    def add(self, deadline: Deadline) -> None:
        assert deadline.at is not None
        with self._condition:
            self._watched[id(deadline)] = deadline
            # Also when the thread is gone: a process forked after a deadline
            # (gunicorn --preload) inherits the attribute but not the thread.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="oximg-watchdog", daemon=True
                )
                self._thread.start()
            if self._wakes_at is None or deadline.at < self._wakes_at:
                self._condition.notify()

    def remove(self, deadline: Deadline) -> None:
        with self._condition:
            self._watched.pop(id(deadline), None)

    def _run(self) -> None:
        with self._condition:
            while True:
                now = time.monotonic()
                for key, deadline in list(self._watched.items()):
                    if deadline.at is not None and deadline.at <= now:
                        del self._watched[key]
                        deadline.expire()
                self._wakes_at = min(
                    (d.at for d in self._watched.values() if d.at is not None), default=None
                )
                timeout = None if self._wakes_at is None else self._wakes_at - now
                self._condition.wait(timeout)


#: The process's watchdog (its thread starts with the first deadline).
WATCHDOG = Watchdog()
