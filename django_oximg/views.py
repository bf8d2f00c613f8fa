"""The Django view: the same thumbnailer as the WSGI middleware, behind a URLconf."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase

from django_oximg import runtime
from django_oximg.core.responders import Reply
from django_oximg.core.wsgi import path_after_prefix, raw_request_path


def serve(request: HttpRequest, path: str) -> HttpResponseBase:
    """Serve one thumbnail; ``path`` is what the URLconf matched after its mount point."""
    mount = request.path[: len(request.path) - len(path)]
    rest = path_after_prefix(raw_request_path(request.META), mount)
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
    else:
        response = HttpResponse(reply.body, status=reply.status)
        del response.headers["Content-Type"]
    for name, value in reply.headers:
        response.headers[name] = value
    return response
