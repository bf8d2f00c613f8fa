"""What a negotiated answer says, under races and across settings.

A thumbnail is cached for a year by every CDN and browser (``immutable``), so
the headers of each answer must be right for its own URL: an answer whose
format was chosen from ``Accept`` says ``Vary: Accept``, one whose URL names
its format does not, even when both requests share one render (single-flight)
or one cache object; likewise for the client hints an answer could depend on.
And two requests whose bytes differ never share a cache key, whatever the
options, the ``Accept`` header, the client hints and the output settings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_oximg import conf, runtime
from django_oximg.core import pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.options import parse_path
from django_oximg.core.serving.client_hints import NO_HINTS, read_hints
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.negotiation import negotiate, output_format
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from tests import images, shells
from tests.constants import JOIN_TIMEOUT, KEY, SALT
from tests.shells import Answer

NEGOTIATED = "/rs:fit:120:120/plain/photos/landscape.jpg"

#: Format -> an Accept header that makes the negotiated URL come out in it.
ACCEPT_FOR = {
    "avif": "image/avif,image/webp,*/*",
    "webp": "image/webp,*/*",
    "jpeg": "image/png,*/*",
}

#: The two ways a URL names its format: an extension, or the ``f`` option.
SPELLINGS = {
    "extension": lambda fmt: f"{NEGOTIATED}@{fmt}",
    "option": lambda fmt: f"/f:{fmt}{NEGOTIATED}",
}


def formats() -> list[str]:
    return [fmt for fmt in ACCEPT_FOR if pipeline.saver_available(fmt)]


# -- the choice itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("image/avif,image/webp,*/*", "avif"),
        ("image/webp,*/*;q=0.8", "webp"),
        ("image/avif;q=0,image/webp", "webp"),
        ("*/*", "jpeg"),
        ("", "jpeg"),
        ("image/*", "jpeg"),
    ],
)
def test_negotiate_prefers_avif_then_webp_and_ignores_wildcards(accept: str, expected: str) -> None:
    assert negotiate(accept, "jpeg") == expected


@pytest.mark.parametrize(
    ("path", "accept", "auto_format", "expected"),
    [
        # The URL's format wins, and nothing was negotiated.
        ("/f:png/plain/a.jpg", "image/avif,image/webp", True, ("png", False)),
        # Negotiated: AVIF first, then WebP, then the name's format.
        ("/plain/a.png", "image/avif,image/webp", True, ("avif", True)),
        ("/plain/a.png", "image/webp", True, ("webp", True)),
        ("/plain/a.png", "*/*", True, ("png", True)),
        ("/plain/a.tiff", "*/*", True, ("jpeg", True)),
        # A name that may hold an animation is never made AVIF.
        ("/plain/a.gif", "image/avif,image/webp", True, ("webp", True)),
        ("/plain/a.webp", "image/avif", True, ("jpeg", True)),
        # ``raw`` and ``skip_processing`` of the name's format are the source itself.
        ("/raw:1/plain/a.png", "image/avif", True, ("png", False)),
        ("/skp:png/plain/a.png", "image/avif", True, ("png", False)),
        ("/skp:jpg/plain/a.png", "image/avif", True, ("avif", True)),
        # AUTO_FORMAT off: the name decides.
        ("/plain/a.png", "image/avif,image/webp", False, ("png", False)),
    ],
)
def test_the_output_format_is_the_urls_or_negotiated_from_the_name_and_accept(
    path: str, accept: str, auto_format: bool, expected: tuple[str, bool]
) -> None:
    parsed = parse_path(path)
    assert output_format(parsed.options, parsed.source, accept, auto_format) == expected


# -- two shells -------------------------------------------------------------------------


def signed_shell(send: Callable[..., Answer]) -> Callable[..., Answer]:
    """``send`` taking an unsigned path and an Accept header, as these tests ask."""

    def ask(path: str, accept: str, **headers: str) -> Answer:
        url = "/img" + runtime.get_signer().signed_path(path)
        return send(url, HTTP_ACCEPT=accept, **headers)

    return ask


SHELLS = {name: signed_shell(send) for name, send in shells.SHELLS.items()}


@pytest.fixture
def held_render(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Renders wait for the yielded event, so a second request joins the first's flight."""
    gate = threading.Event()
    render = pipeline.render

    def held(*args: Any, **kwargs: Any) -> pipeline.Rendered:
        assert gate.wait(JOIN_TIMEOUT)
        return render(*args, **kwargs)

    monkeypatch.setattr(pipeline, "render", held)
    yield gate
    gate.set()


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "the second request never joined the flight"
        time.sleep(0.002)


def race(ask: Callable[[str], None], order: list[str], held_render: threading.Event) -> None:
    """Send ``order[0]``, then ``order[1]`` once it has joined the first's flight; then render."""
    flights = runtime.get_thumbnailer().flights
    first = threading.Thread(target=ask, args=(order[0],))
    first.start()
    wait_until(lambda: flights.stats().in_flight == 1)
    second = threading.Thread(target=ask, args=(order[1],))
    second.start()
    wait_until(lambda: flights.stats().coalesced == 1)
    held_render.set()
    for thread in (first, second):
        thread.join(JOIN_TIMEOUT)


def assert_own_headers(answer: Answer, fmt: str, negotiated: bool) -> None:
    status, headers, body = answer
    assert status == 200
    assert headers["content-type"] == f"image/{fmt}"
    assert headers["x-content-type-options"] == "nosniff"
    if negotiated:
        assert "Accept" in headers.get("vary", "")
    else:
        assert "vary" not in headers
    assert body


@pytest.mark.parametrize("leader", ["explicit", "negotiated"])
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("fmt", formats())
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_shared_render_gives_each_request_its_own_vary(
    media: Path,
    held_render: threading.Event,
    shell: str,
    fmt: str,
    spelling: str,
    leader: str,
) -> None:
    """Deterministic race: the second request is in the first's flight before it renders."""
    send = SHELLS[shell]
    requests = {
        "explicit": (SPELLINGS[spelling](fmt), "*/*"),
        "negotiated": (NEGOTIATED, ACCEPT_FOR[fmt]),
    }
    order = [leader, "negotiated" if leader == "explicit" else "explicit"]
    answers: dict[str, Answer] = {}

    def ask(name: str) -> None:
        answers[name] = send(*requests[name])

    race(ask, order, held_render)
    assert runtime.get_thumbnailer().renders == 1  # one render, shared
    assert_own_headers(answers["explicit"], fmt, negotiated=False)
    assert_own_headers(answers["negotiated"], fmt, negotiated=True)
    assert answers["explicit"][2] == answers["negotiated"][2]


@pytest.mark.parametrize("leader", ["pinned", "hinted"])
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_shared_render_gives_each_request_its_own_hint_vary(
    media: Path, settings: Any, held_render: threading.Event, shell: str, leader: str
) -> None:
    """One URL sets dpr, one leaves it to a hint that was not sent: one render, two Varys."""
    settings.OXIMG = {**settings.OXIMG, "CLIENT_HINTS": True}
    send = SHELLS[shell]
    requests = {
        "pinned": ("/rs:fit:120:120/dpr:1/plain/photos/landscape.jpg@webp", {}),
        "hinted": ("/rs:fit:120:120/plain/photos/landscape.jpg@webp", {"HTTP_WIDTH": "80"}),
    }
    order = [leader, "hinted" if leader == "pinned" else "pinned"]
    answers: dict[str, Answer] = {}

    def ask(name: str) -> None:
        path, headers = requests[name]
        answers[name] = send(path, "*/*", **headers)

    race(ask, order, held_render)
    assert runtime.get_thumbnailer().renders == 1
    assert "vary" not in answers["pinned"][1]
    assert answers["hinted"][1]["vary"] == "Sec-CH-DPR, DPR"  # Width: the URL sets it
    assert answers["pinned"][2] == answers["hinted"][2]


@pytest.mark.parametrize("fmt", formats())
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_cache_hit_gives_each_request_its_own_vary(media: Path, shell: str, fmt: str) -> None:
    send = SHELLS[shell]
    explicit = send(SPELLINGS["extension"](fmt), "*/*")
    negotiated = send(NEGOTIATED, ACCEPT_FOR[fmt])
    again = send(SPELLINGS["extension"](fmt), ACCEPT_FOR[fmt])
    assert runtime.get_thumbnailer().renders == 1  # one object for all three
    assert_own_headers(explicit, fmt, negotiated=False)
    assert_own_headers(negotiated, fmt, negotiated=True)
    assert_own_headers(again, fmt, negotiated=False)


# -- the property: different bytes, different keys ---------------------------------------

#: Output settings to vary, each with two values (index 0 is the default's).
SETTING_VALUES: dict[str, tuple[Any, Any]] = {
    "QUALITY": ({"jpeg": 80, "webp": 75}, {"jpeg": 55, "webp": 40}),
    "MAX_RESULT_DIMENSION": (8192, 48),
    "JPEG_SHRINK_MARGIN": (1.0, 2.0),
    "AUTO_FORMAT": (True, False),
    "FORMAT_BEST_BY_DEFAULT": (False, True),
    "PRESETS": ({"small": "rs:fill:36:30"}, {"small": "rs:fit:36:30/q:30"}),
    "CLIENT_HINTS": (False, True),
}

OPTION_PATHS = st.lists(
    st.sampled_from(
        ["rs:fit:64:64", "rs:fill:40:50", "w:90", "pr:small", "q:30", "bl:1", "el:1", "g:sowe"]
    ),
    max_size=3,
    unique=True,
)
SOURCES = st.sampled_from(["photos/landscape.jpg", "photos/alpha.png"])
EXTENSIONS = st.sampled_from(["", "@jpeg", "@webp", "@png", "@best"])
ACCEPTS = st.sampled_from(["*/*", "image/webp,*/*", "image/avif,image/webp,*/*", ""])
HINTS = st.sampled_from(
    [
        {},
        {"HTTP_DPR": "2"},
        {"HTTP_WIDTH": "50"},
        {"HTTP_SEC_CH_WIDTH": "70", "HTTP_SEC_CH_DPR": "1.5"},
        {"HTTP_WIDTH": "100", "HTTP_DPR": "2"},  # the same width as 50 at DPR 1
    ]
)
VARIANTS = st.fixed_dictionaries({name: st.sampled_from([0, 1]) for name in SETTING_VALUES})


class World:
    """One thumbnailer per combination of output settings, each with its own cache.

    Separate caches make every request render for real: a shared cache would
    answer the second of two requests with equal keys from the first's bytes,
    and the property could not fail.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sources = root / "sources"
        (self.sources / "photos").mkdir(parents=True)
        (self.sources / "photos" / "landscape.jpg").write_bytes(images.jpeg(160, 120))
        (self.sources / "photos" / "alpha.png").write_bytes(images.png_with_alpha(96, 80))
        self.thumbnailers: dict[tuple[int, ...], Thumbnailer] = {}
        self.executor = Executor(2, 64, 30.0, 512 * 1024 * 1024)

    def thumbnailer(self, variant: dict[str, int]) -> Thumbnailer:
        index = tuple(variant[name] for name in SETTING_VALUES)
        if index not in self.thumbnailers:
            raw = {name: SETTING_VALUES[name][variant[name]] for name in SETTING_VALUES}
            settings_ = conf.build_settings({"KEY": KEY, "SALT": SALT, **raw})
            self.thumbnailers[index] = Thumbnailer(
                runtime.thumbnailer_config(settings_),
                runtime.signer(settings_),
                {"": FileSystemSourceStore(self.sources)},
                FileSystemCacheStore(self.root / ("cache-" + "".join(map(str, index)))),
                self.executor,
                limits=runtime.limits(settings_),
            )
        return self.thumbnailers[index]

    def ask(
        self, variant: dict[str, int], path: str, accept: str, hints: dict[str, str]
    ) -> tuple[str, int, Any, bytes]:
        """The request's key and its answer's status, Vary and bytes."""
        thumbnailer = self.thumbnailer(variant)
        signed = thumbnailer.signer.signed_path(path)
        read = read_hints(hints) if thumbnailer.config.client_hints else NO_HINTS
        key = thumbnailer.job_for(signed, accept, read).key
        reply = thumbnailer.reply(signed, "GET", {"HTTP_ACCEPT": accept, **hints})
        body = reply.body
        if reply.file is not None:
            with reply.file as handle:
                body = handle.read()
        return key, reply.status, dict(reply.headers).get("Vary"), body


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("negotiation"))
    yield made
    made.executor.shutdown(wait=True)


requests = st.tuples(VARIANTS, OPTION_PATHS, SOURCES, EXTENSIONS, ACCEPTS, HINTS)


def url_path(options: list[str], source: str, extension: str) -> str:
    return "".join(f"/{option}" for option in options) + f"/plain/{source}{extension}"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=requests, second=requests, same_options=st.booleans())
def test_requests_with_different_bytes_never_share_a_key(
    world: World, first: tuple[Any, ...], second: tuple[Any, ...], same_options: bool
) -> None:
    """Often the same URL under other settings, Accept headers or hints, so keys do collide."""
    if same_options:
        second = (second[0], first[1], first[2], first[3], second[4], second[5])
    answers = []
    for variant, options, source, extension, accept, hints in (first, second):
        path = url_path(options, source, extension)
        key, status, vary, body = world.ask(variant, path, accept, hints)
        assert status == 200
        auto_format = SETTING_VALUES["AUTO_FORMAT"][variant["AUTO_FORMAT"]]
        negotiating = extension in ("", "@best") and auto_format
        hinting = SETTING_VALUES["CLIENT_HINTS"][variant["CLIENT_HINTS"]]
        presets = SETTING_VALUES["PRESETS"][variant["PRESETS"]]
        width_open = "width" not in parse_path(path, presets).assigned
        assert ("Accept" in (vary or "")) is bool(negotiating)
        assert ("Sec-CH-DPR, DPR" in (vary or "")) is hinting  # no URL here sets dpr
        assert ("Sec-CH-Width, Width" in (vary or "")) is (hinting and width_open)
        answers.append((key, body))
    (key_a, body_a), (key_b, body_b) = answers
    if key_a == key_b:
        assert body_a == body_b
