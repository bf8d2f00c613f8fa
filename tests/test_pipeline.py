"""Tests for the pyvips pipeline: sizes, formats, colour, safety, options, limits.

Every source is drawn here with pyvips. Sizes are checked against the geometry
planner, so the template tag's prediction and the real output cannot drift.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import pyvips

from django_oximg.core import exif, pipeline
from django_oximg.core.errors import (
    InvalidImage,
    ProcessingTimeout,
    ResultTooLarge,
    UnsupportedFormat,
)
from django_oximg.core.limits import deadlines
from django_oximg.core.options import (
    OUTPUT_FORMATS,
    RESIZING_TYPES,
    Crop,
    Extension,
    Gravity,
    Options,
    parse_path,
)
from django_oximg.core.options.geometry import plan_geometry
from django_oximg.core.pipeline import steps
from django_oximg.core.pipeline.steps.step import Step
from tests import site_extensions
from tests.images import credited_jpeg

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

SETTINGS = pipeline.RenderSettings()

#: Loader name prefix each output format decodes back with.
LOADERS = {
    "jpeg": "jpegload",
    "png": "pngload",
    "webp": "webpload",
    "avif": "heifload",
    "gif": "gifload",
}


@pytest.fixture(scope="module", autouse=True)
def configured() -> None:
    pipeline.configure(concurrency=2)


def needs_saver(fmt: str) -> pytest.MarkDecorator:
    """Skip a format's test, by the saver's name, when this libvips cannot write it."""
    saver = pipeline.SAVERS[fmt]
    return pytest.mark.skipif(not pipeline.saver_available(fmt), reason=f"no {saver}")


FORMATS = [pytest.param(fmt, marks=needs_saver(fmt)) for fmt in OUTPUT_FORMATS]


# --- drawn sources ------------------------------------------------------------


def photo(width: int, height: int, seed: int = 1) -> pyvips.Image:
    """A photo-like sRGB image: smooth shapes, texture and grain."""
    bands = []
    for offset in range(3):
        smooth = pyvips.Image.perlin(width, height, cell_size=64, seed=seed + offset) * 80 + 128
        grain = pyvips.Image.gaussnoise(width, height, sigma=8, seed=seed + offset)
        bands.append(smooth + grain)
    return bands[0].bandjoin(bands[1:]).cast("uchar").copy(interpretation="srgb")


def flat(width: int, height: int, colour: tuple[int, int, int] = (60, 60, 60)) -> pyvips.Image:
    """A flat sRGB image, so a drawn mark is the only thing that stands out."""
    image = pyvips.Image.black(width, height, bands=3) + list(colour)
    return image.cast("uchar").copy(interpretation="srgb")


def marked(width: int, height: int, left: int, top: int, size: int) -> pyvips.Image:
    """A flat image with one white square."""
    return flat(width, height).draw_rect([255, 255, 255], left, top, size, size, fill=True)


def jpeg(image: pyvips.Image, **save: object) -> bytes:
    return bytes(image.jpegsave_buffer(Q=92, **save))


def png(image: pyvips.Image, **save: object) -> bytes:
    return bytes(image.pngsave_buffer(**save))


def animated_gif(frames: int = 5, width: int = 90, height: int = 60) -> bytes:
    pages = [
        flat(width, height).draw_rect([255, 200, 0], index * 15, 10, 15, 15, fill=True)
        for index in range(frames)
    ]
    strip = pyvips.Image.arrayjoin(pages, across=1).copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", height)
    strip.set_type(pyvips.GValue.array_int_type, "delay", [0, 10, 50, 100, 0][:frames] * 5)
    strip.set_type(pyvips.GValue.gint_type, "loop", 0)
    return bytes(strip.gifsave_buffer())


def decode(data: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(data, "")


def pixel(image: pyvips.Image, x: int, y: int) -> list[float]:
    return list(image(x, y))


def render(data: bytes, fmt: str = "png", **options: object) -> pyvips.Image:
    result = pipeline.render(data, Options(**options), fmt, SETTINGS)  # type: ignore[arg-type]
    return decode(result.data)


@pytest.fixture(scope="module")
def landscape() -> bytes:
    return jpeg(photo(300, 200))


# --- set-up and probe ---------------------------------------------------------


def test_libvips_version() -> None:
    parts = pipeline.libvips_version().split(".")
    assert len(parts) == 3 and all(part.isdigit() for part in parts)
    pipeline.check_libvips_version((8, 0, 0))
    with pytest.raises(RuntimeError, match=r"needs libvips >= 99\.0\.0"):
        pipeline.check_libvips_version((99, 0, 0))


def test_probe_reads_the_header(landscape: bytes) -> None:
    info = pipeline.probe(landscape)
    assert info == pipeline.SourceInfo(300, 200, "jpeg")


def test_probe_details() -> None:
    progressive = jpeg(photo(64, 48), interlace=True)
    assert pipeline.probe(progressive).interlaced is True
    turned = photo(64, 48).copy()
    turned.set_type(pyvips.GValue.gint_type, "orientation", 6)
    assert pipeline.probe(jpeg(turned, keep=pyvips.enums.ForeignKeep.EXIF)).orientation == 6
    alpha = photo(64, 48).bandjoin(255)
    assert pipeline.probe(png(alpha)).has_alpha is True
    gif = pipeline.probe(animated_gif(frames=4))
    assert (gif.format, gif.frames, gif.width, gif.height) == ("gif", 4, 90, 60)


def test_unknown_output_format(landscape: bytes) -> None:
    with pytest.raises(UnsupportedFormat):
        pipeline.render(landscape, Options(), "bmp", SETTINGS)


# --- size equals the plan, for every resizing type and format ------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("resizing_type", RESIZING_TYPES)
@pytest.mark.parametrize("box", [(120, 120), (80, 0), (0, 150), (400, 100)])
def test_every_resizing_type_and_format(
    landscape: bytes, fmt: str, resizing_type: str, box: tuple[int, int]
) -> None:
    options = Options(resizing_type=resizing_type, width=box[0], height=box[1])
    plan = plan_geometry(300, 200, options, max_result_dimension=8192)
    result = pipeline.render(landscape, options, fmt, SETTINGS)
    back = decode(result.data)
    assert str(back.get("vips-loader")).startswith(LOADERS[fmt])
    assert (result.width, result.height) == (plan.width, plan.height)
    assert (back.width, back.height) == (plan.width, plan.height)
    assert result.content_type == pipeline.CONTENT_TYPES[fmt]


def option_grid() -> list[Options]:
    """A fixed pseudo-random sample of option combinations."""
    chooser = random.Random(20240611)
    combos = []
    for _ in range(120):
        combos.append(
            Options(
                resizing_type=chooser.choice(RESIZING_TYPES),
                width=chooser.choice([0, 37, 100, 250, 640]),
                height=chooser.choice([0, 45, 100, 199, 480]),
                dpr=chooser.choice([1.0, 1.0, 1.5, 2.0]),
                enlarge=chooser.random() < 0.3,
                extend=chooser.random() < 0.3,
                min_width=chooser.choice([0, 0, 0, 150]),
                min_height=chooser.choice([0, 0, 0, 120]),
                padding=chooser.choice([(0, 0, 0, 0), (3, 5, 7, 9)]),
                rotate=chooser.choice([0, 0, 90, 180, 270]),
                crop=chooser.choice([None, None, Crop(0.5, 0.75), Crop(120, 90, Gravity("soea"))]),
                gravity=chooser.choice([Gravity(), Gravity("nowe", 5, 3), Gravity("fp", 0.2, 0.8)]),
            )
        )
    return combos


@pytest.mark.parametrize(
    ("options", "orientation"),
    [(options, 1 + index % 8) for index, options in enumerate(option_grid())],
)
def test_output_size_equals_plan(options: Options, orientation: int) -> None:
    source = photo(240, 160).copy()
    source.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    data = jpeg(source, keep=pyvips.enums.ForeignKeep.EXIF)
    plan = plan_geometry(240, 160, options, orientation=orientation, max_result_dimension=700)
    settings = pipeline.RenderSettings(max_result_dimension=700)
    result = pipeline.render(data, options, "jpeg", settings)
    back = decode(result.data)
    assert (back.width, back.height) == (plan.width, plan.height)


@pytest.mark.parametrize("source_size", [(1, 1), (1, 500), (500, 1), (3, 2)])
def test_tiny_and_thin_sources(source_size: tuple[int, int]) -> None:
    data = png(flat(*source_size))
    for options in (Options(width=100, height=100), Options(width=50, enlarge=True)):
        plan = plan_geometry(*source_size, options, max_result_dimension=8192)
        back = decode(pipeline.render(data, options, "png", SETTINGS).data)
        assert (back.width, back.height) == (plan.width, plan.height)


def test_max_result_dimension_clamps_real_output(landscape: bytes) -> None:
    settings = pipeline.RenderSettings(max_result_dimension=100)
    options = Options(width=5000, height=5000, enlarge=True)
    result = pipeline.render(landscape, options, "jpeg", settings)
    assert (result.width, result.height) == (100, 67)


# --- animation ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=needs_saver(f)) for f in ("webp", "gif")])
def test_animation_is_kept(fmt: str) -> None:
    result = pipeline.render(animated_gif(), Options(width=45), fmt, SETTINGS)
    back = pyvips.Image.new_from_buffer(result.data, "", n=-1)
    assert int(back.get("n-pages")) == 5
    assert (result.width, result.height, result.frames) == (45, 30, 5)
    assert int(back.get("page-height")) == 30
    assert min(back.get("delay")) >= pipeline.MIN_FRAME_DELAY_MS
    first, last = back.crop(0, 0, 45, 30), back.crop(0, 120, 45, 30)
    assert (first - last).abs().max() > 100  # the frames differ: the mark moved


def test_animation_with_crop_and_rotate_keeps_frames() -> None:
    options = Options(crop=Crop(60, 60), rotate=90, padding=(2, 2, 2, 2))
    result = pipeline.render(animated_gif(), options, "gif", SETTINGS)
    back = pyvips.Image.new_from_buffer(result.data, "", n=-1)
    assert int(back.get("n-pages")) == 5
    assert (back.width, int(back.get("page-height"))) == (64, 64)


#: Options for an animation, and whether every step left works pixel by pixel
#: (then the frames are done in one pass over the strip).
ANIMATION_OPTIONS = [
    (Options(width=45), True),
    (Options(width=90), True),
    (Options(width=45, background=(0, 0, 255)), True),
    (Options(width=45, strip_color_profile=False), True),
    (Options(resizing_type="fill", width=40, height=40), False),
    (Options(width=45, height=45, extend=True), False),
    (Options(width=45, padding=(2, 2, 2, 2)), False),
    (Options(width=45, blur=1.0), False),
    (Options(width=45, sharpen=1.0), False),
    (Options(width=45, flip_horizontal=True), False),
    (Options(width=45, rotate=90), False),
    (Options(width=45, crop=Crop(60, 60)), False),
]


def animation_plan(options: Options) -> pipeline.Plan:
    """The plan for :func:`animated_gif` (90x60, 5 frames) into an animated GIF."""
    info = pipeline.SourceInfo(90, 60, "gif", frames=5)
    return pipeline.plan_render(info, options, "gif", SETTINGS)


@pytest.mark.parametrize(("options", "expected"), ANIMATION_OPTIONS)
def test_per_pixel_only_tells_which_animations_need_their_frames_apart(
    options: Options, expected: bool
) -> None:
    plan = animation_plan(options)
    geometry = plan.geometry
    planned = (geometry.scaled_width, geometry.scaled_height)
    assert steps.per_pixel_only(plan, planned) is expected
    # A frame not at its planned size still needs resizing frame by frame.
    wider = (geometry.scaled_width + 1, geometry.scaled_height)
    assert steps.per_pixel_only(plan, wider) is False


@pytest.mark.parametrize(("per_pixel", "expected"), [(False, False), (True, True)])
def test_per_pixel_only_counts_every_step_in_the_list(
    per_pixel: bool, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step added to the list is counted by what it declares, not by a second list."""
    plan = animation_plan(Options(width=45))
    frame = (plan.geometry.scaled_width, plan.geometry.scaled_height)
    assert steps.per_pixel_only(plan, frame)
    added = Step(lambda image, plan: image, per_pixel=per_pixel)
    monkeypatch.setattr(steps, "STEPS", (*steps.STEPS, added))
    assert steps.per_pixel_only(plan, frame) is expected


def test_a_step_that_declares_itself_a_no_op_does_not_run() -> None:
    def fails(image: pyvips.Image, plan: pipeline.Plan) -> pyvips.Image:
        raise AssertionError("a no-op step ran")

    plan = animation_plan(Options(width=45))
    image = pyvips.Image.black(4, 4)
    assert Step(fails, is_noop=lambda plan, frame: frame == (4, 4))(image, plan) is image
    with pytest.raises(AssertionError, match="no-op step ran"):
        Step(fails, is_noop=lambda plan, frame: frame == (5, 5))(image, plan)


@pytest.mark.parametrize("options", [options for options, _ in ANIMATION_OPTIONS])
@pytest.mark.parametrize("fmt", [pytest.param(f, marks=needs_saver(f)) for f in ("webp", "gif")])
def test_an_animation_done_in_one_pass_is_the_frame_by_frame_result(
    options: Options, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = animated_gif()
    result = pipeline.render(source, options, fmt, SETTINGS)
    monkeypatch.setattr(steps, "per_pixel_only", lambda *args: False)
    frame_by_frame = pipeline.render(source, options, fmt, SETTINGS)
    assert result.data == frame_by_frame.data
    assert (result.width, result.height, result.frames) == (
        frame_by_frame.width,
        frame_by_frame.height,
        frame_by_frame.frames,
    )
    back = pyvips.Image.new_from_buffer(result.data, "", n=-1)
    assert int(back.get("n-pages")) == 5
    assert min(back.get("delay")) >= pipeline.MIN_FRAME_DELAY_MS


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=needs_saver(f)) for f in ("jpeg", "avif")])
def test_animation_into_still_format_is_first_frame(fmt: str) -> None:
    result = pipeline.render(animated_gif(), Options(), fmt, SETTINGS)
    back = decode(result.data)
    assert (back.width, back.height, result.frames) == (90, 60, 1)
    assert pixel(back, 7, 17)[0] > 200  # the first frame's mark at x 0..15


def test_too_many_frames_gives_first_frame() -> None:
    settings = pipeline.RenderSettings(max_animation_frames=3)
    result = pipeline.render(animated_gif(frames=5), Options(), "gif", settings)
    back = pyvips.Image.new_from_buffer(result.data, "", n=-1)
    assert back.height == 60 and result.frames == 1


# --- orientation and colour ---------------------------------------------------

#: What to do to an upright image so that EXIF orientation N shows it upright.
STORED_FOR_ORIENTATION = {
    1: lambda im: im,
    2: lambda im: im.fliphor(),
    3: lambda im: im.rot180(),
    4: lambda im: im.flipver(),
    5: lambda im: im.rot90().fliphor(),
    6: lambda im: im.rot270(),
    7: lambda im: im.rot270().fliphor(),
    8: lambda im: im.rot90(),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_gives_upright_output(orientation: int) -> None:
    upright = marked(240, 160, 10, 10, 40).draw_rect([0, 0, 255], 200, 130, 30, 20, fill=True)
    stored = STORED_FOR_ORIENTATION[orientation](upright).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    data = png(stored, keep=pyvips.enums.ForeignKeep.EXIF)
    back = render(data, "png", width=120)
    assert (back.width, back.height) == (120, 80)
    reference = render(png(upright), "png", width=120)
    assert (back - reference).abs().max() <= 8  # resampling rounding only
    assert not back.get_typeof("orientation") or back.get("orientation") == 1


def test_cmyk_jpeg_becomes_srgb() -> None:
    red = flat(64, 64, (200, 30, 30))
    cmyk = red.icc_transform("cmyk", input_profile="srgb")
    data = jpeg(cmyk)
    assert decode(data).interpretation == "cmyk"
    back = render(data, "jpeg")
    assert back.bands == 3 and back.interpretation == "srgb"
    assert all(abs(a - b) < 25 for a, b in zip(pixel(back, 30, 30), [200, 30, 30], strict=True))


def test_embedded_profile_is_applied_and_stripped() -> None:
    red = flat(32, 32, (200, 30, 30))
    display_p3 = red.icc_transform("p3", input_profile="srgb")
    data = png(display_p3, keep=pyvips.enums.ForeignKeep.ICC)
    back = render(data, "png")
    assert not back.get_typeof("icc-profile-data")
    assert all(abs(a - b) < 6 for a, b in zip(pixel(back, 5, 5), [200, 30, 30], strict=True))
    kept = render(data, "png", strip_color_profile=False)
    assert kept.get_typeof("icc-profile-data")


def test_16_bit_png_becomes_8_bit() -> None:
    deep = (flat(32, 32, (100, 150, 200)).cast("ushort") * 257).copy(interpretation="rgb16")
    data = png(deep, bitdepth=16)
    assert decode(data).format == "ushort"
    back = render(data, "png")
    assert back.format == "uchar" and back.interpretation == "srgb"
    assert pixel(back, 3, 3) == [100.0, 150.0, 200.0]


@pytest.mark.parametrize(
    "save", [{"bitdepth": 1}, {"palette": True}, {"bitdepth": 8}], ids=["1bit", "palette", "grey"]
)
def test_grey_one_bit_and_palette_become_8_bit_srgb(save: dict[str, object]) -> None:
    grey = pyvips.Image.black(64, 64).draw_rect(255, 10, 10, 20, 20, fill=True).cast("uchar")
    back = render(png(grey.copy(interpretation="b-w"), **save), "jpeg")
    assert (back.bands, back.format, back.interpretation) == (3, "uchar", "srgb")
    assert pixel(back, 15, 15)[0] > 200 and pixel(back, 50, 50)[0] < 60


def test_alpha_into_jpeg_is_flattened_on_white() -> None:
    clear = flat(40, 40).bandjoin(0).copy(interpretation="srgb")
    back = render(png(clear), "jpeg")
    assert back.bands == 3 and min(pixel(back, 20, 20)) > 250


def test_alpha_flattened_on_background_option() -> None:
    clear = flat(40, 40).bandjoin(0).copy(interpretation="srgb")
    back = render(png(clear), "png", background=(0, 0, 255))
    assert back.bands == 3 and pixel(back, 20, 20) == [0.0, 0.0, 255.0]


def test_alpha_kept_into_png_and_webp() -> None:
    half = flat(40, 40).bandjoin(128).copy(interpretation="srgb")
    for fmt in ("png", "webp"):
        assert render(png(half), fmt).hasalpha()


# --- bad input ----------------------------------------------------------------


def truncated(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("kind", ["jpeg", "png", "gif"])
def test_truncated_sources_are_invalid(kind: str, fraction: float) -> None:
    image = photo(200, 150)
    source = {
        "jpeg": jpeg(image),
        "png": png(image),
        "gif": bytes(image.gifsave_buffer()),
    }[kind]
    with pytest.raises(InvalidImage):
        pipeline.render(truncated(source, fraction), Options(width=50), "jpeg", SETTINGS)


SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect/></svg>'


def vips_native_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("vips") / "x.vips"
    flat(4, 4).vipssave(str(path))
    return path.read_bytes()


@pytest.mark.parametrize(
    "name",
    ["random", "empty", "html", "svg", "ppm", "csv", "matrix", "vips"],
)
def test_unwanted_or_broken_bytes_are_refused(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sources = {
        "random": random.Random(1).randbytes(1024),
        "empty": b"",
        "html": b"<html><body>404 Not Found</body></html>",
        "svg": SVG,
        "ppm": b"P6\n2 2\n255\n" + bytes(12),
        "csv": b"0\t0\t0\n0\t0\t0\n",
        "matrix": b"2 2\n0 0\n0 0\n",
        "vips": vips_native_bytes(tmp_path_factory) if name == "vips" else b"",
    }
    with pytest.raises((UnsupportedFormat, InvalidImage)):
        pipeline.probe(sources[name])
    with pytest.raises((UnsupportedFormat, InvalidImage)):
        pipeline.render(sources[name], Options(width=10), "png", SETTINGS)


def libvips_log(configure: bool) -> str:
    """Python logging's output for one thumbnail and one cut-off JPEG, in a fresh process."""
    script = (
        "import logging, pyvips\n"
        "from django_oximg.core import pipeline\n"
        "from django_oximg.benchmarking.bare_libvips import sample_jpeg\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(levelname)s %(message)s')\n"
        f"if {configure}: pipeline.configure(concurrency=1)\n"
        "data = sample_jpeg(120, 80)\n"
        "pyvips.Image.thumbnail_buffer(data, 50).jpegsave_buffer()\n"
        "pyvips.Image.new_from_buffer(data[: len(data) // 2], '').avg()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stderr


def test_libvips_info_lines_stay_out_of_python_logging() -> None:
    """Each would take the GIL from inside a C call, about ten times per thumbnail."""
    log = libvips_log(configure=True)
    assert "INFO VIPS:" not in log and "DEBUG VIPS:" not in log
    assert "WARNING VIPS: VipsJpeg: premature end of JPEG image" in log


def test_unconfigured_pyvips_logs_libvips_info_lines() -> None:
    """Control for the test above: plain pyvips passes libvips' info lines on."""
    log = libvips_log(configure=False)
    assert "INFO VIPS: threadpool completed" in log


def test_blocking_is_what_refuses_svg_and_matrix() -> None:
    """Control: without configure() this libvips would load SVG and matrix files."""
    script = (
        "import sys, pyvips\n"
        "for data in (sys.argv[1].encode(), b'2 2\\n0 0\\n0 0\\n'):\n"
        "    source = pyvips.Source.new_from_memory(data)\n"
        "    print(pyvips.Image.new_from_source(source, '').get('vips-loader'))\n"
    )
    if not pipeline.saver_available("png"):  # pragma: no cover - every build has PNG
        pytest.skip("no pngsave_buffer")
    done = subprocess.run(
        [sys.executable, "-c", script, SVG.decode()],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"this libvips cannot load SVG or matrix at all: {done.stderr[-200:]}")
    assert "svgload" in done.stdout and "matrixload" in done.stdout
    source = pyvips.Source.new_from_memory(b"2 2\n0 0\n0 0\n")
    with pytest.raises(pyvips.Error, match="not in a known format"):
        pyvips.Image.new_from_source(source, "")


# --- gravity ------------------------------------------------------------------


def fill_square(data: bytes, gravity: Gravity) -> pyvips.Image:
    return render(data, "png", resizing_type="fill", width=100, height=100, gravity=gravity)


@pytest.fixture(scope="module")
def marked_top_right() -> bytes:
    """400x200 with a white square in the top-right corner."""
    return png(marked(400, 200, 340, 10, 50))


@pytest.mark.parametrize(
    ("gravity", "has_mark"),
    [
        (Gravity("ea"), True),
        (Gravity("noea"), True),
        (Gravity("soea"), True),
        (Gravity("we"), False),
        (Gravity("ce"), False),
        (Gravity("fp", 0.95, 0.1), True),
        (Gravity("fp", 0.1, 0.5), False),
        (Gravity("we", 0.75, 0), True),
        (Gravity("ea", 0.75, 0), False),
    ],
)
def test_gravity_chooses_the_region(
    marked_top_right: bytes, gravity: Gravity, has_mark: bool
) -> None:
    out = fill_square(marked_top_right, gravity)
    assert (out.width, out.height) == (100, 100)
    assert (out.max() > 200) is has_mark


def test_smart_gravity_finds_the_interesting_corner() -> None:
    busy = photo(60, 60, seed=5)
    image = flat(400, 200).insert(busy, 330, 130)
    out = fill_square(png(image), Gravity("sm"))
    assert out.deviate() > 20  # the textured patch, not the flat field
    assert fill_square(png(image), Gravity("we")).deviate() < 1


def test_crop_option_cuts_before_resizing(marked_top_right: bytes) -> None:
    out = render(marked_top_right, "png", crop=Crop(100, 100, Gravity("noea")), width=50)
    assert (out.width, out.height) == (50, 50)
    assert out.max() > 200
    elsewhere = render(marked_top_right, "png", crop=Crop(100, 100, Gravity("sowe")))
    assert elsewhere.max() < 100


def test_compass_offset_is_scaled_by_dpr() -> None:
    # 800x400 filled into 100x100 scales by 1/4: the mark lands at x 15..25.
    data = png(marked(800, 400, 60, 0, 40))

    def top_left(dpr: float, offset: float) -> list[float]:
        out = render(
            data,
            "png",
            resizing_type="fill",
            width=round(100 / dpr),
            height=round(100 / dpr),
            dpr=dpr,
            gravity=Gravity("nowe", offset, 0),
        )
        return pixel(out, 2, 2)

    assert top_left(1, 0)[0] < 100
    assert top_left(1, 10)[0] < 100  # mark now at 5..15
    assert top_left(2, 10)[0] > 200  # offset doubled: mark at -5..5


# --- filters, rotation, extension ----------------------------------------------


def test_blur_smooths_and_sharpen_adds_contrast() -> None:
    data = png(photo(120, 80))
    base = render(data, "png")
    blurred = render(data, "png", blur=3.0)
    sharpened = render(data, "png", sharpen=2.0)
    edges = pyvips.Image.new_from_array([[0, -1, 0], [-1, 4, -1], [0, -1, 0]])

    def detail(image: pyvips.Image) -> float:
        return float(image.colourspace("b-w").conv(edges).abs().avg())

    assert detail(blurred) < detail(base) * 0.6
    assert detail(sharpened) > detail(base) * 1.05


@pytest.mark.parametrize(
    ("options", "corner"),
    [
        ({"rotate": 90}, (1, 0)),
        ({"rotate": 180}, (1, 1)),
        ({"rotate": 270}, (0, 1)),
        ({"flip_horizontal": True}, (1, 0)),
        ({"flip_vertical": True}, (0, 1)),
        ({"rotate": 90, "flip_horizontal": True}, (0, 0)),
    ],
)
def test_rotate_and_flip_move_the_mark(options: dict[str, object], corner: tuple[int, int]) -> None:
    out = render(png(marked(200, 100, 0, 0, 20)), "png", **options)
    x = 5 if corner[0] == 0 else out.width - 5
    y = 5 if corner[1] == 0 else out.height - 5
    assert pixel(out, x, y)[0] > 200
    assert (out.width, out.height) == (
        (100, 200) if options.get("rotate") in (90, 270) else (200, 100)
    )


def test_padding_uses_white_then_background_and_scales_with_dpr() -> None:
    data = jpeg(flat(100, 100))
    out = render(data, "png", padding=(10, 0, 0, 5))
    assert (out.width, out.height) == (105, 110)
    assert pixel(out, 50, 2) == [255.0, 255.0, 255.0] and pixel(out, 2, 50)[0] == 255
    red = render(data, "png", padding=(10, 10, 10, 10), background=(255, 0, 0), dpr=2, width=50)
    assert (red.width, red.height) == (140, 140)
    assert pixel(red, 1, 1) == [255.0, 0.0, 0.0]


def test_padding_on_alpha_is_transparent() -> None:
    data = png(flat(40, 40).bandjoin(255).copy(interpretation="srgb"))
    out = render(data, "png", padding=(4, 4, 4, 4))
    assert out.bands == 4 and pixel(out, 1, 1)[3] == 0 and pixel(out, 20, 20)[3] == 255


@pytest.mark.parametrize(
    ("gravity", "inside", "outside"),
    [
        (None, (100, 75), (5, 5)),
        (Gravity("nowe"), (10, 10), (190, 140)),
        (Gravity("soea"), (190, 140), (10, 10)),
    ],
)
def test_extend_puts_the_image_on_a_canvas(
    gravity: Gravity | None, inside: tuple[int, int], outside: tuple[int, int]
) -> None:
    data = jpeg(flat(100, 100))
    out = render(data, "jpeg", width=200, height=150, extend=True, extend_gravity=gravity)
    assert (out.width, out.height) == (200, 150)
    assert pixel(out, *inside)[0] < 100  # the image
    assert pixel(out, *outside)[0] > 240  # white canvas


# --- metadata -----------------------------------------------------------------


def tagged_jpeg() -> bytes:
    image = photo(64, 64).copy()
    for name, value in [
        ("exif-ifd0-Copyright", "ACME"),
        ("exif-ifd0-Artist", "Jane"),
        ("exif-ifd0-Make", "Camera Maker"),
        ("exif-ifd2-UserComment", "secret place"),
    ]:
        image.set_type(pyvips.GValue.gstr_type, name, value)
    return jpeg(image, keep=pyvips.enums.ForeignKeep.ALL)


def exif_fields(image: pyvips.Image) -> set[str]:
    return {name for name in image.get_fields() if name.startswith("exif-ifd")}


def test_metadata_stripped_but_copyright_kept() -> None:
    out = render(tagged_jpeg(), "jpeg")
    fields = exif_fields(out)
    assert {"exif-ifd0-Copyright", "exif-ifd0-Artist"} <= fields
    assert "exif-ifd0-Make" not in fields and "exif-ifd2-UserComment" not in fields


#: Bytes an EXIF block may take in a result with ``keep_copyright``: the two
#: tags and, from libvips' savers, the few tags libvips always writes.
SMALL_EXIF_BYTES = 400


@pytest.mark.parametrize("decoder", ["libjpeg-turbo", "libvips"])
@pytest.mark.parametrize(
    "fmt", [pytest.param(fmt, marks=needs_saver(fmt)) for fmt in ("jpeg", "webp", "avif", "png")]
)
def test_copyright_kept_without_the_preview(fmt: str, decoder: str) -> None:
    """The source's 13 KB block (camera tags, a preview) becomes Artist and Copyright alone.

    JPEG and WebP from the libjpeg-turbo decode are encoded by Pillow, the
    rest by libvips' savers: both ways are covered.
    """
    settings = pipeline.RenderSettings(jpeg_decoder=decoder)
    data = credited_jpeg()
    options = Options(width=300, height=300)
    kept = pipeline.render(data, options, fmt, settings).data
    out = pyvips.Image.new_from_buffer(kept, "")
    block = bytes(out.get("exif-data"))
    assert exif.copyright_values(block) == {
        exif.ARTIST: b"Jane Doe\x00",
        exif.COPYRIGHT: b"ACME Photo\x00",
    }
    assert not out.get_typeof("jpeg-thumbnail-data")
    assert not {"exif-ifd0-Make", "exif-ifd2-UserComment"} & exif_fields(out)
    stripped = pipeline.render(data, options._replace(keep_copyright=False), fmt, settings).data
    assert len(block) < SMALL_EXIF_BYTES
    assert len(kept) - len(stripped) < SMALL_EXIF_BYTES


def test_blank_credits_are_not_kept() -> None:
    """Editors' templates leave Artist and Copyright as spaces: nothing worth a block."""
    out = render(credited_jpeg(artist=" " * 32, copyright=" " * 63), "jpeg")
    assert not out.get_typeof("exif-data")


def test_metadata_fully_stripped_without_keep_copyright() -> None:
    out = render(tagged_jpeg(), "jpeg", keep_copyright=False)
    assert not out.get_typeof("exif-data")


def test_metadata_kept_when_not_stripping() -> None:
    """``strip_metadata`` off keeps everything the source has, preview included."""
    out = render(credited_jpeg(), "jpeg", strip_metadata=False)
    assert {"exif-ifd0-Make", "exif-ifd2-UserComment"} <= exif_fields(out)
    assert out.get_typeof("jpeg-thumbnail-data")


# --- the high-quality mode ---------------------------------------------------


def stripes(width: int, height: int, period: int) -> pyvips.Image:
    """Black and white vertical stripes: half the light of white, whatever the scale."""
    x = pyvips.Image.xyz(width, height)[0]
    grey = ((x % period) < period / 2).ifthenelse(255, 0).cast("uchar")
    return grey.bandjoin([grey, grey]).copy(interpretation="srgb")


@pytest.mark.parametrize(
    "encode",
    [
        lambda image: bytes(image.jpegsave_buffer(Q=100, subsample_mode="off")),
        lambda image: png(image),
    ],
    ids=["jpeg", "png"],
)
def test_high_quality_mode_keeps_the_light(encode: object) -> None:
    """Averaged as light, the stripes are 50 % grey, 188 in sRGB; averaged as sRGB values, 128.

    4 px stripes, since a JPEG's 1/2 DCT decode (its 2x margin) averages
    as sRGB values before the linear-light resize.
    """
    data = encode(stripes(1600, 1200, period=4))  # type: ignore[operator]
    standard = render(data, width=400)
    high = render(data, width=400, quality_mode="high")
    assert (standard.width, standard.height) == (high.width, high.height) == (400, 300)
    assert standard.avg() == pytest.approx(128, abs=4)
    assert high.avg() == pytest.approx(188, abs=4)


def turned(image: pyvips.Image, orientation: int) -> pyvips.Image:
    """``image`` stored as a camera held sideways stores it, tagged to be turned upright."""
    stored = STORED_FOR_ORIENTATION[orientation](image).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return stored


HIGH_QUALITY_SOURCES = {
    "jpeg": lambda: jpeg(photo(900, 600)),
    "grey jpeg": lambda: jpeg(photo(900, 600).colourspace("b-w")),
    "cmyk jpeg": lambda: jpeg(photo(600, 400).icc_transform("cmyk", input_profile="srgb")),
    "turned jpeg": lambda: jpeg(turned(photo(900, 600), 6), keep=pyvips.enums.ForeignKeep.EXIF),
    "png with alpha": lambda: png(photo(700, 500).bandjoin(200)),
    "webp": lambda: bytes(photo(800, 600).webpsave_buffer()),
}

HIGH_QUALITY_OPTIONS = {
    "fit": Options(width=250, height=250),
    "fill": Options(width=200, height=120, resizing_type="fill"),
    "rotate": Options(width=180, rotate=90),
    "crop": Options(width=150, crop=Crop(0.5, 0.5)),
    "enlarge": Options(width=1200, enlarge=True),
}


#: Each source with each option; the JPEGs with each decoder. The decoder setting
#: only chooses who decodes a JPEG (``load.scaled_jpeg``): a PNG or a WebP takes
#: the same path under either, so it runs under the default one.
HIGH_QUALITY_CASES = [
    pytest.param(source, options, decoder, id=f"{source_name}-{options_name}-{decoder}")
    for source_name, source in HIGH_QUALITY_SOURCES.items()
    for options_name, options in HIGH_QUALITY_OPTIONS.items()
    for decoder in (
        ("libjpeg-turbo", "libvips") if source_name.endswith("jpeg") else ("libjpeg-turbo",)
    )
]


@pytest.mark.parametrize(("source", "options", "decoder"), HIGH_QUALITY_CASES)
def test_high_quality_mode_gives_the_planned_size(
    source: object, options: Options, decoder: str
) -> None:
    data = source()  # type: ignore[operator]
    settings = pipeline.RenderSettings(jpeg_decoder=decoder, quality_mode="high")
    plan = pipeline.plan_render(pipeline.probe(data), options, "jpeg", settings)
    assert plan.linear_light
    out = decode(pipeline.render(data, options, "jpeg", settings, plan=plan).data)
    assert (out.width, out.height) == (plan.geometry.width, plan.geometry.height)


@pytest.mark.parametrize(
    ("setting", "option", "source", "linear"),
    [
        ("standard", "", "jpeg", False),
        ("high", "", "jpeg", True),
        ("standard", "high", "jpeg", True),
        ("high", "standard", "jpeg", False),
        ("high", "", "animation", False),
    ],
)
def test_the_request_chooses_the_mode_over_the_site(
    setting: str, option: str, source: str, linear: bool
) -> None:
    settings = pipeline.RenderSettings(quality_mode=setting)  # type: ignore[arg-type]
    if source == "animation":
        info, fmt = pipeline.SourceInfo(90, 60, "gif", frames=5), "gif"
    else:
        info, fmt = pipeline.SourceInfo(900, 600, "jpeg"), "jpeg"
    options = Options(width=100, quality_mode=option)
    assert pipeline.plan_render(info, options, fmt, settings).linear_light is linear


# --- quality and size limits --------------------------------------------------


def test_quality_precedence(landscape: bytes) -> None:
    sizes = {}
    for label, options in [
        ("settings", Options()),
        ("format_quality", Options(format_quality=(("jpeg", 30),))),
        ("quality", Options(quality=95, format_quality=(("jpeg", 30),))),
    ]:
        sizes[label] = len(pipeline.render(landscape, options, "jpeg", SETTINGS).data)
    assert sizes["format_quality"] < sizes["settings"] < sizes["quality"]


def test_max_bytes_lowers_quality_until_it_fits(landscape: bytes) -> None:
    full = len(pipeline.render(landscape, Options(quality=90), "jpeg", SETTINGS).data)
    limit = full // 2
    fitted = pipeline.render(landscape, Options(quality=90, max_bytes=limit), "jpeg", SETTINGS)
    assert len(fitted.data) <= limit


def test_max_bytes_out_of_reach(landscape: bytes) -> None:
    with pytest.raises(ResultTooLarge):
        pipeline.render(landscape, Options(max_bytes=100), "jpeg", SETTINGS)
    with pytest.raises(ResultTooLarge):
        pipeline.render(landscape, Options(max_bytes=1000), "png", SETTINGS)


@pytest.mark.parametrize(
    "options",
    [
        Options(resizing_type="fill", width=1500, height=1500),
        Options(gravity=Gravity("sm"), resizing_type="fill", width=900, height=400),
    ],
)
def test_past_deadline_stops_libvips(options: Options) -> None:
    big = jpeg(photo(3000, 2000))
    started = time.monotonic()
    with pytest.raises(ProcessingTimeout):
        pipeline.render(big, options, "png", SETTINGS, deadline=started - 1)


def test_deadline_passing_mid_render_stops_libvips() -> None:
    """The watchdog kills a computation already running when its time comes.

    A sigma-150 blur of a 6000x4000 image keeps libvips busy for seconds
    (sigma 40 took 0.8 s on one core of the CI machine; the cost grows with
    sigma); the deadline is 0.1 s away, so it passes mid-render (the test
    above kills at once, before anything runs).
    """
    big = jpeg(flat(6000, 4000))
    options = Options(width=6000, blur=150.0)
    before = dict(deadlines.WATCHDOG._watched)
    with pytest.raises(ProcessingTimeout):
        pipeline.render(big, options, "png", SETTINGS, deadline=time.monotonic() + 0.1)
    assert deadlines.WATCHDOG._watched == before  # nothing left behind to kill later


def test_a_plan_is_rendered_as_made_and_only_for_its_request(landscape: bytes) -> None:
    """The thumbnailer hands render() the plan it estimated memory for."""
    options = Options(width=50)
    plan = pipeline.plan_render(pipeline.probe(landscape), options, "jpeg", SETTINGS)
    planned = pipeline.render(landscape, options, "jpeg", SETTINGS, plan=plan)
    assert planned == pipeline.render(landscape, options, "jpeg", SETTINGS)
    with pytest.raises(ValueError, match="other options"):
        pipeline.render(landscape, Options(width=60), "jpeg", SETTINGS, plan=plan)
    with pytest.raises(ValueError, match="another format"):
        pipeline.render(landscape, options, "png", SETTINGS, plan=plan)


def test_future_deadline_does_not_interfere(landscape: bytes) -> None:
    deadline = time.monotonic() + 3600
    result = pipeline.render(landscape, Options(width=50), "jpeg", SETTINGS, deadline=deadline)
    assert result.width == 50


def test_grid_covers_every_resizing_type() -> None:
    """Guard the sampled grid above: it must exercise each type and rotation."""
    grid = option_grid()
    assert {o.resizing_type for o in grid} == set(RESIZING_TYPES)
    assert {o.rotate for o in grid} == {0, 90, 180, 270}
    assert any(o.crop for o in grid) and any(o.extend for o in grid)
    assert len(list(itertools.islice(grid, 5))) == 5


# --- encoders the deadline cannot stop -------------------------------------------


def encoder_plan(fmt: str, width: int, height: int, **info: object) -> pipeline.Plan:
    source = pipeline.SourceInfo(width, height, str(info.pop("source", "jpeg")), **info)  # type: ignore[arg-type]
    return pipeline.plan_render(source, Options(width=width, height=height), fmt, SETTINGS)


@pytest.mark.parametrize(
    ("fmt", "size", "effort", "isolated"),
    [
        ("avif", 256, 2, False),  # small: the better effort, in this process
        ("avif", 1024, 0, False),  # the fastest effort keeps it short
        ("avif", 4096, 0, True),  # even the fastest may run long: a child process
        ("gif", 300, 1, False),  # GIF: always libvips' effort 1
        ("gif", 1024, 1, True),
        ("webp", 4096, 4, True),  # the part of libwebp the kill flag misses adds up
        ("webp", 1024, 4, False),
        ("jpeg", 8192, None, False),  # JPEG and PNG stop at the kill flag
        ("png", 8192, None, False),
    ],
)
def test_the_plan_picks_the_effort_and_where_to_encode_by_size(
    fmt: str, size: int, effort: int | None, isolated: bool
) -> None:
    plan = encoder_plan(fmt, size, size)
    assert (plan.effort, plan.isolated) == (effort, isolated)
    assert (plan.encode_seconds > 0) is (effort is not None)


def test_encode_time_grows_with_pixels_frames_and_alpha() -> None:
    small, large = encoder_plan("avif", 1000, 1000), encoder_plan("avif", 3000, 3000)
    assert large.encode_seconds > small.encode_seconds
    alpha = encoder_plan("webp", 1000, 1000, source="png", has_alpha=True)
    assert alpha.alpha and alpha.encode_seconds > encoder_plan("webp", 1000, 1000).encode_seconds
    one = encoder_plan("gif", 300, 300, source="gif", frames=1)
    many = encoder_plan("gif", 300, 300, source="gif", frames=10)
    # Further frames cost less than the first (the palette is searched once).
    assert many.animated and one.encode_seconds < many.encode_seconds < 10 * one.encode_seconds


def test_a_frame_killable_between_frames_stays_in_this_process() -> None:
    """libvips checks its kill flag between GIF frames: only one frame's time counts."""
    plan = encoder_plan("gif", 320, 240, source="gif", frames=50)
    assert plan.encode_seconds > pipeline.plan.IN_PROCESS_ENCODE_SECONDS
    assert not plan.isolated


@needs_saver("avif")
def test_the_planned_effort_is_the_one_encoded_with() -> None:
    """The plan's effort reaches the encoder: 0 and 2 give different bytes."""
    data = jpeg(photo(1200, 900))
    options = Options(width=1200)
    plan = pipeline.plan_render(pipeline.probe(data), options, "avif", SETTINGS)
    assert plan.effort == 0
    fast = pipeline.render(data, options, "avif", SETTINGS, plan=plan)
    slow = pipeline.render(
        data, options, "avif", SETTINGS, plan=dataclasses.replace(plan, effort=2)
    )
    assert fast.data != slow.data


# --- crop of a JPEG, decoded at a DCT scale -----------------------------------

CROP_CASES = {
    "centre": Options(crop=Crop(1200, 900), width=200, height=150),
    "focal-point": Options(
        crop=Crop(900, 900), gravity=Gravity("fp", 0.2, 0.7), width=150, height=150
    ),
    "offsets": Options(crop=Crop(1000, 600, Gravity("nowe", 1301, 17)), width=250),
    "fraction": Options(crop=Crop(0.5, 0.5, Gravity("soea")), width=160),
    "fill": Options(crop=Crop(1600, 1600), resizing_type="fill", width=120, height=90),
}


@pytest.fixture(scope="module")
def large_photo() -> bytes:
    return jpeg(photo(2400, 1600, seed=5))


def crop_difference(data: bytes, options: Options, settings: pipeline.RenderSettings) -> float:
    """Mean absolute difference of the scaled-decode crop from the full-decode one."""
    scaled = pipeline.render(data, options, "png", settings)
    # A margin no DCT scale can leave: the crop decoded at full size.
    full = pipeline.render(data, options, "png", replace(settings, jpeg_shrink_margin=1e9))
    plan = pipeline.plan_render(pipeline.probe(data), options, "png", settings)
    expected = (plan.geometry.width, plan.geometry.height)
    assert (scaled.width, scaled.height) == (full.width, full.height) == expected
    return float((decode(scaled.data) - decode(full.data)).abs().avg())


@pytest.mark.parametrize("decoder", ["libjpeg-turbo", "libvips"])
@pytest.mark.parametrize("case", CROP_CASES)
def test_a_shrunk_crop_is_decoded_at_a_dct_scale(
    large_photo: bytes, case: str, decoder: str
) -> None:
    """The region comes from a 1/2-1/8 decode; sizes exact, pixels those of the full decode.

    The two decodes differ a little anyway (DCT scaling is no resize): a mean
    difference near 1 on this grainy photo, where a region placed 4 source
    pixels off gives 1.7 and 16 pixels off 4.9.
    """
    from django_oximg.core.pipeline.load import crop_shrink, load

    options = CROP_CASES[case]
    settings = replace(SETTINGS, jpeg_decoder=decoder)  # type: ignore[arg-type]
    plan = pipeline.plan_render(pipeline.probe(large_photo), options, "png", settings)
    shrink = crop_shrink(plan, settings)
    assert shrink > 1
    loaded = load(large_photo, plan, settings).image
    region = (plan.geometry.crop_width, plan.geometry.crop_height)
    assert abs(loaded.width - region[0] / shrink) <= 1
    assert abs(loaded.height - region[1] / shrink) <= 1
    # The margin is kept: at least jpeg_shrink_margin x the scaled size is decoded.
    margin = settings.jpeg_shrink_margin
    assert loaded.width >= plan.geometry.scaled_width * margin - 1
    assert crop_difference(large_photo, options, settings) < 1.5


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_shrunk_crop_of_a_rotated_jpeg_is_cut_from_the_upright_image(orientation: int) -> None:
    """EXIF orientation is applied before the region is placed, as on the full decode."""
    image = photo(2400, 1600, seed=5).copy()
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    data = jpeg(image)
    options = Options(crop=Crop(1000, 800, Gravity("noea")), width=100)
    assert crop_difference(data, options, SETTINGS) < 1.5


@pytest.mark.parametrize(
    "options",
    [
        Options(crop=Crop(1200, 900), width=200, rotate=90),
        Options(crop=Crop(1200, 900), width=200, flip_horizontal=True),
        Options(crop=Crop(1200, 900, Gravity("sm")), width=200),
        Options(crop=Crop(1200, 900), width=200, trim_threshold=10),
        Options(crop=Crop(1200, 900), width=900),  # no DCT scale leaves the margin
    ],
    ids=["rotate", "flip", "smart", "trim", "little-shrink"],
)
def test_crops_the_dct_scale_cannot_serve_are_decoded_whole(
    large_photo: bytes, options: Options
) -> None:
    from django_oximg.core.pipeline.load import crop_shrink

    plan = pipeline.plan_render(pipeline.probe(large_photo), options, "png", SETTINGS)
    assert crop_shrink(plan, SETTINGS) == 1


def test_a_png_crop_is_decoded_whole() -> None:
    from django_oximg.core.pipeline.load import crop_shrink

    data = png(photo(1600, 1200))
    options = Options(crop=Crop(1200, 900), width=100)
    plan = pipeline.plan_render(pipeline.probe(data), options, "png", SETTINGS)
    assert crop_shrink(plan, SETTINGS) == 1


# --- a site's own steps (OXIMG["EXTENSIONS"]) ------------------------------------------

#: The tests' tint (after ``colour``) and sepia (after ``pixelate``).
SITE = pipeline.RenderSettings(extensions=(site_extensions.TINT, site_extensions.SEPIA))


def site_options(segments: str, settings: pipeline.RenderSettings = SITE) -> Options:
    return parse_path(f"/{segments}/plain/x", extensions=settings.extensions).options


def site_render(
    data: bytes, segments: str, settings: pipeline.RenderSettings = SITE, fmt: str = "png"
) -> pyvips.Image:
    return decode(pipeline.render(data, site_options(segments, settings), fmt, settings).data)


def grey() -> bytes:
    return png(flat(40, 30, (128, 128, 128)))


def test_the_places_a_site_may_name_are_the_pipelines_steps_from_colour_on() -> None:
    from django_oximg.core.options.extensions import PLACES, STEP_NAMES

    assert tuple(name for name, _ in steps.NAMED_STEPS) == STEP_NAMES
    assert dict(steps.NAMED_STEPS)["colour"] is steps.TO_SRGB
    assert STEP_NAMES[STEP_NAMES.index("colour") :] == PLACES


def test_a_sites_step_tones_a_grey_source_as_it_says() -> None:
    toned = site_render(grey(), "w:20/sep:0.8")
    red, green, blue = (toned[band] for band in range(3))
    assert ((red > green) & (green > blue)).min() == 255  # every pixel
    # 128 * (0.2 + 0.8 * the matrix' row sums), the float result cut back to 8 bits.
    assert pixel(toned, 10, 7) == [163.0, 148.0, 121.0]
    plain = site_render(grey(), "w:20")
    assert pixel(plain, 10, 7) == [128.0, 128.0, 128.0]


def test_a_sites_step_a_request_does_not_give_changes_no_byte(landscape: bytes) -> None:
    options = site_options("w:100/bl:1")
    plan = pipeline.plan_render(pipeline.probe(landscape), options, "jpeg", SITE)
    assert plan.site_steps == ()
    assert steps.steps_for(plan) is steps.STEPS
    with_site = pipeline.render(landscape, options, "jpeg", SITE)
    assert with_site == pipeline.render(landscape, options, "jpeg", SETTINGS)


@pytest.mark.parametrize(("after", "border"), [("pixelate", 255.0), ("padding", 238.0)])
def test_a_sites_step_runs_at_its_declared_place(after: str, border: float) -> None:
    """Sepia before the padding leaves the white border white; after it, tones it too."""
    placed = pipeline.RenderSettings(extensions=(site_extensions.SEPIA._replace(after=after),))
    toned = site_render(grey(), "w:20/pd:4/bg:ffffff/sep:1", placed)
    assert pixel(toned, 0, 0) == [255.0, 255.0, border]
    assert pixel(toned, 14, 11)[0] > pixel(toned, 14, 11)[2]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ((site_extensions.SEPIA_AFTER_COLOUR, site_extensions.TINT), [0.0, 0.0, 255.0]),
        ((site_extensions.TINT, site_extensions.SEPIA_AFTER_COLOUR), [48.0, 42.0, 33.0]),
    ],
    ids=["sepia-then-tint", "tint-then-sepia"],
)
def test_steps_placed_after_one_step_run_in_the_settings_order(
    order: tuple[Extension, ...], expected: list[float]
) -> None:
    settings = pipeline.RenderSettings(extensions=order)
    toned = site_render(grey(), "w:20/sep:1/tint:0000ff:1", settings)
    assert pixel(toned, 10, 7) == expected


def test_a_sites_step_that_changes_the_frames_size_is_refused() -> None:
    settings = pipeline.RenderSettings(extensions=(site_extensions.GROW,))
    with pytest.raises(ValueError, match="a step keeps the frame's size and bands"):
        site_render(grey(), "w:20/grow:1", settings)


def test_a_sites_float_result_is_cast_back_to_the_frames_format() -> None:
    data = grey()
    plan = pipeline.plan_render(pipeline.probe(data), site_options("sep:0.5"), "png", SITE)
    frame = decode(data)
    assert site_extensions.sepia(frame, 0.5).format == "float"
    assert steps.process_frame(frame, plan).format == "uchar"


def test_an_option_no_configured_extension_owns_is_refused() -> None:
    options = site_options("sep:0.5")
    with pytest.raises(ValueError, match="no extension for the options sep"):
        pipeline.plan_render(pipeline.probe(grey()), options, "png", SETTINGS)


@pytest.mark.parametrize(("per_pixel", "expected"), [(True, True), (False, False)])
def test_a_sites_step_counts_in_whether_an_animation_runs_as_one_strip(
    per_pixel: bool, expected: bool
) -> None:
    sepia = site_extensions.SEPIA._replace(per_pixel=per_pixel)
    settings = pipeline.RenderSettings(extensions=(sepia,))
    info = pipeline.SourceInfo(90, 60, "gif", frames=5)
    plan = pipeline.plan_render(info, site_options("w:45/sep:0.7", settings), "gif", settings)
    frame = (plan.geometry.scaled_width, plan.geometry.scaled_height)
    assert steps.per_pixel_only(plan, frame) is expected


@pytest.mark.parametrize("fmt", [pytest.param(f, marks=needs_saver(f)) for f in ("webp", "gif")])
def test_an_animation_toned_in_one_pass_is_the_frame_by_frame_result(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, options = animated_gif(), site_options("w:45/sep:0.7")
    result = pipeline.render(source, options, fmt, SITE)
    monkeypatch.setattr(steps, "per_pixel_only", lambda *args: False)
    assert pipeline.render(source, options, fmt, SITE) == result
    back = pyvips.Image.new_from_buffer(result.data, "", n=-1)
    assert int(back.get("n-pages")) == 5
