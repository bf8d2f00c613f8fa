"""The two ways a request reaches django-oximg in this process, as the tests send it.

``through_view``: Django's test client and the mounted URLconf (the view);
``through_middleware``: one WSGI call of ``OximgMiddleware`` around Django.
Both take the URL as sent (signed, percent-encoded) and extra environ keys
(``HTTP_ACCEPT=...``), and answer ``(status, headers with lower-case names,
body)``, the body read whole and the response closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from wsgiref.util import setup_testing_defaults

from django.core.wsgi import get_wsgi_application
from django.test import Client

from django_oximg.wsgi import OximgMiddleware

Answer = tuple[int, dict[str, str], bytes]


def through_view(url: str, **headers: str) -> Answer:
    response = Client().get(url, RAW_URI=url, **headers)
    try:
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    return response.status_code, {k.lower(): v for k, v in response.headers.items()}, body


def through_middleware(url: str, **headers: str) -> Answer:
    environ: dict[str, Any] = {"PATH_INFO": url, "RAW_URI": url, **headers}
    setup_testing_defaults(environ)
    started: list[Any] = []
    parts = OximgMiddleware(get_wsgi_application())(
        environ, lambda status, found: started.append((status, found))
    )
    try:
        body = b"".join(parts)
    finally:
        getattr(parts, "close", lambda: None)()
    status, found = started[0]
    return int(status.split()[0]), {k.lower(): v for k, v in found}, body


SHELLS: dict[str, Callable[..., Answer]] = {"view": through_view, "middleware": through_middleware}
