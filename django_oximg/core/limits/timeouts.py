"""The longest a request may take, whatever its dependencies do, from the bounds of its parts.

The bounds of every step of a request (the map: :mod:`django_oximg.core.serving`).

Every wait on the way to an answer has a bound of its own: the result cache
lookup and write (``CACHE_STORAGE_TIMEOUT`` on S3), each call to the
coordination cache (``COORDINATION_TIMEOUT``), the waits for a read slot,
for memory and for a worker together (``QUEUE_TIMEOUT``), the source read
(``SOURCE_TIMEOUT``), the render (``RENDER_TIMEOUT``). Their sum is the
longest a request can take, which a proxy's read timeout must exceed
(docs/deployment.md). :class:`RequestTimeouts` adds them up in one place,
for the thumbnailer (how long to wait for a peer) and for the docs and
tests (the bound a request is held to).

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

from typing import NamedTuple

#: Seconds a render may run past ``RENDER_TIMEOUT``: libvips stops at its next
#: tile, and an encoder that cannot be stopped runs in a child process that is
#: killed at the deadline, then waited for.
RENDER_OVERRUN = 1.0

#: Seconds a process's first calls to the coordination cache may take beyond
#: its timeout (importing the client and connecting; core/serving/coordination.py).
FIRST_CALL_ALLOWANCE = 2.0

#: Watching a peer's lease: the first pause, and the longest.
PEER_POLL_FIRST = 0.02
PEER_POLL_MAX = 0.25


class RequestTimeouts(NamedTuple):
    """The bounds of each part of a request, in seconds."""

    #: Every wait together: a read slot, memory, a worker.
    queue: float
    #: A source read that is not on local disk.
    source: float
    render: float
    #: One call to the result cache (a lookup, a write); 0 where it cannot
    #: hang (local disk).
    cache: float
    #: One call to the coordination cache; 0 without one.
    coordination: float

    def making(self) -> float:
        """The longest a process takes to make and store a result once it holds the lease.

        Waits, the read, the render, the write, and the call that marks the
        lease done.
        """
        return (
            self.queue + self.source + self.render + RENDER_OVERRUN + self.cache + self.coordination
        )

    def peer_wait(self) -> float:
        """How long to wait for a peer process that holds the lease: as long as it may
        take itself, so that a slow peer is not raced, and no longer."""
        return self.making()

    def longest_miss(self) -> float:
        """The most a miss can take: its lookup, the lease, a peer's whole making
        (waited for in vain), then its own."""
        if not self.coordination:
            return self.cache + self.making()
        waiting_for_peer = self.peer_wait() + PEER_POLL_MAX + self.coordination
        return (
            self.cache + self.coordination + FIRST_CALL_ALLOWANCE + waiting_for_peer + self.making()
        )

    def longest_hit(self) -> float:
        """The most a hit can take before its answer starts: one lookup."""
        return self.cache
