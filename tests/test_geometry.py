"""Tests for the pure size planner (imgproxy's resizing arithmetic)."""

from __future__ import annotations

import pytest
import pyvips
from hypothesis import given
from hypothesis import strategies as st

from django_oximg.core import pipeline
from django_oximg.core.options import RESIZING_TYPES, Crop, Gravity, Options, parse_path
from django_oximg.core.options.geometry import (
    crop_size,
    orientation_swaps_sides,
    place,
    plan_geometry,
    round_half_up,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def size_of(width: int, height: int, options: Options, **kwargs: int) -> tuple[int, int]:
    kwargs.setdefault("max_result_dimension", 8192)
    plan = plan_geometry(width, height, options, **kwargs)
    return plan.width, plan.height


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (Options(width=500, height=500), (500, 333)),
        (Options(resizing_type="fill", width=500, height=500), (500, 500)),
        (Options(resizing_type="fill-down", width=500, height=500), (500, 500)),
        (Options(resizing_type="force", width=300, height=500), (300, 500)),
        # auto: a landscape box on a landscape source fills, a portrait box fits.
        (Options(resizing_type="auto", width=400, height=300), (400, 300)),
        (Options(resizing_type="auto", width=300, height=400), (300, 200)),
        (Options(width=1000), (1000, 667)),
        (Options(height=200), (300, 200)),
        (Options(), (2000, 1333)),
        (Options(width=250, height=250, dpr=2), (500, 333)),
        (Options(width=500, height=500, rotate=90), (333, 500)),
        (Options(width=500, height=500, rotate=270), (333, 500)),
        (Options(width=500, height=500, rotate=180), (500, 333)),
        (Options(crop=Crop(0.5, 0.5)), (1000, 667)),
        (Options(crop=Crop(400, 300), width=200), (200, 150)),
        (Options(crop=Crop(5000, 300)), (2000, 300)),
        (Options(width=500, height=500, padding=(10, 20, 30, 40)), (560, 373)),
        (Options(width=250, height=250, dpr=2, padding=(10, 0, 10, 0)), (500, 373)),
    ],
)
def test_landscape_source(options: Options, expected: tuple[int, int]) -> None:
    assert size_of(2000, 1333, options) == expected


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # No upscaling without enlarge: fit and fill keep the source size...
        (Options(width=200, height=100), (100, 100)),
        (Options(resizing_type="fill", width=200, height=100), (100, 100)),
        # ...fill-down and force keep the requested aspect ratio, scaled down.
        (Options(resizing_type="fill-down", width=200, height=100), (100, 50)),
        (Options(resizing_type="force", width=200, height=100), (100, 50)),
        (Options(width=200, height=100, enlarge=True), (100, 100)),
        (Options(resizing_type="fill", width=200, height=100, enlarge=True), (200, 100)),
        (Options(width=400, height=400, enlarge=True), (400, 400)),
        # dpr never pushes past the source size without enlarge.
        (Options(width=80, height=80, dpr=2), (100, 100)),
        (Options(width=80, height=80, dpr=3, enlarge=True), (240, 240)),
        # extend pads to the box instead.
        (Options(width=200, height=150, extend=True), (200, 150)),
        (Options(resizing_type="fill", width=200, height=150, extend=True), (200, 150)),
        (Options(width=200, extend=True), (200, 100)),
    ],
)
def test_small_source(options: Options, expected: tuple[int, int]) -> None:
    assert size_of(100, 100, options) == expected


def test_min_sizes_enlarge_past_the_box_then_crop_to_it() -> None:
    # imgproxy: rs:fit:300:300/mw:280/mh:280 on 1600x1200 -> 373x280 cropped to 300x280.
    options = Options(width=300, height=300, min_width=280, min_height=280)
    plan = plan_geometry(1600, 1200, options, max_result_dimension=8192)
    assert (plan.scaled_width, plan.scaled_height) == (373, 280)
    assert (plan.width, plan.height) == (300, 280)
    fill_down = Options(
        resizing_type="fill-down", width=200, height=200, min_width=400, min_height=400
    )
    assert size_of(1600, 1200, fill_down) == (200, 200)


def test_min_width_alone() -> None:
    assert size_of(2000, 1000, Options(height=50, min_width=300)) == (300, 50)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_swaps_only_with_auto_rotate(orientation: int) -> None:
    turned = orientation >= 5
    plan = plan_geometry(
        400, 200, Options(width=100), orientation=orientation, max_result_dimension=8192
    )
    assert (plan.source_width, plan.source_height) == ((200, 400) if turned else (400, 200))
    plain = plan_geometry(
        400,
        200,
        Options(width=100, auto_rotate=False),
        orientation=orientation,
        max_result_dimension=8192,
    )
    assert (plain.source_width, plain.source_height) == (400, 200)


def test_exif_quarter_turn_and_rotate_cancel() -> None:
    assert orientation_swaps_sides(6, True, 90) is False
    assert orientation_swaps_sides(6, True, 180) is True
    assert orientation_swaps_sides(1, True, 270) is True


def test_max_result_dimension_clamps_everything_together() -> None:
    options = Options(resizing_type="force", width=100000, height=100, enlarge=True)
    assert size_of(2000, 1333, options) == (8192, 8)
    assert size_of(2000, 1333, options, max_result_dimension=1000) == (1000, 1)
    padded = Options(width=1000, height=1000, padding=(500, 500, 500, 500), extend=True)
    assert size_of(1000, 1000, padded, max_result_dimension=1000) == (1000, 1000)
    assert size_of(2000, 1333, Options(), max_result_dimension=0) == (2000, 1333)


def test_a_url_lowers_max_result_dimension_but_never_raises_it() -> None:
    big = Options(width=3000, height=3000, enlarge=True)
    assert size_of(
        2000, 1000, big._replace(max_result_dimension=500), max_result_dimension=1000
    ) == (500, 250)
    assert size_of(
        2000, 1000, big._replace(max_result_dimension=2000), max_result_dimension=1000
    ) == (1000, 500)
    assert size_of(2000, 1000, big._replace(max_result_dimension=500), max_result_dimension=0) == (
        500,
        250,
    )
    assert size_of(2000, 1000, big, max_result_dimension=1000) == (1000, 500)


def test_scaling_never_goes_below_one_pixel() -> None:
    assert size_of(10000, 10, Options(width=10)) == (10, 1)


def test_invalid_source_size_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        plan_geometry(0, 10, Options(), max_result_dimension=8192)


def test_crop_size_units() -> None:
    assert crop_size(1000, 0) == 0
    assert crop_size(1000, 250) == 250
    assert crop_size(1000, 0.25) == 250
    assert crop_size(3, 0.01) == 1


def test_round_half_up_matches_go() -> None:
    assert [round_half_up(v) for v in (0.5, 1.5, 2.5, 2.4999)] == [1, 2, 3, 2]


@pytest.mark.parametrize(
    ("gravity", "expected"),
    [
        (Gravity("ce"), (40, 40)),
        (Gravity("no"), (40, 0)),
        (Gravity("so"), (40, 80)),
        (Gravity("ea"), (80, 40)),
        (Gravity("we"), (0, 40)),
        (Gravity("nowe"), (0, 0)),
        (Gravity("noea"), (80, 0)),
        (Gravity("sowe"), (0, 80)),
        (Gravity("soea"), (80, 80)),
        (Gravity("nowe", 10, 5), (10, 5)),
        (Gravity("soea", 10, 5), (70, 75)),
        (Gravity("ce", 10, -5), (50, 35)),
        (Gravity("nowe", 0.5, 0.25), (50, 25)),
        (Gravity("nowe", 500, 500), (80, 80)),
        (Gravity("fp", 0.9, 0.1), (80, 0)),
        (Gravity("fp", 0.5, 0.6), (40, 50)),
    ],
)
def test_place(gravity: Gravity, expected: tuple[int, int]) -> None:
    assert place(100, 100, 20, 20, gravity) == expected


def test_place_scales_absolute_offsets_by_dpr() -> None:
    assert place(100, 100, 20, 20, Gravity("nowe", 10, 5), offset_scale=2) == (20, 10)


@given(
    width=st.integers(1, 5000),
    height=st.integers(1, 5000),
    resizing_type=st.sampled_from(RESIZING_TYPES),
    box_width=st.integers(0, 3000),
    box_height=st.integers(0, 3000),
    dpr=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
    enlarge=st.booleans(),
    extend=st.booleans(),
)
def test_any_request_gives_a_bounded_positive_size(
    width: int,
    height: int,
    resizing_type: str,
    box_width: int,
    box_height: int,
    dpr: float,
    enlarge: bool,
    extend: bool,
) -> None:
    options = Options(
        resizing_type=resizing_type,
        width=box_width,
        height=box_height,
        dpr=dpr,
        enlarge=enlarge,
        extend=extend,
    )
    plan = plan_geometry(width, height, options, max_result_dimension=4096)
    assert 1 <= plan.width <= max(4096, width)
    assert 1 <= plan.height <= max(4096, height)
    assert plan.result_width <= plan.scaled_width
    assert plan.result_height <= plan.scaled_height
    if not enlarge and not extend:
        assert plan.width <= width and plan.height <= height
    if extend and box_width and box_height:
        assert plan.width >= min(plan.target_width, 4096) - 1


# -- zoom and extend_aspect_ratio: what imgproxy's calcScale/calcSizes do --------------


@pytest.mark.parametrize(
    ("url_options", "expected"),
    [
        ("w:100/z:2", (200, 100)),  # the box is zoomed: 200 x 100 of a 400 x 200 source
        ("w:100/z:2:1", (200, 50)),  # each axis by its own zoom, as imgproxy
        ("rs:force:100:100/z:2:0.5", (200, 50)),
        ("w:300/z:2", (400, 200)),  # never above the source without enlarge
        ("w:300/z:2/el:1", (600, 300)),
        ("rs:fill:100:100/z:1.5/dpr:2", (200, 200)),  # the source limits the dpr too
        ("rs:fit:100:100/exar:1", (100, 100)),
        ("rs:fit:100:100/exar:1/pd:5", (110, 110)),
        ("rs:fit:300:100/exar:1", (300, 100)),
        ("rs:fit:100:300/ex:1/exar:1", (100, 300)),
        ("w:100/el:1/z:100", (8192, 4096)),  # clamped by max_result_dimension
    ],
)
def test_zoom_and_extend_aspect_ratio_sizes_are_rendered(
    url_options: str, expected: tuple[int, int]
) -> None:
    options = parse_path(f"/{url_options}/plain/a.png").options
    planned = plan_geometry(400, 200, options, max_result_dimension=8192)
    assert (planned.width, planned.height) == expected
    if max(expected) <= 1000:
        source = bytes(pyvips.Image.black(400, 200, bands=3).pngsave_buffer())
        result = pipeline.render(source, options, "png", pipeline.RenderSettings())
        image = pyvips.Image.new_from_buffer(result.data, "")
        assert (image.width, image.height) == expected
