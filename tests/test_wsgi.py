"""Tests for the WSGI middleware: django_oximg.core.serving.middleware and django_oximg.wsgi.

Real WSGI calls: an environ dict and a start_response, as a server makes them.
The core middleware is tested over a core thumbnailer (no Django); the Django
wrapper ``OximgMiddleware`` over ``get_wsgi_application()`` and the test settings.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, unquote_to_bytes
from wsgiref.util import setup_testing_defaults

import pytest
import pyvips

from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.middleware import (
    ThumbnailMiddleware,
    WSGIApp,
    path_after_prefix,
    raw_request_path,
)
from tests import images
from tests.constants import JOIN_TIMEOUT, MIB, SIGNER

CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"
REPO_ROOT = Path(__file__).resolve().parent.parent


# -- a tiny WSGI client ----------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def environ_for(
    raw_path: str,
    *,
    raw_uri: bool = True,
    method: str = "GET",
    script_name: str = "",
    file_wrapper: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """The environ a server makes for ``raw_path`` (as sent, percent-encoded).

    PATH_INFO is decoded and latin-1, as PEP 3333 says; gunicorn also passes the
    raw target as RAW_URI, which ``raw_uri=False`` leaves out (wsgiref, runserver).
    """
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    decoded = unquote_to_bytes(raw_path).decode("latin-1")
    environ.update(
        REQUEST_METHOD=method,
        SCRIPT_NAME=script_name,
        PATH_INFO=decoded.removeprefix(script_name),
    )
    if raw_uri:
        environ["RAW_URI"] = raw_path
    if file_wrapper is not None:
        environ["wsgi.file_wrapper"] = file_wrapper
    environ.update(extra)
    return environ


def call(app: WSGIApp, environ: dict[str, Any]) -> Answer:
    """Call ``app`` once and collect its answer, closing the iterable as servers must."""
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started.append((status, headers))
        return lambda data: None

    iterable = app(environ, start_response)
    try:
        body = b"".join(iterable)
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            close()
    [(status, headers)] = started
    names = [name.lower() for name, _ in headers]
    assert len(names) == len(set(names)), f"a header is sent twice: {headers}"
    return Answer(int(status.split()[0]), {k.lower(): v for k, v in headers}, body)


class SentinelFileWrapper:
    """A server's ``wsgi.file_wrapper``: records what it was handed."""

    def __init__(self) -> None:
        self.calls: list[tuple[IO[bytes], int]] = []

    def __call__(self, file: IO[bytes], block_size: int = 8192) -> Iterable[bytes]:
        self.calls.append((file, block_size))
        return _Wrapped(file)


class _Wrapped:
    def __init__(self, file: IO[bytes]) -> None:
        self.file = file

    def __iter__(self) -> Iterator[bytes]:
        yield self.file.read()

    def close(self) -> None:
        self.file.close()


# -- raw paths -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"RAW_URI": "/img/a%2Fb/c?x=1", "PATH_INFO": "/img/a/b/c"}, "/img/a%2Fb/c"),
        ({"REQUEST_URI": "/img/a%2fb", "PATH_INFO": "/img/a/b"}, "/img/a%2fb"),
        ({"RAW_URI": "http://example.com/img/x?y", "PATH_INFO": "/img/x"}, "/img/x"),
        ({"PATH_INFO": "/img/a b/c:d@e"}, "/img/a%20b/c:d@e"),
        ({"SCRIPT_NAME": "/site", "PATH_INFO": "/img/x"}, "/site/img/x"),
        ({"PATH_INFO": "/img/caf\xc3\xa9.jpg"}, "/img/caf%C3%A9.jpg"),
    ],
)
def test_raw_request_path_prefers_the_raw_uri_and_rebuilds_it_otherwise(
    environ: dict[str, Any], expected: str
) -> None:
    assert raw_request_path(environ) == expected


@pytest.mark.parametrize(
    ("raw", "prefix", "expected"),
    [
        ("/img/sig/rs:fit:1:1/plain/a%2Fb@jpeg", "/img/", "/sig/rs:fit:1:1/plain/a%2Fb@jpeg"),
        ("/site/img/sig/x", "/site/img/", "/sig/x"),
        ("/a/b/c/sig/x", "/a/b/c", "/sig/x"),
    ],
)
def test_path_after_prefix_keeps_the_raw_rest(raw: str, prefix: str, expected: str) -> None:
    assert path_after_prefix(raw, prefix) == expected


@pytest.mark.parametrize(
    ("raw", "prefix"),
    [
        ("/im%67/sig/x", "/img/"),
        ("/%69mg/sig/x", "/img/"),
        ("/site/im%67/sig/x", "/site/img/"),
        ("/%73ite/img/sig/x", "/site/img/"),
    ],
)
def test_path_after_prefix_refuses_another_spelling_of_the_prefix(raw: str, prefix: str) -> None:
    assert path_after_prefix(raw, prefix) is None


# -- the core middleware ---------------------------------------------------------------


class Downstream:
    """The wrapped application: records what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], Any]] = []
        self.answer = [b"from downstream"]

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.calls.append((environ, start_response))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return self.answer


# conftest's ``thumbnailer``, over these sources; ``HIT_CACHE_BYTES`` by indirect parameter.
NO_HIT_CACHE = pytest.param({"hit_cache_bytes": 0}, id="0")


@pytest.fixture
def source_dir(source_dir: Path) -> Path:
    """conftest's sources, and one whose name is not ASCII."""
    (source_dir / "photos" / "café.jpg").write_bytes(images.jpeg(320, 240))
    return source_dir


@pytest.fixture
def make(make: Callable[..., Thumbnailer]) -> Callable[..., Thumbnailer]:
    return functools.partial(make, budget=256 * MIB)


@dataclass
class Stack:
    app: ThumbnailMiddleware
    downstream: Downstream
    builds: list[int]


@pytest.fixture
def stack(thumbnailer: Thumbnailer) -> Stack:
    downstream = Downstream()
    builds: list[int] = []

    def get_thumbnailer() -> Thumbnailer:
        builds.append(1)
        return thumbnailer

    return Stack(
        ThumbnailMiddleware(downstream, get_thumbnailer, lambda: "/img/"), downstream, builds
    )


def signed_url(path: str, prefix: str = "/img") -> str:
    return prefix + SIGNER.signed_path(path)


@pytest.mark.parametrize("path", ["/", "/static/app.css", "/img", "/imgs/x", "/media/img/x"])
def test_paths_outside_the_prefix_go_to_the_wrapped_app_untouched(stack: Stack, path: str) -> None:
    environ = environ_for(path)
    copy = dict(environ)
    captured: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        captured.append(status)

    result = stack.app(environ, start_response)
    assert result is stack.downstream.answer
    [(seen_environ, seen_start)] = stack.downstream.calls
    assert seen_environ is environ and environ == copy
    assert seen_start is start_response
    assert stack.builds == []  # the thumbnailer is not even built


def test_a_miss_and_a_small_hit_are_answered_from_memory(stack: Stack, no_fd_leak: None) -> None:
    wrapper = SentinelFileWrapper()
    miss = call(stack.app, environ_for(signed_url(CONTROL), file_wrapper=wrapper))
    hit = call(stack.app, environ_for(signed_url(CONTROL), file_wrapper=wrapper))
    assert miss.status == hit.status == 200
    assert hit.body == miss.body
    assert wrapper.calls == []
    assert "last-modified" in hit.headers and "last-modified" not in miss.headers
    assert hit.headers["etag"] == miss.headers["etag"]
    assert hit.headers["content-length"] == str(len(miss.body))


@pytest.mark.parametrize("thumbnailer", [NO_HIT_CACHE], indirect=True)
def test_with_the_hit_cache_off_a_hit_goes_through_the_file_wrapper(
    stack: Stack, no_fd_leak: None
) -> None:
    wrapper = SentinelFileWrapper()
    miss = call(stack.app, environ_for(signed_url(CONTROL), file_wrapper=wrapper))
    assert miss.status == 200
    assert wrapper.calls == []
    image = pyvips.Image.new_from_buffer(miss.body, "")
    assert (image.width, image.height) == (200, 150)

    hit = call(stack.app, environ_for(signed_url(CONTROL), file_wrapper=wrapper))
    assert hit.status == 200
    assert hit.body == miss.body
    [(handed, block_size)] = wrapper.calls
    assert handed.closed  # closed by the iterable's close()
    assert block_size > 0
    assert hit.headers["etag"] == miss.headers["etag"]
    assert hit.headers["content-length"] == str(len(miss.body))
    assert stack.downstream.calls == []


@pytest.mark.parametrize("thumbnailer", [NO_HIT_CACHE], indirect=True)
def test_without_a_server_file_wrapper_the_hit_is_still_streamed(
    stack: Stack, no_fd_leak: None
) -> None:
    miss = call(stack.app, environ_for(signed_url(CONTROL)))
    hit = call(stack.app, environ_for(signed_url(CONTROL)))
    assert hit.body == miss.body


def test_raw_uri_and_rebuilt_path_info_both_verify(stack: Stack) -> None:
    url = signed_url(CONTROL)
    with_raw = call(stack.app, environ_for(url, raw_uri=True))
    rebuilt = call(stack.app, environ_for(url, raw_uri=False))
    assert with_raw.status == rebuilt.status == 200
    assert with_raw.body == rebuilt.body


def test_a_non_ascii_source_verifies_with_raw_uri_and_rebuilt_path(stack: Stack) -> None:
    url = signed_url("/rs:fit:100:100/plain/photos/" + quote("café.jpg") + "@jpeg")
    assert call(stack.app, environ_for(url, raw_uri=True)).status == 200
    assert call(stack.app, environ_for(url, raw_uri=False)).status == 200


def test_an_encoded_slash_verifies_only_where_the_raw_uri_is_known(stack: Stack) -> None:
    """Without RAW_URI the server has decoded ``%2F``; the rebuilt path no longer
    matches what was signed, so the answer is 403, never a second cache object."""
    url = signed_url("/rs:fit:200:200/plain/photos%2Flandscape.jpg@jpeg")
    assert call(stack.app, environ_for(url, raw_uri=True)).status == 200
    assert call(stack.app, environ_for(url, raw_uri=False)).status == 403


@pytest.mark.parametrize("raw_uri", [True, False])
def test_script_name_is_honoured(stack: Stack, raw_uri: bool) -> None:
    url = "/site" + signed_url(CONTROL)
    answer = call(stack.app, environ_for(url, raw_uri=raw_uri, script_name="/site"))
    assert answer.status == 200
    assert stack.downstream.calls == []


def test_the_prefix_is_matched_below_script_name(stack: Stack) -> None:
    """Under SCRIPT_NAME "/site", "/site/other/img/..." is not ours."""
    url = "/site/other" + signed_url(CONTROL)
    environ = environ_for(url, script_name="/site")
    call(stack.app, environ)
    assert len(stack.downstream.calls) == 1


def test_head_gets_headers_and_no_body(stack: Stack) -> None:
    get = call(stack.app, environ_for(signed_url(CONTROL)))
    head = call(stack.app, environ_for(signed_url(CONTROL), method="HEAD"))
    assert head.status == 200
    assert head.body == b""
    assert head.headers["content-length"] == str(len(get.body))


def test_post_gets_405(stack: Stack) -> None:
    answer = call(stack.app, environ_for(signed_url(CONTROL), method="POST"))
    assert answer.status == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert stack.downstream.calls == []


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/img/" + "A" * 43 + CONTROL, 403),
        ("/img" + CONTROL, 403),
        ("/img/", 403),
        (signed_url("/rs:fit:200:200/nope:1/plain/photos/landscape.jpg@jpeg"), 400),
        (signed_url("/rs:fit:200:200/plain/photos/missing.jpg@jpeg"), 404),
        (signed_url("/rs:fit:200:200/plain/../../etc/passwd@jpeg"), 404),
        (signed_url("/rs:fit:200:200/plain/%2e%2e/%2e%2e/etc/passwd@jpeg"), 404),
        (signed_url("/rs:fit:200:200/plain/photos/x%00.jpg@jpeg"), 400),
    ],
)
def test_errors_are_short_plain_text_and_not_stored(
    stack: Stack, tmp_path: Path, url: str, status: int
) -> None:
    answer = call(stack.app, environ_for(url))
    assert answer.status == status
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert 0 < len(answer.body) < 100
    assert not (tmp_path / "cache").exists()


# -- OximgMiddleware over Django -------------------------------------------------------


@pytest.fixture
def django_app(media: Path) -> WSGIApp:
    from django.core.wsgi import get_wsgi_application

    from django_oximg.wsgi import OximgMiddleware

    return OximgMiddleware(get_wsgi_application())


def django_signed_url(path: str) -> str:
    from django_oximg import runtime

    return "/img" + runtime.get_signer().signed_path(path)


def test_oximg_middleware_and_the_view_serve_the_same_bytes(
    django_app: WSGIApp, media: Path, client: Any, no_fd_leak: None
) -> None:
    url = django_signed_url("/rs:fill:160:90/g:ce/plain/photos/landscape.jpg@webp")
    by_middleware = call(django_app, environ_for(url))
    assert by_middleware.status == 200
    shutil.rmtree(media / "oximg")  # the view renders afresh
    response = client.get(url)
    try:
        by_view = (
            b"".join(response) if not response.streaming else b"".join(response.streaming_content)
        )
    finally:
        response.close()
    assert response.status_code == 200
    assert by_view == by_middleware.body
    for name in ("Content-Type", "ETag", "Cache-Control", "Content-Length"):
        assert response.headers[name] == by_middleware.headers[name.lower()], name
    image = pyvips.Image.new_from_buffer(by_view, "")
    assert (image.width, image.height) == (160, 90)


def test_oximg_middleware_serves_a_sites_own_option(
    django_app: WSGIApp, media: Path, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "EXTENSIONS": ["tests.site_extensions.SEPIA"]}
    grey = (pyvips.Image.black(40, 30, bands=3) + 100).cast("uchar")
    (media / "grey.png").write_bytes(bytes(grey.copy(interpretation="srgb").pngsave_buffer()))
    toned = call(django_app, environ_for(django_signed_url("/w:20/sepia:1/plain/grey.png@png")))
    assert toned.status == 200
    red, green, blue = pyvips.Image.new_from_buffer(toned.body, "")(10, 7)
    assert red > green > blue
    bad = call(django_app, environ_for(django_signed_url("/w:20/sep:x/plain/grey.png@png")))
    assert (bad.status, bad.body.strip()) == (400, b"Invalid sepia: x")


#: Paths the view's URLconf and the middleware's prefix match must treat alike:
#: line breaks (which a URLconf's "." does not match), NUL, an empty rest.
ODD_PATHS = [
    "/img/",
    "/img/x%0Ay",
    "/img/x%0Dy",
    "/img/x%0A",
    "/img/%0A",
    "/img/x\ny",
    "/img/x%00y",
    "/img/x%0D%0A/plain/photos/landscape.jpg",
]


@pytest.mark.parametrize("raw_uri", [True, False], ids=["raw-uri", "rebuilt"])
@pytest.mark.parametrize(
    "path",
    [
        *ODD_PATHS,
        # Signed, so the answer comes from past the signature check.
        "signed:/rs:fit:10:10/plain/photos/land%0Ascape.jpg@jpeg",
        "signed:/rs:fit:10:10/plain/photos/land%0Dscape.jpg@jpeg",
        "signed:/rs:fit:10:10/plain/photos/landscape.jpg%0A@jpeg",
    ],
)
def test_the_view_and_the_middleware_answer_every_path_alike(
    django_app: WSGIApp, path: str, raw_uri: bool
) -> None:
    from django.core.wsgi import get_wsgi_application

    if path.startswith("signed:"):
        path = django_signed_url(path.removeprefix("signed:"))
    by_middleware = call(django_app, environ_for(path, raw_uri=raw_uri))
    by_view = call(get_wsgi_application(), environ_for(path, raw_uri=raw_uri))
    assert by_view.status == by_middleware.status
    assert by_view.body == by_middleware.body
    assert by_view.headers["content-type"] == by_middleware.headers["content-type"]


def test_oximg_middleware_passes_other_paths_to_django(django_app: WSGIApp) -> None:
    answer = call(django_app, environ_for("/not-ours/"))
    assert answer.status == 404
    assert answer.headers["content-type"].startswith("text/html")


def test_oximg_middleware_serves_a_hit_through_the_file_wrapper(
    django_app: WSGIApp, media: Path, no_fd_leak: None, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "HIT_CACHE_BYTES": 0}
    url = django_signed_url(CONTROL)
    wrapper = SentinelFileWrapper()
    first = call(django_app, environ_for(url, file_wrapper=wrapper))
    second = call(django_app, environ_for(url, file_wrapper=wrapper))
    assert first.status == second.status == 200
    assert first.body == second.body
    assert len(wrapper.calls) == 1
    assert len([p for p in (media / "oximg").rglob("*") if p.is_file()]) == 1


def test_oximg_middleware_follows_the_url_prefix_setting(media: Path, settings: Any) -> None:
    from django.core.wsgi import get_wsgi_application

    from django_oximg import runtime
    from django_oximg.wsgi import OximgMiddleware

    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/thumbs/"}
    app = OximgMiddleware(get_wsgi_application())
    url = "/thumbs" + runtime.get_signer().signed_path(CONTROL)
    assert call(app, environ_for(url)).status == 200


# -- Django's application built after the first answer ---------------------------------


class CountingBuild:
    """Stands in for Django's application: counts builds, answers 200 "page"."""

    def __init__(self) -> None:
        self.builds = 0
        self.built = threading.Event()

    def __call__(self) -> WSGIApp:
        self.builds += 1
        self.built.set()
        return Downstream()


def deferred_stack(thumbnailer: Thumbnailer) -> tuple[ThumbnailMiddleware, CountingBuild]:
    from django_oximg.wsgi import DeferredApplication

    build = CountingBuild()
    deferred = DeferredApplication(build)
    app = ThumbnailMiddleware(
        deferred, lambda: thumbnailer, lambda: "/img/", deferred.build_in_background
    )
    return app, build


def test_the_wrapped_application_is_built_after_the_first_answer_is_sent(
    thumbnailer: Thumbnailer,
) -> None:
    app, build = deferred_stack(thumbnailer)
    started: list[str] = []
    body = app(environ_for(signed_url(CONTROL)), lambda status, headers: started.append(status))
    assert started == ["200 OK"] and b"".join(body)
    assert build.builds == 0  # not while the first answer is being sent
    body.close()  # type: ignore[attr-defined]
    assert build.built.wait(JOIN_TIMEOUT)
    assert call(app, environ_for(signed_url(CONTROL))).status == 200
    assert call(app, environ_for("/page/")).body == b"from downstream"
    assert build.builds == 1


def test_a_request_for_the_wrapped_application_builds_it_at_once(
    thumbnailer: Thumbnailer,
) -> None:
    app, build = deferred_stack(thumbnailer)
    assert call(app, environ_for("/page/")).body == b"from downstream"
    assert build.builds == 1
    assert call(app, environ_for(signed_url(CONTROL))).status == 200  # starts no second build
    assert call(app, environ_for("/page/")).status == 200
    assert build.builds == 1


def test_a_failed_background_build_fails_the_next_page_not_the_thumbnails(
    thumbnailer: Thumbnailer, caplog: pytest.LogCaptureFixture
) -> None:
    from django_oximg.wsgi import DeferredApplication

    attempts: list[int] = []

    def broken() -> WSGIApp:
        attempts.append(1)
        raise RuntimeError("settings are broken")

    deferred = DeferredApplication(broken)
    deferred.build_in_background()
    deadline = time.monotonic() + JOIN_TIMEOUT
    while "background failed" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "building the WSGI application in the background failed" in caplog.text
    app = ThumbnailMiddleware(deferred, lambda: thumbnailer, lambda: "/img/")
    assert call(app, environ_for(signed_url(CONTROL))).status == 200
    with pytest.raises(RuntimeError, match="settings are broken"):
        call(app, environ_for("/page/"))
    assert len(attempts) == 2


#: Run in a fresh interpreter: the first thumbnail through get_wsgi_application()
#: must not import Django's request handler (nor numpy); once it has been sent,
#: Django's application is built in the background and pages are served.
FRESH_PROCESS = """
import io, json, sys, time
from django_oximg.wsgi import get_wsgi_application

application = get_wsgi_application()
path = sys.argv[1]

def environ(path):
    return {"REQUEST_METHOD": "GET", "PATH_INFO": path, "RAW_URI": path, "SCRIPT_NAME": "",
            "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(), "wsgi.errors": sys.stderr}

statuses = []
body = application(environ(path), lambda status, headers: statuses.append(status))
first = b"".join(body)
before = sorted(m for m in ("django.core.handlers.wsgi", "django.urls", "django.db.models",
                            "django.contrib.auth.models", "numpy", "urllib3") if m in sys.modules)
from django.apps import apps
ready_before = apps.ready
body.close()
deadline = time.monotonic() + 60
while not apps.ready and time.monotonic() < deadline:
    time.sleep(0.01)
page = application(environ("/nowhere/"), lambda status, headers: statuses.append(status))
b"".join(page)
page.close()
print(json.dumps({"statuses": statuses, "size": len(first), "imported": before,
                  "ready_before": ready_before, "ready_after": apps.ready}))
"""


def test_the_first_thumbnail_of_a_new_process_needs_no_django_handler(
    media: Path, tmp_path: Path
) -> None:
    import json
    import subprocess
    import sys

    from django_oximg import runtime

    settings_module = tmp_path / "fresh_settings.py"
    settings_module.write_text(
        "from tests.settings import *  # noqa: F403\n"
        f"MEDIA_ROOT = {str(media)!r}\n"
        f"STORAGES = {{'default': {{'BACKEND': 'django.core.files.storage.FileSystemStorage',"
        f" 'OPTIONS': {{'location': {str(media)!r}}}}}}}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fresh_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, "/img" + runtime.get_signer().signed_path(CONTROL)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["statuses"] == ["200 OK", "404 Not Found"]
    assert found["size"] > 0
    assert found["imported"] == []
    assert found["ready_before"] is False
    assert found["ready_after"] is True


# -- one image, one URL -------------------------------------------------------------------


def test_the_canonical_url_is_served(stack: Stack) -> None:
    answer = call(stack.app, environ_for(signed_url(CONTROL)))
    assert answer.status == 200
    assert answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "extra",
    [
        {"QUERY_STRING": "x=1"},
        {"QUERY_STRING": "utm_source=mail&w=500"},
        {"QUERY_STRING": ""},  # "?" alone: only the raw URI shows it
    ],
)
def test_a_query_string_is_another_url_and_not_found(stack: Stack, extra: dict[str, str]) -> None:
    url = signed_url(CONTROL)
    raw = url + "?" + extra["QUERY_STRING"]
    answer = call(stack.app, environ_for(url, RAW_URI=raw, **extra))
    assert answer.status == 404
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_percent_encoded_prefix_is_another_url_and_not_found(stack: Stack) -> None:
    url = signed_url(CONTROL, prefix="/im%67")
    answer = call(stack.app, environ_for(url))
    assert answer.status == 404
    assert answer.headers["cache-control"] == "no-store"
    assert stack.builds == []  # refused before the thumbnailer is asked


def test_health_and_metrics_answer_with_a_query_string(stack: Stack) -> None:
    answer = call(stack.app, environ_for("/img/health", RAW_URI="/img/health?probe=1"))
    assert answer.status == 200
    assert answer.headers["x-content-type-options"] == "nosniff"
