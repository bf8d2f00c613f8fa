"""Tests for encoding results with Pillow (core/pipeline/encoder.py) and when the pipeline does.

The promise: a result the pipeline hands to Pillow is the result libvips'
saver would have written (a JPEG decodes to the same pixels, a WebP is the
same bytes), and what Pillow is not given (all of a source's metadata,
results too large to hold whole, pixels still streaming from a decoder)
still goes to libvips.
"""

from __future__ import annotations

import io
import time

import pytest
import pyvips
from PIL import Image as PILImage

from django_oximg.core import pipeline
from django_oximg.core.errors import ProcessingTimeout
from django_oximg.core.options import Gravity, Options
from django_oximg.core.pipeline import encoder
from tests.images import credited_jpeg, noise
from tests.test_pipeline import needs_saver, photo

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

PILLOW = pipeline.RenderSettings(encoder="pillow")
LIBVIPS = pipeline.RenderSettings(encoder="libvips")


@pytest.fixture(scope="module", autouse=True)
def configured() -> None:
    pipeline.configure(concurrency=1)


def pixels_of(image: pyvips.Image) -> bytes:
    return bytes(image.write_to_memory())


def decoded(data: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(data, "")


def source_jpeg(width: int = 1200, height: int = 800) -> bytes:
    return bytes(photo(width, height).jpegsave_buffer(Q=90))


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Formats encoded by Pillow during the test (the real encoder still runs).

    A JPEG Pillow had no room for is listed as "jpeg (too large)".
    """
    calls: list[str] = []
    real = encoder.encode

    def counting(*args: object, **kwargs: object) -> bytes:
        try:
            data = real(*args, **kwargs)  # type: ignore[arg-type]
        except encoder.BufferFull:
            calls.append(f"{args[4]} (too large)")
            raise
        calls.append(str(args[4]))
        return data

    monkeypatch.setattr(encoder, "encode", counting)
    return calls


# --- the encoder alone ----------------------------------------------------------


@pytest.mark.parametrize("quality", [10, 40, 80, 89, 90, 95])
def test_jpeg_decodes_to_libvips_pixels(quality: int) -> None:
    """Same pixels at every quality: chroma subsampling and quantisation tables switch
    where libvips' saver switches them, and both clamp low qualities to baseline tables."""
    image = photo(300, 200)
    ours = encoder.encode(pixels_of(image), 300, 200, 3, "jpeg", quality)
    theirs = pipeline.encode.save(image, "jpeg", quality, keep=0)
    assert pixels_of(decoded(ours)) == pixels_of(decoded(theirs))
    assert PILImage.open(io.BytesIO(ours)).quantization == (
        PILImage.open(io.BytesIO(theirs)).quantization
    )
    # optimize_coding: within a JFIF header of libvips' size, not the ~20 % more of plain tables
    assert abs(len(ours) - len(theirs)) <= 64


@pytest.mark.parametrize(
    ("index", "tables"),
    [(encoder.TUNED_QUANT_TABLE, encoder.TUNED_TABLES), (encoder.ANNEX_K_QUANT_TABLE, None)],
)
def test_quantisation_tables_are_libvips_own(index: int, tables: object) -> None:
    """The tables written out in encoder.py are the ones libvips' saver writes for
    ``quant_table`` 2 at quality 50 (a scale of 100 %); Annex K is Pillow's default."""
    written = bytes(photo(16, 16).jpegsave_buffer(Q=50, quant_table=index, keep=0))
    read = PILImage.open(io.BytesIO(written)).quantization
    if tables is None:
        out = io.BytesIO()
        PILImage.new("RGB", (16, 16)).save(out, "JPEG", quality=50)
        tables = [list(t) for t in PILImage.open(out).quantization.values()]
    assert [list(read[0]), list(read[1])] == [list(t) for t in tables]  # type: ignore[attr-defined]


def test_tuned_tables_below_full_chroma_annex_k_from_it() -> None:
    assert encoder.quant_table(encoder.FULL_CHROMA_QUALITY - 1) == encoder.TUNED_QUANT_TABLE
    assert encoder.quant_table(encoder.FULL_CHROMA_QUALITY) == encoder.ANNEX_K_QUANT_TABLE


@needs_saver("webp")
@pytest.mark.parametrize("bands", [3, 4])
@pytest.mark.parametrize("quality", [50, 75, 90])
def test_webp_is_libvips_bytes(bands: int, quality: int) -> None:
    image = photo(240, 160)
    if bands == 4:
        image = image.bandjoin(image.extract_band(0))
    ours = encoder.encode(pixels_of(image), 240, 160, bands, "webp", quality)
    theirs = bytes(image.webpsave_buffer(Q=quality, effort=4, keep=0))
    assert ours == theirs


def test_grey_jpeg() -> None:
    image = photo(120, 80).colourspace("b-w")
    data = encoder.encode(pixels_of(image), 120, 80, 1, "jpeg", 80)
    assert decoded(data).bands == 1


def test_icc_profile_is_embedded() -> None:
    profile = bytes(photo(8, 8).icc_transform("p3", input_profile="srgb").get("icc-profile-data"))
    data = encoder.encode(pixels_of(photo(60, 40)), 60, 40, 3, "jpeg", 80, icc_profile=profile)
    assert bytes(decoded(data).get("icc-profile-data")) == profile
    assert PILImage.open(io.BytesIO(data)).info["icc_profile"] == profile


@pytest.mark.parametrize(
    ("fmt", "width", "height", "bands", "expected"),
    [
        ("jpeg", 500, 333, 3, True),
        ("webp", 500, 333, 4, True),
        ("png", 500, 333, 3, False),
        ("avif", 500, 333, 3, False),
        ("jpeg", 500, 333, 2, False),
        ("jpeg", 2000, 1000, 3, True),
        ("jpeg", 2000, 1001, 3, False),
        ("webp", 16_384, 100, 3, False),
        ("jpeg", 16_384, 100, 3, True),
    ],
)
def test_can_encode(fmt: str, width: int, height: int, bands: int, expected: bool) -> None:
    assert encoder.MAX_PIXELS == 2_000_000  # the 2000 x 1000 rows sit on the limit
    assert encoder.can_encode(fmt, width, height, bands) is expected


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="png"):
        encoder.encode(pixels_of(photo(4, 4)), 4, 4, 3, "png", 80)


# --- in the pipeline --------------------------------------------------------------


CASES = {
    "fit 500": Options(width=500, height=500),
    "fill 320x200": Options(width=320, height=200, resizing_type="fill"),
    "smart crop": Options(width=200, height=200, resizing_type="fill", gravity=Gravity("sm")),
    "blur, sharpen, pad": Options(width=300, blur=1.0, sharpen=0.5, padding=(4, 4, 4, 4)),
    "rotate, flip": Options(width=250, rotate=90, flip_horizontal=True),
}


def is_progressive(data: bytes) -> bool:
    """Whether a JPEG's frame is progressive (SOF2), read by Pillow from its header."""
    return bool(PILImage.open(io.BytesIO(data)).info.get("progressive"))


@pytest.mark.parametrize("options", CASES.values(), ids=list(CASES))
@pytest.mark.parametrize("encoder_name", ["pillow", "libvips"])
def test_progressive_jpeg_has_the_baselines_pixels(
    options: Options, encoder_name: str, encodes: list[str]
) -> None:
    """``JPEG_PROGRESSIVE`` (``jpeg_progressive``): a progressive file from either
    encoder, decoding to the baseline result's pixels (only the scan order changes)."""
    data = source_jpeg()
    baseline = pipeline.render(data, options, "jpeg", LIBVIPS)
    settings = pipeline.RenderSettings(encoder=encoder_name, jpeg_progressive=True)  # type: ignore[arg-type]
    progressive = pipeline.render(data, options, "jpeg", settings)
    assert encodes == (["jpeg"] if encoder_name == "pillow" else [])
    assert is_progressive(progressive.data) and not is_progressive(baseline.data)
    assert pixels_of(decoded(progressive.data)) == pixels_of(decoded(baseline.data))


@pytest.mark.parametrize("options", CASES.values(), ids=list(CASES))
def test_jpeg_source_to_jpeg_goes_through_pillow_with_libvips_pixels(
    options: Options, encodes: list[str]
) -> None:
    data = source_jpeg()
    ours = pipeline.render(data, options, "jpeg", PILLOW)
    theirs = pipeline.render(data, options, "jpeg", LIBVIPS)
    assert encodes == ["jpeg"]
    assert (ours.width, ours.height) == (theirs.width, theirs.height)
    assert pixels_of(decoded(ours.data)) == pixels_of(decoded(theirs.data))


@needs_saver("webp")
@pytest.mark.parametrize("options", CASES.values(), ids=list(CASES))
def test_jpeg_source_to_webp_is_the_same_bytes(options: Options, encodes: list[str]) -> None:
    data = source_jpeg()
    ours = pipeline.render(data, options, "webp", PILLOW)
    theirs = pipeline.render(data, options, "webp", LIBVIPS)
    assert encodes == ["webp"]
    assert ours.data == theirs.data


@needs_saver("webp")
def test_smart_crop_of_a_png_with_alpha_is_in_memory_too(encodes: list[str]) -> None:
    """``sm`` gravity copies the frame to memory first, so any source qualifies."""
    rgba = photo(400, 300).bandjoin(photo(400, 300, seed=2).extract_band(1))
    data = bytes(rgba.pngsave_buffer())
    options = Options(width=150, height=150, resizing_type="fill", gravity=Gravity("sm"))
    ours = pipeline.render(data, options, "webp", PILLOW)
    assert ours.data == pipeline.render(data, options, "webp", LIBVIPS).data
    assert encodes == ["webp"]
    assert decoded(ours.data).bands == 4


def test_max_bytes_loop_reencodes_the_same_pixels(encodes: list[str]) -> None:
    data = source_jpeg()
    target = len(pipeline.render(data, Options(width=500), "jpeg", PILLOW).data) // 2
    encodes.clear()
    options = Options(width=500, max_bytes=target)
    ours = pipeline.render(data, options, "jpeg", PILLOW)
    theirs = pipeline.render(data, options, "jpeg", LIBVIPS)
    assert len(ours.data) <= target
    assert len(encodes) >= 2  # the loop lowered the quality at least once
    assert pixels_of(decoded(ours.data)) == pixels_of(decoded(theirs.data))


def test_profile_kept_when_not_stripped(encodes: list[str]) -> None:
    tagged = photo(900, 600).icc_transform("p3", input_profile="srgb")
    profile = bytes(tagged.get("icc-profile-data"))
    data = bytes(tagged.jpegsave_buffer(Q=90))
    options = Options(width=300, strip_color_profile=False)
    result = pipeline.render(data, options, "jpeg", PILLOW)
    assert encodes == ["jpeg"]
    assert bytes(decoded(result.data).get("icc-profile-data")) == profile


@pytest.mark.parametrize("fmt", ["jpeg", "webp"])
def test_kept_copyright_stays_with_pillow(fmt: str, encodes: list[str]) -> None:
    """The credit needs no libvips saver: Pillow writes the two tags and nothing else."""
    result = pipeline.render(credited_jpeg(), Options(width=300), fmt, PILLOW)
    assert encodes == [fmt]
    written = PILImage.open(io.BytesIO(result.data)).getexif()
    assert dict(written) == {0x013B: "Jane Doe", 0x8298: "ACME Photo"}
    assert not decoded(result.data).get_typeof("jpeg-thumbnail-data")


@pytest.mark.parametrize(
    "case",
    ["streamed png", "metadata kept", "libvips decoder", "png output", "too large"],
)
def test_others_go_to_libvips(
    case: str, encodes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, options, fmt, settings = source_jpeg(), Options(width=400), "jpeg", PILLOW
    if case == "streamed png":
        data = bytes(photo(1200, 800).pngsave_buffer())
    elif case == "metadata kept":
        options = Options(width=400, strip_metadata=False)
    elif case == "libvips decoder":
        settings = pipeline.RenderSettings(encoder="pillow", jpeg_decoder="libvips")
    elif case == "png output":
        fmt = "png"
    else:
        monkeypatch.setattr(encoder, "MAX_PIXELS", 399 * 267)
    result = pipeline.render(data, options, fmt, settings)
    assert encodes == []
    assert result.width == 400


def test_noise_outgrows_pillows_buffer() -> None:
    """The case below is real: Pillow cannot write this JPEG into its buffer."""
    with pytest.raises(encoder.BufferFull):
        encoder.encode(pixels_of(noise(300, 300)), 300, 300, 3, "jpeg", 90)


@pytest.mark.parametrize("quality", [90, 100])
def test_jpeg_too_large_for_pillow_is_written_by_libvips(quality: int, encodes: list[str]) -> None:
    """Such a result is libvips' own bytes, not an error (it used to be a 500)."""
    data = bytes(noise(700, 500).jpegsave_buffer(Q=98))
    options = Options(width=500, quality=quality)
    ours = pipeline.render(data, options, "jpeg", PILLOW)
    assert encodes == ["jpeg (too large)"]  # Pillow tried first
    assert ours.data == pipeline.render(data, options, "jpeg", LIBVIPS).data
    assert (ours.width, ours.height) == (500, 357)


def test_too_large_for_pillow_keeps_only_the_credit(encodes: list[str]) -> None:
    data = credited_jpeg(700, 500, pixels=noise(700, 500))
    result = pipeline.render(data, Options(width=500, quality=90), "jpeg", PILLOW)
    assert encodes == ["jpeg (too large)"]
    written = PILImage.open(io.BytesIO(result.data)).getexif()
    assert (written[0x013B], written[0x8298]) == ("Jane Doe", "ACME Photo")
    assert 0x010F not in written  # the camera's Make stayed behind
    assert not decoded(result.data).get_typeof("jpeg-thumbnail-data")


def test_max_bytes_loop_passes_through_the_fallback(encodes: list[str]) -> None:
    data = bytes(noise(700, 500).jpegsave_buffer(Q=98))
    largest = len(pipeline.render(data, Options(width=500, quality=100), "jpeg", PILLOW).data)
    encodes.clear()
    options = Options(width=500, quality=100, max_bytes=largest // 3)
    result = pipeline.render(data, options, "jpeg", PILLOW)
    assert len(result.data) <= largest // 3
    assert encodes[0] == "jpeg (too large)"  # q100 went to libvips
    assert encodes[-1] == "jpeg"  # the quality that fits did not need it


def test_control_the_spy_sees_pillow(encodes: list[str]) -> None:
    """The empty lists above are not vacuous: the same source and options do reach Pillow."""
    pipeline.render(source_jpeg(), Options(width=400), "jpeg", PILLOW)
    assert encodes == ["jpeg"]


def test_deadline_stops_the_computation_on_the_render_thread(encodes: list[str]) -> None:
    with pytest.raises(ProcessingTimeout):
        pipeline.render(
            source_jpeg(), Options(width=400), "jpeg", PILLOW, deadline=time.monotonic() - 1
        )
    assert encodes == []
