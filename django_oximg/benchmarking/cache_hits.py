"""``--hits``: one cached thumbnail asked for again and again, through each way in.

``middleware`` is ``OximgMiddleware`` around the site's Django application,
``view`` the site's Django application itself when its URLconf mounts
``django_oximg.urls``, and ``whitenoise`` whitenoise alone serving the
thumbnail's bytes from a file. All are WSGI calls in this process, so the
figures are what the application costs per hit: a server adds the same cost
to each (the repository's ``bench/load.py --cache-hits`` runs them under
gunicorn).
"""

from __future__ import annotations

import io
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.management.base import CommandError

from django_oximg import conf, runtime
from django_oximg.benchmarking.measure import process_cpu, summary, timed_loop
from django_oximg.benchmarking.sources import Source, clean_up, run_sources
from django_oximg.core.options import Options, build_path


def run(
    names: list[str], box: tuple[int, int], fmt: str, rounds: int, seconds: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """Summary rows (kind ``hit``, one thread) per source and way in, and the run's notes."""
    notes: list[str] = []
    sources = run_sources(names, quick=True)
    try:
        rows: list[dict[str, Any]] = []
        for source in sources:
            found = hit_contenders(source, box, fmt, notes)
            runs: dict[str, list[dict[str, float]]] = {}
            for _ in range(rounds):
                for name, ask in found.items():
                    measured = timed_loop(ask, 1, seconds, process_cpu)
                    runs.setdefault(name, []).append(measured.figures())
            rows.extend(summary(source.label, name, "hit", 1, v) for name, v in runs.items())
    finally:
        clean_up(sources)
    return rows, notes


def hit_contenders(
    source: Source, box: tuple[int, int], fmt: str, notes: list[str]
) -> dict[str, Callable[[int], int]]:
    """Callables that each answer one hit of the same cached thumbnail of ``source``."""
    from django.core.wsgi import get_wsgi_application
    from django.urls import NoReverseMatch, reverse
    from whitenoise import WhiteNoise

    from django_oximg.wsgi import OximgMiddleware

    width, height = box
    options = Options(width=width, height=height, format=fmt)
    signed = runtime.get_signer().signed_path(build_path(options, source.name))
    django_app = get_wsgi_application()
    middleware = OximgMiddleware(django_app)
    prefix = conf.get_settings().URL_PREFIX.rstrip("/")
    body = wsgi_get(middleware, prefix + signed)  # the miss: rendered and cached
    static = Path(tempfile.mkdtemp(prefix="oximg-bench-hits-"))
    (static / "thumbnail").write_bytes(body)
    whitenoise = WhiteNoise(django_app, root=str(static), prefix="oximg-bench-static/")
    found = {
        "middleware": (middleware, prefix + signed),
        "whitenoise": (whitenoise, "/oximg-bench-static/thumbnail"),
    }
    try:
        mount = reverse("oximg:serve", kwargs={"path": "x"})[:-1].rstrip("/")
    except NoReverseMatch:
        notes.append("the view is not in the URLconf (django_oximg.urls): not measured")
    else:
        found["view"] = (django_app, mount + signed)
    for app, path in found.values():  # each answers it once before timing (the map is filled)
        if wsgi_get(app, path) != body:
            raise CommandError(f"{path} did not answer the thumbnail's bytes")
    return {name: hit_caller(app, path) for name, (app, path) in found.items()}


def hit_caller(app: Any, path: str) -> Callable[[int], int]:
    return lambda _index: len(wsgi_get(app, path))


def wsgi_get(app: Any, path: str) -> bytes:
    """One GET of ``path`` through the WSGI application ``app``: the body, which must be a 200."""
    environ = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "RAW_URI": path,
        "QUERY_STRING": "",
        "SERVER_NAME": allowed_host(),
        "SERVER_PORT": "80",
        "HTTP_HOST": allowed_host(),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
    }
    statuses: list[str] = []
    answer = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        body = b"".join(answer)
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()
    if not statuses or not statuses[0].startswith("200"):
        raise CommandError(f"{path} answered {statuses[:1]} (is ALLOWED_HOSTS set?)")
    return body


def allowed_host() -> str:
    """A host name this site's ALLOWED_HOSTS accepts, for the in-process requests."""
    for host in django_settings.ALLOWED_HOSTS:
        if host != "*":
            return str(host).lstrip(".")
    return "localhost"
