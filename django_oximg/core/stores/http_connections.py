"""Connections that go only to validated addresses, within one download's time limit.

urllib3's own connect would resolve the host name again, and a resolver that
answers differently a moment later (DNS rebinding) could move the connection
to an address that was never checked. Here the socket is opened by
:class:`PinnedHTTPConnection` to the addresses :func:`~.http_guard.resolve`
validated, and nowhere else; the host name still drives ``Host``, SNI and
the certificate check. Every socket is watched by the download's
:class:`TimeLimit`, which shuts it down when the total time is up, so a
source that trickles one byte a second cannot hold a worker thread.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from django_oximg.core.errors import SourceTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.stores.http_guard import Address, HttpUrl

# -- the time limit ------------------------------------------------------------


class TimeLimit:
    """The total time one download may take, enforced on its sockets.

    Per-operation socket timeouts cannot bound a source that sends one byte
    a second (every ``recv`` succeeds). So when the time is up the
    process's watchdog (:mod:`django_oximg.core.limits.deadlines`) shuts down every
    socket this download opened: whatever read is blocked returns at once,
    and :attr:`expired` tells the caller why. Each socket is watched through
    a duplicate descriptor, which reaches the connection even after TLS has
    taken over the original, and which cannot be reused by another
    connection while it is held (the duplicates are closed only once the
    watchdog can no longer touch them).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = Deadline.after(seconds)
        self._duplicates: list[socket.socket] = []

    def __enter__(self) -> TimeLimit:
        self.deadline.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.deadline.__exit__(kind, value, traceback)
        duplicates, self._duplicates = self._duplicates, []
        for duplicate in duplicates:
            duplicate.close()

    @property
    def expired(self) -> bool:
        return self.deadline.expired

    def remaining(self) -> float:
        """Seconds left; raise SourceTimeout when none are."""
        assert self.deadline.at is not None
        left = self.deadline.at - time.monotonic()
        if left <= 0 or self.expired:
            raise SourceTimeout(f"download took longer than {self.seconds} s")
        return left

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock``'s connection down when the time is up (call inside the ``with``)."""
        duplicate = sock.dup()
        self._duplicates.append(duplicate)
        self.deadline.on_expiry(partial(shut_down, duplicate))


def shut_down(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # not connected yet, or already gone
        sock.shutdown(socket.SHUT_RDWR)


# -- pinned connections ---------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """Where a connection may go, and the time limit that watches it."""

    addresses: tuple[Address, ...]
    time_limit: TimeLimit


def dial(connection: HTTPConnection, pin: Pin) -> socket.socket:
    """Open a socket to the first of ``pin``'s validated addresses that answers.

    Replaces urllib3's own connect, which would resolve the host name again.
    """
    failure: OSError | None = None
    for address in pin.addresses:
        sock = socket.socket(address.family, socket.SOCK_STREAM)
        try:
            pin.time_limit.watch(sock)
            for option in connection.socket_options or ():
                sock.setsockopt(*option)
            sock.settimeout(connection.timeout)
            sock.connect(address.sockaddr)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        sys.audit("http.client.connect", connection, connection.host, connection.port)
        return sock
    if isinstance(failure, TimeoutError):
        raise ConnectTimeoutError(connection, f"connection to {connection.host} timed out")
    raise NewConnectionError(connection, f"failed to connect to {connection.host}: {failure}")


class PinnedHTTPConnection(HTTPConnection):
    """An urllib3 connection that connects only to validated addresses.

    The host name still drives the ``Host`` header (and, for HTTPS, SNI and
    certificate checks), so virtual hosts and TLS work as usual.
    """

    def __init__(self, *args: Any, pin: Pin, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pin = pin

    def _new_conn(self) -> socket.socket:
        return dial(self, self.pin)


class PinnedHTTPSConnection(HTTPSConnection):
    """:class:`PinnedHTTPConnection` for HTTPS (certificate verified against the host name)."""

    def __init__(self, *args: Any, pin: Pin, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pin = pin

    def _new_conn(self) -> socket.socket:
        return dial(self, self.pin)


class PinnedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = PinnedHTTPConnection


class PinnedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = PinnedHTTPSConnection


def pool_for(url: HttpUrl, pin: Pin, ca_certs: str | None = None) -> HTTPConnectionPool:
    """A one-connection pool for ``url``'s origin whose connection is pinned.

    HTTPS certificates are always verified, against the URL's host name
    (``ca_certs`` replaces the system's trust store when given).
    """
    if url.scheme == "https":
        return PinnedHTTPSConnectionPool(
            url.host,
            url.port,
            maxsize=1,
            retries=False,
            cert_reqs="CERT_REQUIRED",
            ca_certs=ca_certs,
            pin=pin,
        )
    return PinnedHTTPConnectionPool(url.host, url.port, maxsize=1, retries=False, pin=pin)
