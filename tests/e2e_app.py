"""The WSGI applications gunicorn serves in tests/test_e2e_gunicorn.py and others.

``application``: Django (tests/urls.py) wrapped in ``OximgMiddleware``, as
the fastest deployment in docs/deployment.md does; ``django_application``:
Django alone, for settings whose ``MIDDLEWARE`` serves thumbnails
(tests/e2e_settings.py, ``OXIMG_E2E_DJANGO_MIDDLEWARE``). Both add a header
naming the worker process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

from django_oximg.wsgi import OximgMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.e2e_settings")

thumbnails = OximgMiddleware(get_wsgi_application())


django_only = get_wsgi_application()

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_worker_pid(app: WSGIApp) -> WSGIApp:
    """Add ``X-Worker-Pid``, so tests can see which worker process answered."""

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def with_pid(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            return start_response(status, [*headers, ("X-Worker-Pid", str(os.getpid()))], *args)

        return app(environ, with_pid)

    return answer


application = with_worker_pid(thumbnails)
django_application = with_worker_pid(django_only)
