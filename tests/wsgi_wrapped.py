"""A wsgi.py with OximgMiddleware inside another middleware (for oximg.W006)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

from django_oximg.wsgi import OximgMiddleware


class Outer:
    """A middleware that keeps the application it wraps as ``application``, as WhiteNoise does."""

    def __init__(self, application: Callable[..., Iterable[bytes]]) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.application(environ, start_response)


application = Outer(OximgMiddleware(get_wsgi_application()))
