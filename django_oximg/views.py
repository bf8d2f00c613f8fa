"""The Django views: the same thumbnailer as the WSGI middleware, behind a URLconf.

``serve`` is for WSGI projects (``django_oximg.urls``); ``serve_async`` for
ASGI ones (``django_oximg.urls_async``, see docs/django.md, "ASGI").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase

from django_oximg import runtime
from django_oximg.core.serving import replies
from django_oximg.core.serving.middleware import path_after_prefix, raw_request_path
from django_oximg.core.serving.replies import Reply


def serve(request: HttpRequest, path: str) -> HttpResponseBase:
    """Serve one thumbnail; ``path`` is what the URLconf matched after its mount point."""
    mount = request.path[: len(request.path) - len(path)]
    rest = path_after_prefix(raw_request_path(asgi_environ(request)), mount)
    if rest is None:
        return django_response(replies.not_found())
    reply = runtime.get_thumbnailer().reply(rest, request.method or "GET", request.META)
    return django_response(reply)


def django_response(reply: Reply) -> HttpResponseBase:
    """Turn a core :class:`Reply` into a Django response, keeping its headers exactly."""
    response: HttpResponseBase
    if reply.file is not None:
        # FileResponse lets Django's WSGI handler use wsgi.file_wrapper.
        response = FileResponse(reply.file, status=reply.status)
        for name in ("Content-Disposition", "Content-Length", "Content-Type"):
            if name in response.headers:
                del response.headers[name]
        for name, value in reply.headers:
            response.headers[name] = value
        return response
    # The headers in the constructor: Django adds its default Content-Type
    # only when they have none (a 304), and that one is removed.
    response = HttpResponse(reply.body, status=reply.status, headers=dict(reply.headers))
    if not any(name.lower() == "content-type" for name, _ in reply.headers):
        del response.headers["Content-Type"]
    return response


async def serve_async(request: HttpRequest, path: str) -> HttpResponseBase:
    """:func:`serve` for ASGI: the thumbnailer runs in a pooled thread, the loop stays free.

    Under ASGI, Django runs a sync view in a new thread per request (its
    thread-sensitive context) and iterates a ``FileResponse`` through another
    thread hop, warning each time. Here the reply is made on the event loop's
    thread pool (``thread_sensitive=False``: no request state needs one
    thread; renders run on the thumbnailer's executor as always), any cached
    file is read into memory there, and async middleware stays async.
    """
    mount = request.path[: len(request.path) - len(path)]
    rest = path_after_prefix(raw_request_path(asgi_environ(request)), mount)
    if rest is None:
        return django_response(replies.not_found())
    method = request.method or "GET"
    reply = await sync_to_async(reply_in_memory, thread_sensitive=False)(rest, method, request.META)
    return django_response(reply)


def asgi_environ(request: HttpRequest) -> dict[str, Any]:
    """``request.META``, plus the raw path an ASGI server received as ``RAW_URI``.

    Signatures cover the path as sent; ASGI gives it as ``scope["raw_path"]``
    (bytes, no query string), which Django does not copy into META. Under
    WSGI there is no scope and META already has what the server gives.
    """
    scope = getattr(request, "scope", None) or {}
    raw = scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return {**request.META, "RAW_URI": raw.decode("latin-1")}
    return request.META


def reply_in_memory(path: str, method: str, request_headers: Mapping[str, str]) -> Reply:
    """The thumbnailer's reply with any file or stream read into the body (and closed).

    Thumbnails are small, and ASGI has no sendfile: reading here, in the
    worker thread, keeps blocking file reads off the event loop.
    """
    reply = runtime.get_thumbnailer().reply(path, method, request_headers)
    if reply.file is None:
        return reply
    with reply.file as handle:
        body = handle.read()
    return Reply(reply.status, reply.headers, body)
