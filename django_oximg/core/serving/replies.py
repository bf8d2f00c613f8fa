"""Turn a result or an error into status, headers and body.

Step 9 of a request (the map: :mod:`django_oximg.core.serving`).

The one place that knows HTTP semantics: the error-to-status table, ETag and
304 handling, Cache-Control and Vary. Results on local disk are answered by
whitenoise's :class:`~whitenoise.responders.StaticFile`, which already handles
conditional and range requests for files, so that logic is not written twice.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, BinaryIO, NamedTuple
from urllib.parse import quote, urlsplit

from django_oximg.core import errors

if TYPE_CHECKING:
    from whitenoise.responders import StaticFile

#: Error class -> HTTP status. Looked up along the class's MRO, so a subclass
#: (SourceTooLarge is an InvalidImage) gets its parent's status unless listed.
ERROR_STATUS: dict[type[errors.OximgError], int] = {
    errors.InvalidOptions: 400,
    errors.InvalidSignature: 403,
    errors.SourceNotFound: 404,
    errors.ExpiredURL: 404,
    errors.UnsupportedFormat: 415,
    errors.InvalidImage: 422,
    errors.Overloaded: 429,
    errors.SourceUnavailable: 502,
    errors.ProcessingTimeout: 503,
    errors.SourceTimeout: 504,
}

#: Rejections that a client may retry, and after how many seconds: a full
#: queue, a deadline, and a source storage that did not answer in time (a
#: stalled S3 recovers, and a retry then renders).
RETRY_AFTER = {429: "1", 503: "2", 504: "2"}

#: Error responses must never be stored by browsers, CDNs or our cache: the
#: next request may well succeed (imgproxy 4.0.6 fixed exactly this).
NO_STORE = ("Cache-Control", "no-store")

#: On every response: browsers must not guess another type than the one sent
#: (an image URL answered with text must never run as a script or a page).
NOSNIFF = ("X-Content-Type-Options", "nosniff")

METHODS = ("GET", "HEAD")

#: The quality ``autoquality`` chose for the answer: sent only with answers
#: whose quality was searched, on the miss and on every hit.
QUALITY_HEADER = "X-Oximg-Quality"

#: WSGI status lines, made once rather than per answer.
STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}

#: Cache-Control directives that say how long a response may be kept.
LIFETIME_DIRECTIVES = ("max-age", "s-maxage")


@dataclass
class Reply:
    """A complete HTTP answer, independent of WSGI or Django.

    Exactly one of ``body`` and ``file`` carries the content (``file`` is an
    open binary file the server may hand to sendfile; it must be closed).
    Every reply carries :data:`NOSNIFF`; it is added here, so no way of
    making a reply can forget it.
    """

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    file: BinaryIO | None = None

    def __post_init__(self) -> None:
        if NOSNIFF not in self.headers and not any(
            name.lower() == NOSNIFF[0].lower() for name, _ in self.headers
        ):
            self.headers.append(NOSNIFF)

    @property
    def status_line(self) -> str:
        return STATUS_LINES.get(self.status) or f"{self.status} {HTTPStatus(self.status).phrase}"


class Result(NamedTuple):
    """An answer ready to send: in memory, as a file on local disk, as an
    open stream from a remote cache, or as a URL to redirect to.

    Built for one request: two requests may share the bytes (one cache
    object, one render) yet differ in what their answers must say
    (``vary``, and their Cache-Control), so a result is never shared.
    """

    content_type: str
    etag: str
    #: Request headers this answer depends on, e.g. ``("Accept",)`` when the
    #: format was negotiated: sent as ``Vary``.
    vary: tuple[str, ...]
    data: bytes | None = None
    path: str | None = None
    size: int = 0
    #: A remote cache object's body, sent as it is read; closed by the server.
    stream: BinaryIO | None = None
    #: The cache object's own URL: answered with a redirect (``CACHE_REDIRECT``).
    url: str | None = None
    #: ``Content-Disposition`` ("": none), from ``filename``/``return_attachment``.
    disposition: str = ""
    #: The quality ``autoquality`` chose (:data:`QUALITY_HEADER`); 0: none searched.
    quality: int = 0


def status_for(error: errors.OximgError) -> int:
    """The HTTP status for ``error``, from :data:`ERROR_STATUS`."""
    for cls in type(error).__mro__:
        if cls in ERROR_STATUS:
            return ERROR_STATUS[cls]
    raise TypeError(f"no status for {type(error).__name__}")


def error_reply(error: errors.OximgError, method: str = "GET") -> Reply:
    """A short plain-text answer for ``error``, never cacheable."""
    status = status_for(error)
    body = error.public.encode() + b"\n"
    headers = [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(body))),
        NO_STORE,
    ]
    if status in RETRY_AFTER:
        headers.append(("Retry-After", RETRY_AFTER[status]))
    return Reply(status, headers, body if method != "HEAD" else b"")


#: Errors that say the source itself cannot be served: missing, undecodable, in
#: a format not read, over a limit. A site's fallback image answers these
#: (:func:`fallback_reply`); a bad URL, a full queue or a deadline never.
SOURCE_FAILURES = (errors.SourceNotFound, errors.InvalidImage, errors.UnsupportedFormat)

#: Set on a fallback answer, as imgproxy does, so a log or a test can tell it.
FALLBACK_HEADER = ("Fallback-Image", "1")


class FallbackImage(NamedTuple):
    """The image answered, as it is, for a source that fails (``FALLBACK_IMAGE_*``)."""

    data: bytes
    content_type: str
    status: int = 200
    #: ``max-age`` of a fallback answered with a success status; 0: ``no-store``.
    ttl: int = 60


def is_source_failure(error: errors.OximgError) -> bool:
    """Whether ``error`` is the source's fault (:data:`SOURCE_FAILURES`), not the result's."""
    return isinstance(error, SOURCE_FAILURES) and not isinstance(error, errors.ResultTooLarge)


def fallback_reply(fallback: FallbackImage, method: str = "GET") -> Reply:
    """The fallback image with its configured status, kept for ``ttl`` seconds at most.

    An error status is never kept (``no-store``, as every error answer);
    a success status is kept briefly, so a source put right is soon seen.
    """
    keep = fallback.status < 400 and fallback.ttl > 0
    headers = [
        ("Content-Type", fallback.content_type),
        ("Content-Length", str(len(fallback.data))),
        ("Cache-Control", f"max-age={fallback.ttl}") if keep else NO_STORE,
        FALLBACK_HEADER,
    ]
    return Reply(fallback.status, headers, fallback.data if method != "HEAD" else b"")


def method_not_allowed() -> Reply:
    return Reply(405, [("Allow", "GET, HEAD"), ("Content-Length", "0"), NO_STORE])


def not_found() -> Reply:
    """404 for a URL that is not the canonical spelling of a thumbnail URL.

    One image has one URL: another spelling of it (a percent-encoded mount
    prefix, a query string) would be another entry in every CDN and browser
    cache, which a purge by URL would miss.
    """
    return error_reply(errors.SourceNotFound("not the canonical URL"))


def cache_control(configured: str, expires: int, now: float) -> str:
    """The Cache-Control of a successful answer.

    ``configured`` (``CACHE_CONTROL``) as it is, unless the URL expires
    (``expires``, a unix time): then nothing may keep it longer than it has
    left, so every ``max-age``/``s-maxage`` is capped to the seconds left
    (one is added when there is none) and ``immutable`` is dropped, as
    imgproxy does.
    """
    if not expires:
        return configured
    left = max(0, int(expires - now))
    directives = []
    capped = False
    for directive in (part.strip() for part in configured.split(",")):
        name, _, value = directive.partition("=")
        name = name.strip().lower()
        if name == "immutable" or not directive:
            continue
        if name in LIFETIME_DIRECTIVES:
            seconds = int(value) if value.strip().isdigit() else 0
            directive = f"{name}={min(seconds, left)}"
            capped = True
        directives.append(directive)
    if not capped and "no-store" not in directives and "no-cache" not in directives:
        directives.append(f"max-age={left}")
    return ", ".join(directives)


def result_headers(result: Result, cache_control: str) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", result.content_type),
        ("Cache-Control", cache_control),
        ("ETag", result.etag),
    ]
    if result.vary:
        headers.append(("Vary", ", ".join(result.vary)))
    if result.disposition:
        headers.append(("Content-Disposition", result.disposition))
    if result.quality:
        headers.append((QUALITY_HEADER, str(result.quality)))
    return headers


#: The file extension each output format is saved under, as imgproxy names them.
EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "webp": ".webp", "avif": ".avif", "gif": ".gif"}

#: RFC 5987 ``attr-char`` besides letters and digits: what ``filename*`` keeps as it is.
ATTR_CHARS = "!#$&+-.^_`|~"


def content_disposition(source: str, filename: str, fmt: str, *, attachment: bool) -> str:
    """``inline`` or ``attachment``, with the file name a browser should save.

    As imgproxy names it: ``filename`` (else the source's own name, without
    its extension, else "image") plus the output format's extension. The
    quoted ``filename`` is printable ASCII whatever the name (RFC 6266): a
    ``"`` is ``%22`` (as imgproxy writes it), a backslash is ``%5C``, anything else
    outside printable ASCII is ``_``; a name that needed ``_`` also goes in
    ``filename*`` as percent-encoded UTF-8 (RFC 5987), which browsers
    prefer. No byte of the name can end the header or start another.
    """
    path = urlsplit(source).path if "://" in source else source.rpartition(":")[2]
    stem, _ = posixpath.splitext(posixpath.basename(path))
    name = (filename or stem or "image") + EXTENSIONS.get(fmt, "")
    fallback = "".join(
        char if " " <= char <= "~" else "_" for char in name.replace('"', "%22")
    ).replace("\\", "%5C")
    value = f'{"attachment" if attachment else "inline"}; filename="{fallback}"'
    if not all(" " <= char <= "~" for char in name):
        value += "; filename*=UTF-8''" + quote(name, safe=ATTR_CHARS)
    return value


def etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison, as If-None-Match requires."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(
        candidate.strip().removeprefix("W/") == wanted for candidate in if_none_match.split(",")
    )


def result_reply(
    result: Result, method: str, request_headers: Mapping[str, str], cache_control: str
) -> Reply:
    """Answer GET/HEAD for ``result``, honouring If-None-Match (and Range for files).

    ``request_headers`` uses WSGI environ names (``HTTP_IF_NONE_MATCH``).
    """
    headers = result_headers(result, cache_control)
    if result.path is not None:
        return _file_reply(result.path, headers, method, request_headers)
    if etag_matches(request_headers.get("HTTP_IF_NONE_MATCH", ""), result.etag):
        _discard(result.stream)
        return Reply(304, [h for h in headers if h[0] != "Content-Type"])
    if result.url is not None:
        _discard(result.stream)
        return redirect_reply(result)
    if result.stream is not None:
        headers.append(("Content-Length", str(result.size)))
        if method == "HEAD":
            _discard(result.stream)
            return Reply(200, headers)
        return Reply(200, headers, file=result.stream)
    data = result.data or b""
    headers.append(("Content-Length", str(len(data))))
    return Reply(200, headers, data if method != "HEAD" else b"")


def redirect_reply(result: Result) -> Reply:
    """302 to the cache object's own URL (``CACHE_REDIRECT``).

    Not stored by anyone: the URL may be presigned and expire, while the
    object behind it carries its own long Cache-Control for whoever fetches it.
    """
    headers = [("Location", result.url or ""), ("Content-Length", "0"), NO_STORE]
    if result.vary:
        headers.append(("Vary", ", ".join(result.vary)))
    return Reply(302, headers)


def _discard(stream: BinaryIO | None) -> None:
    """Close a stream that will not be sent (HEAD, 304, redirect)."""
    if stream is not None:
        stream.close()


def _file_reply(
    path: str, headers: list[tuple[str, str]], method: str, request_headers: Mapping[str, str]
) -> Reply:
    # Here, not at the top: a new process's first answers (misses) need no file.
    from whitenoise.responders import StaticFile

    return file_reply(StaticFile(path, headers), method, request_headers)


def file_reply(static_file: StaticFile, method: str, request_headers: Mapping[str, str]) -> Reply:
    """whitenoise's answer for a file on disk, as a :class:`Reply`.

    Raises FileNotFoundError when the file has to be opened (GET) and is gone.
    """
    response = static_file.get_response(method, request_headers)
    # whitenoise gives a wsgiref Headers object, or a plain list for 304/416;
    # either may be shared between requests, so it is copied.
    found = response.headers
    items = list(found.items()) if hasattr(found, "items") else list(found)
    status = int(response.status)
    if status >= 400:  # 416 for a bad Range: an error, stored by no one
        items = [item for item in items if item[0].lower() != "cache-control"] + [NO_STORE]
    return Reply(status, items, b"", response.file)
