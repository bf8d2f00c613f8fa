"""The tag keywords: what each spelling means, and what a mistake says."""

from __future__ import annotations

from typing import Any

import pytest

from django_oximg.arguments import (
    ThumbnailError,
    check_arguments,
    crop_gravity,
    flag,
    hex_color,
    scoped_preset,
    tag_options,
)
from django_oximg.core.options import Gravity
from tests.site_extensions import SEPIA, TINT

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


@pytest.mark.parametrize(
    ("crop", "gravity"),
    [
        (True, Gravity("ce")),
        ("true", Gravity("ce")),
        ("1", Gravity("ce")),
        ("center", Gravity("ce")),
        ("center center", Gravity("ce")),
        ("center top", Gravity("no")),
        ("left center", Gravity("we")),
        ("30%", Gravity("fp", 0.3, 0.3)),
        ("0% 100%", Gravity("fp", 0.0, 1.0)),
        (False, None),
        (None, None),
        ("", None),
        ("false", None),
        ("noop", None),
    ],
)
def test_crop_spellings(crop: Any, gravity: Gravity | None) -> None:
    assert crop_gravity(crop) == gravity


@pytest.mark.parametrize(
    ("crop", "hint"),
    [
        ("10px 20px", "pixel offsets are not supported"),
        ("scale", "'scale' (cover the box, cut nothing) has no equivalent"),
        ("0,0", "easy-thumbnails' edges use 'top', 'left'"),
        ("middle", "use center, top, bottom"),
    ],
)
def test_a_bad_crop_says_what_to_write(crop: str, hint: str) -> None:
    with pytest.raises(ThumbnailError, match=f"bad crop '{crop}'") as raised:
        crop_gravity(crop)
    assert hint in str(raised.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        (1, True),
        (0, False),
        (" Yes ", True),
        ("0", False),
    ],
)
def test_flags(value: Any, expected: bool) -> None:
    assert flag("upscale", value) is expected


@pytest.mark.parametrize("value", [3, -1, 0.5, "maybe", "", [True]])
def test_a_flag_is_true_or_false_only(value: Any) -> None:
    with pytest.raises(ThumbnailError, match="bad padding"):
        flag("padding", value)


@pytest.mark.parametrize(
    ("value", "rgb"), [("#222", (34, 34, 34)), ("fff", (255, 255, 255)), ("00ff80", (0, 255, 128))]
)
def test_colours(value: str, rgb: tuple[int, int, int]) -> None:
    assert hex_color("padding_color", value) == rgb


def test_padding_extends_to_the_box_in_the_padding_colour() -> None:
    padded = tag_options("100x100", {"padding": True})
    assert (padded.extend, padded.background) == (True, (255, 255, 255))
    coloured = tag_options("100x100", {"padding": "true", "padding_color": "#000"})
    assert coloured.background == (0, 0, 0)
    assert tag_options("100x100", {"padding_color": "#000"}).extend is False


def test_unknown_keywords_of_the_peers_say_what_to_do() -> None:
    with pytest.raises(ThumbnailError) as raised:
        tag_options("100", {"progressive": True, "bogus": 1})
    assert str(raised.value) == (
        "unknown thumbnail keyword(s): bogus, progressive "
        "(progressive: JPEGs are written baseline with optimised Huffman tables, or all "
        'progressive with OXIMG["JPEG_PROGRESSIVE"]; drop it)'
    )


PRESETS = {"card": "w:100", "shop.card": "w:200", "shop.Product.image.card": "w:300"}


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("shop.Product.image", "shop.Product.image.card"),
        ("shop.Product.photo", "shop.card"),
        ("blog.Post.image", "card"),
        ("", "card"),
    ],
)
def test_the_most_specific_scope_wins(target: str, name: str) -> None:
    assert scoped_preset("card", target, PRESETS) == name


@pytest.mark.parametrize(
    ("geometry", "names", "literals"),
    [
        ("100x100", {"crop"}, {"crop": "center"}),
        (None, {"crop"}, {}),  # both from variables
        ("", {"preset"}, {}),  # the preset's name from a variable
        ("card", set(), {}),  # a preset named as the geometry
        ("", {"preset"}, {"preset": "card"}),  # known in some scope
    ],
)
def test_what_compiles(geometry: str | None, names: set[str], literals: dict[str, Any]) -> None:
    check_arguments(geometry, names, literals, {"shop.card": "w:1"})


@pytest.mark.parametrize(
    ("geometry", "names", "literals", "words"),
    [
        ("", set(), {}, "no geometry"),
        ("cart", set(), {}, "bad geometry 'cart'"),
        ("100", {"colour"}, {}, "unknown thumbnail keyword(s): colour"),
        ("100", {"preset"}, {"preset": "cart"}, "unknown preset 'cart'"),
        ("100", {"options"}, {"options": "/rs:fit:x/"}, "bad options 'rs:fit:x'"),
        ("100", {"sizing"}, {"sizing": "sorl-thumbnail"}, "bad sizing"),
    ],
)
def test_what_does_not_compile(
    geometry: str, names: set[str], literals: dict[str, Any], words: str
) -> None:
    with pytest.raises(ThumbnailError) as raised:
        check_arguments(geometry, names, literals, {"shop.card": "w:1"})
    assert words in str(raised.value)


# -- a site's own options (OXIMG["EXTENSIONS"]) -------------------------------------------

SITE = (SEPIA, TINT)


@pytest.mark.parametrize(
    ("kwargs", "entries"),
    [
        ({"sepia": 0.8}, (("sep", "0.8"),)),
        ({"sepia": "0.80"}, (("sep", "0.8"),)),
        ({"sepia": 1}, (("sep", "1"),)),
        ({"sepia": 0}, ()),
        ({"sepia": None}, ()),
        ({"tint": "FF0000:0.5"}, (("tint", "ff0000:0.5"),)),
        ({"tint": ("00ff00", 1)}, (("tint", "00ff00:1"),)),
        ({"sepia": 0.5, "tint": ["0000ff", "0.25"]}, (("sep", "0.5"), ("tint", "0000ff:0.25"))),
    ],
)
def test_an_extensions_long_name_is_a_keyword_read_as_its_url_text(
    kwargs: dict[str, Any], entries: tuple[tuple[str, str], ...]
) -> None:
    assert tag_options("100", kwargs, SITE).extensions == entries


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"sepia": 1.5}, "bad sepia 1.5: not in 0..1"),
        ({"sepia": "lots"}, "bad sepia 'lots': not a number"),
        ({"tint": "red"}, "bad tint 'red': takes RRGGBB:strength"),
        ({"sep": 0.5}, "unknown thumbnail keyword(s): sep"),
    ],
)
def test_a_bad_extension_keyword_is_a_thumbnail_error(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ThumbnailError) as raised:
        tag_options("100", kwargs, SITE)
    assert words in str(raised.value)


def test_without_its_extension_the_keyword_is_unknown() -> None:
    with pytest.raises(ThumbnailError, match=r"unknown thumbnail keyword\(s\): sepia"):
        tag_options("100", {"sepia": 0.8})


def test_templates_are_checked_against_the_sites_options() -> None:
    check_arguments("100", {"sepia"}, {"sepia": 0.5}, {}, extensions=SITE)
    check_arguments("100", {"options"}, {"options": "sep:0.5/w:4"}, {}, extensions=SITE)
    with pytest.raises(ThumbnailError, match="bad options 'sep:7'"):
        check_arguments("100", {"options"}, {"options": "sep:7"}, {}, extensions=SITE)
