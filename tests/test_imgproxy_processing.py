"""imgproxy's own output-size tests (``processing/processing_test.go``), ported.

Each table is one imgproxy test function, named in the comment above it, with
imgproxy's expected sizes unchanged. imgproxy runs them on its ``test2.jpg``, a
200x100 JPEG; here the source is drawn at that size. Options are written as
URL text and parsed, so a case for an option that does not exist yet fails
today in the parser and passes the day the option lands. Every case is checked
against :func:`plan_geometry`; a representative subset also goes through a
real render, to confirm the produced image has that size.

``extend_aspect_ratio``'s cases are in their own group at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.options import Options, parse_path
from django_oximg.core.options.geometry import plan_geometry
from django_oximg.core.options.signing import URLSigner, pairs_from_hex
from django_oximg.core.serving.handler import Thumbnailer
from tests import images
from tests.constants import DOCS_KEY, DOCS_SALT, MIB

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: The size of imgproxy's test2.jpg, which every case here resizes.
SOURCE_WIDTH, SOURCE_HEIGHT = 200, 100

#: imgproxy's test config has no result-size limit below this.
NO_LIMIT = 8192


def options_for(url_options: str) -> Options:
    return parse_path(f"/{url_options}/plain/source.jpg").options


def planned_size(url_options: str, limit: int = NO_LIMIT) -> tuple[int, int]:
    plan = plan_geometry(
        SOURCE_WIDTH, SOURCE_HEIGHT, options_for(url_options), max_result_dimension=limit
    )
    return plan.width, plan.height


def size_cases(prefix: str, table: Iterable[tuple[int, int, int, int]]) -> list[Any]:
    """``(width, height, out_width, out_height)`` rows as ``(url options, out size)`` params."""
    return [
        pytest.param(f"{prefix}/w:{w}/h:{h}", (out_w, out_h), id=f"{prefix}/{w}x{h}")
        for w, h, out_w, out_h in table
    ]


# -- TestResizeToFit* / TestResizeToFill* / TestResizeToFillDown* ----------------------

# TestResizeToFit
FIT = [
    (50, 50, 50, 25), (50, 20, 40, 20), (20, 50, 20, 10), (300, 300, 200, 100),
    (300, 50, 100, 50), (100, 300, 100, 50), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip
# TestResizeToFitEnlarge
FIT_ENLARGE = [
    (50, 50, 50, 25), (50, 20, 40, 20), (20, 50, 20, 10), (300, 300, 300, 150),
    (300, 125, 250, 125), (250, 300, 250, 125), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 400, 200), (300, 0, 300, 150),
]  # fmt: skip
# TestResizeToFitExtend
FIT_EXTEND = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 300, 300),
    (300, 125, 300, 125), (250, 300, 250, 300), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 200), (300, 0, 300, 100),
]  # fmt: skip
# TestResizeToFill
FILL = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 200, 100),
    (300, 50, 200, 50), (100, 300, 100, 100), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip
# TestResizeToFillEnlarge and TestResizeToFillDownEnlarge (the same table)
FILL_ENLARGE = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 300, 300),
    (300, 125, 300, 125), (250, 300, 250, 300), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 400, 200), (300, 0, 300, 150),
]  # fmt: skip
# TestResizeToFillExtend and TestResizeToFillDownExtend (the same table)
FILL_EXTEND = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 300, 300),
    (300, 125, 300, 125), (250, 300, 250, 300), (300, 50, 300, 50), (100, 300, 100, 300),
    (0, 50, 100, 50), (50, 0, 50, 25), (0, 200, 200, 200), (300, 0, 300, 100),
]  # fmt: skip
# TestResizeToFillDown
FILL_DOWN = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 100, 100),
    (300, 125, 200, 83), (250, 300, 83, 100), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip

RESIZE_CASES = [
    *size_cases("rt:fit", FIT),  # TestResizeToFit
    *size_cases("rt:fit/el:1", FIT_ENLARGE),  # TestResizeToFitEnlarge
    *size_cases("rt:fit/ex:1:ce", FIT_EXTEND),  # TestResizeToFitExtend
    *size_cases("rt:fill", FILL),  # TestResizeToFill
    *size_cases("rt:fill/el:1", FILL_ENLARGE),  # TestResizeToFillEnlarge
    *size_cases("rt:fill/ex:1:ce", FILL_EXTEND),  # TestResizeToFillExtend
    *size_cases("rt:fill-down", FILL_DOWN),  # TestResizeToFillDown
    *size_cases("rt:fill-down/el:1", FILL_ENLARGE),  # TestResizeToFillDownEnlarge
    *size_cases("rt:fill-down/ex:1:ce", FILL_EXTEND),  # TestResizeToFillDownExtend
]


@pytest.mark.parametrize(("url_options", "expected"), RESIZE_CASES)
def test_resize_sizes(url_options: str, expected: tuple[int, int]) -> None:
    # TestResizeToFit, ...Enlarge, ...Extend; TestResizeToFill*, TestResizeToFillDown*.
    assert planned_size(url_options) == expected


# -- TestResultSizeLimit ------------------------------------------------------------

PADDING = "pd:100:200:300:400"

# TestResultSizeLimit: (limit, url options, out width, out height). imgproxy's
# max_result_dimension is OXIMG["MAX_RESULT_DIMENSION"] here.
RESULT_SIZE_LIMIT = [
    (1000, "rt:fit/w:100/h:100", 100, 50),
    (50, "rt:fit/w:100/h:100", 50, 25),
    (50, "rt:fit/w:0/h:0", 50, 25),
    (100, "rt:fit/w:0/h:100", 100, 50),
    (50, "rt:fit/w:150/h:0", 50, 25),
    (100, "rt:fit/w:1000/h:1000", 100, 50),
    (100, "rt:fit/w:1000/h:1000/el:1", 100, 50),
    (100, "rt:fit/w:1000/h:2000/ex:1", 50, 100),
    (100, "rt:fit/w:100/h:150/rot:90", 50, 100),
    (100, "rt:fit/w:0/h:0/rot:90", 50, 100),
    (200, f"rt:fit/w:100/h:100/{PADDING}", 200, 129),
    (1000, "rt:fill/w:100/h:100", 100, 100),
    (50, "rt:fill/w:100/h:100", 50, 50),
    (50, "rt:fill/w:1000/h:50", 50, 13),
    (50, "rt:fill/w:100/h:1000", 50, 50),
    (50, "rt:fill/w:0/h:0", 50, 25),
    (100, "rt:fill/w:0/h:100", 100, 50),
    (50, "rt:fill/w:150/h:0", 50, 25),
    (100, "rt:fill/w:1000/h:1000", 100, 50),
    (100, "rt:fill/w:1000/h:1000/el:1", 100, 100),
    (100, "rt:fill/w:1000/h:2000/ex:1", 50, 100),
    (100, "rt:fill/w:100/h:150/rot:90", 67, 100),
    (100, "rt:fill/w:0/h:0/rot:90", 50, 100),
    (200, f"rt:fill/w:100/h:100/{PADDING}", 200, 144),
    (1000, "rt:fill-down/w:100/h:100", 100, 100),
    (50, "rt:fill-down/w:100/h:100", 50, 50),
    (50, "rt:fill-down/w:1000/h:50", 50, 3),
    (50, "rt:fill-down/w:100/h:1000", 5, 50),
    (50, "rt:fill-down/w:0/h:0", 50, 25),
    (100, "rt:fill-down/w:0/h:100", 100, 50),
    (50, "rt:fill-down/w:150/h:0", 50, 25),
    (100, "rt:fill-down/w:1000/h:1000", 100, 100),
    (100, "rt:fill-down/w:1000/h:1000/el:1", 100, 100),
    (100, "rt:fill-down/w:1000/h:2000/ex:1", 50, 100),
    (100, "rt:fill-down/w:1000/h:1500/rot:90", 67, 100),
    (100, "rt:fill-down/w:0/h:0/rot:90", 50, 100),
    (200, f"rt:fill-down/w:100/h:100/{PADDING}", 200, 144),
    (200, f"rt:fill-down/w:1000/h:1000/{PADDING}", 200, 144),
]


@pytest.mark.parametrize(
    ("limit", "url_options", "expected"),
    [
        pytest.param(limit, url, (w, h), id=f"{url}@{limit}")
        for limit, url, w, h in RESULT_SIZE_LIMIT
    ],
)
def test_result_size_limit(limit: int, url_options: str, expected: tuple[int, int]) -> None:
    # TestResultSizeLimit
    assert planned_size(url_options, limit) == expected


@pytest.mark.parametrize("configured", [NO_LIMIT, 0], ids=["configured", "no-configured-limit"])
@pytest.mark.parametrize(
    ("limit", "url_options", "expected"),
    [
        pytest.param(limit, url, (w, h), id=f"{url}@{limit}")
        for limit, url, w, h in RESULT_SIZE_LIMIT
    ],
)
def test_result_size_limit_from_the_url(
    configured: int, limit: int, url_options: str, expected: tuple[int, int]
) -> None:
    # TestResultSizeLimit with the limit in the URL (``mrd``, imgproxy's
    # ``max_result_dimension`` option) under a higher configured limit, or none.
    assert planned_size(f"{url_options}/mrd:{limit}", configured) == expected


def test_the_url_never_raises_the_configured_result_limit() -> None:
    assert planned_size("rt:fit/w:1000/h:1000/el:1/mrd:400", 100) == (100, 50)
    assert planned_size("rt:fit/w:1000/h:1000/el:1/mrd:0", 100) == (100, 50)


# -- the same sizes through a real render -------------------------------------------

#: A representative subset: each resizing type with and without enlarge and
#: extend, rounding cases (83 px), rotation, padding and the result limit.
RENDERED = [
    (NO_LIMIT, "rt:fit/w:50/h:20", 40, 20),  # TestResizeToFit
    (NO_LIMIT, "rt:fit/el:1/w:0/h:200", 400, 200),  # TestResizeToFitEnlarge
    (NO_LIMIT, "rt:fit/ex:1:ce/w:300/h:125", 300, 125),  # TestResizeToFitExtend
    (NO_LIMIT, "rt:fill/w:100/h:300", 100, 100),  # TestResizeToFill
    (NO_LIMIT, "rt:fill/el:1/w:250/h:300", 250, 300),  # TestResizeToFillEnlarge
    (NO_LIMIT, "rt:fill/ex:1:ce/w:100/h:300", 100, 300),  # TestResizeToFillExtend
    (NO_LIMIT, "rt:fill-down/w:300/h:125", 200, 83),  # TestResizeToFillDown
    (NO_LIMIT, "rt:fill-down/w:250/h:300", 83, 100),  # TestResizeToFillDown
    (NO_LIMIT, "rt:fill-down/ex:1:ce/w:0/h:200", 200, 200),  # TestResizeToFillDownExtend
    (50, "rt:fill/w:1000/h:50", 50, 13),  # TestResultSizeLimit
    (50, "rt:fill-down/w:100/h:1000", 5, 50),  # TestResultSizeLimit
    (100, "rt:fill/w:100/h:150/rot:90", 67, 100),  # TestResultSizeLimit
    (200, f"rt:fill-down/w:1000/h:1000/{PADDING}", 200, 144),  # TestResultSizeLimit
]


@pytest.fixture(scope="module")
def source_jpeg() -> bytes:
    return images.jpeg(SOURCE_WIDTH, SOURCE_HEIGHT)


@pytest.mark.parametrize(
    ("limit", "url_options", "expected"),
    [pytest.param(limit, url, (w, h), id=f"{url}@{limit}") for limit, url, w, h in RENDERED],
)
def test_rendered_size(
    source_jpeg: bytes, limit: int, url_options: str, expected: tuple[int, int]
) -> None:
    settings = pipeline.RenderSettings(max_result_dimension=limit)
    result = pipeline.render(source_jpeg, options_for(url_options), "png", settings)
    image = pyvips.Image.new_from_buffer(result.data, "")
    assert (result.width, result.height) == expected
    assert (image.width, image.height) == expected


@pytest.mark.parametrize(
    ("limit", "url_options", "expected"),
    [
        pytest.param(limit, url, (w, h), id=f"{url}@{limit}")
        for limit, url, w, h in RENDERED
        if limit != NO_LIMIT
    ],
)
def test_rendered_size_with_the_limit_in_the_url(
    source_jpeg: bytes, limit: int, url_options: str, expected: tuple[int, int]
) -> None:
    settings = pipeline.RenderSettings(max_result_dimension=NO_LIMIT)
    options = options_for(f"{url_options}/mrd:{limit}")
    result = pipeline.render(source_jpeg, options, "png", settings)
    image = pyvips.Image.new_from_buffer(result.data, "")
    assert (image.width, image.height) == expected


def test_max_result_dimension_in_a_served_url(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path, source_jpeg: bytes
) -> None:
    # A served ``mrd`` URL: accepted, applied, and its own cache object.
    (source_dir / "test2.jpg").write_bytes(source_jpeg)
    signer = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))
    thumbnailer = make(workers=1, queue_size=4, budget=64 * MIB, signer=signer)
    sizes = []
    for path in (
        "/rs:fit:150:150/plain/test2.jpg@png",
        "/rs:fit:150:150/mrd:50/plain/test2.jpg@png",
    ):
        reply = thumbnailer.reply(signer.signed_path(path), "GET", {})
        assert reply.status == 200
        image = pyvips.Image.new_from_buffer(reply.body, "")
        sizes.append((image.width, image.height))
    assert sizes == [(150, 75), (50, 25)]
    assert len(list(cache_dir.rglob("*.png"))) == 2


# -- TestImageResolutionTooLarge -------------------------------------------------------


def test_image_resolution_too_large(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path, source_jpeg: bytes
) -> None:
    # TestImageResolutionTooLarge: a source over max_src_resolution is a 422.
    (source_dir / "test2.jpg").write_bytes(source_jpeg)
    signer = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))
    thumbnailer = make(
        workers=1, queue_size=4, budget=64 * MIB, signer=signer, max_src_resolution=1
    )
    reply = thumbnailer.reply(signer.signed_path("/plain/test2.jpg@png"), "GET", {})
    assert reply.status == 422
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.png"))


# -- extend_aspect_ratio ---------------------------------------------------------------

# TestResizeToFitExtendAR
FIT_EXTEND_AR = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 200, 200),
    (300, 125, 240, 100), (250, 500, 200, 400), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip
# TestResizeToFillExtendAR
FILL_EXTEND_AR = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 200, 200),
    (300, 125, 240, 100), (250, 500, 200, 400), (300, 50, 300, 50), (100, 300, 100, 300),
    (0, 50, 100, 50), (50, 0, 50, 25), (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip
# TestResizeToFillDownExtendAR
FILL_DOWN_EXTEND_AR = [
    (50, 50, 50, 50), (50, 20, 50, 20), (20, 50, 20, 50), (300, 300, 100, 100),
    (300, 125, 200, 83), (250, 300, 83, 100), (0, 50, 100, 50), (50, 0, 50, 25),
    (0, 200, 200, 100), (300, 0, 200, 100),
]  # fmt: skip


@pytest.mark.parametrize(
    ("url_options", "expected"),
    [
        *size_cases("rt:fit/exar:1:ce", FIT_EXTEND_AR),  # TestResizeToFitExtendAR
        *size_cases("rt:fill/exar:1:ce", FILL_EXTEND_AR),  # TestResizeToFillExtendAR
        # TestResizeToFillDownExtendAR
        *size_cases("rt:fill-down/exar:1:ce", FILL_DOWN_EXTEND_AR),
    ],
)
def test_resize_sizes_with_extend_aspect_ratio(url_options: str, expected: tuple[int, int]) -> None:
    assert planned_size(url_options) == expected


@pytest.mark.parametrize(
    ("limit", "url_options", "expected"),
    [
        pytest.param(100, f"{rt}/w:1000/h:2000/exar:1", (50, 100), id=rt)
        for rt in ("rt:fit", "rt:fill", "rt:fill-down")
    ],
)
def test_result_size_limit_with_extend_aspect_ratio(
    limit: int, url_options: str, expected: tuple[int, int]
) -> None:
    # TestResultSizeLimit, its three extendAR rows.
    assert planned_size(url_options, limit) == expected
