"""Tests for the MIDDLEWARE entry, django_oximg/django_middleware.py.

Its promise: the same answers as the WSGI wrapper (``django_oximg.wsgi.OximgMiddleware``)
for every request under ``URL_PREFIX``: status line, headers and body, for
renders, hits from memory and through the server's file wrapper, 304s,
ranges, HEAD, and every error. Each request goes to both, as real WSGI
calls (tests/test_wsgi.py's client), on one Django application whose
URLconf has no django-oximg view (tests/urls_empty.py), so what answers
is the middleware or nothing. Under ASGI, Django's async client.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from django_oximg.core.serving.middleware import WSGIApp
from tests.test_wsgi import ODD_PATHS, Answer, SentinelFileWrapper, call, environ_for

ENTRY = "django_oximg.django_middleware.OximgServeMiddleware"

#: The middleware first, then some of Django's own, which must not touch its answers.
MIDDLEWARE = [
    ENTRY,
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.gzip.GZipMiddleware",
]

CONTROL = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"


def signed(path: str) -> str:
    from django_oximg import runtime

    return "/img" + runtime.get_signer().signed_path(path)


Answers = tuple[WSGIApp, WSGIApp]


@pytest.fixture
def apps(media: Path, settings: Any) -> Answers:
    """(the WSGI wrapper around Django, Django with the MIDDLEWARE entry), no view mounted."""
    from django.core.wsgi import get_wsgi_application

    from django_oximg.wsgi import OximgMiddleware

    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.MIDDLEWARE = MIDDLEWARE
    (media / "photos" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG at all")
    return OximgMiddleware(get_wsgi_application()), get_wsgi_application()


def forget_results(media: Path) -> None:
    """No result on disk and none remembered: the next request renders."""
    from django_oximg import runtime

    shutil.rmtree(media / "oximg", ignore_errors=True)
    runtime.reset()


def same_answer(first: Answer, second: Answer) -> None:
    assert first.status == second.status
    assert first.headers == second.headers
    assert first.body == second.body


def both(apps: Answers, environ: Callable[[], dict[str, Any]]) -> tuple[Answer, Answer]:
    wsgi, django = apps
    return call(wsgi, environ()), call(django, environ())


def status_lines(apps: Answers, environ: dict[str, Any]) -> list[str]:
    lines: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
        lines.append(status)
        return lambda data: None

    for app in apps:
        iterable = app(dict(environ), start_response)
        b"".join(iterable)
        getattr(iterable, "close", lambda: None)()
    return lines


RENDERS = [
    CONTROL,
    "/rs:fill:160:90/g:ce/plain/photos/landscape.jpg@webp",
    "/w:50/plain/photos/alpha.png@png",
    "/w:40/att:1/fn:x/plain/photos/landscape.jpg@jpeg",
]


@pytest.mark.parametrize("path", RENDERS)
def test_a_render_is_the_wrappers(apps: Answers, media: Path, path: str) -> None:
    """A miss on each side (the result forgotten in between): the same answer."""
    wsgi, django = apps
    url = signed(path)
    by_wsgi = call(wsgi, environ_for(url))
    forget_results(media)
    by_django = call(django, environ_for(url))
    assert by_wsgi.status == 200
    same_answer(by_wsgi, by_django)


@pytest.mark.parametrize("hit_cache", [True, False], ids=["from-memory", "file-wrapper"])
def test_hits_are_the_wrappers(
    apps: Answers, media: Path, settings: Any, hit_cache: bool, no_fd_leak: None
) -> None:
    """Hits from memory, and from disk through the server's ``wsgi.file_wrapper``."""
    if not hit_cache:
        settings.OXIMG = {**settings.OXIMG, "HIT_CACHE_BYTES": 0}
    url = signed(CONTROL)
    call(apps[0], environ_for(url))  # rendered and stored
    wrapper = SentinelFileWrapper()
    for _ in range(2):
        by_wsgi, by_django = both(apps, lambda: environ_for(url, file_wrapper=wrapper))
        assert by_wsgi.status == 200
        same_answer(by_wsgi, by_django)
    assert len(wrapper.calls) == (0 if hit_cache else 4)


def test_conditional_range_and_head_requests_are_the_wrappers(apps: Answers) -> None:
    url = signed(CONTROL)
    first = call(apps[0], environ_for(url))
    etag, modified = first.headers["etag"], first.headers.get("last-modified", "")
    requests: list[dict[str, Any]] = [
        {"HTTP_IF_NONE_MATCH": etag},
        {"HTTP_IF_NONE_MATCH": '"other"'},
        {"HTTP_RANGE": "bytes=0-99"},
        {"HTTP_RANGE": "bytes=999999-"},
        {"method": "HEAD"},
        {"method": "POST"},
        {"method": "OPTIONS"},
    ]
    if modified:
        requests.append({"HTTP_IF_MODIFIED_SINCE": modified})
    statuses = []
    for extra in requests:
        by_wsgi, by_django = both(apps, lambda extra=extra: environ_for(url, **extra))
        same_answer(by_wsgi, by_django)
        statuses.append(by_wsgi.status)
    assert 304 in statuses and 206 in statuses and 405 in statuses


@pytest.mark.parametrize("raw_uri", [True, False], ids=["raw-uri", "rebuilt"])
@pytest.mark.parametrize(
    "path",
    [
        *ODD_PATHS,
        "/img/" + "A" * 43 + CONTROL,  # a wrong signature
        "/img" + CONTROL,  # none
        "/im%67" + CONTROL,  # another spelling of the prefix
        "/img/health",
        "signed:/rs:fit:200:200/nope:1/plain/photos/landscape.jpg@jpeg",
        "signed:/rs:fit:200:200/plain/photos/missing.jpg@jpeg",
        "signed:/rs:fit:200:200/plain/photos/broken.jpg@jpeg",
        "signed:/rs:fit:200:200/plain/%2e%2e/%2e%2e/etc/passwd@jpeg",
        "signed:/rs:fit:200:200/plain/photos/x%00.jpg@jpeg",
        "signed:/rs:fit:10:10/plain/photos/land%0Ascape.jpg@jpeg",
    ],
)
def test_errors_and_odd_paths_are_the_wrappers(apps: Answers, path: str, raw_uri: bool) -> None:
    if path.startswith("signed:"):
        path = signed(path.removeprefix("signed:"))
    by_wsgi, by_django = both(apps, lambda: environ_for(path, raw_uri=raw_uri))
    same_answer(by_wsgi, by_django)


def test_a_query_string_is_the_wrappers(apps: Answers) -> None:
    url = signed(CONTROL)
    by_wsgi, by_django = both(apps, lambda: environ_for(url, QUERY_STRING="x=1"))
    same_answer(by_wsgi, by_django)


def test_the_status_lines_are_the_wrappers(apps: Answers) -> None:
    """Reason phrases too (Django writes its own from the status code)."""
    for path in (signed(CONTROL), "/img" + CONTROL, signed("/w:1/plain/photos/broken.jpg@jpeg")):
        first, second = status_lines(apps, environ_for(path))
        assert first == second


def test_script_name_and_the_url_prefix_setting_are_followed(
    apps: Answers, media: Path, settings: Any
) -> None:
    from django.core.wsgi import get_wsgi_application

    from django_oximg import runtime

    settings.OXIMG = {**settings.OXIMG, "URL_PREFIX": "/thumbs/"}
    url = "/site/thumbs" + runtime.get_signer().signed_path(CONTROL)
    answer = call(get_wsgi_application(), environ_for(url, script_name="/site"))
    assert answer.status == 200
    assert answer.headers["content-type"] == "image/jpeg"


def test_other_paths_go_through_django(apps: Answers) -> None:
    """Outside the prefix Django answers, with the middleware after this one."""
    answer = call(apps[1], environ_for("/imgs/x"))
    assert answer.status == 404
    assert answer.headers["content-type"].startswith("text/html")
    # SecurityMiddleware ran for this page, and for no thumbnail
    assert answer.headers["referrer-policy"] == "same-origin"
    thumbnail = call(apps[1], environ_for(signed(CONTROL)))
    assert thumbnail.status == 200
    assert "referrer-policy" not in thumbnail.headers


# -- ASGI ---------------------------------------------------------------------------------


async def asgi_answer(url: str) -> Answer:
    """``url`` through Django's ASGI handler (its async test client)."""
    from django.test import AsyncClient

    response = await AsyncClient().get(url)
    if response.streaming:
        body = b"".join([chunk async for chunk in response.streaming_content])
    else:
        body = response.content
    headers = {name.lower(): value for name, value in response.headers.items()}
    return Answer(response.status_code, headers, body)


@pytest.mark.parametrize("path", ["render", "hit", "/img/" + "A" * 43 + CONTROL])
def test_under_asgi_the_answers_are_the_wrappers(apps: Answers, media: Path, path: str) -> None:
    """Django's async stack: the same status, headers and body as the WSGI wrapper."""
    from asgiref.sync import async_to_sync

    url = signed(CONTROL) if path in ("render", "hit") else path
    by_wsgi = call(apps[0], environ_for(url))
    if path == "render":
        forget_results(media)
    if path == "hit":
        by_wsgi = call(apps[0], environ_for(url))
    same_answer(by_wsgi, async_to_sync(asgi_answer)(url))


# -- over real HTTP: two gunicorns ----------------------------------------------------------

#: Headers that name the moment or the process, not the answer.
PER_SERVER_HEADERS = {"date", "x-worker-pid"}


@pytest.mark.one_django(reason="gunicorn's processes over real HTTP; Django's side runs above")
def test_gunicorn_serves_the_wrappers_answers(tmp_path: Path) -> None:
    """tests/e2e_app.py under gunicorn: the WSGI wrapper, and Django alone with the
    entry in MIDDLEWARE (tests/e2e_settings.py), each over its own copy of the
    sources; the results' files are given one mtime, so hits compare whole."""
    import os

    from tests import images
    from tests.servers import Fetched, fetch, gunicorn, imgproxy_url

    roots = []
    photo = images.jpeg(640, 480)  # drawn once: each drawing has its own noise
    for name in ("wrapper", "entry"):
        media = tmp_path / name / "media"
        (media / "photos").mkdir(parents=True)
        (media / "photos" / "landscape.jpg").write_bytes(photo)
        (media / "photos" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG at all")
        roots.append(media)

    def comparable(answer: Fetched) -> tuple[int, dict[str, str], bytes]:
        headers = {k: v for k, v in answer.headers.items() if k not in PER_SERVER_HEADERS}
        return answer.status, headers, answer.body

    def same_results_mtime() -> None:
        for media in roots:
            for path in (media / "oximg").rglob("*"):
                if path.is_file():
                    os.utime(path, (1_700_000_000, 1_700_000_000))

    control = "/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"
    with (
        gunicorn(roots[0], workers=1, threads=2) as wrapper,
        gunicorn(
            roots[1],
            workers=1,
            threads=2,
            app="tests.e2e_app:django_application",
            env={"OXIMG_E2E_DJANGO_MIDDLEWARE": "1"},
        ) as entry,
    ):
        servers = (wrapper, entry)

        def compare(path: str, method: str = "GET", **headers: str) -> Fetched:
            first, second = (
                fetch(
                    imgproxy_url(s.base, path) if path.startswith("/") else s.base + path[1:],
                    method,
                    **headers,
                )
                for s in servers
            )
            assert comparable(first) == comparable(second), (path, method, headers)
            return first

        miss = compare(control)
        assert miss.status == 200
        same_results_mtime()
        hit = compare(control)
        assert "last-modified" in hit.headers
        assert compare(control, **{"If-None-Match": hit.headers["etag"]}).status == 304
        assert compare(control, Range="bytes=0-99").status == 206
        assert compare(control, "HEAD").body == b""
        assert compare(control, "POST").status == 405
        assert compare("/rs:fit:200:200/plain/photos/broken.jpg@jpeg").status == 422
        assert compare("/rs:fit:200:200/plain/photos/missing.jpg@jpeg").status == 404
        assert compare("/rs:fit:200:200/nope:1/plain/photos/landscape.jpg@jpeg").status == 400
        assert compare("~/img/" + "A" * 43 + control).status == 403
        assert compare("~/img/health").status == 200
