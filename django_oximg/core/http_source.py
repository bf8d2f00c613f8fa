"""Source images fetched over HTTP(S), behind an allowlist and an address guard.

A URL source is fetched only when all of these hold, for the first request
and again for every redirect:

1. It parses strictly as ``http(s)://host[:port]/path[?query]``: no userinfo,
   no fragment, no backslash, no control character, no dot segment (also
   once or twice percent-decoded, and with ``;`` parameters: ``..;``). See
   :func:`parse_url`.
2. It lies under one of the configured prefixes, compared on the *parsed*
   URL: scheme, host (lowercase, IDNA), port (default per scheme) and the
   path at a segment boundary (:class:`Allowlist`). String prefixes would let
   ``http://a.com@evil.com/`` or ``http://a.com.evil.com/`` through.
3. Every address the host resolves to is public (:func:`address_refusal`),
   including IPv4 addresses carried inside IPv6 forms (mapped, compatible,
   NAT64, 6to4, Teredo). The connection then goes to those validated
   addresses and nowhere else: the socket is opened by
   :class:`PinnedHTTPConnection` to the resolved address, so a resolver that
   answers differently a moment later (DNS rebinding) cannot move it.

The download is bounded in bytes (``Content-Length`` checked before the body,
then at most ``max_bytes + 1`` bytes read) and in wall-clock time: a watchdog
(:class:`TimeLimit`) shuts the socket down when the total time is up, so a
source that trickles one byte a second cannot hold a worker thread.

A refusal is a :class:`~django_oximg.core.errors.SourceNotFound` (404, with no
detail for the client) and is logged with its reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import logging
import re
import socket
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, TypeAlias
from urllib.parse import quote, unquote, urljoin

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
)
from urllib3.response import BaseHTTPResponse
from urllib3.util.timeout import Timeout

from django_oximg.core import defaults
from django_oximg.core.deadlines import Deadline
from django_oximg.core.errors import (
    InvalidImage,
    SourceNotFound,
    SourceTimeout,
    SourceTooLarge,
    SourceUnavailable,
)
from django_oximg.core.logs import printable

# Defined with the resolver, which needs them without importing urllib3;
# imported here too, where they have always been found.
from django_oximg.core.sources import URL_ALIAS, URL_SOURCE, is_url  # noqa: F401
from django_oximg.core.stores import Reserve

logger = logging.getLogger("django_oximg")

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

SCHEMES = {"http": 80, "https": 443}

#: The only redirects followed; each new location is checked like the first URL.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

#: Upstream answers that mean "there is no such image" (404); any other
#: non-200 answer is the source failing (502).
MISSING_STATUSES = frozenset({404, 410})

#: Answers to a ranged GET that are not failures: the range (206), or the
#: range past the end of an empty body (416).
RANGE_NOT_SATISFIABLE = 416
RANGE_STATUSES = frozenset({200, 206, RANGE_NOT_SATISFIABLE})

#: Bytes asked of the socket per read: big enough to be cheap per byte, small
#: enough that a read past the size limit stops close to it.
CHUNK = 64 * 1024

#: A body of unknown length is reserved from the memory budget this much at a
#: time, ahead of the bytes read (one reservation per chunk would be 800
#: lock round trips for a 50 MiB body).
RESERVE_STEP = 1024 * 1024

#: ``Content-Encoding`` values decoded here. Images are compressed already, so
#: we ask for ``identity``; a server that gzips anyway is decoded in full or
#: refused, never truncated. Anything else (br, zstd, deflate) is refused.
GZIP_ENCODINGS = frozenset({"gzip", "x-gzip"})

#: Characters kept as they are when the path or query is percent-encoded:
#: RFC 3986 unreserved and sub-delims, ":", "@", "/" and existing escapes.
PATH_SAFE = "/%!$&'()*+,;=:@-._~"
QUERY_SAFE = PATH_SAFE + "?"

#: Host names after IDNA: letters, digits, hyphen, dot (and underscore, which
#: some real hosts use). Anything else (``%``, ``\\``, spaces) is refused.
HOST_NAME = re.compile(r"[a-z0-9_.-]+")
URL_SHAPE = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?"
)
AUTHORITY_V6 = re.compile(r"\[(?P<host>[0-9A-Fa-f:.]+)\](?::(?P<port>[0-9]{1,5}))?")
AUTHORITY_NAME = re.compile(r"(?P<host>[^:\[\]]+)(?::(?P<port>[0-9]{1,5}))?")
BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: Percent-decoding rounds checked for dot segments: a server may decode once
#: (``%2e%2e``) and a broken one twice (``%252e``).
DECODE_ROUNDS = 3

#: The NAT64 prefixes (RFC 6052 well-known, RFC 8215 local use).
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
LIMITED_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
IPV4_MASK = 0xFFFFFFFF
#: ``::ffff:0:a.b.c.d``, the SIIT "IPv4-translated" form (RFC 2765).
IPV4_TRANSLATED_HIGH = 0xFFFF0000


# -- URLs and the allowlist -------------------------------------------------------


@dataclass(frozen=True)
class HttpUrl:
    """A parsed, normalised http(s) URL: what the allowlist compares and what is fetched."""

    scheme: str
    #: Lowercase ASCII (IDNA) host name, or an IP address without brackets.
    host: str
    port: int
    #: Percent-encoded, starting with "/".
    path: str
    #: Percent-encoded, without the "?" ("" when absent).
    query: str = ""

    @property
    def request_target(self) -> str:
        return self.path + ("?" + self.query if self.query else "")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if SCHEMES[self.scheme] == self.port else f":{self.port}"
        return f"{self.scheme}://{host}{port}{self.request_target}"


def parse_url(text: str) -> HttpUrl:
    """Parse ``text`` strictly into an :class:`HttpUrl`, or raise ValueError saying why.

    Strict on purpose: every form that parsers disagree about (userinfo,
    backslashes, fragments, control characters, bare ``%``, dot segments) is
    refused rather than interpreted, so what we check is what we fetch.
    """
    if CONTROL.search(text):
        raise ValueError("control character in URL")
    if "\\" in text:
        raise ValueError("backslash in URL")
    if "#" in text:
        raise ValueError("fragment in URL")
    shape = URL_SHAPE.fullmatch(text)
    if shape is None:
        raise ValueError("not an absolute URL")
    scheme = shape["scheme"].lower()
    if scheme not in SCHEMES:
        raise ValueError(f"scheme {scheme!r} is not http or https")
    host, port = parse_authority(shape["authority"], SCHEMES[scheme])
    path = encode_part(shape["path"] or "/", PATH_SAFE)
    query = encode_part(shape["query"] or "", QUERY_SAFE)
    if has_dot_segment(path):
        raise ValueError("dot segment in path")
    return HttpUrl(scheme, host, port, path, query)


def parse_authority(authority: str, default_port: int) -> tuple[str, int]:
    """Host (normalised) and port of ``authority``; userinfo of any kind is refused."""
    if "@" in authority:
        raise ValueError("userinfo in URL")
    if " " in authority:
        raise ValueError("space in host")
    match = AUTHORITY_V6.fullmatch(authority) or AUTHORITY_NAME.fullmatch(authority)
    if match is None:
        raise ValueError("malformed host or port")
    port = int(match["port"]) if match["port"] else default_port
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range")
    if authority.startswith("["):
        try:
            return ipaddress.IPv6Address(match["host"]).compressed, port
        except ValueError as exc:
            raise ValueError("malformed IPv6 address") from exc
    return normalised_host(match["host"]), port


def normalised_host(host: str) -> str:
    """Lowercase ASCII form of a host name (IDNA for non-ASCII names)."""
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise ValueError("host is not a valid domain name") from exc
    if not HOST_NAME.fullmatch(ascii_host) or ascii_host.strip(".") == "":
        raise ValueError("host is not a valid domain name")
    return ascii_host


def encode_part(text: str, safe: str) -> str:
    """Percent-encode what must be (spaces, non-ASCII), keeping existing escapes."""
    if BAD_ESCAPE.search(text):
        raise ValueError("'%' not followed by two hex digits")
    return quote(text, safe=safe)


def has_dot_segment(path: str) -> bool:
    """Whether ``path``, as sent or percent-decoded up to :data:`DECODE_ROUNDS` times,
    has a ``.`` or ``..`` segment, a backslash or a NUL: forms a server may resolve
    to somewhere outside the allowed prefix.

    A segment counts as a dot segment by its name before any ``;``
    parameters as well: servers that strip path parameters (Tomcat, and
    proxies in front of it) read ``/allowed/..;/secret`` as
    ``/allowed/../secret``, i.e. ``/secret``.
    """
    for _ in range(DECODE_ROUNDS):
        if "\\" in path or "\x00" in path:
            return True
        if any(segment.partition(";")[0] in (".", "..") for segment in path.split("/")):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still changing after several rounds: refuse rather than guess


class Allowlist:
    """URL prefixes a source must lie under, compared on parsed URLs."""

    def __init__(self, prefixes: Sequence[str]) -> None:
        self.prefixes = tuple(parse_prefix(prefix) for prefix in prefixes)

    def allows(self, url: HttpUrl) -> bool:
        return any(prefix_covers(prefix, url) for prefix in self.prefixes)


def parse_prefix(text: str) -> HttpUrl:
    """Parse an allowlist entry; it may not carry a query. Raise ValueError if bad."""
    prefix = parse_url(text)
    if prefix.query or "?" in text:
        raise ValueError(f"{text!r}: a prefix cannot have a query")
    return prefix


def prefix_covers(prefix: HttpUrl, url: HttpUrl) -> bool:
    """Same scheme, host and port, and ``url``'s path under ``prefix``'s at a segment boundary.

    ``/photos/`` covers ``/photos/a.jpg``; ``/photos`` covers ``/photos`` and
    ``/photos/a.jpg`` but not ``/photos-private/a.jpg``.
    """
    if (prefix.scheme, prefix.host, prefix.port) != (url.scheme, url.host, url.port):
        return False
    if prefix.path.endswith("/"):
        return url.path.startswith(prefix.path)
    return url.path == prefix.path or url.path.startswith(prefix.path + "/")


# -- the address guard ----------------------------------------------------------


def carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, when it is only a wrapper.

    IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, SIIT
    ``::ffff:0:a.b.c.d`` and NAT64 ``64:ff9b::a.b.c.d`` all reach the IPv4
    host, so that host is what must be judged. ``::`` and ``::1`` are judged
    as themselves.
    """
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    value = int(ip)
    high = value >> 32
    if (high == 0 and value > 1) or high == IPV4_TRANSLATED_HIGH or ip in NAT64:
        return ipaddress.IPv4Address(value & IPV4_MASK)
    return None


def tunnel_endpoints(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a 6to4 (``2002::/16``) or Teredo (``2001::/32``) address leads to."""
    found: list[ipaddress.IPv4Address] = []
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def address_refusal(ip: IPAddress, allow_private: bool = False) -> str | None:
    """Why a connection to ``ip`` is refused, or None when it is allowed.

    Unspecified, multicast and broadcast addresses are always refused. Unless
    ``allow_private``: loopback, private (RFC 1918, CGNAT 100.64/10, unique
    local fc00::/7), link-local, reserved and anything else the IANA
    special-purpose registries do not mark global.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        carried = carried_ipv4(ip)
        if carried is not None:
            reason = address_refusal(carried, allow_private)
            return f"{ip} carries {carried}: {reason}" if reason else None
        for endpoint in tunnel_endpoints(ip):
            reason = address_refusal(endpoint, allow_private)
            if reason:
                return f"{ip} tunnels to {endpoint}: {reason}"
        if ip.sixtofour is not None:
            # Judged by the IPv4 address it tunnels to, checked above. Python
            # 3.12.4 and later call all of 2002::/16 private.
            return None
    if ip.is_unspecified or ip.is_multicast or ip == LIMITED_BROADCAST:
        return f"{ip} is unspecified, multicast or broadcast"
    if allow_private:
        return None
    for kind in ("loopback", "link_local", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return f"{ip} is {kind.replace('_', '-')}"
    if isinstance(ip, ipaddress.IPv6Address) and (ip.is_site_local or ip in NAT64_LOCAL):
        return f"{ip} is site-local"
    if not ip.is_global:
        return f"{ip} is not a global address"
    return None


@dataclass(frozen=True)
class Address:
    """One validated place to connect to: a socket family and address."""

    family: socket.AddressFamily
    sockaddr: tuple[Any, ...]


def resolve(url: HttpUrl, allow_private: bool) -> tuple[Address, ...]:
    """Resolve ``url``'s host once and validate every answer; these are the only
    addresses the connection may use (no second lookup, so no rebinding).

    Refused when *any* answer is refused, so a name that mixes a public and a
    private address cannot be used to reach the private one.
    """
    try:
        infos = socket.getaddrinfo(url.host, url.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            raise SourceUnavailable(f"{url.host}: temporary resolver failure") from exc
        raise SourceNotFound(f"{url.host} does not resolve: {exc}") from exc
    except UnicodeError as exc:
        raise SourceNotFound(f"{url.host} is not a valid host name") from exc
    addresses: list[Address] = []
    for family, _type, _proto, _name, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        reason = address_refusal(ip, allow_private)
        if reason:
            raise refused(url, f"{url.host} resolves to a refused address: {reason}")
        address = Address(socket.AddressFamily(family), tuple(sockaddr))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise SourceNotFound(f"{url.host} has no IPv4 or IPv6 address")
    return tuple(addresses)


def refused(url: HttpUrl | str, reason: str) -> SourceNotFound:
    """A 404 for a refused URL, logged with its reason (the client sees none).

    The URL comes from the request: it is escaped (:func:`printable`), so it
    cannot write a line of its own into the log.
    """
    logger.warning("refused HTTP source %s: %s", printable(url), printable(reason))
    return SourceNotFound(f"refused {printable(url)}: {reason}")


# -- the time limit ------------------------------------------------------------


class TimeLimit:
    """The total time one download may take, enforced on its sockets.

    Per-operation socket timeouts cannot bound a source that sends one byte
    a second (every ``recv`` succeeds). So when the time is up the
    process's watchdog (:mod:`django_oximg.core.deadlines`) shuts down every
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


# -- the store ------------------------------------------------------------------


@dataclass(frozen=True)
class HttpSourceConfig:
    """Settings of :class:`HttpSourceStore` (``OXIMG["HTTP_*"]``)."""

    prefixes: tuple[str, ...]
    #: Seconds for the whole download (connect, redirects, headers and body).
    timeout: float = defaults.HTTP_TIMEOUT
    max_redirects: int = defaults.HTTP_MAX_REDIRECTS
    #: Lift the address guard for loopback/private/link-local addresses.
    allow_private_networks: bool = defaults.HTTP_ALLOW_PRIVATE_NETWORKS
    user_agent: str = "django-oximg"
    #: A PEM file of trusted CAs for HTTPS sources; None: the system's.
    ca_certs: str | None = None


Response: TypeAlias = BaseHTTPResponse


class HttpSourceStore:
    """Source images read from allowed http(s) URLs (the source "name" is the URL).

    Thread-safe: it holds only immutable settings; each read makes its own
    connection (no keep-alive between reads: results are cached, and a fresh
    connection always goes through the address guard).
    """

    read_on_worker = False

    def __init__(self, config: HttpSourceConfig) -> None:
        self.config = config
        self.allowlist = Allowlist(config.prefixes)

    def check_name(self, name: str) -> None:
        """``name`` must parse as a URL under an allowed prefix (no network)."""
        self.checked_url(name)

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        """The body of ``name`` (a URL): at most ``max_bytes``, gzip decoded.

        ``reserve`` gets the declared ``Content-Length`` before the body is
        read, or, without one, :data:`RESERVE_STEP` bytes at a time ahead of it.
        """
        with (
            TimeLimit(self.config.timeout) as time_limit,
            self._final(name, "GET", time_limit) as (
                response,
                url,
            ),
        ):
            return self._body(response, url, max_bytes, time_limit, reserve or ignore)

    def read_header(self, name: str, limit: int) -> bytes:
        """The first ``limit`` bytes of ``name``: a GET asking ``Range: bytes=0-<limit-1>``.

        The same checks as :meth:`read` (allowlist and address guard on every
        hop, the time limit). A server that ignores the range answers with
        the whole body: at most ``limit`` bytes of it are read, then the
        connection is closed.
        """
        with (
            TimeLimit(self.config.timeout) as time_limit,
            self._final(name, "GET", time_limit, f"bytes=0-{limit - 1}") as (response, url),
        ):
            if response.status == RANGE_NOT_SATISFIABLE:
                return b""  # an empty body has no first byte to range over
            return self._prefix(response, url, limit, time_limit)

    def version(self, name: str) -> str:
        """A short token from the source's ETag, else its Last-Modified, else "".

        One HEAD request (through the same checks as a read). "" means the
        server gives no validator: the URL then carries no version, and a
        changed image is seen only once the cached result is purged.
        """
        with (
            TimeLimit(self.config.timeout) as time_limit,
            self._final(name, "HEAD", time_limit) as (
                response,
                _url,
            ),
        ):
            validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        if not validator:
            return ""
        return hashlib.sha256(validator.encode("utf-8", "replace")).hexdigest()[:16]

    def checked_url(self, text: str) -> HttpUrl:
        """``text`` parsed and on the allowlist, or a logged 404."""
        try:
            url = parse_url(text)
        except ValueError as exc:
            raise refused(text, str(exc)) from exc
        if not self.allowlist.allows(url):
            raise refused(url, "not under any HTTP_SOURCES prefix")
        return url

    @contextlib.contextmanager
    def _final(
        self,
        name: str,
        method: str,
        time_limit: TimeLimit,
        byte_range: str = "",
    ) -> Iterator[tuple[Response, HttpUrl]]:
        """The response after redirects (each hop checked), closed on exit.

        With a ``byte_range`` (sent as ``Range``), a partial answer (206) or
        an unsatisfiable range (416) is as good as a 200.
        """
        extra_headers = {"Range": byte_range} if byte_range else {}
        accepted = RANGE_STATUSES if byte_range else frozenset({200})
        text = name
        for _hop in range(self.config.max_redirects + 1):
            url = self.checked_url(text)
            pin = Pin(resolve(url, self.config.allow_private_networks), time_limit)
            with contextlib.closing(pool_for(url, pin, self.config.ca_certs)) as pool:
                response = self._send(pool, url, method, time_limit, extra_headers)
                try:
                    if response.status in REDIRECT_STATUSES:
                        text = redirect_target(response, url)
                        continue
                    if response.status not in accepted:
                        check_status(response, url)
                    with translated_errors(url, time_limit):
                        yield response, url
                    return
                finally:
                    response.close()
        raise refused(name, f"more than {self.config.max_redirects} redirects")

    def _send(
        self,
        pool: HTTPConnectionPool,
        url: HttpUrl,
        method: str,
        time_limit: TimeLimit,
        extra_headers: dict[str, str],
    ) -> Response:
        left = time_limit.remaining()
        with translated_errors(url, time_limit):
            return pool.urlopen(
                method,
                url.request_target,
                headers={
                    "User-Agent": self.config.user_agent,
                    "Accept": "image/*,*/*;q=0.5",
                    "Accept-Encoding": "identity",
                    **extra_headers,
                },
                redirect=False,
                retries=False,
                preload_content=False,
                decode_content=False,
                timeout=Timeout(connect=left, read=left),
            )

    def _body(
        self,
        response: Response,
        url: HttpUrl,
        max_bytes: int,
        time_limit: TimeLimit,
        reserve: Reserve,
    ) -> bytes:
        declared = declared_length(response)
        if declared is not None and declared > max_bytes:
            raise SourceTooLarge(f"{url} declares {declared} bytes, limit {max_bytes}")
        reserved = declared if declared is not None else 0
        reserve(reserved)
        # A BytesIO, not a bytearray: its getvalue() hands over the buffer it
        # grew, where bytes(bytearray) would hold the body twice for a moment.
        data = io.BytesIO()
        size = 0
        while True:
            chunk = response.read(min(CHUNK, max_bytes + 1 - size), decode_content=False)
            if time_limit.expired:
                raise SourceTimeout(f"{url}: download took longer than {time_limit.seconds} s")
            if not chunk:
                break
            if size + len(chunk) > reserved:
                step = max(RESERVE_STEP, size + len(chunk) - reserved)
                reserve(step)
                reserved += step
            size += data.write(chunk)
            if size > max_bytes:
                raise SourceTooLarge(f"{url} sent more than {max_bytes} bytes")
            time_limit.remaining()
        if declared is not None and size != declared:
            raise SourceUnavailable(f"{url} sent {size} of {declared} bytes")
        body = decoded(
            data.getvalue(), response.headers.get("Content-Encoding", ""), max_bytes, url
        )
        if len(body) > reserved:  # inflated from gzip
            reserve(len(body) - reserved)
        return body

    def _prefix(self, response: Response, url: HttpUrl, limit: int, time_limit: TimeLimit) -> bytes:
        """At most ``limit`` bytes of the body, whatever length the server sends."""
        data = bytearray()
        while len(data) < limit:
            chunk = response.read(min(CHUNK, limit - len(data)), decode_content=False)
            if time_limit.expired:
                raise SourceTimeout(f"{url}: download took longer than {time_limit.seconds} s")
            if not chunk:
                break
            data += chunk
            time_limit.remaining()
        return decoded_prefix(bytes(data), response.headers.get("Content-Encoding", ""), limit, url)


def ignore(_nbytes: int) -> None:
    """The ``reserve`` of a read that counts its bytes against nothing."""


def redirect_target(response: Response, url: HttpUrl) -> str:
    location = response.headers.get("Location")
    if not location:
        raise SourceUnavailable(f"{url} redirected without a Location")
    return urljoin(str(url), location)


def check_status(response: Response, url: HttpUrl) -> None:
    if response.status in MISSING_STATUSES:
        raise SourceNotFound(f"{url} answered {response.status}")
    if response.status != 200:
        raise SourceUnavailable(f"{url} answered {response.status}")


def declared_length(response: Response) -> int | None:
    """The ``Content-Length`` as a number, or None when absent (chunked, close-delimited).

    urllib3 itself refuses conflicting or malformed values (502).
    """
    value = response.headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip())


def gzip_inflater(encoding: str, url: HttpUrl) -> zlib._Decompress | None:
    """A gzip decompressor for a body sent with ``encoding``, or None when it is not encoded."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding not in GZIP_ENCODINGS:
        raise InvalidImage(f"{url}: unsupported Content-Encoding {encoding!r}")
    return zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)


def decoded(data: bytes, encoding: str, max_bytes: int, url: HttpUrl) -> bytes:
    """``data`` with its Content-Encoding undone, complete and within ``max_bytes``."""
    inflater = gzip_inflater(encoding, url)
    if inflater is None:
        return data
    try:
        body = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise InvalidImage(f"{url}: broken gzip body: {exc}") from exc
    if len(body) > max_bytes:
        raise SourceTooLarge(f"{url} inflates to more than {max_bytes} bytes")
    if not inflater.eof or inflater.unused_data:
        raise InvalidImage(f"{url}: gzip body is truncated or has trailing data")
    return body


def decoded_prefix(data: bytes, encoding: str, limit: int, url: HttpUrl) -> bytes:
    """The first ``limit`` bytes of what ``data``, the start of a body, decodes to."""
    inflater = gzip_inflater(encoding, url)
    if inflater is None:
        return data
    try:
        return inflater.decompress(data, limit)
    except zlib.error as exc:
        raise InvalidImage(f"{url}: broken gzip body: {exc}") from exc


@contextlib.contextmanager
def translated_errors(url: HttpUrl, time_limit: TimeLimit) -> Iterator[None]:
    """urllib3 and socket failures as the project's errors (504 when time ran out)."""
    try:
        yield
    except (ConnectTimeoutError, ReadTimeoutError) as exc:
        if isinstance(exc, NewConnectionError) and not time_limit.expired:
            raise SourceUnavailable(f"{url}: {exc}") from exc
        raise SourceTimeout(f"{url}: {exc}") from exc
    except (HTTPError, OSError) as exc:
        if time_limit.expired:
            raise SourceTimeout(f"{url}: download took longer than {time_limit.seconds} s") from exc
        raise SourceUnavailable(f"{url}: {exc}") from exc
