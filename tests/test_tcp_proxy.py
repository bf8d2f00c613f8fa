"""The delaying TCP proxy of the fault tests (tests/tcp_proxy.py), against plain sockets.

Each test opens its connection before switching the mode: clients keep
connections alive, and a fault must reach them too. Times are lower bounds
only; "nothing arrived" is a receive that times out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.tcp_proxy import TcpProxy

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: Generous bound on anything that should happen; failing tests wait this long.
TIMEOUT = 10.0

#: How long "nothing arrives" is watched for.
QUIET = 0.2

DELAY = 0.2


@pytest.fixture
def upstream() -> Iterator[socket.socket]:
    """The proxy's target: a listening socket the test accepts from itself."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(TIMEOUT)
        yield listener


@pytest.fixture
def proxy(upstream: socket.socket) -> Iterator[TcpProxy]:
    with TcpProxy(upstream.getsockname()[:2]) as running:
        yield running


def connect(proxy: TcpProxy, upstream: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A client connected through the proxy, and the target's end of it."""
    client = socket.create_connection(proxy.address, timeout=TIMEOUT)
    target, _ = upstream.accept()
    target.settimeout(TIMEOUT)
    return client, target


def receive(sock: socket.socket, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        data = sock.recv(size - len(received))
        if not data:
            break
        received += data
    return bytes(received)


def receive_all(sock: socket.socket) -> bytes:
    """Everything until the peer's end of input."""
    received = bytearray()
    while data := sock.recv(65536):
        received += data
    return bytes(received)


def assert_nothing_arrives(sock: socket.socket) -> None:
    sock.settimeout(QUIET)
    with pytest.raises(TimeoutError):
        sock.recv(1)
    sock.settimeout(TIMEOUT)


def assert_closed(sock: socket.socket) -> None:
    """The peer closed (a FIN) or reset the connection."""
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


def test_bytes_pass_through_unchanged_both_ways_and_so_does_the_end_of_input(
    proxy: TcpProxy, upstream: socket.socket
) -> None:
    request, answer = os.urandom(1024 * 1024 + 7), os.urandom(3 * 65536 + 1)
    client, target = connect(proxy, upstream)
    with client, target:
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        assert receive_all(target) == request  # ends: the client's end of input came through
        target.sendall(answer)
        target.shutdown(socket.SHUT_WR)
        assert receive_all(client) == answer
    assert proxy.accepted == 1


def test_a_delay_holds_each_chunk_in_either_direction_on_an_open_connection(
    proxy: TcpProxy, upstream: socket.socket
) -> None:
    client, target = connect(proxy, upstream)
    with client, target:
        proxy.delay(DELAY)
        sent = time.monotonic()
        client.sendall(b"ping")
        assert receive(target, 4) == b"ping"
        assert time.monotonic() - sent >= DELAY
        sent = time.monotonic()
        target.sendall(b"pong")
        assert receive(client, 4) == b"pong"
        assert time.monotonic() - sent >= DELAY
        proxy.normal()
        client.sendall(b"again")
        assert receive(target, 5) == b"again"


def test_a_stall_forwards_nothing_either_way_until_released_and_loses_nothing(
    proxy: TcpProxy, upstream: socket.socket
) -> None:
    client, target = connect(proxy, upstream)
    with client, target:
        client.sendall(b"before")
        assert receive(target, 6) == b"before"
        proxy.stall()
        client.sendall(b"ping")
        target.sendall(b"pong")
        late, late_target = connect(proxy, upstream)  # accepted while stalled
        with late, late_target:
            late.sendall(b"late")
            assert_nothing_arrives(target)
            assert_nothing_arrives(client)
            assert_nothing_arrives(late_target)
            proxy.release()
            assert receive(target, 4) == b"ping"
            assert receive(client, 4) == b"pong"
            assert receive(late_target, 4) == b"late"
    assert proxy.accepted == 2


def test_refuse_closes_open_connections_and_new_ones_until_normal(
    proxy: TcpProxy, upstream: socket.socket
) -> None:
    client, target = connect(proxy, upstream)
    with client, target:
        client.sendall(b"ping")
        assert receive(target, 4) == b"ping"
        proxy.refuse()
        assert_closed(client)
        assert_closed(target)
    with (
        contextlib.suppress(ConnectionResetError),  # the reset came before connect() returned
        socket.create_connection(proxy.address, timeout=TIMEOUT) as refused,
    ):
        assert_closed(refused)
    assert proxy.accepted == 2
    proxy.normal()
    client, target = connect(proxy, upstream)
    with client, target:
        client.sendall(b"back")
        assert receive(target, 4) == b"back"


def test_close_stops_the_thread_and_closes_every_socket(upstream: socket.socket) -> None:
    before = len(os.listdir("/proc/self/fd"))
    proxy = TcpProxy(upstream.getsockname()[:2])
    client, target = connect(proxy, upstream)
    with client, target:
        proxy.stall()
        client.sendall(b"held")
        proxy.close()
        assert_closed(client)
        proxy.close()  # a second close does nothing
    assert not [thread for thread in threading.enumerate() if thread.name == "tcp-proxy"]
    assert len(os.listdir("/proc/self/fd")) == before
    with pytest.raises(RuntimeError):
        proxy.normal()
