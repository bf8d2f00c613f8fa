"""A process's memory budget: what is reserved, by jobs and by downloads, and what fits.

Part of steps 5 and 7 of a request (the map: :mod:`django_oximg.core.serving`).

The executor decides *when* a job or a download may take bytes (in arrival
order, jobs first, within the queue deadline); this module only counts:
the budget's total, the bytes reserved, the most ever reserved at once
(``/metrics``), and the share of it downloads hold. It is not thread-safe
on its own: the executor calls it under its one lock, together with the
queues the accounting decides about.
"""

from __future__ import annotations

from django_oximg.core.errors import SourceTooLarge
from django_oximg.core.limits.source_limits import check_memory

#: The share of the memory budget downloads may hold at once: the rest is
#: always there for jobs. Requests that have downloaded their source wait
#: for a worker holding it; were they allowed to fill the budget, the job
#: at the head of the queue would find no room while no job runs to make
#: any, a deadlock the queue timeout would break with 503s.
DOWNLOAD_SHARE = 0.5


class MemoryBudget:
    """Bytes of estimated peak memory the work of one process may reserve at once."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("memory_budget must be positive")
        self.total = total
        #: Bytes reserved now, by jobs and downloads together.
        self.reserved = 0
        #: The most bytes ever reserved at once.
        self.peak = 0
        #: Bytes downloads hold (part of :attr:`reserved`).
        self.downloads = 0

    def check_fits(self, cost: int) -> None:
        """Refuse a job whose ``cost`` the whole budget could never hold (a 422, not a wait)."""
        check_memory(cost, self.total)

    def check_download_share(self, held_after: int) -> None:
        """Refuse a download that would hold more than its share however long it waited."""
        if held_after > self.total * DOWNLOAD_SHARE:
            raise SourceTooLarge(
                f"{held_after} bytes of source would exceed the share of the memory budget "
                f"({self.total} bytes) downloads may hold"
            )

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more can be reserved now."""
        return nbytes <= self.total - self.reserved

    def download_fits(self, nbytes: int) -> bool:
        """Whether a download may take ``nbytes`` more now: they fit, and within the share."""
        return self.fits(nbytes) and self.downloads + nbytes <= self.total * DOWNLOAD_SHARE

    def take(self, nbytes: int, *, download: bool = False) -> None:
        """Reserve ``nbytes`` (the caller has checked that they fit)."""
        self.reserved += nbytes
        self.peak = max(self.peak, self.reserved)
        if download:
            self.downloads += nbytes

    def give(self, nbytes: int, *, download: bool = False) -> None:
        """Give ``nbytes`` back."""
        self.reserved -= nbytes
        if download:
            self.downloads -= nbytes
