"""WSGI applications the load benchmark serves with gunicorn (bench/servers.py).

    bench.wsgi_apps:view        Django with django_oximg.urls at /img/ (the view)
    bench.wsgi_apps:middleware  OximgMiddleware in front of Django (the fast path)
    bench.wsgi_apps:deferred    django_oximg.wsgi.get_wsgi_application(): the same, with
                                Django's own application built after the first answer
    bench.wsgi_apps:static      whitenoise alone over $OXIMG_BENCH_STATIC_ROOT at /static/
    bench.wsgi_apps:hello       10 KB of bytes for every request, importing nothing: the
                                server's own cost (bench/cold_start.py)
    bench.wsgi_apps:stack       no django_oximg: Django's settings and storage, Pillow and
                                pyvips imported, and for every request the medium photo
                                read through the storage, decoded at 1/2 by Pillow,
                                resized into 500x500 by libvips and encoded by Pillow at
                                q80: the floor of a first miss on this stack
                                (bench/cold_start.py)
    bench.wsgi_apps:canned      $OXIMG_BENCH_STATIC_ROOT/thumb.jpg with the headers in
                                headers.json beside it, for every request: a cache hit's
                                answer with no work at all (bench/load.py --cache-hits)

Built on first access (module ``__getattr__``), so the static server never
imports Django and each server builds only its own application.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def not_found(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
    return [b"not found"]


HELLO = b"x" * 10_000


def hello(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "image/jpeg"), ("Content-Length", "10000")])
    return [HELLO]


def canned_app() -> WSGIApp:
    """The same answer for every request, made once from files (see the module's docstring)."""
    import json

    root = os.environ["OXIMG_BENCH_STATIC_ROOT"]
    with open(os.path.join(root, "thumb.jpg"), "rb") as handle:
        body = handle.read()
    with open(os.path.join(root, "headers.json")) as handle:
        headers = [(str(name), str(value)) for name, value in json.load(handle)]

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", list(headers))
        return [body]

    return answer


def stack_app() -> WSGIApp:
    """The ``stack`` application: a first miss's unavoidable work, none of django_oximg's."""
    import io

    import pyvips
    from django.conf import settings
    from django.core.files.storage import FileSystemStorage
    from PIL import Image, JpegImagePlugin

    # The settings module read, as django_oximg.wsgi reads it (no app registry).
    storage = FileSystemStorage(settings.MEDIA_ROOT)

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with storage.open("medium.jpg") as handle:
            data = handle.read()
        with JpegImagePlugin.JpegImageFile(io.BytesIO(data)) as decoded:
            width, height = decoded.size
            decoded.draft("RGB", (width // 2, height // 2))
            pixels = decoded.tobytes()
            width, height = decoded.size
        image = pyvips.Image.new_from_memory(pixels, width, height, 3, "uchar")
        scale = min(500 / width, 500 / height)
        resized = image.resize(scale)
        out = io.BytesIO()
        Image.frombytes("RGB", (resized.width, resized.height), resized.write_to_memory()).save(
            out, "JPEG", quality=80
        )
        body = out.getvalue()
        start_response(
            "200 OK", [("Content-Type", "image/jpeg"), ("Content-Length", str(len(body)))]
        )
        return [body]

    return answer


def build(name: str) -> WSGIApp:
    """The application ``name``; logs which django_oximg it runs (before/after runs)."""
    import sys

    if name not in ("static", "canned", "stack"):
        import django_oximg

        print(f"bench.wsgi_apps:{name} serves {django_oximg.__file__}", file=sys.stderr)
    if name == "canned":
        return canned_app()
    if name == "stack":
        return stack_app()
    if name == "static":
        from whitenoise import WhiteNoise

        return WhiteNoise(  # type: ignore[no-any-return]
            not_found, root=os.environ["OXIMG_BENCH_STATIC_ROOT"], prefix="static/", max_age=3600
        )
    if name == "deferred":
        from django_oximg.wsgi import get_wsgi_application as deferred

        return deferred()
    from django.core.wsgi import get_wsgi_application

    django_app = get_wsgi_application()
    if name == "view":
        return django_app
    from django_oximg.wsgi import OximgMiddleware

    return OximgMiddleware(django_app)


def __getattr__(name: str) -> WSGIApp:
    if name not in ("view", "middleware", "deferred", "static", "canned", "stack"):
        raise AttributeError(name)
    app = build(name)
    globals()[name] = app
    return app
