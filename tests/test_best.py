"""``format:best``: the smallest of the formats the client accepts, chosen per thumbnail.

The choice itself (:mod:`django_oximg.core.pipeline.best`): never a format
the request does not accept, never a still for an animation, lossless for
drawn graphics and lossy for photo-like detail, a bounded number of
encodes; and around it, the URL grammar, the cache key and ``Vary`` per
``Accept`` class, the memory estimate and the settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pyvips

from django_oximg import conf
from django_oximg.core import keys, pipeline
from django_oximg.core.errors import InvalidOptions, ProcessingTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import Options, parse_path
from django_oximg.core.pipeline import best
from django_oximg.core.pipeline.budget import estimate_peak_bytes
from django_oximg.core.serving.handler import Thumbnailer
from tests import images
from tests.constants import SIGNER

#: Accept headers of each class, and the formats besides JPEG and PNG each allows.
ACCEPTS = {
    "image/avif,image/webp,image/apng,*/*;q=0.8": {"avif", "webp"},
    "image/webp,*/*": {"webp"},
    "image/avif,*/*": {"avif"},
    "image/avif;q=0,image/webp;q=0,*/*": set(),
    "*/*": set(),
    "": set(),
}

#: The universal formats: JPEG, and PNG for a result with alpha.
UNIVERSAL = {"jpeg", "png"}

ALL_LOSSY = ("avif", "webp")

SETTINGS = pipeline.RenderSettings()


@pytest.fixture(autouse=True)
def configured() -> None:
    pipeline.configure()


def format_of(data: bytes) -> str:
    """The format the bytes are in, read by libvips (not from any header we wrote)."""
    loader = pyvips.Image.new_from_buffer(data, "").get("vips-loader")
    for name in ("jpeg", "png", "webp", "gif"):
        if loader.startswith(name):
            return name
    assert loader.startswith("heif")
    return "avif"


def is_lossless(data: bytes) -> bool:
    """Lossless WebP (a VP8L bitstream) or PNG."""
    return data[:8] == b"\x89PNG\r\n\x1a\n" or (data[:4] == b"RIFF" and data[12:16] == b"VP8L")


def render_best(
    image: pyvips.Image, accepted: tuple[str, ...], **options: Any
) -> pipeline.Rendered:
    data = bytes(image.pngsave_buffer())
    opts = Options(**{"width": 300, **options})
    plan = pipeline.plan_best(pipeline.probe(data), opts, accepted, SETTINGS)
    return pipeline.render(data, plan.options, plan.format, SETTINGS, plan=plan)


# -- the URL ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/f:best/plain/a.jpg", "/rs:fit:90:90/plain/a.jpg@best"])
def test_best_is_a_format_and_an_extension(path: str) -> None:
    assert parse_path(path).options.format == "best"


def test_best_is_not_a_format_quality_may_name() -> None:
    with pytest.raises(InvalidOptions):
        parse_path("/fq:best:50/plain/a.jpg")


# -- the choice -------------------------------------------------------------------------

DRAWN = {"logo": images.logo, "text": images.text, "screenshot": images.screenshot}


@pytest.mark.parametrize("accepted", [ALL_LOSSY, ("webp",), ("avif",), ()])
@pytest.mark.parametrize("drawing", sorted(DRAWN))
def test_drawn_graphics_are_made_lossless(drawing: str, accepted: tuple[str, ...]) -> None:
    """At a small downscale (their text still legible): palette PNG or lossless WebP."""
    image = DRAWN[drawing]()
    rendered = render_best(image, accepted, width=image.width * 3 // 4)
    assert is_lossless(rendered.data)
    assert format_of(rendered.data) in {"png"} | set(accepted)


@pytest.mark.parametrize("accepted", [ALL_LOSSY, ("webp",), ("avif",), ()])
def test_photo_like_detail_is_made_lossy(accepted: tuple[str, ...]) -> None:
    for image in (images.noise(500, 400), images.photo(500, 400)):
        rendered = render_best(image, accepted)
        assert not is_lossless(rendered.data)
        assert format_of(rendered.data) == rendered.format
        assert rendered.format in set(accepted) | {"jpeg"}


def test_the_smallest_candidate_wins() -> None:
    """Every candidate is encoded from the same pixels, and the smallest is kept."""
    encoded: list[bytes] = []
    original = best.encode_candidate

    def spy(*args: Any) -> bytes:
        encoded.append(original(*args))
        return encoded[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(best, "encode_candidate", spy)
        rendered = render_best(images.noise(500, 400), ALL_LOSSY)
    assert len(encoded) == 3
    assert rendered.data == min(encoded, key=len)


@pytest.mark.parametrize("accepted", [ALL_LOSSY, ("webp",), ()])
@pytest.mark.parametrize(
    "image", [images.logo, images.text, images.illustration, images.gradient, images.photo]
)
def test_the_encodes_are_bounded_and_the_pixels_made_once(
    image: Callable[[], pyvips.Image], accepted: tuple[str, ...]
) -> None:
    encodes, copies = [], []
    original, copy_memory = best.encode_candidate, pyvips.Image.copy_memory

    def counted(*args: Any) -> bytes:
        encodes.append(args[1])
        return original(*args)

    def copied(self: pyvips.Image) -> pyvips.Image:
        copies.append(self)
        return copy_memory(self)

    data = bytes(image().pngsave_buffer())
    plan = pipeline.plan_best(pipeline.probe(data), Options(width=300), accepted, SETTINGS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(best, "encode_candidate", counted)
        patch.setattr(pyvips.Image, "copy_memory", copied)
        pipeline.render(data, plan.options, plan.format, SETTINGS, plan=plan)
    assert 1 <= len(encodes) <= plan.encodes <= 5
    assert plan.encodes == len(accepted) + 1 + 1 + ("webp" in accepted)
    assert len(set(encodes)) == len(encodes)  # no candidate twice
    assert len(copies) == 1  # the thumbnail computed once, every encode reads it


def test_the_complexity_tells_drawings_from_photos() -> None:
    threshold = SETTINGS.best_complexity_threshold
    for drawing in (images.logo(), images.text(), images.illustration(), images.gradient()):
        assert best.complexity(drawing) < threshold
    for photo in (images.photo(), images.noise(300, 200)):
        assert best.complexity(photo) > 3 * threshold


def test_a_threshold_of_zero_never_tries_lossless() -> None:
    data = bytes(images.logo().pngsave_buffer())
    settings = replace(SETTINGS, best_complexity_threshold=0.0)
    plan = pipeline.plan_best(pipeline.probe(data), Options(width=300), ALL_LOSSY, settings)
    rendered = pipeline.render(data, plan.options, plan.format, settings, plan=plan)
    assert not is_lossless(rendered.data)


@pytest.mark.parametrize("accepted", [ALL_LOSSY, ("webp",), ("avif",), ()])
def test_an_animation_stays_animated(accepted: tuple[str, ...]) -> None:
    data = images.animated_gif()
    plan = pipeline.plan_best(pipeline.probe(data), Options(width=60), accepted, SETTINGS)
    rendered = pipeline.render(data, plan.options, plan.format, SETTINGS, plan=plan)
    assert rendered.format == ("webp" if "webp" in accepted else "gif")
    assert format_of(rendered.data) == rendered.format
    assert rendered.frames == 6
    assert pyvips.Image.new_from_buffer(rendered.data, "", n=-1).get("n-pages") == 6


def test_alpha_is_never_sent_as_jpeg() -> None:
    rendered = render_best(images.photo(400, 300).bandjoin(128).copy(interpretation="srgb"), ())
    assert rendered.format == "png"
    assert pyvips.Image.new_from_buffer(rendered.data, "").hasalpha()


def test_the_memory_estimate_and_encode_time_count_every_candidate() -> None:
    data = images.jpeg(1600, 1200)
    info = pipeline.probe(data)
    options = Options(width=800)
    single = pipeline.plan_render(info, options, "avif", SETTINGS)
    chosen = pipeline.plan_best(info, options, ALL_LOSSY, SETTINGS)
    assert chosen.format == "avif"
    assert estimate_peak_bytes(chosen, 1, data) > estimate_peak_bytes(single, 1, data)
    assert chosen.encode_seconds > single.encode_seconds


def test_a_deadline_passing_between_encodes_stops_the_next() -> None:
    image = images.logo()
    data = bytes(image.pngsave_buffer())
    plan = pipeline.plan_best(pipeline.probe(data), Options(width=300), ALL_LOSSY, SETTINGS)
    deadline = Deadline(None)
    encodes = []
    original = best.encode_candidate

    def expiring(*args: Any) -> bytes:
        encodes.append(args[1])
        encoded = original(*args)
        deadline.expire()  # what the watchdog does when the time passes
        return encoded

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(best, "encode_candidate", expiring)
        with pytest.raises(ProcessingTimeout):
            best.encode_best(image, plan, SETTINGS, deadline)
    assert len(encodes) == 1


# -- through the thumbnailer: the format accepted, the key and Vary per Accept class -----


@pytest.fixture
def graphics(source_dir: Path) -> Path:
    (source_dir / "photos" / "logo.png").write_bytes(bytes(images.logo().pngsave_buffer()))
    (source_dir / "photos" / "noise.png").write_bytes(
        bytes(images.noise(300, 200).pngsave_buffer())
    )
    return source_dir


def ask(thumbnailer: Thumbnailer, path: str, accept: str) -> tuple[dict[str, str], bytes]:
    reply = thumbnailer.reply(SIGNER.signed_path(path), "GET", {"HTTP_ACCEPT": accept})
    assert reply.status == 200
    body = reply.body
    if reply.file is not None:
        with reply.file as handle:
            body = handle.read()
    return dict(reply.headers), body


SOURCES = ["landscape.jpg", "alpha.png", "logo.png", "noise.png", "anim.gif"]


@pytest.mark.parametrize("accept", sorted(ACCEPTS))
@pytest.mark.parametrize("source", SOURCES)
def test_best_never_sends_a_format_the_request_does_not_accept(
    make: Callable[..., Thumbnailer], graphics: Path, source: str, accept: str
) -> None:
    thumbnailer = make()
    for _ in range(2):  # the render, then the cached file
        headers, body = ask(thumbnailer, f"/rs:fit:200:200/plain/photos/{source}@best", accept)
        fmt = format_of(body)
        assert headers["Content-Type"] == f"image/{fmt}"
        assert fmt in ACCEPTS[accept] | UNIVERSAL | ({"gif"} if source == "anim.gif" else set())
        assert "Accept" in headers["Vary"]
        if source == "anim.gif":
            assert pyvips.Image.new_from_buffer(body, "", n=-1).get("n-pages") > 1
    assert thumbnailer.renders == 1


def test_accept_classes_never_share_a_result(
    make: Callable[..., Thumbnailer], graphics: Path
) -> None:
    thumbnailer = make()
    path = "/rs:fit:200:200/plain/photos/noise.png@best"
    keys_by_accept = {
        accept: thumbnailer.job_for(SIGNER.signed_path(path), accept).key for accept in ACCEPTS
    }
    classes = {frozenset(allowed) for allowed in ACCEPTS.values()}
    assert len(set(keys_by_accept.values())) == len(classes)
    for accept, key in keys_by_accept.items():
        for other, other_key in keys_by_accept.items():
            assert (key == other_key) is (ACCEPTS[accept] == ACCEPTS[other])
    formats = {}
    for accept in ACCEPTS:
        headers, body = ask(thumbnailer, path, accept)
        formats[accept] = format_of(body)
        assert headers["Vary"] == "Accept"
    assert thumbnailer.renders == len(classes)
    assert formats["image/avif,image/webp,image/apng,*/*;q=0.8"] == "avif"
    assert formats["*/*"] == "jpeg"


def test_without_auto_format_best_reads_no_accept(
    make: Callable[..., Thumbnailer], graphics: Path
) -> None:
    thumbnailer = make(auto_format=False)
    path = "/rs:fit:200:200/plain/photos/noise.png@best"
    headers, body = ask(thumbnailer, path, "image/avif,image/webp,*/*")
    assert "Vary" not in headers
    assert format_of(body) == "jpeg"


def test_best_by_default_makes_a_url_without_a_format_best(
    make: Callable[..., Thumbnailer], graphics: Path
) -> None:
    path = "/rs:fit:200:200/plain/photos/logo.png"
    plain = make()
    chosen = make(best_by_default=True)
    assert plain.job_for(SIGNER.signed_path(path), "").key.endswith(".png")
    assert keys.is_best_key(chosen.job_for(SIGNER.signed_path(path), "").key)
    headers, body = ask(chosen, path, "image/webp,*/*")
    assert is_lossless(body) and headers["Content-Type"] in {"image/png", "image/webp"}
    # A URL naming its format keeps it.
    headers, body = ask(chosen, path + "@jpeg", "image/webp,*/*")
    assert format_of(body) == "jpeg"


# -- the settings -----------------------------------------------------------------------


def test_the_settings_change_the_fingerprint_only_when_set() -> None:
    base = conf.build_settings({"KEY": "00", "SALT": "00"})
    on = conf.build_settings({"KEY": "00", "SALT": "00", "FORMAT_BEST_BY_DEFAULT": True})
    lower = conf.build_settings(
        {"KEY": "00", "SALT": "00", "FORMAT_BEST_COMPLEXITY_THRESHOLD": 10.0}
    )
    fingerprints = {conf.output_fingerprint(s) for s in (base, on, lower)}
    assert len(fingerprints) == 3
    assert conf.output_fingerprint(base) == conf.output_fingerprint(
        conf.build_settings({"KEY": "00", "SALT": "00", "FORMAT_BEST_BY_DEFAULT": False})
    )


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image/jpeg"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\r", "image/png"),
        (b"RIFF\x10\x00\x00\x00WEBP", "image/webp"),
        (b"GIF89a\x10\x00\x10\x00\x00\x00", "image/gif"),
        (b"\x00\x00\x00\x1cftypavif", "image/avif"),
        (b"<html>", "application/octet-stream"),
    ],
)
def test_a_best_answer_says_the_type_of_its_bytes(head: bytes, expected: str) -> None:
    assert keys.content_type("ab/cd/ef.best", head) == expected
