"""Tests for the memory budget's accounting (core/limits/memory.py).

The executor's tests (tests/test_executor.py) pin down when jobs and
downloads wait for the budget; these pin down what the budget counts.
"""

from __future__ import annotations

import pytest

from django_oximg.core.errors import SourceTooLarge
from django_oximg.core.limits.memory import DOWNLOAD_SHARE, MemoryBudget

pytestmark = pytest.mark.django_free


def test_what_is_taken_is_reserved_until_given_back_and_the_peak_is_kept() -> None:
    budget = MemoryBudget(1000)
    budget.take(600)
    assert not budget.fits(401)
    assert budget.fits(400)
    budget.take(400)
    budget.give(600)
    assert (budget.reserved, budget.peak) == (400, 1000)
    assert budget.fits(600)


def test_downloads_hold_at_most_their_share_even_with_room_left() -> None:
    budget = MemoryBudget(1000)
    share = int(1000 * DOWNLOAD_SHARE)
    assert budget.download_fits(share)
    budget.take(share, download=True)
    assert budget.fits(1)
    assert not budget.download_fits(1)
    budget.give(share, download=True)
    assert (budget.reserved, budget.downloads) == (0, 0)
    with pytest.raises(SourceTooLarge, match="share"):
        budget.check_download_share(share + 1)
    budget.check_download_share(share)


def test_a_cost_above_the_whole_budget_is_refused_and_one_at_it_is_not() -> None:
    budget = MemoryBudget(1000)
    budget.check_fits(1000)
    with pytest.raises(SourceTooLarge, match="exceeds the memory budget"):
        budget.check_fits(1001)
    with pytest.raises(ValueError, match="positive"):
        MemoryBudget(0)
