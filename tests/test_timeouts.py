"""The longest a request may take, from the bounds of its parts."""

from __future__ import annotations

from typing import Any

from django_oximg import conf, runtime
from django_oximg.core.limits.timeouts import FIRST_CALL_ALLOWANCE, PEER_POLL_MAX, RENDER_OVERRUN
from django_oximg.core.limits.timeouts import RequestTimeouts as Timeouts
from tests.constants import KEY, SALT


def test_one_process_on_local_disk_waits_reads_renders_and_writes() -> None:
    timeouts = Timeouts(queue=5, source=10, render=10, cache=0, coordination=0)
    assert timeouts.making() == 25 + RENDER_OVERRUN
    assert timeouts.longest_miss() == timeouts.making()
    assert timeouts.longest_hit() == 0


def test_a_miss_may_wait_out_a_peer_before_it_makes_the_result_itself() -> None:
    timeouts = Timeouts(queue=1, source=2, render=3, cache=0.5, coordination=0.25)
    making = 1 + 2 + 3 + RENDER_OVERRUN + 0.5 + 0.25
    assert timeouts.making() == making
    assert timeouts.peer_wait() == making
    assert timeouts.longest_miss() == (
        0.5 + 0.25 + FIRST_CALL_ALLOWANCE + (making + PEER_POLL_MAX + 0.25) + making
    )
    assert timeouts.longest_hit() == 0.5


def test_the_settings_give_the_bounds(settings: Any) -> None:
    settings.OXIMG = {
        "KEY": KEY,
        "SALT": SALT,
        "QUEUE_TIMEOUT": 2.0,
        "SOURCE_TIMEOUT": 3.0,
        "RENDER_TIMEOUT": 4.0,
        "CACHE_STORAGE_TIMEOUT": 1.5,
        "COORDINATION_TIMEOUT": 0.2,
    }
    local = runtime.request_timeouts(conf.get_settings())
    assert local == Timeouts(2.0, 3.0, 4.0, 0.0, 0.0)  # local disk, no coordination
    settings.OXIMG = {**settings.OXIMG, "CACHE_STORAGE": "elsewhere", "COORDINATION_CACHE": "x"}
    remote = runtime.request_timeouts(conf.get_settings())
    assert remote == Timeouts(2.0, 3.0, 4.0, 1.5, 0.2)  # a missing alias: assume it can hang
    assert runtime.thumbnailer_config(conf.get_settings()).peer_wait == remote.peer_wait()
