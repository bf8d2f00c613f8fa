"""HEIC sources through pillow-heif, the ``heic`` extra (django_oximg/core/pipeline/heic.py).

The files are written by pillow-heif itself. Without it installed these
tests skip, except under ``OXIMG_REQUIRE_SERVICES=1`` (CI, whose test
group installs it), where they fail.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import pyvips
from django import forms
from django.core.files.uploadedfile import SimpleUploadedFile

from django_oximg.core import pipeline
from django_oximg.core.errors import UnsupportedFormat
from django_oximg.core.options import Options, parse_path
from django_oximg.core.pipeline import load as load_module
from django_oximg.core.serving.handler import Thumbnailer
from tests import images
from tests.constants import MIB, SIGNER
from tests.services import missing


@pytest.fixture(autouse=True)
def pillow_heif_installed() -> None:
    try:
        import pillow_heif  # noqa: F401
    except ImportError:
        missing("pillow-heif is not installed (pip install django-oximg[heic])")


@pytest.fixture(scope="module")
def turned() -> bytes:
    """320x200 as stored, with EXIF orientation 6: 200x320 upright, the mark top right."""
    return images.heic(320, 200, orientation=6)


def options_for(text: str) -> Options:
    return parse_path(f"/{text}/plain/photo.heic").options


def decoded(data: bytes) -> pyvips.Image:
    return pyvips.Image.new_from_buffer(data, "")


def is_red(pixel: list[float]) -> bool:
    red, green, blue = pixel[:3]
    return red > 200 and green < 60 and blue < 60


def test_the_probe_reads_a_heic_header_upright(turned: bytes) -> None:
    info = pipeline.probe(turned)
    assert (info.format, info.compression) == ("heif", "hevc")
    assert (info.width, info.height, info.orientation) == (200, 320, 1)


@pytest.mark.parametrize(
    ("options", "size"),
    [
        ("rs:fit:100:100", (63, 100)),
        ("rs:fill:100:100", (100, 100)),
        ("w:100/qm:high", (100, 160)),
        ("c:200:200:no/w:50", (50, 50)),
        ("rot:90/w:160", (160, 100)),
    ],
)
def test_a_heic_renders_at_its_size_and_upright(
    turned: bytes, options: str, size: tuple[int, int]
) -> None:
    result = pipeline.render(turned, options_for(options), "jpeg", pipeline.RenderSettings())
    image = decoded(result.data)
    assert (image.width, image.height) == (result.width, result.height) == size
    if "rot:" not in options and "fill" not in options:
        assert is_red(image(image.width - 2, 2))  # the stored top-left, turned to the top right
        assert not is_red(image(2, 2))


@pytest.mark.parametrize("fmt", ["avif", "webp", "jpeg", "png"])
@pytest.mark.parametrize("metadata", ["", "/sm:0", "/kcr:0"])
def test_a_heic_result_is_not_turned_again_by_its_exif(
    turned: bytes, fmt: str, metadata: str
) -> None:
    # The file's EXIF still says 6 after libheif applied the turn: no result
    # may carry it (AVIF would write it as a turn of its own, JPEG as a tag).
    options = options_for(f"w:100{metadata}")
    result = pipeline.render(turned, options, fmt, pipeline.RenderSettings())
    image = decoded(result.data)
    assert (image.width, image.height) == (100, 160)
    assert not image.get_typeof("orientation") or image.get("orientation") == 1
    assert is_red(image(image.width - 2, 2))


def test_a_heic_without_auto_rotate_is_still_turned_by_its_file(turned: bytes) -> None:
    # The turn is the file's own (irot), which libheif always applies, as a
    # phone's viewer does; ar:0 only leaves EXIF orientations alone.
    result = pipeline.render(turned, options_for("ar:0/w:100"), "png", pipeline.RenderSettings())
    assert (result.width, result.height) == (100, 160)


def test_a_heic_keeps_its_credit_with_keep_copyright() -> None:
    data = images.heic(64, 48, artist="Ann Artist")
    kept = pipeline.render(data, options_for("w:32/kcr:1"), "jpeg", pipeline.RenderSettings())
    assert "Ann Artist" in str(decoded(kept.data).get("exif-ifd0-Artist"))
    dropped = pipeline.render(data, options_for("w:32/kcr:0"), "jpeg", pipeline.RenderSettings())
    assert not decoded(dropped.data).get_typeof("exif-ifd0-Artist")


def fetch(thumbnailer: Thumbnailer, path: str) -> tuple[int, bytes]:
    """The status and content of ``path`` (signed here), any file read and closed."""
    reply = thumbnailer.reply(SIGNER.signed_path(path), "GET", {})
    if reply.file is None:
        return reply.status, reply.body
    with reply.file as handle:
        return reply.status, handle.read()


def test_a_heic_is_served(
    make: Callable[..., Thumbnailer], source_dir: Path, cache_dir: Path, turned: bytes
) -> None:
    (source_dir / "photos" / "phone.heic").write_bytes(turned)
    thumbnailer = make(workers=1, queue_size=4, budget=256 * MIB)
    status, body = fetch(thumbnailer, "/rs:fit:100:100/plain/photos/phone.heic@jpeg")
    assert status == 200
    image = decoded(body)
    assert (image.width, image.height) == (63, 100)
    assert is_red(image(image.width - 2, 2))


def test_an_over_limit_heic_is_refused_before_it_is_decoded(
    make: Callable[..., Thumbnailer],
    source_dir: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decodes: list[bytes] = []
    real = load_module.heic_decoded
    monkeypatch.setattr(
        load_module,
        "heic_decoded",
        lambda data, options: decodes.append(data) or real(data, options),
    )
    (source_dir / "photos" / "big.heic").write_bytes(images.heic(1200, 1000))
    thumbnailer = make(workers=1, queue_size=4, budget=256 * MIB, max_src_resolution=1_000_000)
    assert fetch(thumbnailer, "/rs:fit:100:100/plain/photos/big.heic@jpeg")[0] == 422
    assert not decodes
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.jpeg"))
    # The URL's own lower limit, likewise; within the limits it renders.
    roomy = make(workers=1, queue_size=4, budget=256 * MIB, max_src_resolution=2_000_000)
    assert fetch(roomy, "/msr:0.5/w:100/plain/photos/big.heic@jpeg")[0] == 422
    assert not decodes
    assert fetch(roomy, "/w:100/plain/photos/big.heic@jpeg")[0] == 200
    assert len(decodes) == 1


def test_without_pillow_heif_a_heic_is_refused_from_its_header(
    make: Callable[..., Thumbnailer],
    source_dir: Path,
    turned: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pillow_heif", None)  # import fails
    with pytest.raises(UnsupportedFormat):
        pipeline.probe(turned)
    with pytest.raises(UnsupportedFormat):
        pipeline.render(turned, options_for("w:50"), "jpeg", pipeline.RenderSettings())
    (source_dir / "photos" / "phone.heic").write_bytes(turned)
    thumbnailer = make(workers=1, queue_size=4, budget=256 * MIB)
    assert fetch(thumbnailer, "/w:50/plain/photos/phone.heic@jpeg") == (
        415,
        b"Unsupported image format\n",
    )


def test_a_heic_upload_passes_django_image_field_as_documented_and_renders(
    turned: bytes,
) -> None:
    import pillow_heif

    pillow_heif.register_heif_opener()  # the one line docs/django.md gives
    upload = SimpleUploadedFile("phone.heic", turned, content_type="image/heic")
    cleaned = forms.ImageField().clean(upload)
    assert (cleaned.image.format, cleaned.image.size) == ("HEIF", (200, 320))
    cleaned.seek(0)
    result = pipeline.render(
        cleaned.read(), options_for("rs:fit:100:100"), "webp", pipeline.RenderSettings()
    )
    assert (result.width, result.height) == (63, 100)


def test_the_info_summary_of_a_heic(turned: bytes) -> None:
    summary = pipeline.summarise(turned, (4, 3), True)
    assert summary.blurhash is not None and len(summary.blurhash) == 28
    assert summary.dominant_color is not None and summary.dominant_color.startswith("#")
