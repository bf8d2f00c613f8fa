"""Tests for django_oximg.core.pipeline.budget: the peak-memory estimate of one render (and of
sizes rendered from one shared decode).

The weights themselves are measured by ``bench/memory.py``; these tests pin
the shape of the model: more pixels cost more, progressive JPEG costs more
than baseline, shrink-on-load and ``crop`` work as libvips does, frames
multiply, high qualities cost more where the encoder pays for them, and the
header details read from the bytes (JPEG sampling, PNG depth) are read
correctly. One test measures a peak (never a time): the worst case of the
quality-dependent weights, in fresh processes. Images are drawn with pyvips.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import pyvips

from django_oximg.core.options import Crop, Options, Watermark
from django_oximg.core.pipeline import (
    Plan,
    RenderSettings,
    SourceInfo,
    WatermarkImage,
    budget,
    plan_render,
    probe,
)
from django_oximg.core.pipeline.budget import (
    BASE_BYTES,
    JpegFrame,
    estimate_peak_bytes,
    jpeg_frame,
    jpeg_shrink_factor,
    png_decoded_bytes_per_pixel,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

FIT_500 = Options(width=500, height=500)
SETTINGS = RenderSettings()


def planned(info: SourceInfo, options: Options) -> Plan:
    """The render's plan for ``info`` and ``options``, into JPEG."""
    return plan_render(info, options, "jpeg", SETTINGS)


def noise(width: int, height: int, bands: int = 3) -> pyvips.Image:
    image = pyvips.Image.gaussnoise(width, height, sigma=40, mean=128, seed=1)
    return image.bandjoin([image] * (bands - 1)).cast("uchar") if bands > 1 else image.cast("uchar")


def jpeg(width: int, height: int, *, progressive: bool = False, subsample: bool = True) -> bytes:
    mode = "on" if subsample else "off"
    saved = noise(width, height).jpegsave_buffer(Q=85, interlace=progressive, subsample_mode=mode)
    return bytes(saved)


def png(
    width: int, height: int, *, bands: int = 3, bits: int = 8, interlace: bool = False
) -> bytes:
    image = noise(width, height, bands)
    if bits == 16:
        interpretation = "rgb16" if bands >= 3 else "grey16"
        image = (image.cast("ushort") * 257).cast("ushort").copy(interpretation=interpretation)
    return bytes(image.pngsave_buffer(interlace=interlace, bitdepth=bits, compression=1))


def animated_gif(width: int, height: int, frames: int) -> bytes:
    base = noise(width, height)
    pages = [base.draw_rect([255, 0, 0], i * 4, 0, 4, 4, fill=True) for i in range(frames)]
    strip = pyvips.Image.arrayjoin(pages, across=1).copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", height)
    return bytes(strip.gifsave_buffer())


def estimate(source: bytes, options: Options = FIT_500, frames: int = 1) -> int:
    return estimate_peak_bytes(planned(probe(source), options), frames, source)


# --- the estimate ------------------------------------------------------------------


@pytest.mark.parametrize(
    "draw",
    [
        lambda w, h: jpeg(w, h),
        lambda w, h: jpeg(w, h, progressive=True),
        lambda w, h: png(w, h),
        lambda w, h: png(w, h, interlace=True),
        lambda w, h: bytes(noise(w, h).webpsave_buffer()),
        lambda w, h: bytes(noise(w, h).gifsave_buffer()),
    ],
    ids=["jpeg", "progressive-jpeg", "png", "interlaced-png", "webp", "gif"],
)
def test_more_pixels_never_cost_less(draw: Callable[[int, int], bytes]) -> None:
    sizes = [(300, 200), (900, 600), (1800, 1200)]
    estimates = [estimate(draw(w, h)) for w, h in sizes]
    assert estimates == sorted(estimates)
    assert estimates[0] < estimates[-1]


def test_progressive_jpeg_costs_more_than_baseline() -> None:
    for subsample in (True, False):
        baseline = jpeg(1600, 1200, subsample=subsample)
        progressive = jpeg(1600, 1200, progressive=True, subsample=subsample)
        assert estimate(progressive) > estimate(baseline)


def test_progressive_costs_the_whole_coefficient_buffer_whatever_the_shrink() -> None:
    source = jpeg(1600, 1200, progressive=True, subsample=False)
    coefficients = JpegFrame(1600, 1200, ((1, 1),) * 3, True).coefficient_bytes()
    assert coefficients == 1600 * 1200 * 3 * 2
    assert estimate(source, Options(width=50, height=50)) > coefficients


def test_full_chroma_progressive_costs_more_than_subsampled() -> None:
    subsampled = jpeg(1600, 1200, progressive=True, subsample=True)
    full = jpeg(1600, 1200, progressive=True, subsample=False)
    assert estimate(full) - len(full) > estimate(subsampled) - len(subsampled)


def test_baseline_jpeg_costs_less_when_shrunk_on_load() -> None:
    source = jpeg(4000, 3000)
    small_box = estimate(source, Options(width=200, height=200))  # shrink 20: loads at 1/8
    large_box = estimate(source, Options(width=1500, height=1500))  # shrink 2.7: loads whole
    assert small_box < large_box


def test_baseline_jpeg_holds_a_whole_decode_up_to_the_libjpeg_turbo_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below jpeg.MAX_DECODED_PIXELS libjpeg-turbo may hold the whole RGB image at its scale."""
    source = jpeg(2000, 1500)
    options = Options(width=1500, height=1500)  # shrink 1.3: decoded at full size, 3 MP
    whole = estimate(source, options) - BASE_BYTES - len(source)
    assert whole >= 3 * 2000 * 1500  # three bytes per pixel, at least
    monkeypatch.setattr(budget.jpeg, "MAX_DECODED_PIXELS", 2000 * 1500 - 1)
    streamed = estimate(source, options) - BASE_BYTES - len(source)
    assert streamed < whole


def test_dpr_reduces_the_shrink() -> None:
    source = jpeg(4000, 3000)
    plain = estimate(source, Options(width=240, height=240))
    doubled = estimate(source, Options(width=240, height=240, dpr=2.0))
    assert doubled > plain


def test_crop_means_a_full_decode_without_shrink_on_load() -> None:
    source = jpeg(4000, 3000)
    info = probe(source)
    crop = Crop(0.5, 0.5)
    fitted = estimate_peak_bytes(planned(info, FIT_500), 1, source)
    cropped = estimate_peak_bytes(planned(info, FIT_500._replace(crop=crop)), 1, source)
    assert cropped > fitted
    # The decode no longer depends on the box: only the (small) output term does.
    small_box = Options(width=50, height=50, crop=crop)
    tiny = estimate_peak_bytes(planned(info, small_box), 1, source)
    fitted_out = budget.sizes_of(planned(info, FIT_500._replace(crop=crop))).output_pixels
    tiny_out = budget.sizes_of(planned(info, small_box)).output_pixels
    assert cropped - tiny == pytest.approx(
        budget.OUTPUT_BYTES_PER_PIXEL["jpeg"] * (fitted_out - tiny_out), abs=2
    )


@pytest.mark.parametrize(
    ("source", "float_pixels"),
    [
        (lambda: jpeg(4000, 3000), 1000 * 750),  # 1/4: the DCT scale leaving 2x of 500x375
        (lambda: png(2000, 1500), 2000 * 1500),  # converted whole
    ],
    ids=["jpeg", "png"],
)
def test_the_high_quality_mode_counts_its_float_pixels(
    source: Callable[[], bytes], float_pixels: int
) -> None:
    """A whole scRGB copy of the 2x decode, over the standard mode's estimate."""
    data = source()
    info = probe(data)
    standard = estimate_peak_bytes(planned(info, FIT_500), 1, data)
    high = estimate_peak_bytes(planned(info, FIT_500._replace(quality_mode="high")), 1, data)
    assert high - standard == pytest.approx(
        budget.LINEAR_LIGHT_BYTES_PER_PIXEL * float_pixels, abs=2
    )


@pytest.mark.parametrize(
    "grown",
    [
        Options(width=500, height=500, extend=True),
        Options(width=500, height=500, extend_aspect_ratio=True),
        Options(width=500, height=500, zoom_width=1.5, zoom_height=1.5),
        Options(width=500, height=500, padding=(50, 50, 50, 50)),
    ],
)
def test_what_enlarges_the_result_costs_its_pixels(grown: Options) -> None:
    source = jpeg(2000, 1000)  # fitted into 500 x 500: 500 x 250
    plain = estimate(source, Options(width=500, height=500))
    sizes = budget.sizes_of(planned(probe(source), grown))
    assert sizes.output_pixels > 500 * 250
    extra = budget.OUTPUT_BYTES_PER_PIXEL["jpeg"] * (sizes.output_pixels - 500 * 250)
    assert estimate(source, grown) >= plain + extra - 2


def test_max_result_dimension_bounds_what_extend_aspect_ratio_adds() -> None:
    info = probe(jpeg(2000, 1000))
    options = Options(width=100, height=20_000, extend_aspect_ratio=True)
    plan = plan_render(info, options, "png", RenderSettings(max_result_dimension=4000))
    assert max(plan.geometry.width, plan.geometry.height) == 4000


def test_trim_means_a_full_decode_as_crop() -> None:
    source = jpeg(4000, 3000)
    trimmed = estimate(source, FIT_500._replace(trim_threshold=10.0))
    cropped = estimate(source, FIT_500._replace(crop=Crop(4000, 3000)))
    assert trimmed == cropped > estimate(source)


def test_a_watermark_costs_its_image_and_a_layer_of_the_output() -> None:
    source = jpeg(2000, 1000)
    info = probe(source)
    mark = WatermarkImage(b"", 300, 200)
    settings = RenderSettings(watermark=mark)
    options = FIT_500._replace(watermark=Watermark(0.5, "re"))
    laid = plan_render(info, options, "jpeg", settings)
    plain = plan_render(info, FIT_500, "jpeg", settings)
    output = budget.sizes_of(laid).output_pixels
    expected = budget.WATERMARK_BYTES_PER_PIXEL * 300 * 200
    expected += budget.WATERMARK_BYTES_PER_OUTPUT_PIXEL * output
    difference = estimate_peak_bytes(laid, 1, source) - estimate_peak_bytes(plain, 1, source)
    assert difference == pytest.approx(expected, abs=2)


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_frames_multiply(fmt: str) -> None:
    info = SourceInfo(400, 300, fmt, frames=30, has_alpha=True)
    source = b"x" * 1000
    one, ten, twenty, thirty = (
        estimate_peak_bytes(planned(info, FIT_500), n, source) for n in (1, 10, 20, 30)
    )
    assert one < ten < twenty < thirty
    assert twenty - ten == pytest.approx(thirty - twenty, abs=2)


def test_animated_gif_output_is_estimated_per_frame() -> None:
    source = animated_gif(200, 150, 8)
    info = probe(source)
    assert info.frames == 8
    assert estimate(source, frames=8) > estimate(source, frames=1)


def test_frames_below_one_count_as_one() -> None:
    source = jpeg(300, 200)
    assert estimate(source, frames=0) == estimate(source, frames=1)


def test_the_source_is_counted_once_more() -> None:
    """pyvips copies the buffer it hands libvips, so the bytes count again."""
    source = png(600, 400)
    padded = source + b"\0" * 100_000  # after IEND: same header, same pixels
    assert (
        estimate_peak_bytes(planned(probe(source), FIT_500), 1, padded) - estimate(source)
        == 100_000
    )


def test_sizes_sharing_one_decode_count_it_once_and_every_size_s_own_part() -> None:
    """Rendered one after another from one decode (rendering ahead): more than any one
    size's estimate, less than their sum, and one size alone is its own estimate."""
    source = jpeg(1600, 1200)
    info = probe(source)
    plans = [planned(info, Options(width=width)) for width in (300, 320, 280)]
    parts = [budget.peak_parts(plan, 1, source) for plan in plans]
    assert len({part.decode for part in parts}) == 1  # one DCT scale: one decode
    alone = [estimate_peak_bytes(plan, 1, source) for plan in plans]
    together = budget.estimate_shared_decode_peak_bytes(plans, source)
    assert max(alone) < together < sum(alone)
    others = parts[1].linear_light + parts[1].output + parts[2].linear_light + parts[2].output
    assert together - alone[0] == pytest.approx(others, abs=2)
    assert budget.estimate_shared_decode_peak_bytes(plans[:1], source) == alone[0]
    assert budget.estimate_shared_decode_peak_bytes([], source) == 0


def test_every_estimate_includes_the_base() -> None:
    source = jpeg(64, 64)
    assert estimate(source) >= BASE_BYTES + len(source)


def test_the_output_is_the_size_the_plan_allows() -> None:
    """A larger ``MAX_RESULT_DIMENSION`` in the plan is a larger output in the estimate."""
    info = SourceInfo(2000, 1333, "png")
    options = Options(width=16000, enlarge=True)
    clamped = plan_render(info, options, "png", RenderSettings(max_result_dimension=8192))
    wide = plan_render(info, options, "png", RenderSettings(max_result_dimension=16384))
    assert (clamped.geometry.width, wide.geometry.width) == (8192, 16000)
    extra = budget.sizes_of(wide).output_pixels - budget.sizes_of(clamped).output_pixels
    difference = estimate_peak_bytes(wide, 1, b"") - estimate_peak_bytes(clamped, 1, b"")
    assert difference == pytest.approx(budget.OUTPUT_BYTES_PER_PIXEL["png"] * extra, abs=2)


def test_unmeasured_formats_get_the_default_weight() -> None:
    info = SourceInfo(1000, 1000, "tiff")
    cost = estimate_peak_bytes(planned(info, FIT_500), 1, b"")
    decode = budget.DEFAULT_BYTES_PER_PIXEL * 1_000_000
    assert cost >= BASE_BYTES + decode


def test_heif_is_weighted_as_a_whole_decode() -> None:
    webp = SourceInfo(4000, 3000, "webp")
    heif = SourceInfo(4000, 3000, "heif")
    assert estimate_peak_bytes(planned(heif, FIT_500), 1, b"") > estimate_peak_bytes(
        planned(webp, FIT_500), 1, b""
    )


def test_small_webp_is_decoded_whole_large_webp_at_scale() -> None:
    small = SourceInfo(2000, 1500, "webp")
    large = SourceInfo(4000, 3000, "webp")
    # At or below the threshold the whole image is decoded, so a smaller box
    # saves nothing; above it the decode follows the box.
    assert estimate_peak_bytes(
        planned(small, Options(width=100, height=100)), 1, b""
    ) == pytest.approx(
        estimate_peak_bytes(planned(small, Options(width=200, height=200)), 1, b""),
        abs=budget.OUTPUT_BYTES_PER_PIXEL["jpeg"] * 200 * 200,
    )
    assert estimate_peak_bytes(planned(large, Options(width=100, height=100)), 1, b"") < (
        estimate_peak_bytes(planned(large, Options(width=1000, height=1000)), 1, b"")
    )


def output_estimate(fmt: str, side: int, has_alpha: bool = False) -> int:
    """The estimate of a ``side`` x ``side`` result in ``fmt`` from a 4096x4096 source,
    rendered in this process (a child process is tested on its own below)."""
    info = SourceInfo(4096, 4096, "png", has_alpha=has_alpha)
    options = Options(width=side, height=side, enlarge=True)
    plan = replace(plan_render(info, options, fmt, SETTINGS), isolated=False)
    return estimate_peak_bytes(plan, 1, b"")


def test_the_encoders_that_hold_the_whole_picture_cost_more() -> None:
    """libheif and libwebp hold the picture again as YUV; the GIF quantiser its histogram."""
    costs = {fmt: output_estimate(fmt, 1024) for fmt in ("png", "jpeg", "webp", "gif", "avif")}
    assert sorted(costs, key=costs.__getitem__) == ["png", "jpeg", "webp", "gif", "avif"]


@pytest.mark.parametrize(("fmt", "dearer"), [("webp", True), ("avif", True), ("png", False)])
def test_an_alpha_channel_costs_more_where_the_encoder_pays_for_it(fmt: str, dearer: bool) -> None:
    with_alpha, without = output_estimate(fmt, 1024, True), output_estimate(fmt, 1024)
    assert (with_alpha > without) is dearer


def quality_estimate(fmt: str, quality: int) -> int:
    plan = plan_render(
        SourceInfo(1400, 1400, "jpeg"), Options(width=1400, quality=quality), fmt, SETTINGS
    )
    return estimate_peak_bytes(replace(plan, isolated=False), 1, b"")


def test_high_qualities_cost_more_where_the_encoder_pays_for_them() -> None:
    """libwebp's tokens grow from q70 on; JPEG only with whole chroma (q90 and up)."""
    webp = [quality_estimate("webp", q) for q in (60, 70, 80, 90, 100)]
    assert webp[0] == webp[1] < webp[2] < webp[3] < webp[4]
    jpeg = [quality_estimate("jpeg", q) for q in (60, 89, 90, 100)]
    assert jpeg[0] == jpeg[1] < jpeg[2] < jpeg[3]
    assert quality_estimate("png", 100) == quality_estimate("png", 10)


@pytest.mark.parametrize("quality", [90, 100])
@pytest.mark.parametrize("fmt", ["jpeg", "webp"])
def test_incompressible_detail_stays_within_the_estimate(
    fmt: str, quality: int, tmp_path: Path
) -> None:
    """Noise kept at 2 MP, the largest result Pillow encodes: measured in a fresh process
    (``bench/memory.py``), the peak stays below the estimate. Before the weights took
    the quality into account the estimate was 0.68 (WebP q100) to 0.92 (JPEG q90) of it."""
    from bench import memory

    paths = memory.ensure_images(tmp_path, memory.DENSE_SOURCES)
    case = next(c for c in memory.dense_cases(paths) if c.name == f"noise-1400>{fmt}-q{quality}")
    measured = memory.measure_in_child(case, concurrency=1, warm_up=True)
    assert measured.delta > 20 * budget.MIB  # the render did happen, at full size
    assert memory.estimate_for(measured) >= measured.delta


def test_a_jpeg_result_drops_the_alpha_and_its_cost() -> None:
    info = SourceInfo(2000, 2000, "png", has_alpha=True)
    assert not plan_render(info, FIT_500, "jpeg", SETTINGS).alpha
    assert plan_render(info, FIT_500, "webp", SETTINGS).alpha
    assert not plan_render(info, FIT_500._replace(background=(0, 0, 0)), "webp", SETTINGS).alpha


def test_a_render_in_a_child_process_adds_the_process_and_its_copy_of_the_source() -> None:
    """Planned AVIF above the in-process limit runs in a child: same pixels, plus the child."""
    info = SourceInfo(4096, 4096, "jpeg")
    options = Options(width=4096, height=4096)
    plan = plan_render(info, options, "avif", SETTINGS)
    assert plan.isolated
    source = b"x" * 1_000_000
    here = replace(plan, isolated=False)
    difference = estimate_peak_bytes(plan, 1, source) - estimate_peak_bytes(here, 1, source)
    assert difference == budget.CHILD_PROCESS_BYTES + len(source)


# --- helpers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shrink", "factor"),
    [(1.0, 1), (3.99, 1), (4.0, 2), (7.9, 2), (8.0, 4), (15.9, 4), (16.0, 8), (100.0, 8)],
)
def test_jpeg_shrink_factor_leaves_a_factor_of_two_for_the_resize(
    shrink: float, factor: int
) -> None:
    assert jpeg_shrink_factor(shrink) == factor


def test_jpeg_frame_reads_sampling_and_progressiveness() -> None:
    subsampled = jpeg_frame(jpeg(320, 240, subsample=True))
    assert subsampled == JpegFrame(320, 240, ((2, 2), (1, 1), (1, 1)), False)
    full = jpeg_frame(jpeg(320, 240, progressive=True, subsample=False))
    assert full == JpegFrame(320, 240, ((1, 1),) * 3, True)


def test_jpeg_frame_skips_metadata_segments() -> None:
    image = noise(320, 240).copy()
    image.set_type(pyvips.GValue.gstr_type, "exif-ifd0-Artist", "someone")
    source = bytes(image.jpegsave_buffer(keep="all"))
    assert jpeg_frame(source) == JpegFrame(320, 240, ((2, 2), (1, 1), (1, 1)), False)


@pytest.mark.parametrize(
    "data",
    [b"", b"not a jpeg", b"\xff\xd8", b"\xff\xd8\xff\xda\x00\x02", b"\xff\xd8\xff\xc0\x00\x05\x08"],
)
def test_jpeg_frame_of_garbage_is_none(data: bytes) -> None:
    assert jpeg_frame(data) is None


def test_unreadable_jpeg_header_is_assumed_the_worst() -> None:
    info = SourceInfo(1000, 1000, "jpeg")
    worst = estimate_peak_bytes(planned(info, FIT_500), 1, b"")
    readable = jpeg(1000, 1000, progressive=True, subsample=False)
    assert worst - 0 > estimate_peak_bytes(planned(info, FIT_500), 1, readable) - len(readable)


@pytest.mark.parametrize(
    ("bands", "bits", "expected"), [(1, 8, 1), (3, 8, 3), (4, 8, 4), (3, 16, 6), (4, 16, 8)]
)
def test_png_decoded_bytes_per_pixel(bands: int, bits: int, expected: int) -> None:
    source = png(16, 16, bands=bands, bits=bits)
    assert png_decoded_bytes_per_pixel(source, has_alpha=bands in (2, 4)) == expected


def test_png_decoded_bytes_of_garbage_is_the_worst_case() -> None:
    assert png_decoded_bytes_per_pixel(b"GIF89a", has_alpha=False) == 8


def test_interlaced_png_costs_more_than_plain() -> None:
    assert estimate(png(1200, 800, interlace=True)) > estimate(png(1200, 800))


def test_sixteen_bit_png_costs_more_than_eight_bit() -> None:
    eight = png(800, 600, bands=4, interlace=True)
    sixteen = png(800, 600, bands=4, bits=16, interlace=True)
    assert estimate(sixteen) - len(sixteen) > estimate(eight) - len(eight)
