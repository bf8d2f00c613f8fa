"""Tests for several sizes of one source from one decode (core/pipeline/batch.py).

The promise: every size comes out byte for byte as a request's render of the
same plan makes it (so it can be stored under that request's cache key and
answered as a hit), whichever sizes share a decode and whichever are rendered
the normal way, and a size that fails leaves the others made.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidImage, ProcessingTimeout
from django_oximg.core.options import parse_path
from django_oximg.core.pipeline import batch
from tests import images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

SETTINGS = pipeline.RenderSettings()


@pytest.fixture(scope="module", autouse=True)
def configured() -> None:
    pipeline.configure(concurrency=1)


def plan_for(data: bytes, path: str, fmt: str, settings: pipeline.RenderSettings) -> pipeline.Plan:
    options = parse_path(path + "/plain/x.jpg", {}).options
    return pipeline.plan_render(pipeline.probe(data), options, fmt, settings)


def rotated_jpeg(orientation: int) -> bytes:
    image = images.photo(900, 600).copy()
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(image.jpegsave_buffer(Q=90))


#: Sizes a site declares for one field: several DCT scales, fill and fit,
#: gravity, smart crop, the high-quality mode, a rotation, other formats, and
#: options whose load is their own (crop, metadata kept, a blur on a full load).
SIZES = [
    ("/rs:fill:120:120/g:ce", "jpeg"),
    ("/rs:fill:160:120/g:no", "jpeg"),
    ("/rs:fit:300:300", "jpeg"),
    ("/rs:fill:400:300/g:sm", "jpeg"),
    ("/w:640", "webp"),
    ("/w:700/qm:high", "jpeg"),
    ("/w:250/rot:90", "png"),
    ("/w:200/bl:2/sh:1/q:60", "jpeg"),
    ("/c:300:200/w:150", "jpeg"),
    ("/w:300/sm:0", "jpeg"),
    ("/w:100", "avif"),
]


@pytest.mark.parametrize("source", ["photo", "exif-6", "grey", "credited"])
@pytest.mark.parametrize("encoder", ["pillow", "libvips"])
def test_every_size_is_byte_for_byte_the_requests_render(source: str, encoder: str) -> None:
    data = {
        "photo": lambda: images.jpeg(1500, 1000),
        "exif-6": lambda: rotated_jpeg(6),
        "grey": lambda: bytes(images.photo(800, 800)[0].jpegsave_buffer(Q=85)),
        "credited": lambda: images.credited_jpeg(1000, 700),
    }[source]()
    settings = dataclasses.replace(SETTINGS, encoder=encoder)  # type: ignore[arg-type]
    sizes = [*SIZES, ("/w:200/kcr:1", "jpeg")] if source == "credited" else SIZES
    plans = {path: plan_for(data, path, fmt, settings) for path, fmt in sizes}
    made, stats = batch.render_batch(data, plans, settings, timeout=30)
    assert list(made) == list(plans)
    for path, fmt in sizes:
        plan, result = plans[path], made[path]
        expected = pipeline.render(data, plan.options, fmt, settings, plan=plan)
        assert isinstance(result, pipeline.Rendered), (path, result)
        assert (result.width, result.height) == (plan.geometry.width, plan.geometry.height)
        assert result == expected, path
    assert stats.shared + stats.separate == len(sizes)
    # crop, kept metadata and AVIF (isolated or not) may not share; the rest do,
    # in fewer decodes than sizes.
    assert stats.separate >= 2
    assert 1 <= stats.shared_decodes < stats.shared


def test_sizes_of_one_scale_share_one_decode() -> None:
    data = images.jpeg(1600, 1200)
    plans = {
        path: plan_for(data, path, "jpeg", SETTINGS)
        for path in ("/w:300", "/rs:fill:320:240/g:ce", "/w:280/q:50", "/rs:fill:300:300/g:sm")
    }
    keys = {batch.decode_key(plan, SETTINGS) for plan in plans.values()}
    assert len(keys) == 1
    _, stats = batch.render_batch(data, plans, SETTINGS, timeout=30)
    assert stats == batch.BatchStats(shared_decodes=1, shared=4, separate=0)


def test_shared_decodes_names_the_sizes_of_each_scale_and_those_alone_by_key() -> None:
    data = images.jpeg(1600, 1200)
    paths = ["/w:300", "/w:1200", "/c:300:200/w:150", "/w:280/q:50", "/w:1000"]
    plans = {path: plan_for(data, path, "jpeg", SETTINGS) for path in paths}
    groups, alone = batch.shared_decodes(plans, SETTINGS)
    assert sorted(groups.values()) == [["/w:1200", "/w:1000"], ["/w:300", "/w:280/q:50"]]
    assert alone == ["/c:300:200/w:150"]


def test_the_libvips_decoder_and_other_formats_render_each_size_the_normal_way() -> None:
    png = images.png_with_alpha(600, 400)
    plans = {path: plan_for(png, path, "png", SETTINGS) for path in ("/w:100", "/w:200")}
    made, stats = batch.render_batch(png, plans, SETTINGS, timeout=30)
    assert stats == batch.BatchStats(shared_decodes=0, shared=0, separate=2)
    widths = {path: r.width for path, r in made.items() if isinstance(r, pipeline.Rendered)}
    assert widths == {"/w:100": 100, "/w:200": 200}
    settings = pipeline.RenderSettings(jpeg_decoder="libvips")
    data = images.jpeg(800, 600)
    assert batch.decode_key(plan_for(data, "/w:100", "jpeg", settings), settings) is None


def test_a_failing_size_is_its_error_and_the_others_are_made() -> None:
    data = images.jpeg(1200, 800)
    plans = {path: plan_for(data, path, "jpeg", SETTINGS) for path in ("/w:100", "/w:200")}
    now = time.monotonic()
    clock = iter([now, now - 100])  # the second size's deadline has passed when it starts
    made, _ = batch.render_batch(data, plans, SETTINGS, timeout=30, clock=lambda: next(clock))
    assert isinstance(made["/w:100"], pipeline.Rendered)
    assert isinstance(made["/w:200"], ProcessingTimeout)


def test_a_truncated_source_fails_every_size_without_raising() -> None:
    data = images.jpeg(1200, 800)
    plans = {path: plan_for(data, path, "jpeg", SETTINGS) for path in ("/w:100", "/c:200:200/w:50")}
    made, _ = batch.render_batch(data[: len(data) // 2], plans, SETTINGS, timeout=30)
    assert set(made) == set(plans)
    assert all(isinstance(result, InvalidImage) for result in made.values()), made
