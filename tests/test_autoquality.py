"""``autoquality``: imgproxy's option and settings, and the search the encoder makes."""

from __future__ import annotations

import math
from typing import Any

import pytest
import pyvips
from django.core.exceptions import ImproperlyConfigured

from django_oximg import setting_values
from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import AutoQuality, Options, build_path, parse_path
from django_oximg.core.options.autoquality import (
    MAX_ENCODES,
    AutoQualitySettings,
    QualityTarget,
    planned_encodes,
    quality_target,
)
from django_oximg.core.pipeline import autoquality
from django_oximg.core.pipeline.budget import estimate_peak_bytes
from django_oximg.core.pipeline.encode import encode_at_target, save
from tests.images import jpeg, noise, photo

DSSIM = AutoQualitySettings(method="dssim")


def options_of(path: str) -> Options:
    return parse_path(f"/{path}/plain/a.jpg").options


# -- the option ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("aq:dssim:0.02:70:80:0.001", AutoQuality("dssim", 0.02, 70, 80, 0.001)),
        ("autoquality:size:10240:10:80", AutoQuality("size", 10240.0, 10, 80, None)),
        ("aq:none", AutoQuality("none")),
        ("aq::0.01", AutoQuality("", 0.01)),
        # A later aq redefines only what it gives.
        ("aq:size:5000/aq:::20", AutoQuality("size", 5000.0, 20)),
    ],
)
def test_the_option_reads_imgproxys_arguments(path: str, expected: AutoQuality) -> None:
    assert options_of(path).autoquality == expected


@pytest.mark.parametrize(
    "path",
    ["aq:dssim:0.02:70:80:0.001", "aq:size:10240:10:80", "aq:none", "aq::0.5", "aq:ml:::90"],
)
def test_the_canonical_path_reads_back_to_the_same_options(path: str) -> None:
    options = options_of(path)
    built = build_path(options, "a.jpg")
    assert "/aq:" in built
    assert parse_path(built).options == options


def test_no_autoquality_writes_nothing_and_each_target_its_own_path() -> None:
    assert "aq" not in build_path(options_of("w:10"), "a.jpg")
    paths = {build_path(options_of(f"aq:dssim:{t}"), "a.jpg") for t in ("0.01", "0.02")}
    assert len(paths) == 2


@pytest.mark.parametrize(
    "path",
    [
        "aq:best",
        "aq:dssim:x",
        "aq:dssim:-1",
        "aq:size:1:0",
        "aq:size:1:10:101",
        "aq:size:1:80:70",
        "aq:dssim:0.02:70:80:2",
        "aq:dssim:0.02:70:80:0.001:1",
    ],
)
def test_a_bad_argument_is_refused(path: str) -> None:
    with pytest.raises(InvalidOptions, match="autoquality"):
        options_of(path)


# -- what a render is asked for -----------------------------------------------------


def test_off_by_default() -> None:
    assert quality_target(options_of("w:10"), "jpeg", AutoQualitySettings(), 100) is None


def test_the_settings_give_imgproxys_defaults_and_avifs_own_bounds() -> None:
    jpeg_target = quality_target(options_of("w:10"), "jpeg", DSSIM, 100)
    avif_target = quality_target(options_of("w:10"), "avif", DSSIM, 100)
    assert jpeg_target == QualityTarget("dssim", 0.02, 70, 80, 0.001)
    assert avif_target == QualityTarget("dssim", 0.02, 60, 65, 0.001)


def test_a_urls_arguments_redefine_the_settings_for_every_format() -> None:
    target = quality_target(options_of("aq::0.01:50:90"), "avif", DSSIM, 100)
    assert target == QualityTarget("dssim", 0.01, 50, 90, 0.001)
    assert quality_target(options_of("aq:none"), "jpeg", DSSIM, 100) is None
    assert quality_target(options_of("aq:ml"), "jpeg", AutoQualitySettings(), 100) == (
        QualityTarget("dssim", 0.02, 70, 80, 0.001)
    )


def test_formats_without_a_quality_animations_and_large_results_are_not_searched() -> None:
    settings = DSSIM._replace(max_resolution=0.5)
    assert quality_target(options_of("w:10"), "png", DSSIM, 100) is None
    assert quality_target(options_of("w:10"), "jpeg", settings, 600_000) is None
    assert quality_target(options_of("w:10"), "jpeg", settings, 400_000) is not None


def test_a_urls_quality_turns_the_sites_method_off_for_its_format_only() -> None:
    assert quality_target(options_of("q:90"), "jpeg", DSSIM, 100) is None
    assert quality_target(options_of("fq:webp:90"), "webp", DSSIM, 100) is None
    assert quality_target(options_of("fq:webp:90"), "jpeg", DSSIM, 100) is not None
    assert quality_target(options_of("q:90/aq:dssim"), "jpeg", DSSIM, 100) is not None


def test_the_setting_is_read_over_imgproxys_defaults() -> None:
    read = setting_values.autoquality(
        {"METHOD": "size", "TARGET": 20000, "FORMAT_MAX": {"webp": 70}}
    )
    assert read == AutoQualitySettings(
        method="size", target=20000, format_max=(("avif", 65), ("webp", 70))
    )


@pytest.mark.parametrize(
    "value",
    [
        {"METHOD": "best"},
        {"MIN": 0},
        {"FORMAT_MIN": {"bmp": 50}},
        {"TARGET": "x"},
        {"ALLOWED_ERROR": 3.0},
        {"METHD": "size"},
        "dssim",
    ],
)
def test_a_bad_setting_is_refused(value: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="AUTOQUALITY"):
        setting_values.autoquality(value)


# -- the search ---------------------------------------------------------------------


def counted(image: pyvips.Image, fmt: str = "jpeg") -> tuple[list[int], Any]:
    """An encoder of ``image`` that records each quality it is asked for."""
    asked: list[int] = []

    def encode_at(quality: int) -> bytes:
        asked.append(quality)
        return save(image, fmt, quality, keep=0)

    return asked, encode_at


def test_dssim_is_zero_for_the_same_pixels_and_grows_as_quality_falls() -> None:
    image = photo(200, 150).copy_memory()
    reference = autoquality.Reference(image)
    lossless = bytes(image.pngsave_buffer())
    scores = [reference.dssim(save(image, "jpeg", q, keep=0)) for q in (90, 60, 20)]
    assert reference.dssim(lossless) == pytest.approx(0.0, abs=1e-6)
    assert 0 < scores[0] < scores[1] < scores[2]


@pytest.mark.parametrize("target", [0.002, 0.01, 0.03])
def test_the_dssim_search_keeps_the_lowest_quality_that_meets_the_target(target: float) -> None:
    image = photo(200, 150).copy_memory()
    reference = autoquality.Reference(image)
    asked, encode_at = counted(image)
    goal = QualityTarget("dssim", target, 10, 95, 0.0)
    chosen = autoquality.search(encode_at, goal, reference)
    assert 10 <= chosen.quality <= 95
    assert chosen.encodes == len(asked) <= MAX_ENCODES
    assert chosen.data == save(image, "jpeg", chosen.quality, keep=0)
    if chosen.score <= target:
        assert chosen.quality == 10 or reference.dssim(encode_at(chosen.quality - 1)) > target
    else:
        assert chosen.quality == 95


def test_the_dssim_search_stops_within_the_allowed_error() -> None:
    image = photo(200, 150).copy_memory()
    reference = autoquality.Reference(image)
    asked, encode_at = counted(image)
    goal = QualityTarget("dssim", 0.01, 10, 95, 0.0)
    start = autoquality.first_quality(goal, reference)
    error = abs(reference.dssim(save(image, "jpeg", start, keep=0)) - goal.target)
    chosen = autoquality.search(encode_at, goal._replace(allowed_error=error + 1e-9), reference)
    assert (chosen.quality, chosen.encodes, asked) == (start, 1, [start])


def test_the_metric_grows_as_the_square_of_the_error() -> None:
    # The same offset on every channel moves the lightness by the same
    # amount everywhere: twice the offset, four times the metric.
    image = (photo(160, 120).cast("float") * 0.5 + 64).cast("uchar").copy_memory()
    reference = autoquality.Reference(image)
    pattern = (pyvips.Image.xyz(160, 120)[0] % 2) * 2 - 1  # +1/-1 columns
    shifted = [bytes((image + pattern * k).cast("uchar").pngsave_buffer()) for k in (2, 4)]
    small, large = (reference.dssim(data) for data in shifted)
    assert small > 0
    assert large == pytest.approx(4 * small, rel=1e-6)


def test_a_textured_image_starts_the_search_higher_than_a_flat_one() -> None:
    flat = pyvips.Image.black(200, 150).new_from_image([120, 130, 140]).cast("uchar")
    goal = QualityTarget("dssim", 0.01, 10, 95, 0.0)
    textured = autoquality.Reference(noise(200, 150).copy_memory())
    plain = autoquality.Reference(flat.copy(interpretation="srgb").copy_memory())
    assert plain.texture < textured.texture
    assert autoquality.first_quality(goal, plain) < autoquality.first_quality(goal, textured)


class LogLinear:
    """A stand-in reference whose metric falls as JPEG's does: log-linear in quality."""

    def __init__(self, at_70: float, slope: float) -> None:
        self.at_70, self.slope = at_70, slope
        offset, factor = autoquality.TEXTURE_AT_70
        self.texture = (math.log(at_70) - offset) / factor

    def dssim(self, encoded: bytes) -> float:
        return self.at_70 * math.exp(-self.slope * (int(encoded) - 70))


@pytest.mark.parametrize(("at_70", "slope"), [(0.02, 0.038), (0.05, 0.03), (0.005, 0.06)])
@pytest.mark.parametrize("target", [0.004, 0.009, 0.02])
def test_the_dssim_search_interpolates_in_few_encodes(
    at_70: float, slope: float, target: float
) -> None:
    reference = LogLinear(at_70, slope)
    asked: list[int] = []

    def encode_at(quality: int) -> bytes:
        asked.append(quality)
        return str(quality).encode()

    goal = QualityTarget("dssim", target, 50, 89, 0.0)
    chosen = autoquality.search(encode_at, goal, reference)  # type: ignore[arg-type]
    metric = {q: reference.dssim(str(q).encode()) for q in range(50, 90)}
    exact = next((q for q in range(50, 90) if metric[q] <= target), 89)
    assert chosen.quality == exact
    assert len(asked) == len(set(asked)) == chosen.encodes
    # A bisection of 50..89 takes 5 or 6.
    assert chosen.encodes <= 4


class Cliff:
    """A stand-in reference whose metric drops at one quality: interpolation creeps up to it."""

    texture = 0.0

    def __init__(self, edge: int) -> None:
        self.edge = edge

    def dssim(self, encoded: bytes) -> float:
        return 0.05 if int(encoded) < self.edge else 0.001


@pytest.mark.parametrize("edge", [72, 76, 77])
def test_the_dssim_search_makes_no_more_encodes_than_a_bisection_would(edge: int) -> None:
    asked: list[int] = []

    def encode_at(quality: int) -> bytes:
        asked.append(quality)
        return str(quality).encode()

    goal = QualityTarget("dssim", 0.01, 70, 80, 0.0)
    chosen = autoquality.search(encode_at, goal, Cliff(edge))  # type: ignore[arg-type]
    assert chosen.encodes == len(asked) <= planned_encodes(goal)
    # Its best so far: a passing quality at or above the edge.
    assert edge <= chosen.quality <= 80
    assert chosen.score < goal.target


def test_the_size_search_keeps_the_highest_quality_that_fits() -> None:
    image = noise(120, 90).copy_memory()
    asked, encode_at = counted(image)
    limit = len(save(image, "jpeg", 50, keep=0)) + 1
    chosen = autoquality.search(encode_at, QualityTarget("size", limit, 10, 80, 0.0))
    assert len(chosen.data) <= limit
    assert len(save(image, "jpeg", chosen.quality + 1, keep=0)) > limit
    assert chosen.encodes == len(asked) <= planned_encodes(QualityTarget("size", limit, 10, 80, 0))


def test_the_size_search_takes_one_encode_when_the_maximum_fits() -> None:
    asked, encode_at = counted(photo(64, 48).copy_memory())
    chosen = autoquality.search(encode_at, QualityTarget("size", 10**9, 10, 80, 0.0))
    assert (chosen.quality, asked) == (80, [80])


def test_the_size_search_gives_the_lowest_quality_when_nothing_fits() -> None:
    asked, encode_at = counted(noise(64, 48).copy_memory())
    chosen = autoquality.search(encode_at, QualityTarget("size", 1, 70, 80, 0.0))
    assert chosen.quality == 70 == min(asked)


@pytest.mark.parametrize(("width", "height"), [(1, 1), (4, 3), (17, 40), (33, 33)])
def test_small_thumbnails_are_measured_at_the_scales_they_have(width: int, height: int) -> None:
    image = photo(width, height).copy_memory()
    reference = autoquality.Reference(image)
    assert reference.count == autoquality.scale_count(width, height) <= autoquality.SCALES
    assert reference.dssim(bytes(image.pngsave_buffer())) == pytest.approx(0.0, abs=1e-6)
    assert reference.dssim(save(image, "jpeg", 20, keep=0)) >= 0


def test_the_search_stops_at_the_deadline_after_its_first_encode() -> None:
    asked, encode_at = counted(photo(64, 48).copy_memory())
    deadline = Deadline(0.0)
    deadline.expired = True
    chosen = autoquality.search(encode_at, QualityTarget("size", 1, 10, 95, 0.0), None, deadline)
    assert asked == [95]
    assert chosen.quality == 95


@pytest.mark.parametrize("fmt", ["jpeg", "webp", "avif"])
def test_encode_at_target_gives_bytes_and_quality_for_another_caller(fmt: str) -> None:
    chosen = encode_at_target(photo(96, 64), fmt, QualityTarget("dssim", 0.01, 30, 90, 0.002))
    assert 30 <= chosen.quality <= 90
    decoded = pyvips.Image.new_from_buffer(chosen.data, "")
    assert (decoded.width, decoded.height) == (96, 64)


# -- in a render --------------------------------------------------------------------


def test_a_render_records_the_chosen_quality_within_the_bounds() -> None:
    source = jpeg(640, 480)
    rendered = pipeline.render(
        source, options_of("aq:dssim:0.01:40:90/w:200"), "jpeg", pipeline.RenderSettings()
    )
    assert 40 <= rendered.quality <= 90
    settings = pipeline.RenderSettings()
    fixed = pipeline.render(source, options_of(f"w:200/q:{rendered.quality}"), "jpeg", settings)
    assert rendered.data == fixed.data
    assert fixed.quality == 0


def test_the_sites_setting_reaches_the_render() -> None:
    settings = pipeline.RenderSettings(autoquality=AutoQualitySettings(method="size", target=1))
    rendered = pipeline.render(jpeg(320, 240), options_of("w:100"), "webp", settings)
    assert rendered.quality == 70


def test_max_bytes_still_holds_after_the_search() -> None:
    source = bytes(noise(320, 240).jpegsave_buffer(Q=95))
    options = options_of("aq:dssim:0.0001:70:90/mb:3000/w:80")
    rendered = pipeline.render(source, options, "jpeg", pipeline.RenderSettings())
    assert len(rendered.data) <= 3000
    assert rendered.quality < 70
    fixed = pipeline.render(
        source, options_of(f"w:80/q:{rendered.quality}"), "jpeg", pipeline.RenderSettings()
    )
    assert rendered.data == fixed.data


def test_the_memory_estimate_and_encode_time_count_the_search() -> None:
    source = jpeg(640, 480)
    info = pipeline.probe(source)
    settings = pipeline.RenderSettings()
    # The same starting quality (the search's maximum), without the search.
    plain = pipeline.plan_render(info, options_of("fq:webp:80/w:300"), "webp", settings)
    searched = pipeline.plan_render(info, options_of("aq:dssim/w:300"), "webp", settings)
    assert estimate_peak_bytes(searched, 1, source) > estimate_peak_bytes(plain, 1, source)
    assert searched.encode_seconds == plain.encode_seconds * planned_encodes(
        searched.quality_target  # type: ignore[arg-type]
    )
