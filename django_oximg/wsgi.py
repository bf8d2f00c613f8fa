"""``OximgMiddleware``: serve thumbnails in front of a Django WSGI application.

    # wsgi.py
    from django.core.wsgi import get_wsgi_application
    from django_oximg.wsgi import OximgMiddleware

    application = OximgMiddleware(get_wsgi_application())

Requests under ``OXIMG["URL_PREFIX"]`` (default ``/img/``) are answered before
Django builds a request; a local-disk cache hit goes out through
``wsgi.file_wrapper``. Everything else goes to the wrapped application.
"""

from __future__ import annotations

from django_oximg import conf, runtime
from django_oximg.core.wsgi import ThumbnailMiddleware, WSGIApp


def current_prefix() -> str:
    return conf.get_settings().URL_PREFIX


class OximgMiddleware(ThumbnailMiddleware):
    """The core middleware wired to this process's settings and thumbnailer."""

    def __init__(self, application: WSGIApp) -> None:
        super().__init__(application, runtime.get_thumbnailer, current_prefix)
