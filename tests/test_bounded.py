"""Calls to something that may stop answering: each waited for at most a bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from django_oximg.core.limits.bounded import BoundedCalls, Breaker, CallTimedOut
from tests.constants import JOIN_TIMEOUT

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def wait_until(condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds (a thread finishing its bookkeeping), within JOIN_TIMEOUT."""
    deadline = time.monotonic() + JOIN_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.001)


def test_a_call_returns_its_result_or_raises_its_error() -> None:
    calls = BoundedCalls("test", threads=2, timeout=JOIN_TIMEOUT)
    assert calls.call(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        calls.call(lambda: 1 / 0)


def test_a_call_that_hangs_is_given_up_on_and_keeps_only_its_thread() -> None:
    calls = BoundedCalls("test", threads=1, timeout=0.01)
    release = threading.Event()
    returned = threading.Event()

    def hang() -> None:
        release.wait(JOIN_TIMEOUT)
        returned.set()

    # Within 0.01 s the thread either took the call (it hangs there) or did
    # not (the call is dropped, never made): on a busy machine the hand-over
    # alone may take longer, so call again until one is taken, which
    # stuck() tells for certain once the caller has given up.
    deadline = time.monotonic() + JOIN_TIMEOUT
    while True:
        with pytest.raises(CallTimedOut, match=r"no answer within 0\.01 s"):
            calls.call(hang)
        if calls.stuck() == 1:
            break
        assert time.monotonic() < deadline, "no call was ever taken by the thread"
    # Its one thread is held: the next call waits its time in the queue, is
    # given up on, and is dropped rather than made late.
    made = threading.Event()
    with pytest.raises(CallTimedOut):
        calls.call(made.set)
    release.set()
    assert returned.wait(JOIN_TIMEOUT)
    # Its thread is free again. The next call is answered within a bound for
    # a busy machine: 0.01 s is shorter than one hand-over between two threads
    # may take while other processes hold both CPUs.
    calls.timeout = JOIN_TIMEOUT
    assert calls.call(lambda: "again") == "again"
    assert not made.is_set()


def test_a_call_that_finds_every_thread_busy_waits_for_one() -> None:
    """Busy is not stuck: a call beyond the threads waits its turn instead of failing."""
    calls = BoundedCalls("test", threads=1, timeout=JOIN_TIMEOUT)
    held = threading.Event()
    release = threading.Event()

    def hold() -> str:
        held.set()
        release.wait(JOIN_TIMEOUT)
        return "held"

    answers: list[str] = []
    holder = threading.Thread(target=lambda: answers.append(calls.call(hold)))
    holder.start()
    assert held.wait(JOIN_TIMEOUT)  # the one thread is taken
    waiter = threading.Thread(target=lambda: answers.append(calls.call(lambda: "queued")))
    waiter.start()
    wait_until(lambda: calls.queued() == 1)
    release.set()
    for thread in (holder, waiter):
        thread.join(JOIN_TIMEOUT)
    assert sorted(answers) == ["held", "queued"]


def test_the_first_calls_may_take_longer_until_one_answers() -> None:
    """A process's first call imports the client and connects."""
    calls = BoundedCalls("test", threads=2, timeout=0.01, first_timeout=JOIN_TIMEOUT)
    slow_once = threading.Event()
    assert calls.call(lambda: slow_once.wait(0.05)) is False  # past 0.01 s, within the first bound
    release = threading.Event()
    with pytest.raises(CallTimedOut, match=r"0\.01 s"):
        calls.call(lambda: release.wait(JOIN_TIMEOUT))
    release.set()


def test_a_breaker_stays_open_for_its_pause() -> None:
    now = [100.0]
    breaker = Breaker(5.0, clock=lambda: now[0])
    assert breaker.closed()
    breaker.opened()
    now[0] += 4.9
    assert not breaker.closed()
    now[0] += 0.1
    assert breaker.closed()
    breaker.opened()
    breaker.reset()
    assert breaker.closed()
