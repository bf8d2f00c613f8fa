"""The WSGI application gunicorn serves in tests/test_e2e_gunicorn.py.

Django (tests/urls.py) wrapped in ``OximgMiddleware``, as the fastest
deployment in docs/deployment.md does, plus a header naming the worker process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

from django_oximg.wsgi import OximgMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.e2e_settings")

thumbnails = OximgMiddleware(get_wsgi_application())


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Add ``X-Worker-Pid``, so tests can see which worker process answered."""

    def with_pid(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
        return start_response(status, [*headers, ("X-Worker-Pid", str(os.getpid()))], *args)

    return thumbnails(environ, with_pid)
