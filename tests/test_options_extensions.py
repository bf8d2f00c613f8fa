"""Tests for django_oximg.core.options.extensions: a site's own options in the URL grammar.

A site's option is read as strictly as the table's (a bad value is a 400
naming it), written in one canonical text after the built-in options (so
equal effects share a path, and so a cache key), left out at its default,
and refused at start-up when it could not keep those promises.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options import (
    Choice,
    Extension,
    Integer,
    Number,
    Options,
    build_path,
    parse_path,
)
from django_oximg.core.options.extensions import ExtensionError, problems
from tests import site_extensions
from tests.site_extensions import SEPIA, TINT

BOTH = (SEPIA, TINT)


def options_of(path: str, extensions: tuple[Extension, ...] = BOTH, **kwargs: Any) -> Options:
    return parse_path(path, extensions=extensions, **kwargs).options


# -- argument kinds --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "args", "value", "written"),
    [
        (Number(0, 1), ["0.80"], 0.8, ("0.8",)),
        (Number(0, 1), [".5"], 0.5, ("0.5",)),
        (Number(0, 1), ["1"], 1.0, ("1",)),
        (Number(-2, 2), ["-1.5e0"], -1.5, ("-1.5",)),
        (Integer(2, 64), ["+08"], 8, ("8",)),
        (Choice(("warm", "cold")), ["cold"], "cold", ("cold",)),
    ],
)
def test_a_kind_reads_a_value_and_writes_its_one_text(
    kind: Any, args: list[str], value: Any, written: tuple[str, ...]
) -> None:
    assert kind.read(args) == value
    assert tuple(kind.write(value)) == written
    assert kind.read(list(written)) == value


@pytest.mark.parametrize(
    ("kind", "args", "why"),
    [
        (Number(0, 1), ["1.5"], "not in 0..1"),
        (Number(0, 1), ["-0.1"], "not in 0..1"),
        (Number(0, 1), ["nan"], "not a number"),
        (Number(0, 1), ["1e999"], "not in 0..1"),
        (Number(0, 1), [" 0.5"], "not a number"),
        (Number(0, 1), [""], "not a number"),
        (Number(0, 1), ["0.5", "1"], "takes one argument"),
        (Integer(2, 64), ["2.0"], "not an integer"),
        (Integer(2, 64), ["65"], "not in 2..64"),
        (Integer(2, 64), ["٣"], "not an integer"),
        (Choice(("warm", "cold")), ["Warm"], "expected one of warm, cold"),
    ],
)
def test_a_kind_refuses_what_it_cannot_read_exactly(kind: Any, args: list[str], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        kind.read(args)


# -- parsing and building ----------------------------------------------------------------


@pytest.mark.parametrize("segment", ["sepia:0.80", "sep:.8", "sep:0.8", "sepia:8e-1"])
def test_either_name_and_any_spelling_of_a_value_is_one_canonical_segment(segment: str) -> None:
    options = options_of(f"/w:10/{segment}/plain/a.jpg")
    assert options.extensions == (("sep", "0.8"),)
    assert build_path(options, "a.jpg") == "/w:10/sep:0.8/plain/a.jpg"


def test_a_bad_argument_is_invalid_options_naming_the_option() -> None:
    with pytest.raises(InvalidOptions) as caught:
        options_of("/sep:2/plain/a.jpg")
    assert caught.value.public == "Invalid sepia: 2"
    assert "not in 0..1" in caught.value.detail


def test_a_bad_argument_of_a_sites_own_reader_names_its_option_too() -> None:
    with pytest.raises(InvalidOptions) as caught:
        options_of("/tint:red:0.5/plain/a.jpg")
    assert caught.value.public == "Invalid tint: red:0.5"
    assert "takes RRGGBB:strength" in caught.value.detail


def test_an_option_at_its_default_is_no_option() -> None:
    """``sep:0`` changes nothing, so it shares the path, and the key, of no ``sep``."""
    assert parse_path("/w:10/sep:0/plain/a.jpg", extensions=BOTH) == parse_path(
        "/w:10/plain/a.jpg", extensions=BOTH
    )


def test_a_later_segment_wins_even_when_it_gives_the_default() -> None:
    assert options_of("/sep:0.5/sepia:0/plain/a.jpg").extensions == ()
    assert options_of("/sep:0.5/sepia:0.25/plain/a.jpg").extensions == (("sep", "0.25"),)


def test_without_the_extension_its_name_is_an_unknown_option() -> None:
    with pytest.raises(InvalidOptions, match="unknown option 'sep'"):
        parse_path("/sep:0.5/plain/a.jpg")
    with pytest.raises(InvalidOptions, match="unknown option 'sep'"):
        options_of("/sep:0.5/plain/a.jpg", extensions=(TINT,))


@pytest.mark.parametrize("extensions", [(SEPIA, TINT), (TINT, SEPIA)])
def test_site_options_follow_the_built_in_ones_by_name_whatever_the_settings_order(
    extensions: tuple[Extension, ...],
) -> None:
    options = options_of("/tint:FF8000:0.50/sep:0.3/w:10/q:50/plain/a.jpg", extensions)
    assert build_path(options, "a.jpg") == "/w:10/q:50/sep:0.3/tint:ff8000:0.5/plain/a.jpg"


def test_the_canonical_path_reads_back_into_the_same_options() -> None:
    options = options_of("/tint:00ff00:1/rs:fill:30:20/sep:1/plain/a.jpg")
    for encode in ("plain", "base64"):
        path = build_path(options, "a b.jpg", encode=encode)
        assert parse_path(path, extensions=BOTH).options == options


def test_presets_may_use_a_sites_option() -> None:
    presets = {"old": "sep:0.9/w:40"}
    assert options_of("/pr:old/plain/a.jpg", presets=presets).extensions == (("sep", "0.9"),)
    assert options_of("/pr:old/sep:0/plain/a.jpg", presets=presets).extensions == ()


def test_allowed_options_limit_a_sites_options_as_the_others() -> None:
    from django_oximg.core.options import URLRules

    rules = URLRules(frozenset({"w", "sep"}))
    assert options_of("/sep:0.5/plain/a.jpg", rules=rules).extensions == (("sep", "0.5"),)
    with pytest.raises(InvalidOptions, match="ALLOWED_PROCESSING_OPTIONS"):
        options_of("/sepia:0.5/plain/a.jpg", rules=rules)


@pytest.mark.parametrize("entry", [("sep", "0/5"), ("sep", "a%2F"), ("Sep", "0.5"), ("s:p", "1")])
def test_entries_no_url_can_carry_are_refused_before_a_path_is_built(
    entry: tuple[str, str],
) -> None:
    with pytest.raises(InvalidOptions):
        build_path(Options(extensions=(entry,)), "a.jpg")


def test_a_value_written_so_that_it_reads_back_otherwise_is_the_sites_bug() -> None:
    rounding = site_extensions.ROUNDING
    with pytest.raises(ExtensionError, match="reads back as another value"):
        rounding.text(0.25)


# -- what a site's list must be ----------------------------------------------------------


def test_the_tests_extensions_are_sound() -> None:
    assert problems([SEPIA, TINT, site_extensions.GROW]) == []


@pytest.mark.parametrize(
    ("extensions", "why"),
    [
        ([site_extensions.NOT_AN_EXTENSION], "is not an Extension"),
        ([site_extensions.LAMBDA_STEP], "cannot be pickled"),
        ([site_extensions.TAKEN_NAME], "'blur' is already an option's name"),
        ([SEPIA, SEPIA._replace(names=("sepia2", "sep"))], "'sep' is already an option's name"),
        ([SEPIA._replace(names=("sep", "sep"))], "a name is given twice"),
        ([SEPIA._replace(names=("Sepia",))], "'Sepia' is not a name"),
        ([SEPIA._replace(names=("se:p",))], "'se:p' is not a name"),
        ([SEPIA._replace(names=())], "names must be a tuple"),
        ([site_extensions.TOO_EARLY], "after must be one of colour, crop_to_box"),
        ([SEPIA._replace(version="")], "version must be a non-empty string"),
        ([SEPIA._replace(step=None)], "step must be a function"),
        ([site_extensions.ROUNDING], "reads back as another value"),
    ],
)
def test_what_cannot_keep_its_promises_is_refused(extensions: list[Any], why: str) -> None:
    found = problems(extensions)
    assert len(found) == 1, found
    assert why in found[0]
