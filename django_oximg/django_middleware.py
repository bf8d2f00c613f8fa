"""Serving thumbnails from Django's ``MIDDLEWARE``, for hosts where wsgi.py is not yours.

    MIDDLEWARE = [
        "django_oximg.django_middleware.OximgServeMiddleware",
        # ... the site's other middleware
    ]

Some hosts (platform templates, managed Django hosting) let a site edit
settings.py but not the WSGI file, so :class:`~django_oximg.wsgi.OximgMiddleware`
cannot wrap the application. This Django middleware answers the same paths
(those under ``OXIMG["URL_PREFIX"]``) with the same thumbnailer and the
same answers: status, headers and body, for renders, hits (from memory, or
through the server's ``wsgi.file_wrapper`` as a ``FileResponse``), 304s,
ranges and errors. What it cannot skip is Django's request handling up to
it: Django builds the request and runs the middleware listed above this
one (put it first, so none does; any above it may change its answers), and
logs 4xx and 5xx answers on ``django.request`` as it does for every view.
Under ASGI it runs the thumbnailer on the event loop's thread pool and
reads a cached file into memory there, as :func:`~django_oximg.views.serve_async`
does.

Named ``django_middleware`` because ``core/serving/middleware.py`` is the
WSGI one: one module name, one layer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponseBase

from django_oximg import conf, runtime
from django_oximg.core.serving import replies
from django_oximg.core.serving.middleware import rest_under_prefix
from django_oximg.core.serving.replies import Reply
from django_oximg.views import asgi_environ, django_response, reply_in_memory

__all__ = ["OximgServeMiddleware"]

GetResponse = Callable[[HttpRequest], Any]


def is_thumbnail_request(request: HttpRequest) -> bool:
    """Whether ``request`` is under ``URL_PREFIX``, judged as the WSGI middleware judges it.

    The WSGI middleware compares the server's ``PATH_INFO`` (Django keeps
    it in ``META`` under WSGI; under ASGI ``META`` has Django's own).
    """
    path_info = str(request.META.get("PATH_INFO", request.path_info))
    return path_info.startswith(conf.get_settings().URL_PREFIX)


def thumbnail_path(request: HttpRequest) -> tuple[str | None, str, dict[str, Any]]:
    """The raw path after the prefix (None: not its canonical spelling), the method, the environ."""
    environ = asgi_environ(request)
    rest = rest_under_prefix(environ, conf.get_settings().URL_PREFIX)
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    return rest, method, environ


class OximgServeMiddleware:
    """Answer ``URL_PREFIX`` with the thumbnailer, pass every other request on.

    Sync and async capable, so Django keeps an ASGI stack async through it.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.answer_async(request)
        if not is_thumbnail_request(request):
            return self.get_response(request)
        rest, method, environ = thumbnail_path(request)
        if rest is None:
            return django_response(replies.not_found())
        return django_response(runtime.get_thumbnailer().reply(rest, method, environ))

    async def answer_async(self, request: HttpRequest) -> HttpResponseBase:
        """The ASGI way: the thumbnailer on a pooled thread, any cached file read there."""
        if not is_thumbnail_request(request):
            response: Awaitable[HttpResponseBase] = self.get_response(request)
            return await response
        rest, method, environ = thumbnail_path(request)
        reply: Reply
        if rest is None:
            reply = replies.not_found()
        else:
            reply = await sync_to_async(reply_in_memory, thread_sensitive=False)(
                rest, method, environ
            )
        return django_response(reply)
