"""Source images fetched over HTTP(S), behind an allowlist and an address guard.

Part of step 5 of a request, for URL sources (the map: :mod:`django_oximg.core.serving`).

A URL source is fetched only when all of these hold, for the first request
and again for every redirect (:mod:`.http_guard`):

1. It parses strictly as ``http(s)://host[:port]/path[?query]``: no userinfo,
   no fragment, no backslash, no control character, no dot segment (also
   once or twice percent-decoded, and with ``;`` parameters: ``..;``). See
   :func:`~.http_guard.parse_url`.
2. It lies under one of the configured prefixes, compared on the *parsed*
   URL: scheme, host (lowercase, IDNA), port (default per scheme) and the
   path at a segment boundary (:class:`~.http_guard.Allowlist`).
3. Every address the host resolves to is public
   (:func:`~.http_guard.address_refusal`). The connection then goes to those
   validated addresses and nowhere else (:mod:`.http_connections`), so a
   resolver that answers differently a moment later (DNS rebinding) cannot
   move it.

The download is bounded in bytes and in wall-clock time (:mod:`.http_bodies`,
:class:`~.http_connections.TimeLimit`). This module is the store that puts
those together: one request, its redirects, the statuses and the failures
as the project's errors. A refusal is a
:class:`~django_oximg.core.errors.SourceNotFound` (404, with no detail for
the client) and is logged with its reason.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urljoin

from urllib3 import HTTPConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
)
from urllib3.util.timeout import Timeout

from django_oximg.core import defaults
from django_oximg.core.errors import (
    SourceNotFound,
    SourceTimeout,
    SourceUnavailable,
)
from django_oximg.core.stores.http_bodies import Response, ignore, read_body, read_prefix
from django_oximg.core.stores.http_connections import Pin, TimeLimit, pool_for
from django_oximg.core.stores.http_guard import (
    Allowlist,
    HttpUrl,
    address_refusal,
    has_dot_segment,
    parse_prefix,
    parse_url,
    refused,
    resolve,
)
from django_oximg.core.stores.protocols import Reserve

# Defined with the resolver, which needs them without importing urllib3;
# imported here too, where they have always been found.
from django_oximg.core.stores.resolver import URL_ALIAS, URL_SOURCE, is_url

__all__ = [
    "URL_ALIAS",
    "URL_SOURCE",
    "Allowlist",
    "HttpSourceConfig",
    "HttpSourceStore",
    "HttpUrl",
    "TimeLimit",
    "address_refusal",
    "has_dot_segment",
    "ignore",
    "is_url",
    "parse_prefix",
    "parse_url",
]

#: The only redirects followed; each new location is checked like the first URL.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

#: Upstream answers that mean "there is no such image" (404); any other
#: non-200 answer is the source failing (502).
MISSING_STATUSES = frozenset({404, 410})

#: Answers to a ranged GET that are not failures: the range (206), or the
#: range past the end of an empty body (416).
RANGE_NOT_SATISFIABLE = 416
RANGE_STATUSES = frozenset({200, 206, RANGE_NOT_SATISFIABLE})


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
        read, or, without one, :data:`~.http_bodies.RESERVE_STEP` bytes at a time
        ahead of it.
        """
        with (
            TimeLimit(self.config.timeout) as time_limit,
            self._final(name, "GET", time_limit) as (
                response,
                url,
            ),
        ):
            return read_body(response, url, max_bytes, time_limit, reserve or ignore)

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
            return read_prefix(response, url, limit, time_limit)

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
