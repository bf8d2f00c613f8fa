"""Tests for django_oximg.core.options: imgproxy's option grammar, parse and build."""

from __future__ import annotations

import base64

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options import (
    BOOLEANS,
    FORMAT_NAMES,
    GRAVITY_TYPES,
    MAX_APPLIED_OPTIONS,
    MAX_DIMENSION,
    OUTPUT_FORMATS,
    QUALITY_MODES,
    RESIZING_TYPES,
    Crop,
    Gravity,
    Options,
    ParsedPath,
    Watermark,
    build_path,
    parse_path,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

# docs.imgproxy.net "Processing an image", the example at the end and the
# "Base64 encoded" source section.
DOCS_BASE64_PATH = (
    "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png"
)
DOCS_PLAIN_PATH = (
    "/preset:sharp/resize:fill:300:400:0/gravity:sm/quality:80"
    "/plain/http://example.com/images/curiosity.jpg@png"
)
DOCS_SOURCE = "http://example.com/images/curiosity.jpg"
COMPASS = tuple(t for t in GRAVITY_TYPES if t not in ("sm", "fp"))


def options_of(segments: str, presets: dict[str, str] | None = None) -> Options:
    """The options of ``/<segments>/plain/a.jpg``."""
    prefix = f"/{segments}" if segments else ""
    return parse_path(f"{prefix}/plain/a.jpg", presets).options


def error_of(path: str, presets: dict[str, str] | None = None) -> InvalidOptions:
    with pytest.raises(InvalidOptions) as caught:
        parse_path(path, presets)
    return caught.value


# -- the imgproxy documentation's examples -----------------------------------------


def test_docs_base64_example() -> None:
    parsed = parse_path(DOCS_BASE64_PATH)
    assert parsed.source == DOCS_SOURCE
    assert parsed.options == Options(
        resizing_type="fill", width=300, height=400, gravity=Gravity("sm"), format="png"
    )


def test_docs_plain_example_with_preset() -> None:
    parsed = parse_path(DOCS_PLAIN_PATH, {"sharp": "sh:0.7"})
    assert parsed.source == DOCS_SOURCE
    assert parsed.options == Options(
        resizing_type="fill",
        width=300,
        height=400,
        gravity=Gravity("sm"),
        quality=80,
        sharpen=0.7,
        format="png",
    )


def test_docs_examples_build_the_same_canonical_path() -> None:
    plain = parse_path(DOCS_BASE64_PATH)
    assert build_path(plain.options, plain.source) == (
        "/rt:fill/w:300/h:400/g:sm/plain/http://example.com/images/curiosity.jpg@png"
    )
    assert build_path(plain.options, plain.source, encode="base64") == (
        "/rt:fill/w:300/h:400/g:sm/aHR0cDovL2V4YW1wbGUuY29tL2ltYWdlcy9jdXJpb3NpdHkuanBn.png"
    )


# -- every option, by its long and its short name ---------------------------------

SIMPLE_OPTIONS = [
    # (names, argument text, field, expected value)
    (("resizing_type", "rt"), "fill-down", "resizing_type", "fill-down"),
    (("width", "w"), "300", "width", 300),
    (("height", "h"), "200", "height", 200),
    (("min-width", "mw"), "50", "min_width", 50),
    (("min-height", "mh"), "60", "min_height", 60),
    (("dpr",), "2.5", "dpr", 2.5),
    (("enlarge", "el"), "1", "enlarge", True),
    (("extend", "ex"), "t", "extend", True),
    (("gravity", "g"), "soea:10:20", "gravity", Gravity("soea", 10, 20)),
    (("crop", "c"), "100:50", "crop", Crop(100, 50)),
    (("padding", "pd"), "10", "padding", (10, 10, 10, 10)),
    (("background", "bg"), "10:20:30", "background", (10, 20, 30)),
    (("blur", "bl"), "1.5", "blur", 1.5),
    (("sharpen", "sh"), "0.5", "sharpen", 0.5),
    (("rotate", "rot"), "90", "rotate", 90),
    (("quality", "q"), "70", "quality", 70),
    (("format_quality", "fq"), "webp:60", "format_quality", (("webp", 60),)),
    (("format", "f", "ext"), "webp", "format", "webp"),
    (("strip_metadata", "sm"), "0", "strip_metadata", False),
    (("keep_copyright", "kcr"), "false", "keep_copyright", False),
    (("strip_color_profile", "scp"), "F", "strip_color_profile", False),
    (("auto_rotate", "ar"), "FALSE", "auto_rotate", False),
    (("cachebuster", "cb"), "v2", "cachebuster", "v2"),
    (("expires", "exp"), "4102444800", "expires", 4102444800),
    (("max_bytes", "mb"), "20000", "max_bytes", 20000),
    (("zoom", "z"), "1.5", "zoom_width", 1.5),
    (("extend_aspect_ratio", "extend_ar", "exar"), "1", "extend_aspect_ratio", True),
    (("trim", "t"), "10", "trim_threshold", 10.0),
    (("pixelate", "pix"), "8", "pixelate", 8),
    (("watermark", "wm"), "0.5", "watermark", Watermark(0.5)),
    (("filename", "fn"), "photo", "filename", "photo"),
    (("return_attachment", "att"), "1", "return_attachment", True),
    (("skip_processing", "skp"), "png", "skip_processing", ("png",)),
    (("raw",), "1", "raw", True),
    (("enforce_thumbnail", "eth"), "1", "enforce_thumbnail", True),
    (("max_src_resolution", "msr"), "0.5", "max_src_resolution", 500_000),
    (("max_src_file_size", "msfs"), "1000", "max_src_file_size", 1000),
    (("max_animation_frames", "maf"), "3", "max_animation_frames", 3),
    (
        ("max_animation_frame_resolution", "mafr"),
        "0.25",
        "max_animation_frame_resolution",
        250_000,
    ),
    (("quality_mode", "qm"), "high", "quality_mode", "high"),
    (("max_result_dimension", "mrd"), "640", "max_result_dimension", 640),
]


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("z:2", Options(zoom_width=2.0, zoom_height=2.0)),
        ("z:2:0.5", Options(zoom_width=2.0, zoom_height=0.5)),
        (
            "exar:1:so:0:5",
            Options(extend_aspect_ratio=True, extend_aspect_ratio_gravity=Gravity("so", 0, 5)),
        ),
        (
            "t:10:ff0000:1:0",
            Options(trim_threshold=10.0, trim_color=(255, 0, 0), trim_equal_horizontal=True),
        ),
        # An empty threshold switches trimming off; the equal flags are then folded.
        ("t:10::1/t:", Options()),
        # The colour resets when left out, the flags keep their values (as imgproxy).
        ("t:5:abc:1/t:7", Options(trim_threshold=7.0, trim_equal_horizontal=True)),
        ("wm:0.5:re:10:20:0.25", Options(watermark=Watermark(0.5, "re", 10, 20, 0.25))),
        ("wm:1/wm:0.5::3", Options(watermark=Watermark(0.5, "ce", 3))),
        ("fn:cGhvdG8gMS_DqQ:1", Options(filename="photo 1/é")),
        ("fn:a%20b", Options(filename="a b")),
        ("skp:jpg/skp:png:jpeg", Options(skip_processing=("jpeg", "png"))),
        (
            "msr:1.5/mafr:0.000001",
            Options(max_src_resolution=1_500_000, max_animation_frame_resolution=1),
        ),
    ],
)
def test_new_option_arguments(segment: str, expected: Options) -> None:
    assert options_of(segment) == expected


@pytest.mark.parametrize(
    "segment",
    [
        "z:0", "z:-1", "z:1:2:3", "z:x", "exar:2", "exar:1:sm", "exar:1:re", "t:-1", "t:256",
        "t:1:ggg", "t:1::x", "t:1:2:3:4:5", "pix:-1", "pix:x", "wm:2", "wm:0.5:sm", "wm:0.5:fp",
        "wm:0.5:ce:x", "wm:0.5:ce:0:0:0", "wm:1:2:3:4:5:6", "fn:a:1", "fn:a:b:c", "fn:" + "a" * 256,
        "att:x", "skp:bmp", "skp:jpg:tiff", "raw:2", "eth:yes", "msr:-1", "msr:x", "msfs:-1",
        "maf:1.5", "mafr:-0.5", "mrd:-1", "mrd:1.5", "mrd:100001", "mrd:1:2",
    ],
)  # fmt: skip
def test_bad_new_option_arguments_are_refused(segment: str) -> None:
    with pytest.raises(InvalidOptions):
        options_of(segment)


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("z:1000", Options(zoom_width=1000.0, zoom_height=1000.0)),
        ("z:0.5:1000", Options(zoom_width=0.5, zoom_height=1000.0)),
        ("z:1000:0.5", Options(zoom_width=1000.0, zoom_height=0.5)),
        ("wm:0.5:ce:0:0:1000", Options(watermark=Watermark(0.5, "ce", 0, 0, 1000.0))),
    ],
)
def test_zoom_and_watermark_scale_stop_at_a_thousand(segment: str, expected: Options) -> None:
    """Past 1000 every result is clamped anyway; the bound keeps absurd factors
    (and the sizes they multiply into) out of the geometry."""
    assert options_of(segment) == expected
    for above in ("1000.001", "1001", "1000000"):
        with pytest.raises(InvalidOptions):
            options_of(segment.replace("1000", above))


def test_raw_ignores_the_format_and_the_extension_as_imgproxy() -> None:
    parsed = parse_path("/raw:1/f:png/skp:jpg/plain/a.jpg@webp")
    assert parsed.options == Options(raw=True)
    assert build_path(parsed.options, parsed.source) == "/raw:1/plain/a.jpg"


def test_client_hints_can_see_which_fields_a_url_set() -> None:
    assert "width" in parse_path("/w:0/plain/a").assigned
    assert "width" in parse_path("/pr:p/plain/a", {"p": "s:10"}).assigned
    assert "width" not in parse_path("/s::10/plain/a").assigned  # an empty argument sets nothing
    assert "dpr" in parse_path("/plain/a", {"default": "dpr:1"}).assigned


@pytest.mark.parametrize(
    ("name", "argument", "field_name", "expected"),
    [
        (name, argument, field_name, expected)
        for names, argument, field_name, expected in SIMPLE_OPTIONS
        for name in names
    ],
)
def test_each_option_by_each_name(
    name: str, argument: str, field_name: str, expected: object
) -> None:
    options = options_of(f"{name}:{argument}")
    assert getattr(options, field_name) == expected
    assert getattr(options, field_name) != getattr(Options(), field_name)


@pytest.mark.parametrize("name", ["resize", "rs"])
def test_resize_sets_every_part(name: str) -> None:
    options = options_of(f"{name}:fill:300:200:1:1:so:5:6")
    assert options == Options(
        resizing_type="fill",
        width=300,
        height=200,
        enlarge=True,
        extend=True,
        extend_gravity=Gravity("so", 5, 6),
    )


@pytest.mark.parametrize("name", ["size", "s"])
def test_size_sets_every_part(name: str) -> None:
    options = options_of(f"{name}:300:200:t:true:nowe")
    assert options == Options(
        width=300, height=200, enlarge=True, extend=True, extend_gravity=Gravity("nowe")
    )


@pytest.mark.parametrize("resizing_type", RESIZING_TYPES)
def test_every_resizing_type(resizing_type: str) -> None:
    assert options_of(f"rs:{resizing_type}").resizing_type == resizing_type


def test_omitted_trailing_arguments_keep_current_values() -> None:
    options = options_of("w:10/h:20/el:1/rs:fill:300")
    assert (options.resizing_type, options.width, options.height, options.enlarge) == (
        "fill",
        300,
        20,
        True,
    )


def test_empty_arguments_of_meta_options_are_skipped() -> None:
    options = options_of("rt:force/w:10/h:20/rs::300::1")
    assert (options.resizing_type, options.width, options.height, options.enlarge) == (
        "force",
        300,
        20,
        True,
    )
    assert options_of("w:10/s::20").width == 10


def test_later_options_override_earlier_ones() -> None:
    assert options_of("w:100/w:200").width == 200
    assert options_of("rs:fill:100/rt:fit").resizing_type == "fit"
    assert options_of("q:10/quality:20/q:30").quality == 30
    assert options_of("bg:ffffff/bg:").background is None


# -- gravity ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", COMPASS)
def test_every_compass_gravity_with_and_without_offsets(kind: str) -> None:
    assert options_of(f"g:{kind}").gravity == Gravity(kind)
    assert options_of(f"g:{kind}:10").gravity == Gravity(kind, 10, 0)
    assert options_of(f"g:{kind}:10:-0.25").gravity == Gravity(kind, 10, -0.25)


def test_smart_and_focus_point_gravity() -> None:
    assert options_of("g:sm").gravity == Gravity("sm")
    assert options_of("g:fp:0.25:1").gravity == Gravity("fp", 0.25, 1.0)
    assert options_of("g:fp:0:0").gravity == Gravity("fp", 0.0, 0.0)


def test_gravity_offsets_not_given_keep_current_as_imgproxy() -> None:
    assert options_of("g:no:10:20/g:so").gravity == Gravity("so", 10, 20)
    assert options_of("g:no:10:20/g:sm").gravity == Gravity("sm")
    assert options_of("g:fp:0.5:0.5/g:we").gravity == Gravity("we", 0.5, 0.5)


@pytest.mark.parametrize(
    ("segments", "field", "expected"),
    [
        ("g:no::5", "gravity", Gravity("no", 0, 5)),
        ("g:no:3:4/g:no::5", "gravity", Gravity("no", 3, 5)),
        ("g:no:3:4/g:so:7:", "gravity", Gravity("so", 7, 4)),
        ("g:no:3:4/g:we::", "gravity", Gravity("we", 3, 4)),
        ("dpr:2/g:no::5", "gravity", Gravity("no", 0, 5)),
        ("c:50:50:ce::10", "crop", Crop(50, 50, Gravity("ce", 0, 10))),
        ("ex:1:no::5", "extend_gravity", Gravity("no", 0, 5)),
        ("dpr:2/ex:1:no::5", "extend_gravity", Gravity("no", 0, 5)),
    ],
)
def test_empty_gravity_offsets_keep_current_values(
    segments: str, field: str, expected: object
) -> None:
    # Skipped like every other empty argument (imgproxy refuses them: docs/urls.md).
    assert getattr(options_of(segments), field) == expected


def test_empty_gravity_offset_shares_the_spelled_out_cache_path() -> None:
    assert build_path(options_of("g:no::5"), "a") == build_path(options_of("g:no:0:5"), "a")


@pytest.mark.parametrize(
    "argument",
    [
        *("xx", "", "sm:1", "fp", "fp:0.5", "fp::0.5", "fp:0.5:"),
        *("fp:1.5:0.5", "fp:0.5:-0.1", "no:1:2:3", "ce:a", "CE"),
    ],
)
def test_bad_gravity_names_gravity(argument: str) -> None:
    assert "gravity" in error_of(f"/g:{argument}/plain/a").public


# -- extend, crop, padding, background ---------------------------------------------


def test_extend_gravity() -> None:
    assert options_of("ex:1:no:5:5").extend_gravity == Gravity("no", 5, 5)
    assert options_of("ex:1:fp:0.1:0.9").extend_gravity == Gravity("fp", 0.1, 0.9)
    assert "extend" in error_of("/ex:1:sm/plain/a").public
    assert "extend" in error_of("/ex:1:no:1:2:3/plain/a").public
    assert "extend" in error_of("/ex:maybe/plain/a").public


def test_extend_no_ops_are_folded() -> None:
    assert options_of("ex:1:ce").extend_gravity is None
    assert options_of("ex:1:ce:0:0") == options_of("ex:1")
    assert options_of("ex:0:so") == Options()


def test_crop() -> None:
    assert options_of("c:100:200").crop == Crop(100, 200)
    assert options_of("c:0.5:0.25:fp:0.1:0.2").crop == Crop(0.5, 0.25, Gravity("fp", 0.1, 0.2))
    assert options_of("c:10:20:sm").crop == Crop(10, 20, Gravity("sm"))
    assert options_of("c:10:20:no/c:30").crop == Crop(30, 20, Gravity("no"))
    assert options_of("c:0:0:no").crop is None


@pytest.mark.parametrize("argument", ["-1", "", "x", "1:-1", "1:1:zz", "1e9"])
def test_bad_crop_names_crop(argument: str) -> None:
    assert "crop" in error_of(f"/c:{argument}/plain/a").public


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("10", (10, 10, 10, 10)),
        ("10:20", (10, 20, 10, 20)),
        ("1:2:3", (1, 2, 3, 2)),
        ("1:2:3:4", (1, 2, 3, 4)),
        ("::7", (0, 0, 7, 0)),
        ("0", (0, 0, 0, 0)),
    ],
)
def test_padding_is_css_like(argument: str, expected: tuple[int, int, int, int]) -> None:
    assert options_of(f"pd:{argument}").padding == expected


def test_padding_keeps_sides_not_given() -> None:
    assert options_of("pd:5/pd::7").padding == (5, 7, 5, 7)


@pytest.mark.parametrize(
    ("argument", "expected"),
    [("255:0:10", (255, 0, 10)), ("ff000a", (255, 0, 10)), ("F0a", (255, 0, 170))],
)
def test_background(argument: str, expected: tuple[int, int, int]) -> None:
    assert options_of(f"bg:{argument}").background == expected


@pytest.mark.parametrize("argument", ["256:0:0", "1:2", "1:2:3:4", "ggg", "ff00", "-1:0:0"])
def test_bad_background_names_background(argument: str) -> None:
    assert "background" in error_of(f"/bg:{argument}/plain/a").public


# -- rotation, flips, quality, format ---------------------------------------------


@pytest.mark.parametrize(
    ("argument", "expected"), [("0", 0), ("90", 90), ("-90", 270), ("450", 90), ("360", 0)]
)
def test_rotate_is_normalised(argument: str, expected: int) -> None:
    assert options_of(f"rot:{argument}").rotate == expected


def test_flip() -> None:
    assert (options_of("fl:1").flip_horizontal, options_of("fl:1").flip_vertical) == (True, False)
    assert options_of("fl::1").flip_vertical
    assert options_of("fl:1:0/fl::1") == Options(flip_horizontal=True, flip_vertical=True)
    assert "flip" in error_of("/fl:1:1:1/plain/a").public


def test_format_quality_merges_sorts_and_drops_zero() -> None:
    options = options_of("fq:webp:60:jpg:80/fq:avif:50:webp:0")
    assert options.format_quality == (("avif", 50), ("jpeg", 80))


@pytest.mark.parametrize("argument", ["webp", "webp:60:jpeg", "bmp:50", "webp:101", "webp:x"])
def test_bad_format_quality_names_it(argument: str) -> None:
    assert "format_quality" in error_of(f"/fq:{argument}/plain/a").public


@pytest.mark.parametrize("name", sorted(FORMAT_NAMES))
def test_format_names(name: str) -> None:
    expected = "jpeg" if name == "jpg" else name
    assert options_of(f"f:{name}").format == expected
    assert parse_path(f"/plain/a.png@{name}").options.format == expected
    assert expected in OUTPUT_FORMATS


@pytest.mark.parametrize("name", ["bmp", "tiff", "JPG", "BEST", "", "jpeg "])
def test_unknown_format_names_it(name: str) -> None:
    error = error_of(f"/f:{name}/plain/a")
    assert "format" in error.public
    assert name.strip() in error.public


def test_extension_wins_over_format_option_as_in_imgproxy() -> None:
    assert parse_path("/f:webp/plain/a.jpg@png").options.format == "png"
    assert parse_path("/f:webp/plain/a.jpg").options.format == "webp"
    assert parse_path("/f:webp/YS5qcGc.avif").options.format == "avif"


@pytest.mark.parametrize("text", sorted(BOOLEANS))
def test_booleans_are_go_parsebool(text: str) -> None:
    assert options_of(f"el:{text}").enlarge is BOOLEANS[text]


@pytest.mark.parametrize("text", ["yes", "no", "2", "", "tRUE", "on"])
def test_other_booleans_are_rejected(text: str) -> None:
    assert "enlarge" in error_of(f"/el:{text}/plain/a").public


def test_cachebuster_is_percent_decoded_once() -> None:
    assert options_of("cb:a%2Fb%2520").cachebuster == "a/b%20"


# -- bad values: always InvalidOptions naming the option --------------------------

BAD_SEGMENTS = [
    ("w:-1", "width"),
    ("w:1.5", "width"),
    ("w:abc", "width"),
    ("w:", "width"),
    ("w:100001", "width"),
    ("w:1_0", "width"),
    ("w: 1", "width"),
    ("w:\u0661\u0662", "width"),  # Arabic-Indic digits, which int() would accept
    ("w:" + "9" * 5000, "width"),  # int() would raise ValueError past 4300 digits
    ("w:1:2", "width"),
    ("h:-5", "height"),
    ("mw:x", "min-width"),
    ("mh:-1", "min-height"),
    ("dpr:0", "dpr"),
    ("dpr:8.5", "dpr"),
    ("dpr:nan", "dpr"),
    ("dpr:inf", "dpr"),
    ("dpr:-1", "dpr"),
    ("rt:stretch", "resizing_type"),
    ("rs:fill:1:2:0:0:ce:0:0:9", "resize"),
    ("s:1:2:0:0:ce:0:0:9", "size"),
    ("rs:fill:-1", "width"),
    ("bl:101", "blur"),
    ("bl:-1", "blur"),
    ("sh:1e999", "sharpen"),
    ("rot:45", "rotate"),
    ("rot:ninety", "rotate"),
    ("q:101", "quality"),
    ("q:-1", "quality"),
    ("pd:-1", "padding"),
    ("pd:1:2:3:4:5", "padding"),
    ("exp:-1", "expires"),
    ("exp:soon", "expires"),
    ("mb:-1", "max_bytes"),
    ("qm:best", "quality_mode"),
    ("qm:high:1", "quality_mode"),
    ("cb:a:b", "cachebuster"),
    ("sm:maybe", "strip_metadata"),
    ("kcr:2", "keep_copyright"),
    ("scp:x", "strip_color_profile"),
    ("ar:x", "auto_rotate"),
    ("nosuch:1", "nosuch"),
    ("pr:missing", "missing"),
]


@pytest.mark.parametrize(("segment", "named"), BAD_SEGMENTS)
def test_bad_value_names_the_option(segment: str, named: str) -> None:
    error = error_of(f"/{segment}/plain/a.jpg")
    assert named in error.public
    assert error.detail


@pytest.mark.parametrize("path", ["/ph:1/plain/a.jpg", "/preserve_hdr:0/plain/a.jpg"])
def test_preserve_hdr_is_refused_saying_why(path: str) -> None:
    # imgproxy's preserve_hdr: refused with the reason, not as an unknown option.
    error = error_of(path)
    assert error.public.startswith("preserve_hdr is not supported: ")
    assert "Unknown option" not in error.public
    assert error_of("/pr:hdr/plain/a.jpg", {"hdr": "w:10/ph:1"}).public == error.public


def test_public_message_is_short_and_inert() -> None:
    error = error_of("/<script>:1/plain/a")
    assert "<" not in error.public
    assert "Unknown option" in error.public
    assert len(error_of("/w:" + "x" * 1000 + "/plain/a").public) < 100


# -- presets --------------------------------------------------------------------


def test_presets_by_either_name_and_several() -> None:
    presets = {"small": "rs:fill:100:100", "q": "q:50/sh:1"}
    expected = Options(resizing_type="fill", width=100, height=100, quality=50, sharpen=1)
    assert options_of("preset:small:q", presets) == expected
    assert options_of("pr:small/pr:q", presets) == expected


def test_default_preset_applies_first_and_urls_override_it() -> None:
    presets = {"default": "q:70/w:10", "big": "w:1000"}
    assert options_of("", presets) == Options(quality=70, width=10)
    assert options_of("w:20", presets) == Options(quality=70, width=20)
    assert options_of("pr:big", presets).width == 1000
    assert options_of("q:0", presets).quality == 0


def test_preset_applies_where_it_is_named() -> None:
    presets = {"p": "w:100"}
    assert options_of("w:5/pr:p", presets).width == 100
    assert options_of("pr:p/w:5", presets).width == 5


def test_unknown_preset_names_it() -> None:
    assert "nope" in error_of("/pr:nope/plain/a", {"p": "w:1"}).public
    assert "preset" in error_of("/pr:/plain/a").public


def test_recursive_presets_are_skipped_as_in_imgproxy() -> None:
    presets = {"a": "w:1/pr:b", "b": "h:2/pr:a"}
    assert options_of("pr:a", presets) == Options(width=1, height=2)


def test_bad_preset_text_is_invalid_options() -> None:
    assert "preset" in error_of("/pr:p/plain/a", {"p": "w:1/oops"}).public
    assert "width" in error_of("/pr:p/plain/a", {"p": "w:-1"}).public


def test_preset_fan_out_is_capped() -> None:
    presets = {f"p{i}": "/".join([f"pr:p{i + 1}"] * 4) for i in range(10)}
    presets["p10"] = "w:1"
    error = error_of("/pr:p0/plain/a", presets)
    assert "Too many options" in error.public
    chain = "/".join(["w:1"] * (MAX_APPLIED_OPTIONS + 1))
    assert "Too many options" in error_of(f"/{chain}/plain/a").public


# -- sources ----------------------------------------------------------------------


def test_plain_source_is_percent_decoded_exactly_once() -> None:
    assert parse_path("/plain/a%252e.jpg").source == "a%2e.jpg"
    assert parse_path("/plain/%2e%2e/%2e%2e/etc/passwd").source == "../../etc/passwd"
    assert parse_path("/plain/a%40b.jpg@png") == ParsedPath(Options(format="png"), "a@b.jpg")
    assert parse_path("/plain/caf%C3%A9%20x.jpg").source == "café x.jpg"


def test_plain_source_is_kept_exact() -> None:
    assert parse_path("/plain//srv/a//b/").source == "/srv/a//b/"
    assert parse_path("/plain/media:photos/a.jpg").source == "media:photos/a.jpg"
    assert parse_path("/plain/w:100").source == "w:100"
    assert parse_path("/plain/a.jpg@").options.format == ""


@pytest.mark.parametrize(
    "path",
    [
        "/plain/a%00b.jpg",  # NUL
        "/plain/a%ff.jpg",  # not UTF-8 once decoded
        "/plain/a@b@png",  # two extensions
        "/plain/@png",  # empty source
        "/plain",
        "/plain/",
        "/w:100",
        "/w:100/",
        "/",
        "",
        "/YQ.png.png",  # two extensions
        "/YQ=x",  # base64 with a stray character
        "/Y",  # base64 of impossible length
        "/_w",  # base64 of bytes that are not UTF-8
        "/AA",  # base64 of NUL
        "/.png",
        "/w:%ff/plain/a",  # option not UTF-8
        "/plain/\ud800",  # lone surrogate
    ],
)
def test_bad_sources_are_invalid_options(path: str) -> None:
    error_of(path)


def test_base64_source_split_padded_or_not() -> None:
    encoded = base64.urlsafe_b64encode(b"media/photo1.jpg").decode()
    assert encoded.endswith("=")
    split = "/".join(encoded[i : i + 5] for i in range(0, len(encoded), 5))
    for text in (encoded, encoded.rstrip("="), split, split.rstrip("=")):
        assert parse_path(f"/w:10/{text}") == ParsedPath(Options(width=10), "media/photo1.jpg")
        assert parse_path(f"/{text}.webp").options.format == "webp"


def test_base64_source_is_not_percent_decoded() -> None:
    encoded = base64.urlsafe_b64encode(b"a%252e").decode().rstrip("=")
    assert parse_path(f"/{encoded}").source == "a%252e"


# -- building ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        "rs:fill:300:200",
        "rt:fill/w:300/h:200",
        "w:300/h:200/rt:fill",
        "resize:fill:300:200:0/g:ce/q:0/ex:0:so",
        "s:300:200/resizing_type:fill/c:0:0:no",
    ],
)
def test_equivalent_requests_build_one_path(options: str) -> None:
    parsed = parse_path(f"/{options}/plain/a.jpg")
    assert build_path(parsed.options, parsed.source) == "/rt:fill/w:300/h:200/plain/a.jpg"


def test_build_defaults_is_just_the_source() -> None:
    assert build_path(Options(), "a.jpg") == "/plain/a.jpg"
    assert build_path(Options(), "a.jpg", encode="base64") == "/YS5qcGc"


def test_build_escapes_what_the_parser_would_split_on() -> None:
    path = build_path(Options(format="webp"), "dir/a b@c%d?e#f:g.jpg")
    assert path == "/plain/dir/a%20b%40c%25d%3Fe%23f:g.jpg@webp"
    assert parse_path(path) == ParsedPath(Options(format="webp"), "dir/a b@c%d?e#f:g.jpg")


def test_build_uses_short_names_in_a_fixed_order() -> None:
    options = Options(
        resizing_type="fill",
        width=1,
        height=2,
        min_width=3,
        min_height=4,
        dpr=2,
        enlarge=True,
        extend=True,
        extend_gravity=Gravity("so", 1, 0),
        gravity=Gravity("fp", 0.5, 0.25),
        crop=Crop(0.5, 10, Gravity("sm")),
        padding=(1, 2, 3, 4),
        background=(255, 0, 16),
        blur=1.5,
        sharpen=0.5,
        rotate=270,
        flip_vertical=True,
        quality=80,
        format_quality=(("avif", 50), ("webp", 70)),
        format="jpeg",
        strip_metadata=False,
        keep_copyright=False,
        strip_color_profile=False,
        auto_rotate=False,
        cachebuster="v 1/2",
        expires=4102444800,
        max_bytes=1000,
        quality_mode="high",
    )
    path = build_path(options, "a.jpg")
    assert path == (
        "/rt:fill/w:1/h:2/mw:3/mh:4/dpr:2/el:1/ex:1:so:1:0/g:fp:0.5:0.25/c:0.5:10:sm"
        "/pd:1:2:3:4/bg:ff0010/bl:1.5/sh:0.5/rot:270/fl:0:1/q:80/qm:high/fq:avif:50:webp:70"
        "/sm:0/kcr:0/scp:0/ar:0/cb:v%201%2F2/exp:4102444800/mb:1000/plain/a.jpg@jpeg"
    )
    assert parse_path(path) == ParsedPath(options, "a.jpg")


def test_build_folds_no_op_variants() -> None:
    folded = Options(extend=True, extend_gravity=Gravity(), crop=Crop(0, 0, Gravity("no")))
    assert build_path(folded, "a") == build_path(Options(extend=True), "a")


def test_build_refuses_what_no_url_can_carry() -> None:
    with pytest.raises(InvalidOptions):
        build_path(Options(cachebuster="a:b"), "a")
    with pytest.raises(InvalidOptions):
        build_path(Options(), "")
    with pytest.raises(InvalidOptions):
        build_path(Options(), "a\x00b")
    with pytest.raises(ValueError, match="encode"):
        build_path(Options(), "a", encode="hex")
    with pytest.raises(InvalidOptions):
        build_path(Options(filename="\udc80"), "a")


# -- properties -------------------------------------------------------------------

offsets = st.floats(-MAX_DIMENSION, MAX_DIMENSION)
fractions = st.floats(0, 1)


def gravities(*, allow_smart: bool = True) -> st.SearchStrategy[Gravity]:
    kinds = [
        st.builds(Gravity, st.sampled_from(COMPASS), offsets, offsets),
        st.builds(Gravity, st.just("fp"), fractions, fractions),
    ]
    if allow_smart:
        kinds.append(st.just(Gravity("sm")))
    return st.one_of(kinds)


dimensions = st.integers(0, MAX_DIMENSION)
crops = st.builds(
    Crop,
    st.floats(0, MAX_DIMENSION),
    st.floats(0, MAX_DIMENSION),
    st.none() | gravities(),
).filter(lambda crop: crop.width != 0 or crop.height != 0)
colors = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255))
watermarks = st.builds(
    Watermark,
    st.floats(0, 1, exclude_min=True),
    st.sampled_from(("no", "so", "ea", "we", "noea", "nowe", "soea", "sowe", "ce", "re")),
    offsets,
    offsets,
    st.just(0.0) | st.floats(0, 1000, exclude_min=True),
)
format_qualities = st.dictionaries(
    st.sampled_from(OUTPUT_FORMATS), st.integers(1, 100), max_size=3
).map(lambda pairs: tuple(sorted(pairs.items())))


@st.composite
def valid_options(draw: st.DrawFn) -> Options:
    """Any valid Options in normal form (no-op variants folded)."""
    extend = draw(st.booleans())
    extend_gravity = None
    if extend:
        extend_gravity = draw(
            st.none() | gravities(allow_smart=False).filter(lambda g: g != Gravity())
        )
    extend_aspect_ratio = draw(st.booleans())
    extend_aspect_ratio_gravity = None
    if extend_aspect_ratio:
        extend_aspect_ratio_gravity = draw(
            st.none() | gravities(allow_smart=False).filter(lambda g: g != Gravity())
        )
    trim_threshold = draw(st.none() | st.floats(0, 255))
    trimming = trim_threshold is not None
    raw = draw(st.booleans())
    return Options(
        extend_aspect_ratio=extend_aspect_ratio,
        extend_aspect_ratio_gravity=extend_aspect_ratio_gravity,
        zoom_width=draw(st.floats(0, 1000, exclude_min=True)),
        zoom_height=draw(st.floats(0, 1000, exclude_min=True)),
        trim_threshold=trim_threshold,
        trim_color=draw(st.none() | colors) if trimming else None,
        trim_equal_horizontal=draw(st.booleans()) and trimming,
        trim_equal_vertical=draw(st.booleans()) and trimming,
        pixelate=draw(st.just(0) | st.integers(2, MAX_DIMENSION)),
        watermark=draw(st.just(Watermark()) | watermarks),
        filename=draw(st.text(max_size=255)),
        return_attachment=draw(st.booleans()),
        skip_processing=()
        if raw
        else tuple(sorted(draw(st.sets(st.sampled_from(OUTPUT_FORMATS), max_size=3)))),
        raw=raw,
        enforce_thumbnail=draw(st.booleans()),
        max_src_resolution=draw(st.integers(0, 10**12)),
        max_src_file_size=draw(st.integers(0, 2**40)),
        max_animation_frames=draw(st.integers(0, 10**6)),
        max_animation_frame_resolution=draw(st.integers(0, 10**12)),
        max_result_dimension=draw(dimensions),
        resizing_type=draw(st.sampled_from(RESIZING_TYPES)),
        width=draw(dimensions),
        height=draw(dimensions),
        min_width=draw(dimensions),
        min_height=draw(dimensions),
        dpr=draw(st.floats(0, 8, exclude_min=True)),
        enlarge=draw(st.booleans()),
        extend=extend,
        extend_gravity=extend_gravity,
        gravity=draw(gravities()),
        crop=draw(st.none() | crops),
        padding=draw(st.tuples(dimensions, dimensions, dimensions, dimensions)),
        background=draw(
            st.none() | st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255))
        ),
        blur=draw(st.floats(0, 100)),
        sharpen=draw(st.floats(0, 100)),
        rotate=draw(st.sampled_from((0, 90, 180, 270))),
        flip_horizontal=draw(st.booleans()),
        flip_vertical=draw(st.booleans()),
        quality=draw(st.integers(0, 100)),
        format_quality=draw(format_qualities),
        format="" if raw else draw(st.sampled_from(("", *OUTPUT_FORMATS))),
        strip_metadata=draw(st.booleans()),
        keep_copyright=draw(st.booleans()),
        strip_color_profile=draw(st.booleans()),
        auto_rotate=draw(st.booleans()),
        cachebuster=draw(st.text().filter(lambda text: ":" not in text)),
        expires=draw(st.integers(0, 2**40)),
        max_bytes=draw(st.integers(0, 2**40)),
        quality_mode=draw(st.sampled_from(("", *QUALITY_MODES))),
    )


sources = st.text(min_size=1).filter(lambda text: "\x00" not in text)


@settings(max_examples=300)
@given(valid_options(), sources, st.sampled_from(("plain", "base64")))
def test_parse_inverts_build(options: Options, source: str, encode: str) -> None:
    path = build_path(options, source, encode=encode)
    assert parse_path(path) == ParsedPath(options, source)


@given(valid_options(), sources)
def test_both_encodings_build_paths_of_one_request(options: Options, source: str) -> None:
    plain = parse_path(build_path(options, source))
    assert plain == parse_path(build_path(options, source, encode="base64"))


@settings(max_examples=500)
@given(st.text())
def test_any_text_parses_or_raises_invalid_options(path: str) -> None:
    try:
        parse_path(path)
    except InvalidOptions as error:
        assert error.public


NAMES = sorted(
    {name for names, *_ in SIMPLE_OPTIONS for name in names} | {"rs", "s", "resize", "size", "pr"}
)
ARGUMENTS = st.one_of(
    st.sampled_from(("", "0", "1", "t", "-1", "0.5", "fill", "sm", "fp", "no", "ff0000", "jpg")),
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)
segments = st.builds(
    lambda name, args: ":".join([name, *args]),
    st.sampled_from(NAMES) | st.text(max_size=4),
    st.lists(ARGUMENTS, min_size=1, max_size=9),
)


@settings(max_examples=1000)
@given(st.lists(segments, max_size=6), st.sampled_from(("/plain/a.jpg", "/YS5qcGc.png")))
def test_random_options_parse_or_raise_invalid_options_and_build_idempotently(
    option_segments: list[str], tail: str
) -> None:
    path = "/" + "/".join(option_segments) + tail if option_segments else tail
    try:
        parsed = parse_path(path, {"p": "rs:fit:1:2/g:no:5/pr:p"})
    except InvalidOptions:
        event("rejected")
        return
    event("parsed")
    canonical = build_path(parsed.options, parsed.source)
    assert parse_path(canonical) == parsed
    assert build_path(parsed.options, parsed.source, encode="base64") != canonical


#: Plausible arguments per option (by every name), so that most generated paths
#: parse and the canonical-path properties see many real combinations.
PLAUSIBLE_ARGUMENTS = {
    ("resize", "rs"): ["fill:300:200", "fit::100", "force:1:2:1:1:so:5", ":50", "auto:0:0:0"],
    ("size", "s"): ["300:200", ":100:t", "1:2:0:1:fp:0.5:0.5", "::1"],
    ("resizing_type", "rt"): list(RESIZING_TYPES),
    ("width", "w", "height", "h", "min-width", "mw", "min-height", "mh"): ["0", "1", "300"],
    ("dpr",): ["1", "2", "0.5", "3.25"],
    ("enlarge", "el", "strip_metadata", "sm", "keep_copyright", "kcr"): ["0", "1", "t", "False"],
    ("strip_color_profile", "scp", "auto_rotate", "ar"): ["0", "true"],
    ("extend", "ex"): ["1", "0", "1:no", "1:ce:0:0", "t:fp:0.1:0.2", "1:sowe:3"],
    ("gravity", "g"): ["sm", "ce", "no:5:6", "fp:0.5:0.25", "ea:0.5", "we"],
    ("crop", "c"): ["100:200", "0.5:0.5:sm", "0:0", "10", "1:2:no:3:4"],
    ("padding", "pd"): ["10", "1:2", "1:2:3", "1:2:3:4", "::5", "0"],
    ("background", "bg"): ["", "ff0000", "abc", "1:2:3"],
    ("blur", "bl", "sharpen", "sh"): ["0", "1.5", "100"],
    ("rotate", "rot"): ["0", "90", "-90", "720"],
    ("flip", "fl"): ["1", ":1", "1:0", "0:0"],
    ("quality", "q"): ["0", "80", "100"],
    ("format_quality", "fq"): ["webp:60", "jpg:80:avif:0", "png:1:gif:2"],
    ("format", "f", "ext"): list(FORMAT_NAMES),
    ("cachebuster", "cb"): ["", "v1", "a%2Fb", "%25"],
    ("expires", "exp", "max_bytes", "mb"): ["0", "1", "4102444800"],
    ("preset", "pr"): ["p"],
    ("zoom", "z"): ["2", "0.5:1.5"],
    ("extend_aspect_ratio", "exar"): ["1", "0", "1:so:2", "t:fp:0.5:0.5"],
    ("trim", "t"): ["10", "", "5:ff0000", "5::1:1", "0:abc:0"],
    ("pixelate", "pix"): ["0", "1", "8"],
    ("watermark", "wm"): ["0", "0.5", "1:re:10:20", "0.5:soea::5:0.3"],
    ("filename", "fn"): ["a", "YS9i:1", "a%20b"],
    ("return_attachment", "att", "raw", "enforce_thumbnail", "eth"): ["0", "1"],
    ("skip_processing", "skp"): ["jpg", "png:webp"],
    ("max_src_resolution", "msr", "max_animation_frame_resolution", "mafr"): ["0", "1.5"],
    ("max_src_file_size", "msfs", "max_animation_frames", "maf"): ["0", "3"],
    ("max_result_dimension", "mrd"): ["0", "640"],
}
plausible_segments = st.one_of(
    [
        st.builds("{}:{}".format, st.sampled_from(names), st.sampled_from(arguments))
        for names, arguments in PLAUSIBLE_ARGUMENTS.items()
    ]
)


@settings(max_examples=500)
@given(
    st.lists(plausible_segments | segments, max_size=8),
    st.sampled_from(("/plain/a.jpg", "/plain/b%20c@png", "/YS5qcGc.png", "/YS5q/cGc")),
)
def test_plausible_options_build_one_canonical_path(option_segments: list[str], tail: str) -> None:
    path = "/" + "/".join(option_segments) + tail if option_segments else tail
    try:
        parsed = parse_path(path, {"p": "rs:fill:10:20/g:no:5"})
    except InvalidOptions:
        event("rejected")
        return
    event("parsed")
    canonical = build_path(parsed.options, parsed.source)
    assert parse_path(canonical) == parsed
    assert parse_path(build_path(parsed.options, parsed.source, encode="base64")) == parsed
    again = parse_path(canonical)
    assert build_path(again.options, again.source) == canonical


@given(valid_options(), sources)
def test_build_of_parse_is_idempotent(options: Options, source: str) -> None:
    once = build_path(options, source)
    parsed = parse_path(once)
    assert build_path(parsed.options, parsed.source) == once


@given(valid_options(), valid_options(), sources)
def test_distinct_requests_build_distinct_paths(
    first: Options, second: Options, source: str
) -> None:
    assume(first != second)
    assert build_path(first, source) != build_path(second, source)


def test_replace_with_format_changes_only_the_extension() -> None:
    parsed = parse_path("/w:10/plain/a.jpg")
    assert build_path(parsed.options._replace(format="webp"), parsed.source) == (
        "/w:10/plain/a.jpg@webp"
    )
