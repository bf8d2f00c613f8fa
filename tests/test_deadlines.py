"""Tests for django_oximg.core.limits.deadlines: one watchdog thread stops work at its deadline.

What each deadline stops is tested where it is used: renders in
tests/test_pipeline.py (libvips' kill flag), downloads in
tests/test_http_source.py (the socket shut down). Waits are bounded by
``PATIENCE`` and never asserted on.
"""

from __future__ import annotations

import threading
import time

import pytest

from django_oximg.core.limits.deadlines import WATCHDOG, Deadline, Watchdog

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: Upper bound on waiting for the watchdog; never reached when the code works.
PATIENCE = 10.0


def wait_for(event: threading.Event) -> bool:
    return event.wait(PATIENCE)


def test_work_is_stopped_when_the_deadline_passes() -> None:
    stopped = threading.Event()
    with Deadline.after(0.05) as deadline:
        deadline.on_expiry(stopped.set)
        assert wait_for(stopped), "the watchdog never stopped the work"
        assert deadline.expired


def test_work_registered_after_the_deadline_is_stopped_at_once() -> None:
    calls: list[str] = []
    with Deadline(time.monotonic() - 1) as deadline:
        deadline.on_expiry(lambda: calls.append("stopped"))
        assert calls == ["stopped"] and deadline.expired


def test_work_registered_after_the_block_is_stopped_at_once() -> None:
    calls: list[str] = []
    deadline = Deadline.after(3600)
    with deadline:
        pass
    deadline.on_expiry(lambda: calls.append("stopped"))
    assert calls == ["stopped"]


def test_nothing_is_stopped_once_the_block_is_left() -> None:
    calls: list[str] = []
    deadline = Deadline.after(3600)
    with deadline:
        deadline.on_expiry(lambda: calls.append("stopped"))
    deadline.expire()  # as the watchdog would, had it been about to
    assert calls == [] and not deadline.expired
    assert id(deadline) not in WATCHDOG._watched


def test_without_a_time_nothing_is_ever_stopped() -> None:
    calls: list[str] = []
    with Deadline(None) as deadline:
        deadline.on_expiry(lambda: calls.append("stopped"))
    assert calls == [] and not deadline.expired


def test_the_earliest_of_several_deadlines_passes_first() -> None:
    """One thread: a later deadline added first must not delay an earlier one."""
    early, late = threading.Event(), threading.Event()
    with Deadline.after(3600) as far, Deadline.after(0.05) as near:
        far.on_expiry(late.set)
        near.on_expiry(early.set)
        assert wait_for(early), "the earlier deadline waited for the later one"
        assert not late.is_set() and not far.expired


def test_watchdog_restarts_a_thread_lost_in_a_fork() -> None:
    """A forked child has the watchdog's attribute but not its thread: a new one starts."""
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    watchdog = Watchdog()
    watchdog._thread = dead
    deadline = Deadline(time.monotonic() + 0.05)  # not entered: only ours watches
    watchdog.add(deadline)
    assert watchdog._thread is not dead and watchdog._thread.is_alive()
    stop = time.monotonic() + PATIENCE
    while not deadline.expired:
        assert time.monotonic() < stop, "the new watchdog thread never expired it"
        time.sleep(0.01)
