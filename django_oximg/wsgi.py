"""Serving thumbnails in front of a Django WSGI application.

The fastest start: Django's own application is built after the first
thumbnail answer (in the background) or at the first request that is not
a thumbnail, whichever comes first::

    # wsgi.py
    import os

    from django_oximg.wsgi import get_wsgi_application

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")

    application = get_wsgi_application()

Or around an application built beforehand (``gunicorn --preload``, or any
other WSGI middleware in between)::

    from django.core.wsgi import get_wsgi_application
    from django_oximg.wsgi import OximgMiddleware

    application = OximgMiddleware(get_wsgi_application())

Requests under ``OXIMG["URL_PREFIX"]`` (default ``/img/``) are answered before
Django builds a request; a local-disk cache hit goes out from memory or
through ``wsgi.file_wrapper``. Everything else goes to the wrapped application.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django_oximg import conf, runtime
from django_oximg.core.serving.middleware import StartResponse, ThumbnailMiddleware, WSGIApp

logger = logging.getLogger("django_oximg")


def current_prefix() -> str:
    return conf.get_settings().URL_PREFIX


class OximgMiddleware(ThumbnailMiddleware):
    """The core middleware wired to this process's settings and thumbnailer."""

    def __init__(
        self, application: WSGIApp, *, after_first_answer: Callable[[], None] | None = None
    ) -> None:
        super().__init__(application, runtime.get_thumbnailer, current_prefix, after_first_answer)


def django_application() -> WSGIApp:
    """Django's own WSGI application: ``django.setup()`` and its request handler."""
    from django.core.wsgi import get_wsgi_application as build

    return build()


class DeferredApplication:
    """A WSGI application built when it is first needed, once, or earlier in the background."""

    def __init__(self, build: Callable[[], WSGIApp] = django_application) -> None:
        self.build = build
        self._built: WSGIApp | None = None
        self._lock = threading.Lock()
        self._started = False

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return self.application()(environ, start_response)

    def application(self) -> WSGIApp:
        """The application, built by this call if no one has built it yet."""
        found = self._built
        if found is not None:
            return found
        with self._lock:
            if self._built is None:
                self._built = self.build()
            return self._built

    def build_in_background(self) -> None:
        """Start building the application on a thread of its own (once)."""
        with self._lock:
            if self._started or self._built is not None:
                return
            self._started = True
        threading.Thread(target=self._build_quietly, name="oximg-django-setup", daemon=True).start()

    def _build_quietly(self) -> None:
        """Build it; a failure is logged and raised again by the next request that needs it."""
        try:
            self.application()
        except Exception:
            logger.exception("building the WSGI application in the background failed")


def get_wsgi_application() -> OximgMiddleware:
    """Django's WSGI application behind :class:`OximgMiddleware`, built after the first answer.

    A thumbnail needs Django's settings and the storages, not its request
    handler: ``django.setup()`` (every app and its models, logging) and the
    handler's imports (URL resolvers, middleware) are most of a new
    process's start. So they happen on a thread of their own once the first
    thumbnail has been sent, or at once for a request that is not a
    thumbnail (which then waits for them). See docs/deployment.md.
    """
    deferred = DeferredApplication()
    return OximgMiddleware(deferred, after_first_answer=deferred.build_in_background)
