"""Tests for django_oximg.core.stores.http: HTTP(S) sources behind an SSRF guard.

The store and the modules it is made of are tested together, through real
servers: ``http_guard`` (URLs, the allowlist, the address guard),
``http_connections`` (pinned connections, the time limit) and
``http_bodies`` (reading a body within its limits).

Every server here is started by the test on 127.0.0.1 (``http.server`` in
threads) and every loop is bounded in count and time. No test can reach
another machine: ``socket.socket.connect`` is replaced for every test by a
recorder that lets loopback through, maps :data:`PUBLIC_IP` to a loopback
server (a test-only NAT, so the guard can be shown a public address) and
refuses everything else without sending a packet. ``socket.getaddrinfo`` is
replaced by a table, so no name is ever looked up in real DNS.

A *canary* server counts accepted connections; "untouched" is checked by
connecting once more ourselves and waiting for that marker to be accepted,
so a connection made by the code under test (queued earlier) cannot be
missed by a race.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import ipaddress
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.exceptions import ImproperlyConfigured

from django_oximg import conf, runtime
from django_oximg.core import errors
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.disk import FileSystemSourceStore
from django_oximg.core.stores.http import URL_ALIAS, HttpSourceConfig, HttpSourceStore
from django_oximg.core.stores.http_bodies import ignore, read_body, read_prefix
from django_oximg.core.stores.http_connections import TimeLimit
from django_oximg.core.stores.http_guard import (
    Allowlist,
    address_refusal,
    has_dot_segment,
    parse_url,
)
from tests import images
from tests.constants import MIB, SIGNER

#: A global (public) address as far as the guard can tell. Connections to it
#: never leave the machine: the connect recorder maps it to a loopback server.
PUBLIC_IP = "1.2.3.4"

#: Bounds on waiting in tests; never reached when the code works.
WAIT = 10.0
#: How long a held response waits before giving up on its own.
HOLD = 10.0

REAL_CONNECT = socket.socket.connect
REAL_GETADDRINFO = socket.getaddrinfo
PHOTO = images.jpeg(640, 480)


# -- the network around the code under test ---------------------------------------


@dataclass
class Network:
    """What the code under test tried: connects and name lookups."""

    attempts: list[tuple[str, int]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    #: (PUBLIC_IP, port) -> loopback port it reaches.
    nat: dict[tuple[str, int], int] = field(default_factory=dict)
    #: host name -> a list of answers, one per lookup (the last one repeats).
    names: dict[str, list[list[str]]] = field(default_factory=dict)

    def connect(self, sock: socket.socket, address: Any) -> None:
        host, port = str(address[0]), int(address[1])
        self.attempts.append((host, port))
        if (host, port) in self.nat:
            REAL_CONNECT(sock, ("127.0.0.1", self.nat[(host, port)]))
        elif host in ("127.0.0.1", "::1"):
            REAL_CONNECT(sock, address)
        else:
            raise ConnectionRefusedError(f"test network: {host} is unreachable")

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = str(host)
        self.lookups.append(name)
        if name in self.names:
            answers = self.names[name]
            current = answers.pop(0) if len(answers) > 1 else answers[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port))) for ip in current]
        if name == "localhost":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port)))]
        # Numeric hosts only: the real resolver does no DNS for them.
        flags = socket.AI_NUMERICHOST
        return REAL_GETADDRINFO(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, flags)


@pytest.fixture(autouse=True)
def network(monkeypatch: pytest.MonkeyPatch) -> Network:
    net = Network()

    def connect(sock: socket.socket, address: Any) -> None:  # a plain function binds to sock
        net.connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", net.getaddrinfo)
    return net


# -- servers -----------------------------------------------------------------------

Route = Callable[["Handler"], None]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Upstream

    def do_GET(self) -> None:
        self.server.record(self.command, self.path)
        route = self.server.routes.get(self.path.partition("?")[0])
        if route is None:
            send_bytes(self, b"missing", status=404)
        else:
            route(self)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


class Upstream(http.server.ThreadingHTTPServer):
    """A test HTTP server on 127.0.0.1 that counts connections, requests and body bytes."""

    daemon_threads = False
    block_on_close = True  # server_close() joins every handler thread

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes: dict[str, Route] = dict(routes or {})
        self.connections = 0
        self.requests: list[tuple[str, str]] = []
        self.body_bytes = 0
        self.release = threading.Event()
        self._lock = threading.Lock()

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse lookup of the address (no DNS in tests)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.port

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def get_request(self) -> tuple[socket.socket, Any]:
        accepted = super().get_request()
        with self._lock:
            self.connections += 1
        return accepted

    def record(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def count_body(self, sent: int) -> None:
        with self._lock:
            self.body_bytes += sent

    def assert_untouched(self) -> None:
        """No connection reached this server: a marker connection is the first accepted."""
        with socket.socket() as marker:
            REAL_CONNECT(marker, ("127.0.0.1", self.port))
            give_up = time.monotonic() + WAIT
            while self.connections == 0 and time.monotonic() < give_up:
                time.sleep(0.01)
        assert self.connections == 1, f"{self.connections - 1} connection(s) reached the canary"


@pytest.fixture
def servers() -> Iterator[Callable[..., Upstream]]:
    """Start servers in threads; stop them (joining handler threads) after the test."""
    started: list[tuple[Upstream, threading.Thread]] = []

    def start(routes: dict[str, Route] | None = None) -> Upstream:
        server = Upstream(routes)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        started.append((server, thread))
        return server

    yield start
    for server, thread in started:
        server.release.set()
        server.shutdown()
        thread.join(WAIT)
        server.server_close()


@pytest.fixture
def canary(servers: Callable[..., Upstream]) -> Upstream:
    return servers({})


@pytest.fixture
def upstream(servers: Callable[..., Upstream]) -> Upstream:
    return servers({"/photos/a.jpg": lambda h: send_bytes(h, PHOTO)})


def send_bytes(
    handler: Handler,
    body: bytes,
    status: int = 200,
    headers: dict[str, str] | None = None,
    length: int | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "image/jpeg")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.send_header("Connection", "close")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)
        handler.server.count_body(len(body))
    handler.close_connection = True


def redirect(location: str, status: int = 302) -> Route:
    def route(handler: Handler) -> None:
        send_bytes(handler, b"", status=status, headers={"Location": location})

    return route


# -- the thumbnailer around the store ------------------------------------------------


@dataclass
class Site:
    """A core thumbnailer with an HTTP store, as a plain-WSGI user would wire it."""

    thumbnailer: Thumbnailer
    store: HttpSourceStore
    cache_dir: Path

    def get(self, url: str, options: str = "rs:fit:100:100", form: str = "base64") -> Reply:
        if form == "base64":
            encoded = base64.urlsafe_b64encode(url.encode()).rstrip(b"=").decode()
            path = f"/{options}/{encoded}.jpg"
        else:
            path = f"/{options}/plain/{url.replace('%', '%25').replace('@', '%40')}@jpg"
        reply = self.thumbnailer.reply(SIGNER.signed_path(path), "GET", {})
        if reply.file is not None:  # a cache hit: read and close the file
            with reply.file as handle:
                return Reply(reply.status, reply.headers, handle.read())
        return reply

    def cached(self) -> list[Path]:
        return [p for p in self.cache_dir.rglob("*") if p.is_file()]


@pytest.fixture
def site(make: Callable[..., Thumbnailer], tmp_path: Path, cache_dir: Path) -> Callable[..., Site]:
    def build(*prefixes: str, max_src_file_size: int = 50 * MIB, **http: Any) -> Site:
        store = HttpSourceStore(HttpSourceConfig(prefixes=prefixes, **http))
        thumbnailer = make(
            stores={"": FileSystemSourceStore(tmp_path), URL_ALIAS: store},
            max_src_file_size=max_src_file_size,
        )
        return Site(thumbnailer, store, cache_dir)

    return build


def size_of(reply: Reply) -> tuple[int, int]:
    image = pyvips.Image.new_from_buffer(reply.body, "")
    return image.width, image.height


def assert_not_found(reply: Reply) -> None:
    assert reply.status == 404
    assert reply.body == b"Not found\n"
    assert ("Cache-Control", "no-store") in reply.headers


# -- the positive path ---------------------------------------------------------------


@pytest.mark.parametrize("form", ["base64", "plain"])
def test_allowed_server_gives_a_thumbnail(
    site: Callable[..., Site], upstream: Upstream, form: str
) -> None:
    web = site(upstream.url("/photos/"), allow_private_networks=True)
    reply = web.get(upstream.url("/photos/a.jpg"), form=form)
    assert reply.status == 200, reply.body
    assert size_of(reply) == (100, 75)
    assert upstream.requests == [("GET", "/photos/a.jpg")]
    assert len(web.cached()) == 1


def test_a_host_name_is_checked_and_connected_to_by_its_validated_address(
    site: Callable[..., Site], upstream: Upstream, network: Network
) -> None:
    network.names["images.test"] = [["127.0.0.1"]]
    web = site(f"http://IMAGES.test:{upstream.port}/photos", allow_private_networks=True)
    reply = web.get(f"http://images.TEST:{upstream.port}/photos/a.jpg")
    assert reply.status == 200
    assert network.lookups == ["images.test"]
    assert network.attempts == [("127.0.0.1", upstream.port)]


def test_url_sources_are_off_without_an_http_store(
    make: Callable[..., Thumbnailer], tmp_path: Path, canary: Upstream, network: Network
) -> None:
    thumbnailer = make(
        workers=1, queue_size=4, budget=64 * MIB, source=FileSystemSourceStore(tmp_path)
    )
    path = f"/rs:fit:10:10/plain/{canary.url('/a.jpg')}@jpg"
    assert_not_found(thumbnailer.reply(SIGNER.signed_path(path), "GET", {}))
    assert network.attempts == []
    canary.assert_untouched()


# -- the address guard: nothing refused is ever connected to ---------------------------

#: Loopback forms: if the guard let them through, the canary would count them.
LOOPBACK_HOSTS = [
    "127.0.0.1",
    "127.1",
    "0.0.0.0",
    "[::1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "localhost",
    "[::127.0.0.1]",
]

#: Other non-public forms: the guard must refuse before connecting anywhere.
PRIVATE_HOSTS = [
    "169.254.169.254",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "[fc00::1]",
    "[fe80::1]",
    "[ff02::1]",
    "[64:ff9b::7f00:1]",
    "[64:ff9b::10.0.0.1]",
    "[2002:7f00:0001::]",
    "[2002:a00:1::]",
    # Teredo: server 127.0.0.1, client 127.0.0.1 (stored inverted).
    "[2001:0:7f00:1:0:0:80ff:fffe]",
]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS + PRIVATE_HOSTS)
def test_non_public_addresses_are_refused_before_any_connection(
    site: Callable[..., Site], canary: Upstream, network: Network, host: str
) -> None:
    url = f"http://{host}:{canary.port}/photos/a.jpg"
    web = site(url)  # on the allowlist: only the address guard can stop it
    assert_not_found(web.get(url))
    assert network.attempts == []
    canary.assert_untouched()


def test_a_name_with_one_private_address_among_public_ones_is_refused(
    site: Callable[..., Site], canary: Upstream, network: Network
) -> None:
    network.names["mixed.test"] = [[PUBLIC_IP, "127.0.0.1"]]
    url = f"http://mixed.test:{canary.port}/a.jpg"
    assert_not_found(site(url).get(url))
    assert network.attempts == []
    canary.assert_untouched()


def test_dns_rebinding_connects_only_to_the_validated_address(
    site: Callable[..., Site], upstream: Upstream, canary: Upstream, network: Network
) -> None:
    # First answer public (reaches the real upstream through the test NAT),
    # every later answer loopback, on the canary's port.
    network.names["rebind.test"] = [[PUBLIC_IP], ["127.0.0.1"]]
    network.nat[(PUBLIC_IP, canary.port)] = upstream.port
    url = f"http://rebind.test:{canary.port}/photos/a.jpg"
    web = site(url)

    first = web.get(url)
    assert first.status == 200
    assert network.lookups == ["rebind.test"]  # resolved once, never again for this fetch
    assert network.attempts == [(PUBLIC_IP, canary.port)]

    # A new fetch resolves again, now to loopback: refused before connecting.
    second = web.get(url, options="rs:fit:50:50")
    assert_not_found(second)
    assert network.attempts == [(PUBLIC_IP, canary.port)]
    canary.assert_untouched()


def test_private_networks_setting_lifts_the_guard_but_not_for_unspecified_addresses(
    site: Callable[..., Site], canary: Upstream, network: Network
) -> None:
    url = f"http://0.0.0.0:{canary.port}/a.jpg"
    assert_not_found(site(url, allow_private_networks=True).get(url))
    assert network.attempts == []


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("8.8.8.8", False),
        ("2606:4700::1111", False),
        ("::ffff:8.8.8.8", False),
        ("64:ff9b::808:808", False),
        ("2002:808:808::", False),
        ("127.0.0.1", True),
        ("127.255.255.254", True),
        ("0.0.0.0", True),
        ("10.1.2.3", True),
        ("172.31.0.1", True),
        ("192.168.0.1", True),
        ("100.127.255.255", True),
        ("169.254.0.1", True),
        ("224.0.0.251", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("203.0.113.1", True),
        ("::", True),
        ("::1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:0:7f00:1", True),
        ("::7f00:1", True),
        ("64:ff9b::a9fe:a9fe", True),
        ("64:ff9b:1::1", True),
        ("2002:c0a8:101::", True),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", True),
        ("fc00::1", True),
        ("fd12:3456::1", True),
        ("fe80::1", True),
        ("fec0::1", True),
        ("ff02::1", True),
    ],
)
def test_address_refusal(address: str, refused: bool) -> None:
    reason = address_refusal(ipaddress.ip_address(address))
    assert (reason is not None) == refused, reason


def test_allowing_private_networks_still_refuses_unspecified_multicast_broadcast() -> None:
    for address in ("127.0.0.1", "10.0.0.1", "::1", "fe80::1"):
        assert address_refusal(ipaddress.ip_address(address), allow_private=True) is None
    for address in ("0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "::ffff:0.0.0.0"):
        assert address_refusal(ipaddress.ip_address(address), allow_private=True)


# -- the allowlist: compared on parsed URLs --------------------------------------------


def test_allowlist_refusals_never_connect(
    site: Callable[..., Site], canary: Upstream, network: Network
) -> None:
    """Each URL's *real* host is the canary (or resolves to it); private networks are
    allowed, so only the allowlist can stop them."""
    network.names["allowed.test"] = [["127.0.0.1"]]
    network.names["allowed.test.evil.test"] = [["127.0.0.1"]]
    port = canary.port
    web = site(f"http://allowed.test:{port}/photos/", allow_private_networks=True)
    refused = [
        f"http://allowed.test:{port}@127.0.0.1:{port}/photos/a.jpg",
        f"http://allowed.test@127.0.0.1:{port}/photos/a.jpg",
        f"http://user:pass@allowed.test:{port}/photos/a.jpg",
        f"http://allowed.test.evil.test:{port}/photos/a.jpg",
        f"http://allowed.test:{port}\\@127.0.0.1:{port}/photos/a.jpg",
        f"http://allowed.test:{port}/photos\\..\\secret.jpg",
        f"http://allowed.test:{port}/photos/a.jpg#x",
        f"http://allowed.test:{port}/photos/../secret.jpg",
        f"http://allowed.test:{port}/photos/%2e%2e/secret.jpg",
        f"http://allowed.test:{port}/photos/%252e%252e/secret.jpg",
        # Servers that drop path parameters (Tomcat) read "..;" as "..".
        f"http://allowed.test:{port}/photos/..;/secret.jpg",
        f"http://allowed.test:{port}/photos/%2e%2e;/secret.jpg",
        f"http://allowed.test:{port}/photos/%2E%2E%3B/secret.jpg",
        f"http://allowed.test:{port}/photos/..;jsessionid=1/secret.jpg",
        f"http://allowed.test:{port}/photos/.;/a.jpg",
        f"http://allowed.test:{port}/photos-secret/a.jpg",
        f"http://allowed.test:{port}/photos",
        f"https://allowed.test:{port}/photos/a.jpg",
        f"http://allowed.test:{port + 1}/photos/a.jpg",
        "http://allowed.test/photos/a.jpg",
        f"http://127.0.0.1:{port}/photos/a.jpg",
        f"http://allowed.test:{port}/photos/a\r\nX-Injected: 1.jpg",
        f"http://%61llowed.test:{port}/photos/a.jpg",
        f"file://allowed.test:{port}/photos/a.jpg",
        "file:///etc/passwd",
        f"ftp://allowed.test:{port}/photos/a.jpg",
        f"gopher://127.0.0.1:{port}/_GET%20/",
        "data:image/png;base64,iVBORw0KGgo=",
    ]
    for url in refused:
        assert_not_found(web.get(url))
    assert network.attempts == []
    canary.assert_untouched()


@pytest.mark.parametrize(
    ("prefix", "url", "allowed"),
    [
        ("https://img.example.com/photos/", "https://img.example.com/photos/a.jpg", True),
        ("https://img.example.com/photos/", "https://IMG.Example.COM/photos/a.jpg", True),
        ("https://img.example.com/photos/", "HTTPS://img.example.com:443/photos/a.jpg", True),
        ("https://img.example.com/photos/", "https://img.example.com/photos/", True),
        ("https://img.example.com/photos/", "https://img.example.com/photos", False),
        ("https://img.example.com/photos/", "https://img.example.com/Photos/a.jpg", False),
        ("https://img.example.com/photos", "https://img.example.com/photos/a.jpg", True),
        ("https://img.example.com/photos", "https://img.example.com/photosx/a.jpg", False),
        ("https://img.example.com", "https://img.example.com/any/a.jpg?w=1", True),
        ("https://img.example.com/", "http://img.example.com/a.jpg", False),
        ("https://img.example.com/", "https://img.example.com:8443/a.jpg", False),
        ("http://img.example.com:80/", "http://img.example.com/a.jpg", True),
        ("https://img.example.com/", "https://img.example.com./a.jpg", False),
        ("https://img.example.com/", "https://img.example.com.evil.com/a.jpg", False),
        ("https://img.example.com/", "https://evil.com/img.example.com/a.jpg", False),
        ("https://bücher.example/", "https://xn--bcher-kva.example/a.jpg", True),
        ("https://xn--bcher-kva.example/", "https://BÜCHER.example/a.jpg", True),
        ("https://[2001:db8::1]/", "https://[2001:0db8:0:0::1]/a.jpg", True),
        ("https://img.example.com/a b/", "https://img.example.com/a%20b/c.jpg", True),
    ],
)
def test_prefix_matching(prefix: str, url: str, allowed: bool) -> None:
    assert Allowlist([prefix]).allows(parse_url(url)) is allowed


@pytest.mark.parametrize(
    "url",
    [
        "http://a.com@evil.com/x",
        "http://@evil.com/x",
        "http://evil.com/x#frag",
        "http://evil.com\\x",
        "http://evil.com/a%zz",
        "http://evil.com:0/",
        "http://evil.com:99999/",
        "http://evil.com:/",
        "http:///x",
        "http:/evil.com/x",
        "http://[::1%25eth0]/",
        "http://ev il.com/",
        "http://evil..com/",
        "javascript://evil.com/%0aalert(1)",
        "//evil.com/x",
        "http://evil.com/a/./b",
    ],
)
def test_malformed_or_ambiguous_urls_do_not_parse(url: str) -> None:
    with pytest.raises(ValueError):
        parse_url(url)


@pytest.mark.parametrize(
    ("path", "dotted"),
    [
        ("/allowed/..;/secret", True),
        ("/allowed/%2e%2e;/secret", True),
        ("/allowed/%2e%2E%3b/secret", True),
        ("/allowed/%252e%252e%253b/secret", True),
        ("/allowed/.;v=1/a.jpg", True),
        ("/allowed/..;", True),
        ("/allowed/a;v=1/b.jpg", False),
        ("/allowed/..a/b.jpg", False),
        ("/allowed/a..;/b.jpg", False),
    ],
)
def test_dot_segments_count_with_path_parameters(path: str, dotted: bool) -> None:
    assert has_dot_segment(path) is dotted


def test_a_refused_url_is_logged_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """The URL comes from the request: its line breaks must not start log lines."""
    store = HttpSourceStore(HttpSourceConfig(prefixes=("http://a.test/",)))
    with (
        caplog.at_level(logging.WARNING, logger="django_oximg"),
        pytest.raises(errors.SourceNotFound),
    ):
        store.check_name("http://a.test/x\r\nCRITICAL forged\u2028.jpg")
    [record] = caplog.records
    line = record.getMessage()
    assert not any(char in line for char in "\r\n\u2028")
    assert "x\\r\\nCRITICAL forged\\u2028.jpg" in line


# -- redirects ---------------------------------------------------------------------------


@pytest.mark.parametrize(("hops", "status"), [(5, 200), (6, 404)])
def test_at_most_five_redirects_are_followed(
    site: Callable[..., Site], servers: Callable[..., Upstream], hops: int, status: int
) -> None:
    server = servers({"/photos/0": lambda h: send_bytes(h, PHOTO)})
    for hop in range(1, hops + 1):
        # Relative and absolute locations alternate; both are checked.
        target = f"/photos/{hop - 1}" if hop % 2 else server.url(f"/photos/{hop - 1}")
        server.routes[f"/photos/{hop}"] = redirect(target, status=(301, 302, 307, 308)[hop % 4])
    web = site(server.url("/photos/"), allow_private_networks=True)
    reply = web.get(server.url(f"/photos/{hops}"))
    assert reply.status == status
    assert len(server.requests) == min(hops + 1, 6)


def test_redirect_to_loopback_is_refused_and_the_canary_gets_nothing(
    site: Callable[..., Site], upstream: Upstream, canary: Upstream, network: Network
) -> None:
    network.names["origin.test"] = [[PUBLIC_IP]]
    network.nat[(PUBLIC_IP, upstream.port)] = upstream.port
    upstream.routes["/photos/moved.jpg"] = redirect(canary.url("/photos/a.jpg"))
    web = site(f"http://origin.test:{upstream.port}/photos/", canary.url("/photos/"))
    assert_not_found(web.get(f"http://origin.test:{upstream.port}/photos/moved.jpg"))
    assert network.attempts == [(PUBLIC_IP, upstream.port)]
    canary.assert_untouched()


def test_redirect_off_the_allowlist_is_refused(
    site: Callable[..., Site], upstream: Upstream
) -> None:
    upstream.routes["/photos/moved.jpg"] = redirect("/secret/a.jpg")
    upstream.routes["/secret/a.jpg"] = lambda h: send_bytes(h, PHOTO)
    web = site(upstream.url("/photos/"), allow_private_networks=True)
    assert_not_found(web.get(upstream.url("/photos/moved.jpg")))
    assert upstream.requests == [("GET", "/photos/moved.jpg")]


def test_redirect_to_a_name_resolving_to_a_private_address_is_refused(
    site: Callable[..., Site], upstream: Upstream, network: Network
) -> None:
    network.names["origin.test"] = [[PUBLIC_IP]]
    network.names["inside.test"] = [["10.0.0.1"]]
    network.nat[(PUBLIC_IP, upstream.port)] = upstream.port
    upstream.routes["/photos/moved.jpg"] = redirect("http://inside.test/photos/a.jpg")
    web = site(f"http://origin.test:{upstream.port}/photos/", "http://inside.test/photos/")
    assert_not_found(web.get(f"http://origin.test:{upstream.port}/photos/moved.jpg"))
    assert network.attempts == [(PUBLIC_IP, upstream.port)]


# -- size limits ---------------------------------------------------------------------------


def test_content_length_over_the_limit_is_refused_before_the_body(
    site: Callable[..., Site], servers: Callable[..., Upstream]
) -> None:
    def held(handler: Handler) -> None:
        """Headers now; the body only after the client would have waited for it."""
        handler.send_response(200)
        handler.send_header("Content-Length", str(4 * MIB))
        handler.end_headers()
        handler.wfile.flush()
        if handler.server.release.wait(HOLD):
            return
        try:
            handler.wfile.write(b"\0" * 4 * MIB)
            handler.server.count_body(4 * MIB)
        except OSError:
            pass
        handler.close_connection = True

    server = servers({"/big.jpg": held})
    # A client that read the body first would block on it until the 5 s deadline: 504.
    web = site(server.url("/"), allow_private_networks=True, max_src_file_size=MIB, timeout=5.0)
    reply = web.get(server.url("/big.jpg"))
    assert reply.status == 422
    assert reply.body == b"Source image is too large\n"
    assert server.body_bytes == 0
    assert web.cached() == []


def test_chunked_body_over_the_limit_is_refused_and_the_read_stops(
    no_fd_leak: None, site: Callable[..., Site], servers: Callable[..., Upstream]
) -> None:
    total = 64 * MIB
    piece = b"\xff" * (64 * 1024)

    def endless(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for _ in range(total // len(piece)):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                handler.server.count_body(len(piece))
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up, as it should
        handler.close_connection = True

    server = servers({"/endless.jpg": endless})
    limit = 256 * 1024
    web = site(server.url("/"), allow_private_networks=True, max_src_file_size=limit)
    reply = web.get(server.url("/endless.jpg"))
    assert reply.status == 422
    # Socket buffers on loopback hold a few MiB; the rest was never sent.
    assert settled_body_bytes(server) < total // 4


def settled_body_bytes(server: Upstream) -> int:
    """The body bytes ``server`` sent, once it has stopped sending (bounded wait)."""
    give_up = time.monotonic() + WAIT
    before = -1
    while server.body_bytes != before and time.monotonic() < give_up:
        before = server.body_bytes
        time.sleep(0.2)
    return server.body_bytes


class FakeResponse:
    """Just enough of urllib3's response to watch how much the store asks for."""

    def __init__(self, body: bytes, headers: dict[str, str]) -> None:
        self.body = body
        self.headers = headers
        self.taken = 0

    def read(self, amt: int, decode_content: bool = True) -> bytes:
        assert decode_content is False
        chunk, self.body = self.body[:amt], self.body[amt:]
        self.taken += len(chunk)
        return chunk


@pytest.mark.parametrize("size", [1000, 1001, 5000, 300_000])
def test_the_body_read_asks_for_at_most_limit_plus_one_bytes(size: int) -> None:
    limit = 1000
    response = FakeResponse(b"x" * size, {})
    url = parse_url("http://a.test/x")
    with TimeLimit(WAIT) as deadline:
        if size > limit:
            with pytest.raises(errors.SourceTooLarge):
                read_body(response, url, limit, deadline, ignore)  # type: ignore[arg-type]
        else:
            body = read_body(response, url, limit, deadline, ignore)  # type: ignore[arg-type]
            assert len(body) == size
    assert response.taken == min(size, limit + 1)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Content-Length": str(3 * MIB)}, [3 * MIB]),  # all of it, before the body
        ({}, [0, MIB, MIB, MIB]),  # a mebibyte at a time, ahead of the bytes
    ],
    ids=["declared", "chunked"],
)
def test_the_body_is_reserved_before_it_is_read(
    headers: dict[str, str], expected: list[int]
) -> None:
    reserved: list[int] = []
    response = FakeResponse(b"x" * (3 * MIB), headers)
    with TimeLimit(WAIT) as deadline:
        body = read_body(
            response, parse_url("http://a.test/x"), 50 * MIB, deadline, reserved.append
        )  # type: ignore[arg-type]
    assert len(body) == 3 * MIB
    assert reserved == expected


def test_short_body_is_a_502_and_nothing_is_cached(
    site: Callable[..., Site], servers: Callable[..., Upstream]
) -> None:
    server = servers({"/short.jpg": lambda h: send_bytes(h, PHOTO[:5000], length=len(PHOTO))})
    web = site(server.url("/"), allow_private_networks=True)
    reply = web.get(server.url("/short.jpg"))
    assert reply.status == 502
    assert reply.body == b"Source unavailable\n"
    assert web.cached() == []


def test_gzip_encoded_source_is_decoded_in_full(
    site: Callable[..., Site], servers: Callable[..., Upstream]
) -> None:
    packed = gzip.compress(PHOTO)
    server = servers(
        {"/a.jpg": lambda h: send_bytes(h, packed, headers={"Content-Encoding": "gzip"})}
    )
    web = site(server.url("/"), allow_private_networks=True)
    reply = web.get(server.url("/a.jpg"))
    assert reply.status == 200
    assert size_of(reply) == (100, 75)


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (gzip.compress(PHOTO)[:-100], "gzip"),  # truncated stream
        (gzip.compress(PHOTO) + b"junk", "gzip"),  # trailing bytes
        (b"not gzip at all", "gzip"),
        (PHOTO, "br"),  # an encoding we do not decode
    ],
)
def test_bad_or_unknown_content_encoding_is_a_422_never_a_truncated_image(
    site: Callable[..., Site], servers: Callable[..., Upstream], body: bytes, encoding: str
) -> None:
    server = servers(
        {"/a.jpg": lambda h: send_bytes(h, body, headers={"Content-Encoding": encoding})}
    )
    web = site(server.url("/"), allow_private_networks=True)
    assert web.get(server.url("/a.jpg")).status == 422
    assert web.cached() == []


def test_gzip_that_inflates_past_the_limit_is_a_422(
    site: Callable[..., Site], servers: Callable[..., Upstream]
) -> None:
    bomb = gzip.compress(b"\0" * (8 * MIB))
    server = servers(
        {"/a.jpg": lambda h: send_bytes(h, bomb, headers={"Content-Encoding": "gzip"})}
    )
    web = site(server.url("/"), allow_private_networks=True, max_src_file_size=MIB)
    reply = web.get(server.url("/a.jpg"))
    assert reply.status == 422
    assert reply.body == b"Source image is too large\n"


# -- time limits ----------------------------------------------------------------------------


#: Seconds between two trickled bytes: shorter than the 1 s deadline, so every
#: single read succeeds and only a limit on the total time can stop the source.
TRICKLE_PAUSE = 0.25


def trickle(head: bytes, then: bytes) -> Route:
    """Send ``head`` at once, then ``then`` one byte at a time until the client leaves."""

    def route(handler: Handler) -> None:
        try:
            handler.wfile.write(head)
            handler.wfile.flush()
            for byte in then:
                if handler.server.release.wait(TRICKLE_PAUSE):
                    break
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                handler.server.count_body(1)
        except OSError:
            pass
        handler.close_connection = True

    return route


SLOW_BODY = trickle(
    b"HTTP/1.1 200 OK\r\nContent-Length: 60\r\nConnection: close\r\n\r\n", b"x" * 60
)
SLOW_HEADERS = trickle(b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"y" * 60 + b"\r\n\r\n")


@pytest.mark.parametrize("route", [SLOW_BODY, SLOW_HEADERS], ids=["body", "headers"])
def test_a_source_that_trickles_is_cut_off_at_the_deadline(
    no_fd_leak: None, site: Callable[..., Site], servers: Callable[..., Upstream], route: Route
) -> None:
    server = servers({"/slow.jpg": route})
    web = site(server.url("/"), allow_private_networks=True, timeout=1.0)
    reply = web.get(server.url("/slow.jpg"))
    assert reply.status == 504
    assert reply.body == b"Source timed out\n"
    assert web.cached() == []
    assert server.body_bytes < 30  # cut off long before the 60-byte trickle ended


def test_a_blackhole_source_times_out(site: Callable[..., Site]) -> None:
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(8)  # accepts at the TCP level, never answers
        url = f"http://127.0.0.1:{hole.getsockname()[1]}/a.jpg"
        reply = site(url, allow_private_networks=True, timeout=1.0).get(url)
    assert reply.status == 504


def test_a_refused_port_is_a_502(site: Callable[..., Site]) -> None:
    # Bound but not listening: connections are refused, and no server started
    # beside this test can take the port while the request is made.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/a.jpg"
        assert site(url, allow_private_networks=True).get(url).status == 502


# -- HTTPS -----------------------------------------------------------------------------------


def tls_files(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """A throw-away CA and a certificate for ``host`` signed by it (cert, key, CA)."""
    pytest.importorskip("cryptography")
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            # Key identifiers and the CA's key usage: Python 3.13's default
            # context verifies strictly (VERIFY_X509_STRICT) and requires them.
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), False
            )
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = certificate("oximg test CA", ca_key, "oximg test CA", ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf_cert = certificate(host, leaf_key, "oximg test CA", ca_key, ca=False)
    paths = directory / "leaf.pem", directory / "leaf.key", directory / "ca.pem"
    paths[0].write_bytes(leaf_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    paths[2].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return paths


def test_https_is_verified_against_the_host_name_while_connecting_to_the_pinned_address(
    site: Callable[..., Site], upstream: Upstream, network: Network, tmp_path: Path
) -> None:
    import ssl

    cert, key, ca = tls_files(tmp_path, "images.test")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream.socket = context.wrap_socket(upstream.socket, server_side=True)
    network.names["images.test"] = [["127.0.0.1"]]
    network.names["other.test"] = [["127.0.0.1"]]
    port = upstream.port
    prefixes = (f"https://images.test:{port}/photos/", f"https://other.test:{port}/photos/")

    trusted = site(*prefixes, allow_private_networks=True, ca_certs=str(ca))
    assert trusted.get(f"https://images.test:{port}/photos/a.jpg").status == 200
    # The same address under a name the certificate does not cover.
    assert trusted.get(f"https://other.test:{port}/photos/a.jpg").status == 502
    # The system trust store does not know the test CA.
    untrusted = site(*prefixes, allow_private_networks=True)
    assert untrusted.get(f"https://images.test:{port}/photos/a.jpg", "rs:fit:50:50").status == 502
    assert set(network.attempts) == {("127.0.0.1", port)}


# -- upstream statuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"), [(404, 404), (410, 404), (500, 502), (503, 502), (403, 502)]
)
def test_upstream_errors(
    site: Callable[..., Site], servers: Callable[..., Upstream], status: int, expected: int
) -> None:
    server = servers({"/a.jpg": lambda h: send_bytes(h, b"error page", status=status)})
    web = site(server.url("/"), allow_private_networks=True)
    reply = web.get(server.url("/a.jpg"))
    assert reply.status == expected
    assert ("Cache-Control", "no-store") in reply.headers
    assert web.cached() == []


# -- version --------------------------------------------------------------------------------


def test_version_comes_from_etag_then_last_modified_with_a_head_request(
    servers: Callable[..., Upstream],
) -> None:
    validators: dict[str, dict[str, str]] = {
        "/etag.jpg": {"ETag": '"abc"', "Last-Modified": "Tue, 01 Jul 2025 00:00:00 GMT"},
        "/etag2.jpg": {"ETag": '"abd"'},
        "/modified.jpg": {"Last-Modified": "Tue, 01 Jul 2025 00:00:00 GMT"},
        "/none.jpg": {},
    }
    server = servers(
        {
            path: (lambda h, headers=headers: send_bytes(h, PHOTO, headers=headers))
            for path, headers in validators.items()
        }
    )
    store = HttpSourceStore(
        HttpSourceConfig(prefixes=(server.url("/"),), allow_private_networks=True)
    )
    etag = store.version(server.url("/etag.jpg"))
    assert len(etag) == 16 and int(etag, 16) >= 0
    assert store.version(server.url("/etag.jpg")) == etag
    assert store.version(server.url("/etag2.jpg")) not in ("", etag)
    modified = store.version(server.url("/modified.jpg"))
    assert modified not in ("", etag)
    assert store.version(server.url("/none.jpg")) == ""
    assert {method for method, _ in server.requests} == {"HEAD"}
    assert server.body_bytes == 0
    with pytest.raises(errors.SourceNotFound):
        store.version(server.url("/missing.jpg"))


def test_version_is_refused_like_a_read(canary: Upstream, network: Network) -> None:
    store = HttpSourceStore(HttpSourceConfig(prefixes=(canary.url("/"),)))
    with pytest.raises(errors.SourceNotFound):
        store.version(canary.url("/a.jpg"))
    assert network.attempts == []


# -- header reads (the template tags) -------------------------------------------------------


def ranged(body: bytes, seen: list[str]) -> Route:
    """Serve ``body``, honouring ``Range: bytes=0-N`` as S3 and most servers do."""

    def route(handler: Handler) -> None:
        wanted = handler.headers.get("Range", "")
        seen.append(wanted)
        if not body:
            send_bytes(handler, b"", status=416)
            return
        last = int(wanted.removeprefix("bytes=0-")) if wanted.startswith("bytes=0-") else None
        if last is None:
            send_bytes(handler, body)
            return
        part = body[: last + 1]
        content_range = f"bytes 0-{len(part) - 1}/{len(body)}"
        send_bytes(handler, part, status=206, headers={"Content-Range": content_range})

    return route


def test_a_header_read_is_one_ranged_get(servers: Callable[..., Upstream]) -> None:
    seen: list[str] = []
    server = servers({"/a.jpg": ranged(PHOTO, seen), "/empty.jpg": ranged(b"", seen)})
    store = HttpSourceStore(
        HttpSourceConfig(prefixes=(server.url("/"),), allow_private_networks=True)
    )
    assert store.read_header(server.url("/a.jpg"), 4096) == PHOTO[:4096]
    assert seen == ["bytes=0-4095"]
    assert server.requests == [("GET", "/a.jpg")]
    give_up = time.monotonic() + WAIT
    while server.body_bytes < 4096 and time.monotonic() < give_up:
        time.sleep(0.01)  # the handler counts after its write returns
    assert server.body_bytes == 4096
    assert store.read_header(server.url("/empty.jpg"), 4096) == b""  # 416: nothing to range over
    with pytest.raises(errors.SourceNotFound):
        store.read_header(server.url("/missing.jpg"), 4096)


def test_a_server_ignoring_the_range_is_read_no_further_than_the_limit(
    no_fd_leak: None, servers: Callable[..., Upstream]
) -> None:
    total = 64 * MIB
    piece = bytes(range(256)) * 256

    def whole(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(total))
        handler.end_headers()
        try:
            for _ in range(total // len(piece)):
                handler.wfile.write(piece)
                handler.server.count_body(len(piece))
        except OSError:
            pass  # the client hung up, as it should
        handler.close_connection = True

    server = servers({"/big.jpg": whole})
    store = HttpSourceStore(
        HttpSourceConfig(prefixes=(server.url("/"),), allow_private_networks=True)
    )
    assert store.read_header(server.url("/big.jpg"), 100_000) == (piece * 2)[:100_000]
    # Socket buffers on loopback hold a few MiB; the rest was never sent.
    assert settled_body_bytes(server) < total // 4


@pytest.mark.parametrize("size", [10, 1000, 1001, 300_000])
def test_a_header_read_takes_at_most_the_limit(size: int) -> None:
    response = FakeResponse(b"x" * size, {})
    url = parse_url("http://a.test/x")
    with TimeLimit(WAIT) as deadline:
        data = read_prefix(response, url, 1000, deadline)  # type: ignore[arg-type]
    assert len(data) == min(size, 1000)
    assert response.taken == min(size, 1000)


def test_a_gzipped_header_read_gives_a_prefix_of_the_image(
    servers: Callable[..., Upstream],
) -> None:
    packed = gzip.compress(PHOTO)
    server = servers(
        {"/a.jpg": lambda h: send_bytes(h, packed, headers={"Content-Encoding": "gzip"})}
    )
    store = HttpSourceStore(
        HttpSourceConfig(prefixes=(server.url("/"),), allow_private_networks=True)
    )
    data = store.read_header(server.url("/a.jpg"), 8192)
    assert data and len(data) <= 8192
    assert PHOTO.startswith(data)


def test_a_header_read_is_refused_like_a_read(canary: Upstream, network: Network) -> None:
    store = HttpSourceStore(HttpSourceConfig(prefixes=(canary.url("/"),)))
    with pytest.raises(errors.SourceNotFound):
        store.read_header(canary.url("/a.jpg"), 4096)
    assert network.attempts == []


# -- settings and the Django side -------------------------------------------------------------


def test_settings_enable_http_sources(settings: Any, media: Path, upstream: Upstream) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "HTTP_SOURCES": upstream.url("/photos/"),
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
        "HTTP_TIMEOUT": 2,
    }
    store = runtime.get_thumbnailer().sources.stores[URL_ALIAS]
    assert isinstance(store, HttpSourceStore)
    assert store.config == HttpSourceConfig(
        prefixes=(upstream.url("/photos/"),), timeout=2, allow_private_networks=True
    )
    path = runtime.get_signer().signed_path(
        f"/rs:fit:100:100/plain/{upstream.url('/photos/a.jpg')}@png"
    )
    reply = runtime.get_thumbnailer().reply(path, "GET", {})
    assert reply.status == 200
    assert not runtime.source_is_local(URL_ALIAS)


def test_http_sources_are_off_by_default(settings: Any, media: Path, canary: Upstream) -> None:
    assert conf.get_settings().HTTP_SOURCES == ()
    assert URL_ALIAS not in runtime.get_thumbnailer().sources.stores
    path = runtime.get_signer().signed_path(f"/rs:fit:10:10/plain/{canary.url('/a.jpg')}@png")
    assert_not_found(runtime.get_thumbnailer().reply(path, "GET", {}))
    canary.assert_untouched()


def test_a_host_removed_from_the_allowlist_is_not_served_from_the_cache(
    settings: Any, media: Path, upstream: Upstream
) -> None:
    """The allowlist is checked (no network) before the cache lookup."""
    settings.OXIMG = {
        **settings.OXIMG,
        "HTTP_SOURCES": upstream.url("/photos/"),
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
    }
    path = runtime.get_signer().signed_path(
        f"/rs:fit:100:100/plain/{upstream.url('/photos/a.jpg')}@png"
    )
    assert runtime.get_thumbnailer().reply(path, "GET", {}).status == 200
    assert any((media / "oximg").rglob("*.png"))  # the result is cached
    requests = len(upstream.requests)
    settings.OXIMG = {**settings.OXIMG, "HTTP_SOURCES": upstream.url("/other/")}
    assert_not_found(runtime.get_thumbnailer().reply(path, "GET", {}))
    settings.OXIMG = {**settings.OXIMG, "HTTP_SOURCES": []}
    assert_not_found(runtime.get_thumbnailer().reply(path, "GET", {}))
    assert len(upstream.requests) == requests  # refused without asking the upstream


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["ftp://images.example.com/"], "is not http or https"),
        (["https://user@images.example.com/"], "userinfo"),
        (["https://images.example.com/?a=1"], "query"),
        (["https://images.example.com/#x"], "fragment"),
        (["images.example.com/photos/"], "not an absolute URL"),
        ([1], "a string or a list of strings"),
    ],
)
def test_bad_prefixes_fail_at_start_up(value: Any, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        conf.build_settings({"HTTP_SOURCES": value})


@pytest.mark.parametrize(
    "raw",
    [{"HTTP_TIMEOUT": 0}, {"HTTP_MAX_REDIRECTS": -1}, {"HTTP_ALLOW_PRIVATE_NETWORKS": "yes"}],
)
def test_bad_http_settings_fail_at_start_up(raw: dict[str, Any]) -> None:
    with pytest.raises(ImproperlyConfigured):
        conf.build_settings(raw)


def test_the_template_helper_builds_a_working_url_for_an_http_source(
    settings: Any, media: Path, upstream: Upstream
) -> None:
    from django_oximg.thumbnails import get_thumbnail

    upstream.routes["/photos/tagged.jpg"] = lambda h: send_bytes(h, PHOTO, headers={"ETag": '"v1"'})
    settings.OXIMG = {
        **settings.OXIMG,
        "HTTP_SOURCES": [upstream.url("/photos/")],
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
    }
    thumb = get_thumbnail(upstream.url("/photos/tagged.jpg"), "100x100")
    assert (thumb.width, thumb.height) == (100, 75)
    prefix = conf.get_settings().URL_PREFIX
    reply = runtime.get_thumbnailer().reply("/" + thumb.url.split(prefix, 1)[1], "GET", {})
    assert reply.status == 200
    assert size_of(reply) == (100, 75)
    assert [method for method, _ in upstream.requests] == ["HEAD", "GET", "GET"]
