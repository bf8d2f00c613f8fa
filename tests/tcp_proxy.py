"""A TCP proxy on 127.0.0.1 that can slow, stall or refuse what it forwards.

Fault tests put it between a server under test and a service the server
uses (S3, say) and switch its mode while requests run. A mode acts on the
connections already open too, not only on new ones: clients such as boto3
keep connections alive across requests, so a fault that only new
connections saw would often never be seen.

- :meth:`TcpProxy.normal`: forward at once.
- :meth:`TcpProxy.delay`: hold every chunk, in either direction, ``seconds``
  after the proxy received it (a request and its answer gain twice that).
- :meth:`TcpProxy.stall`: keep accepting and reading, forward nothing in
  either direction; what arrives is kept, and :meth:`TcpProxy.release`
  (the normal mode) forwards it all, in order.
- :meth:`TcpProxy.refuse`: reset every open connection, and every new one
  as soon as it is accepted (the kernel completes the handshake first, so a
  client sees its connection reset, in ``connect`` or at its first read,
  rather than refused).

A mode method returns once the forwarding thread has applied the mode. One
thread serves every connection with a selector; :meth:`TcpProxy.close` stops
it and closes every socket (the proxy is also a context manager).
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import struct
import threading
import time
from collections import deque
from types import TracebackType

#: Bytes read from a socket at a time.
CHUNK = 65536

#: Bound on waiting for the forwarding thread to apply a mode or to stop.
SETTLE_TIMEOUT = 10.0

NORMAL, DELAY, STALL, REFUSE = "normal", "delay", "stall", "refuse"


def reset(sock: socket.socket) -> None:
    """Close with a RST instead of a FIN: the peer sees ECONNRESET, as from a crash."""
    with contextlib.suppress(OSError):  # already closed by the peer
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Direction:
    """Bytes on their way from ``source`` to ``destination``, each with its arrival time."""

    def __init__(self, source: socket.socket, destination: socket.socket) -> None:
        self.source = source
        self.destination = destination
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.eof: float | None = None  # when the source finished sending
        self.shut = False  # and that end was passed on to the destination
        self.blocked = False  # the destination's buffer was full at the last send


class Connection:
    """An accepted client and its connection to the target."""

    def __init__(self, client: socket.socket, upstream: socket.socket, connected: bool) -> None:
        self.client = client
        self.upstream = upstream
        self.connected = connected
        self.outgoing = Direction(client, upstream)
        self.incoming = Direction(upstream, client)
        self.events = {client: 0, upstream: 0}

    def directions(self) -> tuple[Direction, Direction]:
        return self.outgoing, self.incoming


class TcpProxy:
    """Forwards connections to ``target`` from a free port of 127.0.0.1."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._selector = selectors.DefaultSelector()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.setblocking(False)
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_in.setblocking(False)
        self._wake_out.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._connections: set[Connection] = set()
        self._condition = threading.Condition()
        # Asked for by callers (under the condition)...
        self._mode, self._delay, self._requested = NORMAL, 0.0, 0
        # ... and in force in the forwarding thread.
        self._active_mode, self._active_delay, self._applied = NORMAL, 0.0, 0
        self._accepted = 0
        self._closing = False
        self._error: BaseException | None = None
        self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._wake_in, selectors.EVENT_READ, self._wake_up)
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()

    # -- for the tests -------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: the URL of an HTTP service behind the proxy."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        """Connections accepted so far (refused ones included)."""
        with self._condition:
            return self._accepted

    @property
    def mode(self) -> str:
        """The mode in force: "normal", "delay", "stall" or "refuse"."""
        with self._condition:
            return self._mode

    def normal(self) -> None:
        """Forward everything at once (also what :meth:`release` does)."""
        self._switch(NORMAL)

    def delay(self, seconds: float) -> None:
        """Hold each chunk ``seconds`` after its arrival before forwarding it."""
        if seconds < 0:
            raise ValueError("a delay cannot be negative")
        self._switch(DELAY, seconds)

    def stall(self) -> None:
        """Forward nothing, in either direction, until :meth:`release`; keep what arrives."""
        self._switch(STALL)

    def release(self) -> None:
        """End a stall (or any other mode): forward what was held, then everything at once."""
        self._switch(NORMAL)

    def refuse(self) -> None:
        """Reset the open connections and each new one; :meth:`normal` accepts again."""
        self._switch(REFUSE)

    def close(self) -> None:
        """Stop the forwarding thread and close every socket (idempotent)."""
        with self._condition:
            if self._closing:
                return
            self._closing = True
        self._poke()
        self._thread.join(SETTLE_TIMEOUT)
        if self._thread.is_alive():
            raise RuntimeError("the proxy's thread did not stop")
        self._wake_in.close()
        self._wake_out.close()
        if self._error is not None:
            raise RuntimeError("the proxy's thread failed") from self._error

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _switch(self, mode: str, delay: float = 0.0) -> None:
        with self._condition:
            if self._closing:
                raise RuntimeError("the proxy is closed")
            self._mode, self._delay = mode, delay
            self._requested += 1
            wanted = self._requested
        self._poke()
        with self._condition:
            if not self._condition.wait_for(
                lambda: self._applied >= wanted or self._error is not None, SETTLE_TIMEOUT
            ):
                raise RuntimeError("the proxy's thread did not apply the mode in time")
            if self._error is not None:
                raise RuntimeError("the proxy's thread failed") from self._error

    def _poke(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full: wake-ups are pending already
            self._wake_out.send(b"!")

    # -- the forwarding thread -----------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closing:
                for key, mask in self._selector.select(self._timeout()):
                    key.data(key.fileobj, mask)
                self._forward()
        except BaseException as error:
            with self._condition:
                self._error = error
                self._condition.notify_all()
        finally:
            for connection in list(self._connections):
                self._drop(connection, hard=True)
            self._selector.unregister(self._listener)
            self._selector.unregister(self._wake_in)
            self._selector.close()
            self._listener.close()

    def _wake_up(self, sock: socket.socket, mask: int) -> None:
        try:
            while sock.recv(CHUNK):
                pass
        except BlockingIOError:
            pass
        with self._condition:
            mode, delay, requested = self._mode, self._delay, self._requested
        self._active_mode, self._active_delay = mode, delay
        if mode == REFUSE:
            for connection in list(self._connections):
                self._drop(connection, hard=True)
        with self._condition:
            self._applied = requested
            self._condition.notify_all()

    def _accept(self, listener: socket.socket, mask: int) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except BlockingIOError:
                return
            with self._condition:
                self._accepted += 1
            if self._active_mode == REFUSE:
                reset(client)
                continue
            client.setblocking(False)
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setblocking(False)
            status = upstream.connect_ex(self.target)
            if status not in (0, errno.EINPROGRESS):
                upstream.close()
                reset(client)
                continue
            connection = Connection(client, upstream, connected=status == 0)
            self._connections.add(connection)
            self._watch(connection)

    def _on_socket(self, connection: Connection, sock: socket.socket, mask: int) -> None:
        if connection not in self._connections:
            return  # dropped earlier in this round
        if sock is connection.upstream and not connection.connected:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._drop(connection, hard=True)
                return
            connection.connected = True
        if mask & selectors.EVENT_WRITE:
            for direction in connection.directions():
                if direction.destination is sock:
                    direction.blocked = False
        if mask & selectors.EVENT_READ:
            direction = connection.outgoing if sock is connection.client else connection.incoming
            try:
                data = sock.recv(CHUNK)
            except BlockingIOError:
                return
            except OSError:
                self._drop(connection, hard=True)
                return
            if data:
                direction.chunks.append((time.monotonic(), data))
            else:
                direction.eof = time.monotonic()

    def _due(self, arrived: float, now: float) -> bool:
        if self._active_mode == NORMAL:
            return True
        if self._active_mode == DELAY:
            return now >= arrived + self._active_delay
        return False

    def _timeout(self) -> float | None:
        """Until the next held chunk is due (only a delay holds chunks for a known time)."""
        if self._active_mode != DELAY:
            return None
        heads = [
            head + self._active_delay
            for connection in self._connections
            if connection.connected
            for direction in connection.directions()
            if not direction.blocked and (head := self._head(direction)) is not None
        ]
        return max(0.0, min(heads) - time.monotonic()) if heads else None

    @staticmethod
    def _head(direction: Direction) -> float | None:
        """When the next thing to pass on (a chunk, else the end of input) arrived."""
        if direction.chunks:
            return direction.chunks[0][0]
        return None if direction.shut else direction.eof

    def _forward(self) -> None:
        now = time.monotonic()
        for connection in list(self._connections):
            if connection.connected and not all(
                self._send(direction, now) for direction in connection.directions()
            ):
                self._drop(connection, hard=True)
                continue
            outgoing, incoming = connection.directions()
            if outgoing.shut and incoming.shut:
                self._drop(connection, hard=False)
            elif connection in self._connections:
                self._watch(connection)

    def _send(self, direction: Direction, now: float) -> bool:
        """Send what is due; pass on the end of input; False when the connection broke."""
        try:
            while direction.chunks and not direction.blocked:
                arrived, data = direction.chunks[0]
                if not self._due(arrived, now):
                    break
                try:
                    sent = direction.destination.send(data)
                except BlockingIOError:
                    sent = 0
                if sent < len(data):
                    direction.chunks[0] = (arrived, data[sent:])
                    direction.blocked = True
                else:
                    direction.chunks.popleft()
            if (
                not direction.chunks
                and direction.eof is not None
                and not direction.shut
                and self._due(direction.eof, now)
            ):
                direction.destination.shutdown(socket.SHUT_WR)
                direction.shut = True
        except OSError:
            return False
        return True

    def _watch(self, connection: Connection) -> None:
        """Register each socket for what it waits for now."""
        for sock in (connection.client, connection.upstream):
            events = 0
            if sock is connection.upstream and not connection.connected:
                events = selectors.EVENT_WRITE
            else:
                for direction in connection.directions():
                    if direction.source is sock and direction.eof is None:
                        events |= selectors.EVENT_READ
                    if direction.destination is sock and direction.blocked:
                        events |= selectors.EVENT_WRITE
            before = connection.events[sock]
            if events == before:
                continue
            if before == 0:
                self._selector.register(sock, events, self._handler(connection))
            elif events == 0:
                self._selector.unregister(sock)
            else:
                self._selector.modify(sock, events, self._handler(connection))
            connection.events[sock] = events

    def _handler(self, connection: Connection) -> object:
        def handle(sock: socket.socket, mask: int) -> None:
            self._on_socket(connection, sock, mask)

        return handle

    def _drop(self, connection: Connection, *, hard: bool) -> None:
        """Close both sockets: with a RST when ``hard`` (a fault), else normally."""
        self._connections.discard(connection)
        for sock in (connection.client, connection.upstream):
            if connection.events[sock]:
                self._selector.unregister(sock)
                connection.events[sock] = 0
            if hard:
                reset(sock)
            else:
                sock.close()
