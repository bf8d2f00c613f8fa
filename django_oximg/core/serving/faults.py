"""How the things a process serves through have fared lately, for ``/health`` and ``/metrics``.

Part of step 8 of a request (the map: :mod:`django_oximg.core.serving`).

A thumbnail server depends on things it does not own: the result cache
(a disk that fills up, an S3 bucket that refuses writes), the coordination
cache (a Redis that stops answering) and the source storages. Each call to
one of them ends in :meth:`Faults.succeeded` or :meth:`Faults.failed`, under
a short name (:data:`RESULT_CACHE_WRITE`, ...). A dependency whose latest
call failed, less than :data:`FAULT_MEMORY` seconds ago, is failing:
``/health`` names it in its 503 body, and ``/metrics`` counts every failure
and shows which dependencies are failing now.

Judged from the calls requests make anyway, never from probes of its own
(a probe write to S3 would be a paid request, and would leave objects
behind): so a disk that filled up shows at the first miss that cannot be
stored, and stops showing at the first one that can. A dependency nobody
called for :data:`FAULT_MEMORY` seconds is no longer reported, since
nothing says it is still broken.

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

#: Writes of results (a full disk, a read-only directory, S3 refusing PutObject).
RESULT_CACHE_WRITE = "result_cache_write"
#: Lookups in a remote result cache (S3 answering neither the object nor "no such key").
RESULT_CACHE_LOOKUP = "result_cache_lookup"
#: The cache that hands out render leases between processes (``COORDINATION_CACHE``).
COORDINATION_CACHE = "coordination_cache"

#: Seconds a failure is reported after the dependency was last called: long
#: enough for a load balancer's checks (every few seconds) to see it, short
#: enough that a dependency which recovered while nothing called it is not
#: reported broken for long.
FAULT_MEMORY = 60.0

#: The longest reason kept: an error's text can quote a whole response.
MAX_REASON = 200

#: Seconds between two log lines about one dependency's failures: a
#: dependency that is down fails every request, and one line says it.
LOG_INTERVAL = 60.0

logger = logging.getLogger("django_oximg")


def source_dependency(alias: str) -> str:
    """The name under which the source storage ``alias`` ("" for the default) is reported."""
    return f"source:{alias}" if alias else "source"


class Fault(NamedTuple):
    """A dependency's latest failure, while no call has succeeded since."""

    reason: str
    #: ``clock()`` when it failed first, and last, since its last success.
    since: float
    last: float
    #: Failures in a row since the last success.
    failures: int


class Faults:
    """Recent failures of the dependencies one process serves through (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._current: dict[str, Fault] = {}
        self._failures: Counter[str] = Counter()
        #: Every dependency seen, so the metrics show each one's state from its first call.
        self._seen: set[str] = set()
        self._logged: dict[str, float] = {}

    def failed(
        self, dependency: str, reason: str, log: str = "", level: int = logging.WARNING
    ) -> None:
        """Record a failed call to ``dependency``; ``reason`` says what went wrong.

        With ``log``, also write ``"<log>: <reason>"`` to the ``django_oximg``
        logger at ``level``, at most once per :data:`LOG_INTERVAL` for the
        dependency.
        """
        now = self._clock()
        with self._lock:
            self._seen.add(dependency)
            self._failures[dependency] += 1
            held = self._current.get(dependency)
            since, failures = (now, 0) if held is None else (held.since, held.failures)
            short = " ".join(reason.split())[:MAX_REASON]
            self._current[dependency] = Fault(short, since, now, failures + 1)
            write = bool(log) and now - self._logged.get(dependency, -math.inf) >= LOG_INTERVAL
            if write:
                self._logged[dependency] = now
        if write:
            logger.log(level, "%s: %s", log, reason)

    def succeeded(self, dependency: str) -> None:
        """Record a call to ``dependency`` that worked: it is no longer failing."""
        # Read without the lock first: this runs on every call that works,
        # and almost always finds nothing to clear.
        if dependency in self._current or dependency not in self._seen:
            with self._lock:
                self._seen.add(dependency)
                self._current.pop(dependency, None)

    def failing(self) -> dict[str, Fault]:
        """The dependencies failing now (latest call failed, within :data:`FAULT_MEMORY`)."""
        cutoff = self._clock() - FAULT_MEMORY
        with self._lock:
            return {name: fault for name, fault in self._current.items() if fault.last > cutoff}

    def problems(self) -> list[str]:
        """What ``/health`` says of each failing dependency, sorted by name."""
        now = self._clock()
        return [
            f"{name} failing for {now - fault.since:.0f} s "
            f"({fault.failures} failed in a row): {fault.reason}"
            for name, fault in sorted(self.failing().items())
        ]

    def failure_counts(self) -> dict[str, int]:
        """Failures of each dependency seen so far (0 for one that never failed)."""
        with self._lock:
            return {name: self._failures[name] for name in sorted(self._seen)}
