"""Tests for single-flight: concurrent calls with one key share one execution.

The leader's function is held on an Event until every follower has joined the
flight (seen through ``stats().coalesced``), so the sharing is certain, not a race.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_oximg.core.serving.singleflight import SingleFlight

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

PATIENCE = 10.0  # upper bound on any wait; no test asserts on elapsed time


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("state not reached")
        time.sleep(0.001)


class Caller(threading.Thread):
    """A request thread: calls ``flight.do`` and keeps the outcome."""

    def __init__(self, flight: SingleFlight, key: str, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.flight, self.key, self.fn = flight, key, fn
        self.value: Any = None
        self.shared: bool | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value, self.shared = self.flight.do(self.key, self.fn)
        except BaseException as error:  # kept for the test to inspect
            self.error = error

    def finish(self) -> None:
        self.join(PATIENCE)
        assert not self.is_alive(), "caller still blocked"


def test_concurrent_callers_with_one_key_share_one_call() -> None:
    flight = SingleFlight()
    release = threading.Event()
    calls: list[int] = []

    def render() -> object:
        calls.append(1)
        assert release.wait(PATIENCE)
        return object()  # a fresh object: identity proves everyone got the same one

    callers = [Caller(flight, "thumb", render) for _ in range(50)]
    for caller in callers:
        caller.start()
    wait_until(lambda: flight.stats().coalesced == 49)
    release.set()
    for caller in callers:
        caller.finish()

    assert len(calls) == 1
    assert all(caller.error is None for caller in callers)
    assert len({id(caller.value) for caller in callers}) == 1
    assert [caller.shared for caller in callers].count(False) == 1
    assert [caller.shared for caller in callers].count(True) == 49
    stats = flight.stats()
    assert (stats.executed, stats.coalesced, stats.in_flight) == (1, 49, 0)


def test_the_leaders_exception_is_shared() -> None:
    flight = SingleFlight()
    release = threading.Event()
    raised = ValueError("corrupt source")

    def render() -> None:
        assert release.wait(PATIENCE)
        raise raised

    callers = [Caller(flight, "thumb", render) for _ in range(10)]
    for caller in callers:
        caller.start()
    wait_until(lambda: flight.stats().coalesced == 9)
    release.set()
    for caller in callers:
        caller.finish()

    assert all(caller.error is raised for caller in callers)
    assert flight.stats().in_flight == 0


def test_different_keys_run_independently() -> None:
    flight = SingleFlight()
    b_ran = threading.Event()

    def render_a() -> str:
        # Only finishes if "b" runs while "a" is still in flight.
        assert b_ran.wait(PATIENCE)
        return "a"

    def render_b() -> str:
        b_ran.set()
        return "b"

    caller_a = Caller(flight, "a", render_a)
    caller_a.start()
    wait_until(lambda: flight.stats().in_flight == 1)
    assert flight.do("b", render_b) == ("b", False)
    caller_a.finish()

    assert (caller_a.value, caller_a.shared, caller_a.error) == ("a", False, None)
    assert flight.stats().coalesced == 0


def test_a_completed_key_is_forgotten_not_cached() -> None:
    flight = SingleFlight()
    calls: list[int] = []

    def render() -> int:
        calls.append(1)
        return len(calls)

    assert flight.do("thumb", render) == (1, False)
    assert flight.do("thumb", render) == (2, False)
    assert flight.stats().executed == 2


def test_a_key_is_forgotten_after_an_exception() -> None:
    flight = SingleFlight()

    def fail() -> None:
        raise OSError("storage down")

    with pytest.raises(OSError):
        flight.do("thumb", fail)
    assert flight.do("thumb", lambda: "recovered") == ("recovered", False)


def test_a_followers_own_function_is_never_called() -> None:
    flight = SingleFlight()
    release = threading.Event()
    follower_called = threading.Event()

    def lead() -> str:
        assert release.wait(PATIENCE)
        return "leader"

    def follow() -> str:
        follower_called.set()
        return "follower"

    leader = Caller(flight, "thumb", lead)
    leader.start()
    wait_until(lambda: flight.stats().in_flight == 1)
    follower = Caller(flight, "thumb", follow)
    follower.start()
    wait_until(lambda: flight.stats().coalesced == 1)
    release.set()
    leader.finish()
    follower.finish()

    assert (follower.value, follower.shared) == ("leader", True)
    assert not follower_called.is_set()
