"""sorl-thumbnail's and easy-thumbnails' arithmetic, and the options that reproduce it.

The whole template sets are compared with the real packages in
tests/test_peers.py; here are the rules, case by case, worked by hand from
the packages' code.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from django_oximg.core.options import Gravity, Options
from django_oximg.core.options.geometry import place, plan_geometry
from django_oximg.sizing import exact_size_options, sorl_margin, sorl_round

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


@pytest.mark.parametrize(
    ("number", "rounded"), [(112.5, 112), (113.5, 114), (149.33, 149), (1.0, 1), (0.3, 1)]
)
def test_sorl_rounds_halves_to_even_and_never_to_zero(number: float, rounded: int) -> None:
    assert sorl_round(number) == rounded


def fit(width: int, height: int, **changes: object) -> Options:
    return Options(width=width, height=height)._replace(**changes)  # type: ignore[arg-type]


def fill(width: int, height: int, gravity: str = "ce", **changes: object) -> Options:
    return fit(width, height, resizing_type="fill", gravity=Gravity(gravity), **changes)


CASES = [
    # sizing, source (w, h, orientation), options, size, padding (top, right, bottom, left)
    ("sorl", (640, 480, 1), fit(150, 0), (149, 112), (0, 0, 0, 0)),  # 112.5 -> 112, then fits
    ("easy-thumbnails", (640, 480, 1), fit(150, 0), (150, 112), (0, 0, 0, 0)),
    ("sorl", (1200, 900, 6), fit(0, 150), (112, 149), (0, 0, 0, 0)),  # shown 900x1200
    ("sorl", (120, 90, 1), fit(300, 300), (120, 90), (0, 0, 0, 0)),  # no upscale
    ("sorl", (120, 90, 1), fit(300, 300, enlarge=True), (300, 225), (0, 0, 0, 0)),
    ("sorl", (120, 90, 1), fill(200, 200, "sm"), (90, 90), (0, 0, 0, 0)),  # the box's shape
    ("sorl", (120, 90, 1), fill(200, 200), (120, 90), (0, 0, 0, 0)),
    ("easy-thumbnails", (120, 90, 1), fill(200, 200, "sm"), (120, 90), (0, 0, 0, 0)),
    ("sorl", (1600, 1200, 1), fit(150, 150, extend=True), (150, 112), (19, 0, 19, 0)),
    ("sorl", (120, 90, 1), fill(150, 150, extend=True), (120, 90), (30, 15, 30, 15)),
    ("easy-thumbnails", (1600, 1200, 1), fit(200, 200, extend=True), (200, 150), (25, 0, 25, 0)),
    ("easy-thumbnails", (1600, 1200, 1), fit(200, 0, extend=True), (200, 150), (0, 0, 0, 0)),
    ("easy-thumbnails", (2400, 700, 1), fill(0, 120), (411, 120), (0, 0, 0, 0)),
]


@pytest.mark.parametrize(("sizing", "source", "options", "size", "padding"), CASES)
def test_the_packages_sizes_become_exact_options(
    sizing: str,
    source: tuple[int, int, int],
    options: Options,
    size: tuple[int, int],
    padding: tuple[int, int, int, int],
) -> None:
    width, height, orientation = source
    exact = exact_size_options(sizing, width, height, orientation, options)
    assert exact is not None
    assert (exact["width"], exact["height"], exact["padding"]) == (*size, padding)
    planned = plan_geometry(
        width, height, options._replace(**exact), orientation=orientation, max_result_dimension=0
    )
    boxed = (size[0] + padding[1] + padding[3], size[1] + padding[0] + padding[2])
    assert (planned.width, planned.height) == boxed


@pytest.mark.parametrize(
    "options",
    [
        fit(100, 100, dpr=2.0),
        fit(100, 100, rotate=90),
        fit(100, 100, min_width=50),
        fit(100, 100, padding=(1, 1, 1, 1)),
        fit(0, 0),
        fit(100, 100)._replace(resizing_type="force"),
        fit(100, 100, extend=True, extend_gravity=Gravity("no")),
    ],
)
def test_what_the_packages_cannot_say_keeps_imgproxys_arithmetic(options: Options) -> None:
    assert exact_size_options("sorl", 640, 480, 1, options) is None
    assert exact_size_options("imgproxy", 640, 480, 1, fit(100, 100)) is None


@pytest.mark.parametrize(
    ("size", "box", "margin"),
    [
        ((250, 188), (300, 300), "56px 25px 56px 25px"),
        ((250, 333), (300, 300), "-16px 25px -15px 25px"),
        ((100, 75), (101, 80), "2px 1px 3px 0px"),
        ((100, 75), (200, 0), "37px 50px 38px 50px"),  # the height from the ratio: 150
    ],
)
def test_sorls_margin(size: tuple[int, int], box: tuple[int, int], margin: str) -> None:
    assert sorl_margin(size, box) == margin


# sorl-thumbnail 13.4.0's crop, as its code does it: ``engines/base.py`` scales with
# ``helpers.toint`` (round, and up to 1 below it), then ``parsers.parse_crop`` puts
# the window at ``int(slack * percent / 100.0)``, its crop words being 0, 50 or 100 %.
SORL_WORD_PERCENTS = {
    "center": (50, 50),
    "top": (50, 0),
    "bottom": (50, 100),
    "left": (0, 50),
    "right": (100, 50),
    "left top": (0, 0),
    "right top": (100, 0),
    "left bottom": (0, 100),
    "right bottom": (100, 100),
}
OUR_GRAVITIES = {
    "center": "ce",
    "top": "no",
    "bottom": "so",
    "left": "we",
    "right": "ea",
    "left top": "nowe",
    "right top": "noea",
    "left bottom": "sowe",
    "right bottom": "soea",
}


def sorls_toint(number: float) -> int:
    """sorl's ``helpers.toint``."""
    return int(round(number, 0) if number > 1 else round(math.ceil(number), 0))


def sorls_crop(
    source: tuple[int, int], geometry: tuple[int, int], word: str, upscale: bool
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], bool]:
    """Scaled size, window, window offset, and whether a scaled side fell on a half."""
    x, y = float(source[0]), float(source[1])
    ratio = x / y  # parse_geometry's
    width = geometry[0] or sorls_toint(geometry[1] * ratio)
    height = geometry[1] or sorls_toint(geometry[0] / ratio)
    factor = max(width / x, height / y)  # _calculate_scaling_factor's, for a crop
    scaled = source[0], source[1]
    if factor < 1 or upscale:
        scaled = (sorls_toint(x * factor), sorls_toint(y * factor))
    window = (min(scaled[0], width), min(scaled[1], height))
    percents = SORL_WORD_PERCENTS[word]
    offset = tuple(
        int(max(0, min((side - cut) * percent / 100.0, side - cut)))
        for side, cut, percent in zip(scaled, window, percents, strict=True)
    )
    half = any(abs(side * factor % 1 - 0.5) < 1e-9 for side in source)
    return scaled, window, (offset[0], offset[1]), half


CROP_SOURCES = [(97, 75), (640, 480), (1001, 999), (1333, 3024), (4032, 3024), (3024, 4032)]
CROP_BOXES = [
    (width, height)
    for width in (0, 50, 101, 150, 333)
    for height in (0, 50, 99, 150, 200)
    if width or height
]


@pytest.mark.parametrize("upscale", [True, False])
@pytest.mark.parametrize("word", sorted(SORL_WORD_PERCENTS))
def test_sorl_sizing_crops_where_sorl_crops(word: str, upscale: bool) -> None:
    """Window and offset are sorl's for every source and box; imgproxy's centre is not.

    Where a scaled side falls on exactly half a pixel, imgproxy's scaling rounds it
    up and sorl's to even: the scaled image is one pixel longer there, the window
    and its offset are still sorl's.
    """
    differed = 0
    for source in CROP_SOURCES:
        for box in CROP_BOXES:
            options = fill(*box, OUR_GRAVITIES[word], enlarge=upscale)
            exact = exact_size_options("sorl", *source, 1, options)
            assert exact is not None
            planned = plan_geometry(
                *source, options._replace(**exact), orientation=1, max_result_dimension=0
            )
            scaled = (planned.scaled_width, planned.scaled_height)
            window = (planned.result_width, planned.result_height)
            at = place(*scaled, *window, exact.get("gravity", options.gravity), planned.dpr_scale)
            sorls = sorls_crop(source, box, word, upscale)
            assert (window, at) == sorls[1:3], (source, box)
            if scaled != sorls[0]:
                assert (
                    sorls[3] and max(abs(a - b) for a, b in zip(scaled, sorls[0], strict=True)) == 1
                )
            imgproxys = place(*scaled, *window, options.gravity, planned.dpr_scale)
            differed += imgproxys != at
    # What sizing="sorl" changes: imgproxy's own centring is a pixel off that often.
    if 50 in SORL_WORD_PERCENTS[word]:
        assert differed > 0


def test_sorl_sizing_leaves_other_crops_where_imgproxy_puts_them() -> None:
    for gravity in (Gravity("sm"), Gravity("fp", 0.3, 0.7), Gravity("ce", 10, 0)):
        exact = exact_size_options("sorl", 640, 480, 1, fill(100, 100)._replace(gravity=gravity))
        assert exact is not None
        assert "gravity" not in exact


# easy-thumbnails 2.10.1's scale_and_crop, as its code does it: the scaled size rounded
# (halves to even), then the window centred on the focal point ``target`` (50 %, 50 %
# by default) with both halves truncated, or kept at an edge ("0,0", "-0,-0"...).
EASY_CROPS = {
    # our gravity: easy-thumbnails' crop and target
    Gravity("ce"): (True, None),
    Gravity("no"): (",0", None),
    Gravity("so"): (",-0", None),
    Gravity("we"): ("0,", None),
    Gravity("ea"): ("-0,", None),
    Gravity("nowe"): ("0,0", None),
    Gravity("soea"): ("-0,-0", None),
    Gravity("fp", 0.29, 0.7): (True, (29, 70)),
    Gravity("fp", 0.0, 1.0): (True, (0, 100)),
}


def easys_crop(
    source: tuple[int, int], size: tuple[int, int], crop: Any, target: Any, upscale: bool
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The window's size and its offset in the scaled image."""
    source_x, source_y = float(source[0]), float(source[1])
    target_x, target_y = size
    scale = max(target_x / source_x, target_y / source_y)
    if not target_x:
        target_x = round(source_x * scale)
    elif not target_y:
        target_y = round(source_y * scale)
    scaled_x, scaled_y = source
    if scale < 1.0 or (scale > 1.0 and upscale):
        scaled_x, scaled_y = round(source_x * scale), round(source_y * scale)
    diff_x = int(scaled_x - min(scaled_x, target_x))
    diff_y = int(scaled_y - min(scaled_y, target_y))
    focal_point = target or (50, 50)
    box = [
        max(0, min(scaled_x - target_x, int(scaled_x * focal_point[0] / 100) - int(target_x / 2))),
        max(0, min(scaled_y - target_y, int(scaled_y * focal_point[1] / 100) - int(target_y / 2))),
    ]
    edges = re.match(r"(?:(-?)(\d+))?,(?:(-?)(\d+))?$", crop) if isinstance(crop, str) else None
    if edges:
        x_right, x_crop, y_bottom, y_crop = edges.groups()
        if x_crop:
            box[0] = diff_x if x_right else 0
        if y_crop:
            box[1] = diff_y if y_bottom else 0
    window = (min(scaled_x, target_x), min(scaled_y, target_y))
    return window, (box[0], box[1])


@pytest.mark.parametrize("upscale", [True, False])
@pytest.mark.parametrize("gravity", list(EASY_CROPS), ids=str)
def test_easy_sizing_crops_where_easy_thumbnails_crops(gravity: Gravity, upscale: bool) -> None:
    crop, target = EASY_CROPS[gravity]
    differed = 0
    for source in CROP_SOURCES:
        for box in CROP_BOXES:
            options = fill(*box, enlarge=upscale)._replace(gravity=gravity)
            exact = exact_size_options("easy-thumbnails", *source, 1, options)
            assert exact is not None
            planned = plan_geometry(
                *source, options._replace(**exact), orientation=1, max_result_dimension=0
            )
            scaled = (planned.scaled_width, planned.scaled_height)
            window = (planned.result_width, planned.result_height)
            at = place(*scaled, *window, exact.get("gravity", gravity), planned.dpr_scale)
            assert (window, at) == easys_crop(source, box, crop, target, upscale), (source, box)
            differed += place(*scaled, *window, gravity, planned.dpr_scale) != at
    if gravity.type in ("ce", "no", "fp"):
        assert differed > 0  # imgproxy's own placement is a pixel off that often
