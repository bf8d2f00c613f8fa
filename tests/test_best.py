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
from django.core.exceptions import ImproperlyConfigured

from django_oximg import conf
from django_oximg.core import keys, pipeline
from django_oximg.core.errors import InvalidOptions, ProcessingTimeout
from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import BEST_FORMAT, Options, parse_path
from django_oximg.core.options.autoquality import (
    AutoQualitySettings,
    QualityTarget,
    planned_encodes,
    quality_target,
)
from django_oximg.core.pipeline import best
from django_oximg.core.pipeline.autoquality import Chosen
from django_oximg.core.pipeline.budget import estimate_peak_bytes
from django_oximg.core.pipeline.encode import encode_at_target
from django_oximg.core.pipeline.plan import Candidate
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.negotiation import output_format
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

#: The site's ``AUTOQUALITY`` asking for DSSIM, with imgproxy's defaults
#: (AVIF searched between 60 and 65, the other formats between 70 and 80).
DSSIM_SETTINGS = pipeline.RenderSettings(autoquality=AutoQualitySettings(method="dssim"))


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
    image: pyvips.Image,
    accepted: tuple[str, ...],
    settings: pipeline.RenderSettings = SETTINGS,
    **options: Any,
) -> pipeline.Rendered:
    data = bytes(image.pngsave_buffer())
    opts = Options(**{"width": 300, **options})
    plan = pipeline.plan_best(pipeline.probe(data), opts, accepted, settings)
    return pipeline.render(data, plan.options, plan.format, settings, plan=plan)


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


@pytest.mark.parametrize(
    ("settings", "make_image"),
    [(SETTINGS, images.logo), (DSSIM_SETTINGS, images.photo)],
    ids=["fixed", "dssim"],
)
def test_a_deadline_passing_between_encodes_stops_the_next(
    settings: pipeline.RenderSettings, make_image: Callable[[], pyvips.Image]
) -> None:
    """With ``aq:dssim``, a photo's first search stops after one encode, and no other runs."""
    image = make_image()
    data = bytes(image.pngsave_buffer())
    plan = pipeline.plan_best(pipeline.probe(data), Options(width=300), ALL_LOSSY, settings)
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
            best.encode_best(image, plan, settings, deadline)
    assert len(encodes) == 1


# -- autoquality: every format at the same measured look ----------------------------------


@pytest.mark.parametrize("accepted", [ALL_LOSSY, ("webp",), ()])
def test_with_dssim_each_format_is_encoded_at_its_searched_quality(
    accepted: tuple[str, ...],
) -> None:
    """Each lossy format is searched within its own bounds, and the smallest result wins.

    The winner's quality is what :func:`encode_at_target` finds for that
    format on the same pixels (the thumbnail kept lossless); without
    ``autoquality`` each format is encoded at its fixed ``QUALITY``.
    """
    image = images.photo(500, 400)
    searched: list[tuple[QualityTarget, Chosen]] = []
    original = best.search

    def spy(*args: Any) -> Chosen:
        chosen = original(*args)
        searched.append((args[1], chosen))
        return chosen

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(best, "search", spy)
        rendered = render_best(image, accepted, DSSIM_SETTINGS)
    formats = [*accepted, "jpeg"]
    pixels = rendered.width * rendered.height
    wanted = [quality_target(Options(), fmt, DSSIM_SETTINGS.autoquality, pixels) for fmt in formats]
    assert [target for target, _ in searched] == wanted
    for target, chosen in searched:
        assert target.min_quality <= chosen.quality <= target.max_quality
    winner = min(searched, key=lambda pair: len(pair[1].data))
    assert rendered.data == winner[1].data
    assert rendered.quality == winner[1].quality
    assert rendered.format in formats
    data = bytes(image.pngsave_buffer())
    kept = pipeline.render(data, Options(width=300), "png", SETTINGS).data
    thumbnail = pyvips.Image.new_from_buffer(kept, "")
    alone = encode_at_target(thumbnail, rendered.format, winner[0])
    assert rendered.quality == alone.quality
    fixed = render_best(image, accepted)
    assert fixed.quality == 0
    assert fixed.data == best.encode_candidate(
        thumbnail,
        Candidate(fixed.format, SETTINGS.quality[fixed.format]),
        0,
        False,
    )


def test_with_dssim_the_searches_count_in_the_bounds() -> None:
    """The encode count, the encoder time and the memory estimate count every search."""
    data = bytes(images.photo(500, 400).pngsave_buffer())
    info, options = pipeline.probe(data), Options(width=300)
    fixed = pipeline.plan_best(info, options, ALL_LOSSY, SETTINGS)
    searched = pipeline.plan_best(info, options, ALL_LOSSY, DSSIM_SETTINGS)
    targets = [candidate.target for candidate in searched.candidates]
    assert all(target is not None and target.method == "dssim" for target in targets)
    searches = sum(planned_encodes(target) for target in targets if target is not None)
    assert searched.encodes == searches + len(searched.flat_candidates) > fixed.encodes
    assert searched.encode_seconds > fixed.encode_seconds
    assert estimate_peak_bytes(searched, 1, data) > estimate_peak_bytes(fixed, 1, data)
    encodes = []
    original = best.encode_candidate

    def counted(*args: Any) -> bytes:
        encodes.append(args[1])
        return original(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(best, "encode_candidate", counted)
        pipeline.render(data, options, searched.format, DSSIM_SETTINGS, plan=searched)
    assert len(fixed.candidates) < len(encodes) <= searched.encodes


def test_max_bytes_lowers_the_searched_quality_of_the_smallest_lossy_result() -> None:
    """``max_bytes`` still applies after the searches, from the winner's searched quality."""
    image = images.photo(500, 400)
    searched = render_best(image, ALL_LOSSY, DSSIM_SETTINGS)
    limit = len(searched.data) * 2 // 3
    fitted = render_best(image, ALL_LOSSY, DSSIM_SETTINGS, max_bytes=limit)
    assert len(fitted.data) <= limit
    assert fitted.format == searched.format
    assert 0 < fitted.quality < searched.quality


def test_a_size_search_leaves_best_at_its_fixed_qualities() -> None:
    """``aq:size`` has every format fit the same bytes: no look to compare them at."""
    data = bytes(images.photo(500, 400).pngsave_buffer())
    options = parse_path("/aq:size:20000/w:300/plain/a.png").options
    plan = pipeline.plan_best(pipeline.probe(data), options, ALL_LOSSY, SETTINGS)
    assert [candidate.target for candidate in plan.candidates] == [None] * 3
    assert [candidate.quality for candidate in plan.candidates] == [65, 75, 80]


# -- FORMAT_BEST_MAX_RESOLUTION: one encoding over it -----------------------------------


@pytest.mark.parametrize(
    ("accepted", "photo", "drawing"),
    [
        (ALL_LOSSY, "webp", "webp"),
        (("avif",), "avif", "png"),
        ((), "jpeg", "png"),
    ],
)
def test_over_the_max_resolution_best_encodes_the_format_that_usually_wins(
    accepted: tuple[str, ...], photo: str, drawing: str
) -> None:
    """0.1 MP: a 500x400 photo or 400x300 logo encodes once, at 300 px wide all are tried."""
    settings = replace(SETTINGS, best_max_resolution=0.1)
    encodes: list[Candidate] = []
    original = best.encode_candidate

    def counted(*args: Any) -> bytes:
        encodes.append(args[1])
        return original(*args)

    for image, expected, lossless in (
        (images.photo(500, 400), photo, False),
        (images.logo(400, 300), drawing, True),
    ):
        data = bytes(image.pngsave_buffer())
        for width, tries_all in ((500, False), (300, True)):
            encodes.clear()
            options = Options(width=width, height=width)
            plan = pipeline.plan_best(pipeline.probe(data), options, accepted, settings)
            assert plan.picks_one is not tries_all
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(best, "encode_candidate", counted)
                rendered = pipeline.render(data, options, plan.format, settings, plan=plan)
            if tries_all:
                assert len(encodes) >= len(plan.candidates)
                continue
            assert len(encodes) == plan.encodes == 1
            assert (rendered.format, is_lossless(rendered.data)) == (expected, lossless)
            assert format_of(rendered.data) == expected


def test_the_max_resolution_must_not_be_negative() -> None:
    with pytest.raises(ImproperlyConfigured, match="FORMAT_BEST_MAX_RESOLUTION"):
        conf.build_settings({"KEY": "00", "SALT": "00", "FORMAT_BEST_MAX_RESOLUTION": -1})


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


@pytest.mark.parametrize("render", [SETTINGS, DSSIM_SETTINGS], ids=["fixed", "dssim"])
@pytest.mark.parametrize("accept", sorted(ACCEPTS))
@pytest.mark.parametrize("source", SOURCES)
def test_best_never_sends_a_format_the_request_does_not_accept(
    make: Callable[..., Thumbnailer],
    graphics: Path,
    source: str,
    accept: str,
    render: pipeline.RenderSettings,
) -> None:
    thumbnailer = make(render=render)
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


# -- FORMAT_BEST_ALLOW_SKIPS: skip_processing for best ------------------------------------


def test_skip_processing_makes_best_no_other_format() -> None:
    """As in imgproxy: the name's format listed leaves the URL at ``best``."""
    options = parse_path("/skp:jpg/w:50/plain/a.jpg@best").options
    assert output_format(options, "a.jpg", "image/avif,*/*", True) == (BEST_FORMAT, True)
    plain = parse_path("/skp:jpg/w:50/plain/a.jpg").options
    assert output_format(plain, "a.jpg", "image/avif,*/*", True) == ("jpeg", False)


@pytest.mark.parametrize("allow", [False, True])
def test_allow_skips_serves_a_listed_source_as_it_is(
    make: Callable[..., Thumbnailer], source_dir: Path, allow: bool
) -> None:
    """On, a source in a listed format the client may get is its own answer; off, rendered."""
    photos = source_dir / "photos"
    (photos / "photo.webp").write_bytes(bytes(images.photo(300, 200).webpsave_buffer()))
    thumbnailer = make(best_allows_skips=allow)
    jpeg = (photos / "landscape.jpg").read_bytes()
    webp = (photos / "photo.webp").read_bytes()
    headers, body = ask(thumbnailer, "/skp:jpg:webp/w:100/plain/photos/landscape.jpg@best", "*/*")
    assert (body == jpeg) is allow
    assert headers["Content-Type"] == "image/jpeg"
    headers, body = ask(
        thumbnailer, "/skp:jpg:webp/w:100/plain/photos/photo.webp@best", "image/webp,*/*"
    )
    assert (body == webp) is allow
    # WebP to a client that does not take it: always rendered, in a format it takes.
    headers, body = ask(thumbnailer, "/skp:webp/w:100/plain/photos/photo.webp@best", "*/*")
    assert body != webp
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
