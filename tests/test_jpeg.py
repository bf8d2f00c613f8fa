"""Tests for the libjpeg-turbo JPEG decode (core/pipeline/jpeg.py) and its place in the pipeline.

The promise pinned down here: whichever decoder runs (``RenderSettings.
jpeg_decoder``), a JPEG source gives the same output bytes, and every file the
fast decoder declines still renders (or fails) exactly as libvips decides.
The byte comparisons let libvips encode both (``encoder="libvips"``): the
encoder's own promise is pinned in tests/test_encoder.py.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidImage
from django_oximg.core.options import Options
from django_oximg.core.pipeline import jpeg, load
from tests.test_pipeline import flat, photo

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

TURBO = pipeline.RenderSettings(jpeg_decoder="libjpeg-turbo")
LIBVIPS = pipeline.RenderSettings(jpeg_decoder="libvips")


@pytest.fixture(scope="module", autouse=True)
def configured() -> None:
    pipeline.configure(concurrency=1)


def jpeg_bytes(image: pyvips.Image, **save: object) -> bytes:
    return bytes(image.jpegsave_buffer(Q=90, **save))


def as_image(decoded: jpeg.Decoded) -> pyvips.Image:
    return pyvips.Image.new_from_memory(
        decoded.pixels, decoded.width, decoded.height, decoded.bands, "uchar"
    )


# --- core/pipeline/jpeg.py ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "shrink", "grey"),
    [
        (size, shrink, grey)
        for size, shrink, grey in itertools.product(
            [(301, 199), (64, 48), (17, 9)], [1, 2, 4, 8], [False, True]
        )
    ],
)
def test_pixels_equal_libvips_decode(size: tuple[int, int], shrink: int, grey: bool) -> None:
    image = photo(*size)
    if grey:
        image = image.colourspace("b-w")
    data = jpeg_bytes(image)
    decoded = jpeg.decode_scaled(data, shrink)
    assert decoded is not None
    reference = pyvips.Image.jpegload_buffer(data, shrink=shrink)
    # libjpeg rounds the scaled size up, libvips down (the caller crops).
    assert (decoded.width, decoded.height) == (-(-size[0] // shrink), -(-size[1] // shrink))
    assert decoded.bands == reference.bands == (1 if grey else 3)
    ours = as_image(decoded).crop(0, 0, reference.width, reference.height)
    assert (ours.cast("int") - reference.cast("int")).abs().max() == 0


def test_large_decodes_are_left_to_libvips(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole-image array above the limit would cost more than libvips' strips."""
    data = jpeg_bytes(photo(200, 100))
    monkeypatch.setattr(jpeg, "MAX_DECODED_PIXELS", 100 * 50)
    assert jpeg.decode_scaled(data, 1) is None
    assert jpeg.decode_scaled(data, 2) is not None


def test_cmyk_is_left_to_libvips() -> None:
    cmyk = photo(64, 48).icc_transform("cmyk", input_profile="srgb")
    assert jpeg.decode_scaled(jpeg_bytes(cmyk), 2) is None


@pytest.mark.parametrize("cut", [0.3, 0.7, 0.95])
def test_truncated_or_broken_files_are_left_to_libvips(cut: float) -> None:
    data = jpeg_bytes(photo(120, 80))
    assert jpeg.decode_scaled(data[: int(len(data) * cut)], 1) is None
    assert jpeg.decode_scaled(b"\xff\xd8 not a jpeg", 1) is None


# --- the pipeline with either decoder -----------------------------------------


def tagged(image: pyvips.Image, orientation: int = 1, profile: str | None = None) -> bytes:
    """A JPEG with EXIF (copyright and more), an orientation and optionally a profile."""
    image = image.copy()
    if profile:
        image = image.icc_transform(profile, input_profile="srgb")
    for name, value in [
        ("exif-ifd0-Copyright", "ACME"),
        ("exif-ifd0-Artist", "Jane"),
        ("exif-ifd0-Make", "Camera Maker"),
    ]:
        image.set_type(pyvips.GValue.gstr_type, name, value)
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return jpeg_bytes(image, keep=pyvips.enums.ForeignKeep.ALL)


SOURCES = {
    "plain": lambda: jpeg_bytes(photo(640, 427)),
    "grey": lambda: jpeg_bytes(photo(400, 300).colourspace("b-w")),
    "tagged, turned": lambda: tagged(photo(480, 320), orientation=6),
    "display p3": lambda: tagged(photo(480, 320), profile="p3"),
    "progressive": lambda: jpeg_bytes(photo(500, 375), interlace=True),
    "cmyk": lambda: jpeg_bytes(photo(300, 200).icc_transform("cmyk", input_profile="srgb")),
}

OPTIONS = {
    "fit 100": Options(width=100, height=100),
    "fill 150x90": Options(width=150, height=90, resizing_type="fill"),
    "width 317, keep metadata": Options(width=317, strip_metadata=False),
    "no copyright": Options(width=120, keep_copyright=False),
    "strip profile": Options(width=200, strip_color_profile=True),
    "rotate, no auto-rotate": Options(width=90, rotate=90, auto_rotate=False),
}


@pytest.mark.parametrize("margin", [1.0, 1.5, 2.0])
@pytest.mark.parametrize("options", OPTIONS.values(), ids=list(OPTIONS))
@pytest.mark.parametrize("source", SOURCES.values(), ids=list(SOURCES))
def test_both_decoders_give_the_same_bytes(source, options: Options, margin: float) -> None:  # type: ignore[no-untyped-def]
    data = source()
    results = [
        pipeline.render(
            data,
            options,
            fmt,
            pipeline.RenderSettings(
                jpeg_shrink_margin=margin, jpeg_decoder=decoder, encoder="libvips"
            ),
        )
        for decoder in ("libjpeg-turbo", "libvips")
        for fmt in ("jpeg", "png")
    ]
    turbo_jpeg, turbo_png, vips_jpeg, vips_png = results
    assert turbo_png.data == vips_png.data
    assert turbo_jpeg.data == vips_jpeg.data
    assert (turbo_jpeg.width, turbo_jpeg.height) == (vips_jpeg.width, vips_jpeg.height)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("auto_rotate", [True, False])
def test_every_orientation_is_resized_and_turned_as_libvips_does(
    orientation: int, auto_rotate: bool
) -> None:
    """The turbo path resizes and turns itself (``resize_decoded``), not with thumbnail_image."""
    data = tagged(photo(480, 320), orientation=orientation)
    options = Options(width=130, height=100, resizing_type="fill", auto_rotate=auto_rotate)
    turbo, vips = (
        pipeline.render(
            data,
            options,
            "png",
            pipeline.RenderSettings(jpeg_shrink_margin=1.0, jpeg_decoder=decoder),
        )
        for decoder in ("libjpeg-turbo", "libvips")
    )
    assert turbo.data == vips.data
    assert (turbo.width, turbo.height) == (130, 100)


@pytest.mark.parametrize("width", [320, 160, 80, 150])
def test_a_decode_already_at_the_target_size_is_left_as_libvips_leaves_it(width: int) -> None:
    """320/160/80 are the 1/2, 1/4 and 1/8 DCT scales of 640: no resize at all; 150 is one."""
    data = jpeg_bytes(photo(640, 480))
    turbo, vips = (
        pipeline.render(
            data, Options(width=width), "png", pipeline.RenderSettings(jpeg_decoder=decoder)
        )
        for decoder in ("libjpeg-turbo", "libvips")
    )
    assert turbo.data == vips.data
    assert turbo.width == width


def test_fast_decode_really_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above is not vacuous: the default settings take the turbo path."""
    calls = []
    real = jpeg.decode_scaled

    def counting(data: bytes, shrink: int) -> jpeg.Decoded | None:
        calls.append(shrink)
        return real(data, shrink)

    monkeypatch.setattr(jpeg, "decode_scaled", counting)
    data = jpeg_bytes(photo(2000, 1000))
    pipeline.render(data, Options(width=500, height=500), "jpeg", TURBO)
    pipeline.render(data, Options(width=500, height=500), "jpeg", LIBVIPS)
    assert calls == [2]  # 2000 -> 500 with margin 1.5: 1/2; libvips' decoder not counted


def test_header_read_by_probe_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """render() takes the ICC profile and resolution from probe()'s header parse."""
    data = jpeg_bytes(photo(800, 600).icc_transform("p3", input_profile="srgb"))
    info = pipeline.probe(data)
    opened = []
    real = load.memory_source

    def counting(source: bytes) -> object:
        opened.append(len(source))
        return real(source)

    monkeypatch.setattr(load, "memory_source", counting)
    options = Options(width=200, strip_color_profile=False)
    plan = pipeline.plan_render(info, options, "jpeg", TURBO)
    reused = pipeline.render(data, options, "jpeg", TURBO, plan=plan)
    assert opened == []
    # Control: without the probe's header, the turbo path parses it itself.
    headless = dataclasses.replace(info, header=None)
    fresh = pipeline.render(
        data, options, "jpeg", TURBO, plan=pipeline.plan_render(headless, options, "jpeg", TURBO)
    )
    assert opened == [len(data)]
    assert reused.data == fresh.data
    out = pyvips.Image.new_from_buffer(reused.data, "")
    assert out.get("icc-profile-data") == info.header.get("icc-profile-data")


def test_truncated_jpeg_still_fails_as_libvips_says() -> None:
    data = jpeg_bytes(flat(300, 200))
    with pytest.raises(InvalidImage):
        pipeline.render(data[: len(data) // 2], Options(width=50), "jpeg", TURBO)


def with_extraneous_bytes(data: bytes) -> bytes:
    """Garbage before the scan's marker: libjpeg warns, skips it and decodes the rest."""
    scan = data.index(b"\xff\xda")
    return data[:scan] + b"\x00\x13\x37" + data[scan:]


def with_a_corrupt_scan(data: bytes) -> bytes:
    """A run of the entropy-coded data overwritten: libjpeg warns and fills in what it lost."""
    middle = data.index(b"\xff\xda") + (len(data) - data.index(b"\xff\xda")) // 2
    return data[:middle] + bytes(range(0x20, 0x60)) + data[middle + 0x40 :]


@pytest.mark.parametrize(
    "damage", [with_extraneous_bytes, with_a_corrupt_scan], ids=["extraneous", "corrupt"]
)
def test_recoverable_damage_is_decoded_as_libvips_decodes_it(damage) -> None:  # type: ignore[no-untyped-def]
    """Pillow decodes what libjpeg recovers from; libvips (fail_on=truncated) does the same."""
    data = damage(jpeg_bytes(photo(640, 480)))
    options = Options(width=200, height=200)
    if damage is with_extraneous_bytes:
        assert jpeg.decode_scaled(data, 2) is not None  # the fast path really decodes it

    def rendered(settings: pipeline.RenderSettings) -> bytes | type[Exception]:
        try:
            return pipeline.render(data, options, "png", settings).data
        except InvalidImage as error:
            return type(error)

    assert rendered(TURBO) == rendered(LIBVIPS)


def test_a_site_loading_truncated_images_leaves_every_jpeg_to_libvips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pillow's global switch would make it pad a truncated file; libvips keeps refusing it."""
    from PIL import ImageFile

    data = jpeg_bytes(flat(300, 200))
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    assert jpeg.decode_scaled(data, 2) is None
    with pytest.raises(InvalidImage):
        pipeline.render(data[: len(data) // 2], Options(width=50), "jpeg", TURBO)
