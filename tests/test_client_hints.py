"""Client hints: ``DPR`` and ``Width`` as a URL's defaults, in the key and in ``Vary``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pyvips

from django_oximg import runtime
from django_oximg.core.options import Options, parse_path
from django_oximg.core.serving.client_hints import ClientHints, read_hints, with_hints
from django_oximg.core.serving.handler import Thumbnailer
from tests import images
from tests.constants import MIB, SIGNER
from tests.shells import SHELLS, through_middleware

DPR = ("Sec-CH-DPR", "DPR")
WIDTH = ("Sec-CH-Width", "Width")


@pytest.mark.parametrize(
    ("path", "hints", "expected", "vary"),
    [
        ("/plain/a", ClientHints(), Options(), DPR + WIDTH),
        ("/plain/a", ClientHints(dpr=2), Options(dpr=2), DPR + WIDTH),
        # 300 physical pixels at 1.5 are 200 CSS pixels: the ladder's 224.
        ("/plain/a", ClientHints(width=300, dpr=1.5), Options(width=224, dpr=1.5), DPR + WIDTH),
        # The URL's dpr wins, but the width is still the hint over the DPR hint (150: 160).
        ("/dpr:3/plain/a", ClientHints(width=300, dpr=2), Options(width=160, dpr=3), DPR + WIDTH),
        ("/w:100/plain/a", ClientHints(width=300, dpr=2), Options(width=100, dpr=2), DPR),
        ("/w:0/dpr:1/plain/a", ClientHints(width=300, dpr=2), Options(), ()),
        # Presets (the default one too) count as the URL's own options.
        ("/pr:p/plain/a", ClientHints(width=300), Options(width=40), DPR),
        ("/raw:1/plain/a", ClientHints(width=300, dpr=2), Options(raw=True), ()),
    ],
)
def test_hints_fill_in_what_the_url_leaves_open(
    path: str, hints: ClientHints, expected: Options, vary: tuple[str, ...]
) -> None:
    assert with_hints(parse_path(path, {"p": "w:40"}), hints) == (expected, vary)


@pytest.mark.parametrize(
    ("hints", "expected"),
    [
        (ClientHints(dpr=0.5), Options(dpr=1)),
        (ClientHints(dpr=1.25), Options(dpr=1.5)),
        (ClientHints(dpr=2.625), Options(dpr=3)),
        (ClientHints(dpr=4.5), Options(dpr=6)),
        (ClientHints(dpr=8), Options(dpr=8)),
        (ClientHints(width=1), Options(width=16)),
        (ClientHints(width=320), Options(width=320)),
        (ClientHints(width=321), Options(width=384)),
        (ClientHints(width=1025), Options(width=1280)),
        (ClientHints(width=5000), Options(width=5120)),
        (ClientHints(width=448, dpr=1.4), Options(width=320, dpr=1.5)),  # 448 / 1.4 is 320
        (ClientHints(width=8192), Options(width=8192)),
        # No result is wider than MAX_RESULT_DIMENSION (8192 here).
        (ClientHints(width=8193), Options(width=8192)),
        (ClientHints(width=100_000), Options(width=8192)),
        (ClientHints(width=100_000, dpr=8), Options(width=8192, dpr=8)),
    ],
)
def test_hints_are_rounded_up_to_fixed_steps(hints: ClientHints, expected: Options) -> None:
    """Never smaller than asked: the DPR to its next step, the CSS width to the next rung."""
    options, _ = with_hints(parse_path("/plain/a"), hints, max_result_dimension=8192)
    assert options == expected
    if hints.width:
        assert options.width * (options.dpr or 1) >= min(hints.width, 8192)


def test_a_urls_max_result_dimension_caps_the_hinted_width() -> None:
    # mrd:600 makes no result wider than 600: a wider hint is one answer, not many.
    parsed = parse_path("/mrd:600/plain/a")
    widths = {with_hints(parsed, ClientHints(width=w), 8192)[0].width for w in (700, 1500, 4000)}
    assert widths == {with_hints(parsed, ClientHints(width=600), 8192)[0].width}
    assert (
        with_hints(parse_path("/mrd:9000/plain/a"), ClientHints(width=9000), 8192)[0].width == 8192
    )


def test_the_answers_one_url_can_have_through_hints_are_few() -> None:
    """Every Width and a fine grid of DPRs give at most 37 widths and 7 DPRs (304 with none)."""
    parsed = parse_path("/plain/a")
    widths = {with_hints(parsed, ClientHints(width=w), 8192)[0].width for w in range(1, 100_001)}
    dprs = {with_hints(parsed, ClientHints(dpr=n / 1000), 8192)[0].dpr for n in range(1, 8001)}
    assert len(widths) == 37 and max(widths) == 8192
    assert dprs == {1, 1.5, 2, 3, 4, 6, 8}


def test_the_cache_keys_one_url_can_have_through_hints_are_at_most_304(
    thumbnailer: Thumbnailer,
) -> None:
    """Keys through the real job reader, over DPRs every 0.05 and widths 7% apart (23667 pairs)."""
    signed = SIGNER.signed_path("/plain/a.jpg@png")
    widths = [0, *sorted({round(1.07**k) for k in range(171)} | {100_000})]
    dprs = [0.0, *(n / 20 for n in range(1, 161))]
    keys = {
        thumbnailer.job_for(signed, "", ClientHints(dpr, width)).key
        for dpr in dprs
        for width in widths
    }
    assert len(widths) * len(dprs) == 23_667
    assert len(keys) <= (7 + 1) * (37 + 1) == 304


def test_a_flood_of_width_hints_is_one_render_and_one_cache_file(
    thumbnailer: Thumbnailer, cache_dir: Path
) -> None:
    """25 Width values on one signed URL fall on one rung (5120): one answer, not 25."""
    etags = {answer(thumbnailer, "/plain/a.jpg", HTTP_WIDTH=str(w))[0] for w in range(5000, 5025)}
    assert len(etags) == 1
    assert thumbnailer.renders == 1
    assert len([path for path in cache_dir.rglob("*") if path.is_file()]) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_DPR": "0"},
        {"HTTP_DPR": "inf"},
        {"HTTP_DPR": "nan"},
        {"HTTP_DPR": "1e999"},
        {"HTTP_DPR": " 2"},
        {"HTTP_DPR": "2_0"},
        {"HTTP_WIDTH": "0"},
        {"HTTP_WIDTH": "1.5"},
        {"HTTP_WIDTH": "100001"},
        {"HTTP_WIDTH": "١٢"},
        {"HTTP_WIDTH": ""},
    ],
)
def test_values_imgproxy_would_not_take_are_no_hints(headers: dict[str, str]) -> None:
    assert read_hints(headers) == ClientHints()


def test_a_bad_standard_hint_falls_back_to_the_older_header() -> None:
    headers = {"HTTP_SEC_CH_DPR": "x", "HTTP_DPR": "2", "HTTP_SEC_CH_WIDTH": "0", "HTTP_WIDTH": "9"}
    assert read_hints(headers) == ClientHints(dpr=2.0, width=9)


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    (tmp_path / "a.jpg").write_bytes(images.jpeg(640, 480))
    return tmp_path


@pytest.fixture
def make(make: Callable[..., Thumbnailer]) -> Callable[..., Thumbnailer]:
    """conftest's ``make`` (and so ``thumbnailer``), with client hints on."""
    return functools.partial(
        make,
        workers=1,
        queue_size=8,
        queue_timeout=10.0,
        budget=256 * MIB,
        client_hints=True,
        auto_format=False,
    )


def answer(thumbnailer: Thumbnailer, path: str, **headers: str) -> tuple[str, str]:
    """The answer's ETag (its cache object) and Vary."""
    signed = SIGNER.signed_path(path)
    reply = thumbnailer.reply(signed, "GET", headers)
    if reply.file is not None:
        reply.file.close()
    assert reply.status == 200
    found = dict(reply.headers)
    return found["ETag"], found.get("Vary", "")


def test_different_hints_are_different_cache_objects(thumbnailer: Thumbnailer) -> None:
    one = answer(thumbnailer, "/plain/a.jpg", HTTP_WIDTH="100")
    two = answer(thumbnailer, "/plain/a.jpg", HTTP_WIDTH="200")
    same = answer(thumbnailer, "/plain/a.jpg", HTTP_SEC_CH_WIDTH="100", HTTP_DPR="1")
    assert one[0] != two[0]
    assert one == same  # the same options: one object
    assert thumbnailer.renders == 2
    assert one[1] == "Sec-CH-DPR, DPR, Sec-CH-Width, Width"


def test_a_url_that_sets_width_and_dpr_varies_on_no_hint(thumbnailer: Thumbnailer) -> None:
    first = answer(thumbnailer, "/w:100/dpr:1/plain/a.jpg", HTTP_WIDTH="300", HTTP_DPR="2")
    second = answer(thumbnailer, "/w:100/dpr:1/plain/a.jpg")
    assert first == second
    assert first[1] == ""


# -- through the view and the middleware ----------------------------------------------------

#: One source and two URLs a hint completes: a fixed format, and a negotiated one
#: (whose hit-cache entries are kept per ``Accept`` class).
HINTED = ("/plain/photos/landscape.jpg@png", "/plain/photos/landscape.jpg")


def decoded_size(body: bytes) -> tuple[int, int]:
    image = pyvips.Image.new_from_buffer(body, "")
    return image.width, image.height


@pytest.mark.parametrize("shell", sorted(SHELLS))
@pytest.mark.parametrize("path", HINTED, ids=["fixed-format", "negotiated"])
def test_a_hinted_answer_is_never_served_to_another_hint(
    media: Path, settings: Any, shell: str, path: str
) -> None:
    """The second request for a hint is answered from the cached file, where the
    hit cache would learn it; the next one with another hint must be its own."""
    settings.OXIMG = {**settings.OXIMG, "CLIENT_HINTS": True}
    url = "/img" + runtime.get_signer().signed_path(path)
    for hints, size in [  # widths on the ladder: 100 and 200 go to 112 and 224
        ({"HTTP_WIDTH": "100"}, (112, 84)),
        ({"HTTP_WIDTH": "100"}, (112, 84)),
        ({"HTTP_WIDTH": "200"}, (224, 168)),
        ({"HTTP_WIDTH": "200"}, (224, 168)),
        ({"HTTP_SEC_CH_WIDTH": "100"}, (112, 84)),
        # Width counts physical pixels: 50 CSS pixels, 56 on the ladder, at DPR 2.
        ({"HTTP_WIDTH": "100", "HTTP_DPR": "2"}, (112, 84)),
        ({}, (640, 480)),
    ]:
        status, headers, body = SHELLS[shell](url, **hints)
        assert (status, decoded_size(body)) == (200, size), hints
        assert "Width" in headers["vary"]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_dpr_answer_is_never_served_to_another_dpr(
    media: Path, settings: Any, shell: str
) -> None:
    settings.OXIMG = {**settings.OXIMG, "CLIENT_HINTS": True}
    url = "/img" + runtime.get_signer().signed_path("/w:100/plain/photos/landscape.jpg@png")
    for dpr, size in [("1", (100, 75)), ("1", (100, 75)), ("2", (200, 150)), ("1", (100, 75))]:
        status, headers, body = SHELLS[shell](url, HTTP_SEC_CH_DPR=dpr)
        assert (status, decoded_size(body)) == (200, size), dpr
        assert headers["vary"] == "Sec-CH-DPR, DPR"


def test_an_answer_no_hint_changes_is_still_kept_in_the_hit_cache(
    media: Path, settings: Any
) -> None:
    """The hit cache is on in these tests: what the tests above prove is not vacuous."""
    settings.OXIMG = {**settings.OXIMG, "CLIENT_HINTS": True}
    signed = runtime.get_signer().signed_path("/w:100/dpr:1/plain/photos/landscape.jpg@png")
    for _ in range(2):  # a miss, then an answer from the cached file
        status, headers, _body = through_middleware("/img" + signed, HTTP_WIDTH="300")
        assert (status, "vary" in headers) == (200, False)
    assert runtime.get_thumbnailer().hits.lookup(signed, "") is not None
