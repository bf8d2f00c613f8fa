"""Which http(s) URLs may be fetched, and which addresses they may be fetched from.

Two checks, each made for the first request and again for every redirect,
both without a connection:

1. The URL parses strictly as ``http(s)://host[:port]/path[?query]``: no
   userinfo, no fragment, no backslash, no control character, no dot segment
   (also once or twice percent-decoded, and with ``;`` parameters: ``..;``),
   and lies under one of the configured prefixes, compared on the *parsed*
   URL (:func:`parse_url`, :class:`Allowlist`). String prefixes would let
   ``http://a.com@evil.com/`` or ``http://a.com.evil.com/`` through.
2. Every address the host resolves to is public (:func:`address_refusal`),
   including IPv4 addresses carried inside IPv6 forms (mapped, compatible,
   NAT64, 6to4, Teredo). :func:`resolve` returns those validated addresses,
   the only ones a connection may then use (:mod:`.http_connections`).

Pure Python and the standard library: no HTTP client is needed to check a
URL or an address.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import quote, unquote

from django_oximg.core.errors import SourceNotFound, SourceUnavailable
from django_oximg.core.logs import printable

logger = logging.getLogger("django_oximg")

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

SCHEMES = {"http": 80, "https": 443}

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
