"""The WSGI middleware: answer thumbnail paths under a prefix, pass the rest on.

Step 1 of a request (the map: :mod:`django_oximg.core.serving`).

It sits in front of any WSGI application (Django's included) and answers
before that application builds a request object; a cache hit on local disk
goes out from memory (a repeated one, :mod:`django_oximg.core.serving.hits`) or
through ``wsgi.file_wrapper`` (sendfile where the server has it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from wsgiref.util import FileWrapper

from django_oximg.core.serving import replies
from django_oximg.core.serving.replies import Reply

if TYPE_CHECKING:
    from django_oximg.core.serving.handler import Thumbnailer

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

#: Characters left as they are when a raw path has to be rebuilt from the
#: decoded PATH_INFO (servers that keep no raw URI): RFC 3986 path characters.
PATH_SAFE = "/:@!$&'()*+,;=~"

#: Block size for streaming cached files.
FILE_BLOCK_SIZE = 64 * 1024


def raw_request_path(environ: dict[str, Any]) -> str:
    """The request path exactly as the client sent it, still percent-encoded.

    Signatures are computed over the raw path, as imgproxy does, so the
    server's decoding must not be trusted: gunicorn gives ``RAW_URI``, uWSGI
    and mod_wsgi ``REQUEST_URI``. Without either (wsgiref, Django's
    runserver), the decoded path is re-encoded, which reproduces every URL
    the template tag builds (it only uses unreserved characters).
    """
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        path = str(raw).partition("?")[0]
        if not path.startswith("/"):  # absolute-form target: http://host/path
            path = "/" + path.partition("://")[2].partition("/")[2]
        return path
    decoded = str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", ""))
    return quote(decoded.encode("latin-1"), safe=PATH_SAFE)


def path_after_prefix(raw_path: str, decoded_prefix: str) -> str | None:
    """The raw path after the segments of ``decoded_prefix``, starting with "/".

    The prefix is matched on the decoded path by the caller; here its segments
    are dropped from the raw path, so encoded characters after it stay
    exactly as sent. None when the raw path spells the prefix otherwise than
    its one canonical form (``/im%67/`` for ``/img/``): one image, one URL.
    """
    canonical = canonical_prefix(decoded_prefix)
    if raw_path.startswith(canonical):  # the usual case, without splitting
        return raw_path[len(canonical) - 1 :]
    parts = raw_path.split("/")
    segments = decoded_prefix.rstrip("/").count("/") + 1
    if "/".join(parts[:segments]) != canonical[:-1]:
        return None
    return "/" + "/".join(parts[segments:])


def rest_under_prefix(environ: dict[str, Any], prefix: str) -> str | None:
    """The raw path after ``SCRIPT_NAME`` and ``prefix`` (see :func:`path_after_prefix`).

    For a request whose ``PATH_INFO`` is under ``prefix``: the WSGI
    middleware and the Django one share this decision.
    """
    script_name = str(environ.get("SCRIPT_NAME", "")).rstrip("/")
    return path_after_prefix(raw_request_path(environ), script_name + prefix)


@functools.lru_cache(maxsize=64)
def canonical_prefix(decoded_prefix: str) -> str:
    """The one raw spelling of ``decoded_prefix``, ending with "/" (a site has one or two)."""
    return quote(decoded_prefix.rstrip("/"), safe=PATH_SAFE) + "/"


def send(reply: Reply, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Send ``reply`` through WSGI; files go through the server's file wrapper."""
    start_response(reply.status_line, reply.headers)
    if reply.file is not None:
        wrapper = environ.get("wsgi.file_wrapper", FileWrapper)
        return wrapper(reply.file, FILE_BLOCK_SIZE)  # type: ignore[no-any-return]
    return [reply.body]


class AfterClose:
    """A response body that calls ``then`` once the server has sent and closed it."""

    def __init__(self, body: Iterable[bytes], then: Callable[[], None]) -> None:
        self.body = body
        self.then = then

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.then()


class ThumbnailMiddleware:
    """Serve ``prefix`` with a thumbnailer, everything else with ``app``.

    ``get_thumbnailer`` and ``get_prefix`` are called per request, so the
    composition root can build (and rebuild) them lazily.
    ``after_first_answer`` is called once, when the first thumbnail answer
    has been sent: work that can wait (building the wrapped application)
    then stays out of a new process's first answer.
    """

    def __init__(
        self,
        app: WSGIApp,
        get_thumbnailer: Callable[[], Thumbnailer],
        get_prefix: Callable[[], str],
        after_first_answer: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.get_thumbnailer = get_thumbnailer
        self.get_prefix = get_prefix
        self.after_first_answer = after_first_answer

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        prefix = self.get_prefix()
        path_info = str(environ.get("PATH_INFO", ""))
        if not path_info.startswith(prefix):
            return self.app(environ, start_response)
        rest = rest_under_prefix(environ, prefix)
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if rest is None:
            reply = replies.not_found()
        else:
            reply = self.get_thumbnailer().reply(rest, method, environ)
        body = send(reply, environ, start_response)
        then, self.after_first_answer = self.after_first_answer, None
        return body if then is None else AfterClose(body, then)
