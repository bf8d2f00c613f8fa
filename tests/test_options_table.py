"""Tests for django_oximg.core.options.table: one declaration per option, both ways.

The parser and the builder are both derived from the table, so what these
check is the table's own honesty: every field has one option that writes it,
every name one option, each option's text depends only on the fields it
declares and reads back into them, and the canonical order (which every
cache key depends on) stays what it is.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings

from django_oximg.core.options import (
    OPTION_NAMES,
    AutoQuality,
    Crop,
    Gravity,
    Options,
    ParsedPath,
    Watermark,
    build_path,
    parse_path,
)
from django_oximg.core.options.model import DEFAULTS, normalized
from django_oximg.core.options.table import BY_NAME, OPTIONS, PRESET_NAMES, Option
from tests.test_options import valid_options

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

WRITTEN = [option for option in OPTIONS if option.fields]
#: The format is written as the path's extension, not as a segment.
SEGMENTS = [option for option in WRITTEN if option.name != "format"]


def test_every_field_is_written_by_exactly_one_option() -> None:
    owners = Counter(name for option in OPTIONS for name in option.fields)
    # The site's own options are written by their extensions (tests/test_options_extensions.py).
    assert set(owners) == set(Options._fields) - {"extensions"}
    assert [name for name, count in owners.items() if count > 1] == []


def test_every_name_belongs_to_one_option() -> None:
    names = [name for option in OPTIONS for name in option.names]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert not set(names) & set(PRESET_NAMES)
    assert frozenset(names) | frozenset(PRESET_NAMES) == OPTION_NAMES


def test_an_option_at_its_defaults_writes_no_segment() -> None:
    # build_path asks only the options whose fields differ from the defaults.
    assert [option.name for option in OPTIONS if option.segment(DEFAULTS) is not None] == []


@settings(max_examples=100, deadline=None)
@given(valid_options())
def test_the_builder_writes_what_every_option_asked_in_turn_writes(options: Options) -> None:
    every = [s for option in OPTIONS if (s := option.segment(normalized(options))) is not None]
    built = build_path(options, "x.jpg").split("/")[1:-2]  # without "plain" and the source
    assert built == every


def test_meta_options_write_nothing() -> None:
    meta = {option.name for option in OPTIONS if not option.fields}
    assert meta == {"resize", "size"}
    assert all(BY_NAME[name].segment(Options(width=5, enlarge=True)) is None for name in meta)


def _own_fields(option: Option, options: Options) -> Options:
    """The defaults, with only ``option``'s fields taken from ``options``."""
    return DEFAULTS._replace(**{name: getattr(options, name) for name in option.fields})


@settings(max_examples=100)
@given(valid_options())
def test_each_text_depends_only_on_its_own_fields(options: Options) -> None:
    for option in WRITTEN:
        assert option.text(options) == option.text(_own_fields(option, options)), option.name


@settings(max_examples=100)
@given(valid_options())
def test_each_segment_reads_back_into_its_own_fields(options: Options) -> None:
    for option in SEGMENTS:
        segment = option.segment(options)
        if segment is None:
            assert normalized(_own_fields(option, options)) == DEFAULTS, option.name
            continue
        parsed = parse_path(f"/{segment}/plain/a").options
        assert _own_fields(option, parsed) == _own_fields(option, options), segment


def everything(*, raw: bool) -> Options:
    """Options every option writes a segment for (but ``raw`` or the two it folds)."""
    return Options(
        resizing_type="fill-down",
        width=1,
        height=2,
        min_width=3,
        min_height=4,
        dpr=1.5,
        enlarge=True,
        extend=True,
        extend_gravity=Gravity("so", 1, 0),
        gravity=Gravity("fp", 0.5, 0.25),
        crop=Crop(0.5, 10, Gravity("sm")),
        padding=(1, 2, 3, 4),
        zoom_width=2.0,
        zoom_height=0.5,
        extend_aspect_ratio=True,
        extend_aspect_ratio_gravity=Gravity("we"),
        trim_threshold=10.0,
        trim_color=(255, 0, 0),
        trim_equal_vertical=True,
        background=(0, 16, 255),
        blur=1.5,
        sharpen=0.25,
        rotate=90,
        flip_horizontal=True,
        pixelate=8,
        watermark=Watermark(0.5, "re", 10, 0, 0),
        quality=80,
        quality_mode="high",
        format_quality=(("avif", 50), ("webp", 70)),
        autoquality=AutoQuality("dssim", 0.02, 60, 85, 0.001),
        format="" if raw else "webp",
        strip_metadata=False,
        keep_copyright=False,
        strip_color_profile=False,
        auto_rotate=False,
        cachebuster="v 1/2",
        expires=4102444800,
        max_bytes=1000,
        filename="photo 1",
        return_attachment=True,
        raw=raw,
        enforce_thumbnail=True,
        skip_processing=() if raw else ("gif", "png"),
        max_src_resolution=1_500_000,
        max_animation_frame_resolution=250_000,
        max_src_file_size=5000,
        max_animation_frames=3,
        max_result_dimension=640,
    )


#: Every option's canonical text, in the canonical order. Cache keys are made
#: from these paths: a change here orphans every cached result.
CANONICAL = (
    "/rt:fill-down/w:1/h:2/mw:3/mh:4/dpr:1.5/el:1/ex:1:so:1:0/g:fp:0.5:0.25/c:0.5:10:sm"
    "/pd:1:2:3:4/z:2:0.5/exar:1:we/t:10:ff0000:0:1/bg:0010ff/bl:1.5/sh:0.25/rot:90/fl:1:0"
    "/pix:8/wm:0.5:re:10/q:80/qm:high/fq:avif:50:webp:70/aq:dssim:0.02:60:85:0.001/sm:0/kcr:0"
    "/scp:0/ar:0/cb:v%201%2F2"
    "/exp:4102444800/mb:1000/fn:cGhvdG8gMQ:1/att:1{raw}/eth:1{skp}/msr:1.5/mafr:0.25"
    "/msfs:5000/maf:3/mrd:640/plain/dir/a%20b.jpg{ext}"
)


@pytest.mark.parametrize("raw", [False, True], ids=["processed", "raw"])
def test_the_canonical_path_of_every_option_is_fixed(raw: bool) -> None:
    options = everything(raw=raw)
    expected = CANONICAL.format(
        raw="/raw:1" if raw else "", skp="" if raw else "/skp:gif:png", ext="" if raw else "@webp"
    )
    assert build_path(options, "dir/a b.jpg") == expected
    assert parse_path(expected) == ParsedPath(options, "dir/a b.jpg")
    silent = {option.name for option in WRITTEN if option.segment(normalized(options)) is None}
    assert silent == ({"format", "skip_processing"} if raw else {"format", "raw"})
    assert BY_NAME["format"].segment(options) is None  # the extension carries it
