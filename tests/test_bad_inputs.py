"""Every row of the bad-inputs table in docs/security.md ("Bad inputs, row by row").

Each refusal here is checked for its status (never a 5xx), ``Cache-Control:
no-store``, and that nothing reached the result cache (no object, no
``tmp-oximg-*`` file). Bombs and broken files are built by tests/bombs.py.

The first half runs the core :class:`Thumbnailer` in this process with
counting stores (tests/test_thumbnailer.py's fixtures), to prove what was not
read, opened or written. The second half sends the bombs and broken files to
ONE real gunicorn worker (tests/servers.py) and checks after every row that
the same worker process is still there, then measures its memory (rows 28,
33, 45: resident set size from ``/proc``, never time).

Rows tested elsewhere (each checked to assert the row's promise):

* 1: test_thumbnailer.py::test_valid_request_renders_caches_once_and_then_serves_the_file
* 6: test_thumbnailer.py::test_bad_signatures_get_403_before_any_source_read
  [signature pasted again]; test_signing.py::
  test_signature_pasted_again_inside_the_path_is_rejected
* 7: test_thumbnailer.py::test_signed_encoding_variants_share_one_cache_object and
  ::test_variants_under_the_original_signature_are_forbidden; test_views.py::
  test_encoding_variants_give_403_or_200_with_one_cache_object
* 14-27: tests/test_http_source.py (HTTP sources)
* 44: test_overload.py (429 with Retry-After, only 200/429/503, the same worker after)
* 46: test_limits.py::test_fifty_identical_concurrent_misses_render_once (50 x 200,
  identical bytes, one source read, one render)
* 47: tests/test_faults.py (SIGKILL during render and cache write, then oximg_clean)
* 48: test_thumbnailer.py::test_a_failing_cache_write_still_serves_from_memory
  (read-only disk), test_s3.py::
  test_a_failing_putobject_still_answers_from_memory_and_caches_nothing (S3 500);
  "error logged once per interval" is added here
* 49: test_thumbnailer.py::test_negotiated_formats_are_separate_cache_objects_with_vary;
  test_views.py::test_accept_chooses_the_format_and_each_is_its_own_cache_object
* 50: test_responders.py::test_error_replies_are_short_plain_text_and_never_stored
  (every error class); asserted again by every refusal here
* 51-55: test_production_faults.py, one test each (two gunicorn nodes, moto's
  S3, redis-server); 55 also test_s3.py::
  test_concurrent_hits_on_s3_make_one_client_per_store (clients counted)
* 56: test_client_hints.py::test_a_flood_of_width_hints_is_one_render_and_one_cache_file
* 57: test_render_ahead.py::
  test_sizes_over_the_memory_budget_are_refused_and_their_requests_still_get_422
* 58: test_thumbnails.py::test_a_default_name_that_looks_like_a_url_is_never_fetched
  and ::test_a_default_name_that_looks_like_another_source

Rows 2-5 and 8 are also tested on the signer alone (test_signing.py), 9-13
without the ``open()`` audit (test_thumbnailer.py), 28 without memory
(test_limits.py), 33's weight in test_budget.py
(test_progressive_jpeg_costs_more_than_baseline), 34 and 40-42 on the pipeline
alone (test_pipeline.py); here they go through the whole request.

How the rows are tested, where it needs saying:

* Rows 37 and 38: a format blocked on purpose (SVG, libvips ``.v``, PPM)
  answers 415, bytes that are no image 422. CSV, matrix and raw pixels have no
  signature, so they cannot be told from garbage: 422.
* Row 28: "in < 5 ms" is not asserted (no wall-clock assertions).
* Row 29: the 16383x16383 WebP is 246 bytes, not 10 KB (a flat lossless image
  costs no bits per pixel).
* Row 39: the AVIF is a small real one whose ``ispe`` box claims 17000x17000;
  "HEIF with many items" is not built.
* Row 43: ``w:0/h:0`` is valid (imgproxy: keep the source's size), so 200.
* Row 45: the sources are 48-49 MP (the limit, 50 MP, is inclusive), the
  server's budget 384 MiB (the GIF alone is estimated at 293 MiB).
* Rows 44 and 28: latencies ("within 50 ms", "< 5 ms") are not asserted.
* Row 47: orphaned temporary files are removed by ``manage.py oximg_clean``
  (those older than a minute), not at start-up.
* Row 37: "no file read" is shown by the 415 (the SVG loader never parses
  the document), the sentinel's text absent from the answer and a canary
  socket that nobody connects to; a read by C code cannot be audited here.

Row 34 found a bug: libvips drops a GIF's cut-off last frames without an
error, even with ``fail_on``, so a GIF truncated after its first frames was
served (and cached) as a shorter animation; pipeline.check_complete now
refuses a GIF without its trailer.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hmac
import logging
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pyvips

from django_oximg.core import pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.options.signing import URLSigner, pairs_from_hex
from django_oximg.core.pipeline import RenderSettings
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.serving.replies import Reply
from django_oximg.core.stores.protocols import TEMP_PREFIX
from tests import bombs, images
from tests.constants import KEY, MIB, SALT, SIGNER
from tests.servers import Fetched, Server, fetch, gunicorn, imgproxy_url, request
from tests.test_thumbnailer import (  # noqa: F401 (fixtures: the counting stores)
    CONTROL,
    CountingCacheStore,
    CountingSourceStore,
    body_of,
    cache,
    cached_files,
    decode,
    get,
    header,
    sources,
)

#: The second half: the subject is one gunicorn worker process (it survives, its memory
#: stays bounded). The first half, and test_views.py for the Django side, run on both Djangos.
live_worker = pytest.mark.one_django(
    reason="the subject is a gunicorn worker process and its memory, not Django"
)

#: A second key pair: the "new" key of a rotation, or a key that was never ours.
OTHER_KEY = "1f" * 32
OTHER_SALT = "2e" * 32

BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def assert_refused(reply: Reply, status: int, cache_dir: Path) -> None:
    """The refusal every bad input gets: status, no-store, nothing cached."""
    assert reply.status == status, reply.body
    assert header(reply, "Cache-Control") == "no-store"
    assert reply.file is None and 0 < len(reply.body) < 100
    assert cached_files(cache_dir) == []  # no result and no temporary file


# -- rows 2-5: a bad signature touches nothing -------------------------------------


def forged_paths() -> dict[str, str]:
    """Every tampered signature of CONTROL, by "<row>-<what>"."""
    signature = SIGNER.sign(CONTROL)
    cases = {
        "2-no-signature-segment": CONTROL,
        "2-empty-signature-segment": f"/{CONTROL}",
    }
    for index in range(len(signature)):
        flipped = BASE64URL[BASE64URL.index(signature[index]) ^ 1]
        cases[f"3-bit-flipped-in-char-{index}"] = (
            f"/{signature[:index]}{flipped}{signature[index + 1 :]}{CONTROL}"
        )
    for cut in range(1, len(signature)):
        cases[f"4-truncated-by-{cut}"] = f"/{signature[:-cut]}{CONTROL}"
    last = BASE64URL.index(signature[-1])
    high = last & ~0b11  # the last character's low 2 bits are padding for 32 bytes
    twins = {f"last-char-twin-{BASE64URL[high | low]}": high | low for low in range(4)}
    lenient = {
        "padded-=": signature + "=",
        "padded-==": signature + "==",
        "percent-padded": signature + "%3D%3D",
        **{name: signature[:-1] + BASE64URL[twin] for name, twin in twins.items() if twin != last},
        "non-ascii-inside": signature[:20] + "%C3%A9" + signature[20:],
        "non-ascii-before": "%C3%A9" + signature,
        "non-ascii-after": signature + "%C3%A9",
        "raw-non-ascii": signature[:20] + "\u00e9" + signature[20:],
        "swapped-case": signature.swapcase(),
    }
    for name, forged in lenient.items():
        cases[f"5-{name}"] = f"/{forged}{CONTROL}"
    return cases


def test_rows_2_to_5_every_tampered_signature_is_403_before_any_storage_call(
    thumbnailer: Thumbnailer,
    sources: CountingSourceStore,
    cache: CountingCacheStore,
    cache_dir: Path,
) -> None:
    """Missing, bit-flipped, truncated by 1..42, padded, low-bit twins, non-ASCII."""
    lookups: list[object] = []
    cache.after_get = lookups.append
    cases = forged_paths()
    assert len(cases) == 2 + 43 + 42 + 3 + 3 + 5
    for case, path in cases.items():
        reply = thumbnailer.reply(path, "GET", {})
        assert (reply.status, reply.body) == (403, b"Forbidden\n"), case
        assert header(reply, "Cache-Control") == "no-store", case
    assert (sources.reads, len(lookups), cache.puts) == (0, 0, 0)
    assert cached_files(cache_dir) == []
    # Control: the genuine signature passes the same thumbnailer.
    assert get(thumbnailer, CONTROL).status == 200


def test_row_3_digests_are_compared_in_constant_time(
    thumbnailer: Thumbnailer, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    """A well-formed but wrong signature reaches ``hmac.compare_digest``, and only that."""
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # what signing.py calls
    digest = bytearray(base64.urlsafe_b64decode(SIGNER.sign(CONTROL) + "="))
    digest[7] ^= 0x10
    forged = base64.urlsafe_b64encode(bytes(digest)).rstrip(b"=").decode()
    assert_refused(thumbnailer.reply(f"/{forged}{CONTROL}", "GET", {}), 403, cache_dir)
    assert len(compared) == 1
    assert compared[0][0] == bytes(digest)


# -- row 8: key rotation -----------------------------------------------------------


def thumbnailer_with_keys(
    keys: list[str],
    salts: list[str],
    sources: CountingSourceStore,
    cache: CountingCacheStore,
    executors: list[Executor],
) -> Thumbnailer:
    executor = Executor(1, 4, 5.0, 512 * MIB)
    executors.append(executor)
    signer = URLSigner(pairs_from_hex(keys, salts))
    return Thumbnailer(ThumbnailerConfig(), signer, {"": sources}, cache, executor)


def test_row_8_previous_key_in_rotation_is_200_retired_key_is_403(
    sources: CountingSourceStore,
    cache: CountingCacheStore,
    cache_dir: Path,
    executors: list[Executor],
) -> None:
    signed_with_old_key = SIGNER.signed_path(CONTROL)
    rotating = thumbnailer_with_keys(
        [OTHER_KEY, KEY], [OTHER_SALT, SALT], sources, cache, executors
    )
    served = rotating.reply(signed_with_old_key, "GET", {})
    body_of(served)
    assert served.status == 200
    assert rotating.signer.signed_path(CONTROL) != signed_with_old_key  # the new key signs

    for stale in cached_files(cache_dir):
        stale.unlink()
    retired = thumbnailer_with_keys([OTHER_KEY], [OTHER_SALT], sources, cache, executors)
    assert_refused(retired.reply(signed_with_old_key, "GET", {}), 403, cache_dir)


# -- rows 9-13: names outside the root are never opened ----------------------------

_opened: list[str] | None = None
_audit_installed = False


def _record_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], str | bytes):
        _opened.append(os.fsdecode(args[0]))


@contextlib.contextmanager
def files_opened() -> Iterator[list[str]]:
    """Every path Python code opens meanwhile (an audit hook; any thread)."""
    global _opened, _audit_installed
    if not _audit_installed:  # audit hooks cannot be removed: install one, switch it
        sys.addaudithook(_record_open)
        _audit_installed = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


ESCAPES = [
    pytest.param("../../etc/passwd", 404, id="9-dot-dot"),
    pytest.param("%2e%2e/%2e%2e/etc/passwd", 404, id="10-encoded-dot-dot"),
    pytest.param("%252e%252e/%252e%252e/etc/passwd", 404, id="10-double-encoded"),
    pytest.param("%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", 404, id="10-encoded-slashes"),
    pytest.param("../sources-secret/secret.jpg", 404, id="11-sibling-prefix"),
    pytest.param("photos/to-sibling.jpg", 404, id="11-symlink-to-sibling-prefix"),
    pytest.param("photos/to-etc/passwd", 404, id="12-symlink-to-etc"),
    pytest.param("photos/landscape.jpg%00.png", 400, id="13-nul"),
    pytest.param("/etc/passwd", 404, id="13-absolute"),
    pytest.param("%2Fetc%2Fpasswd", 404, id="13-encoded-absolute"),
    pytest.param("..%5C..%5Cetc%5Cpasswd", 404, id="13-windows-dot-dot"),
    pytest.param("photos\\..\\..\\etc\\passwd", 404, id="13-raw-backslashes"),
]


@pytest.mark.parametrize(("name", "status"), ESCAPES)
def test_rows_9_to_13_names_outside_the_root_are_refused_and_never_opened(
    thumbnailer: Thumbnailer, source_dir: Path, cache_dir: Path, name: str, status: int
) -> None:
    secret = source_dir.parent / "sources-secret"
    secret.mkdir()
    (secret / "secret.jpg").write_bytes(images.jpeg(64, 48))
    (source_dir / "photos" / "to-sibling.jpg").symlink_to(secret / "secret.jpg")
    (source_dir / "photos" / "to-etc").symlink_to("/etc")
    with files_opened() as opened:
        reply = get(thumbnailer, f"/rs:fit:50:50/plain/{name}@jpeg")
    assert_refused(reply, status, cache_dir)
    outside = [
        path
        for path in map(os.path.realpath, opened)
        if path == "/etc/passwd" or path.startswith(str(secret))
    ]
    assert outside == []


def test_the_open_audit_sees_a_source_read(thumbnailer: Thumbnailer, source_dir: Path) -> None:
    """Control for the test above: a served source is seen being opened."""
    with files_opened() as opened:
        assert get(thumbnailer, CONTROL).status == 200
    assert str(source_dir / "photos" / "landscape.jpg") in opened


# -- row 32: zero delays -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_row_32_zero_frame_delays_are_clamped_to_20_ms(
    thumbnailer: Thumbnailer, source_dir: Path, fmt: str
) -> None:
    (source_dir / "zero.gif").write_bytes(bombs.gif_animation(32, 32, 5, delay_cs=0))
    assert pyvips.Image.new_from_file(str(source_dir / "zero.gif"), n=-1).get("delay") == [0] * 5
    reply = get(thumbnailer, f"/plain/zero.gif@{fmt}")
    assert reply.status == 200
    animation = pyvips.Image.new_from_buffer(reply.body, "", n=-1)
    assert animation.get("n-pages") == 5
    assert animation.get("delay") == [pipeline.MIN_FRAME_DELAY_MS] * 5


# -- row 34 (animations): a GIF cut between frames is not a shorter animation ------


@pytest.mark.parametrize("fraction", [0.5, 0.9])
@pytest.mark.parametrize("fmt", ["gif", "webp", "jpeg"])
def test_row_34_a_gif_cut_after_whole_frames_is_422(
    thumbnailer: Thumbnailer, source_dir: Path, cache_dir: Path, fmt: str, fraction: float
) -> None:
    """libvips decodes the whole frames before the cut without complaint, so the
    trailer is what tells (pipeline.check_complete)."""
    whole = images.animated_gif()
    cut = bombs.truncated(whole, fraction)
    assert 1 < pyvips.Image.new_from_buffer(cut, "", n=-1).get("n-pages") < 6  # libvips agrees
    (source_dir / "cut.gif").write_bytes(cut)
    assert_refused(get(thumbnailer, f"/rs:fit:60:60/plain/cut.gif@{fmt}"), 422, cache_dir)
    (source_dir / "whole.gif").write_bytes(whole)
    assert get(thumbnailer, f"/rs:fit:60:60/plain/whole.gif@{fmt}").status == 200


# -- row 36: decoded by magic, never by name ---------------------------------------


def test_row_36_png_bytes_named_jpg_are_decoded_as_png(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    (source_dir / "really-a-png.jpg").write_bytes(images.png_with_alpha(64, 48))
    for path in (
        "/rs:fit:32:32/plain/really-a-png.jpg@png",
        "/rs:fit:32:32/plain/really-a-png.jpg",
    ):
        reply = get(thumbnailer, path)
        assert reply.status == 200
        assert decode(reply.body).width == 32
    assert pipeline.probe(images.png_with_alpha(64, 48)).format == "png"


def test_row_36_a_webp_that_looks_like_svg_is_loaded_as_webp(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    data = bombs.webp_with_svg_inside()
    assert b"<svg" in data[:200]
    assert pipeline.probe(data).format == "webp"
    (source_dir / "looks-like.svg").write_bytes(data)
    reply = get(thumbnailer, "/plain/looks-like.svg@png")
    assert reply.status == 200
    image = decode(reply.body)
    assert (image.width, image.height) == (8, 8)
    assert list(image(4, 4))[:3] == [200.0, 30.0, 30.0]


# -- rows 40-42: colour, depth and orientation -------------------------------------

RED = (200, 30, 30)


def red_cmyk() -> pyvips.Image:
    red = pyvips.Image.black(64, 64, bands=3).linear(1, list(RED)).cast("uchar")
    return red.copy(interpretation="srgb").icc_transform("cmyk", input_profile="srgb")


def cmyk_jpegs() -> dict[str, bytes]:
    with_profile = red_cmyk()
    bare = with_profile.copy()
    bare.remove("icc-profile-data")
    no_profile = bytes(bare.jpegsave_buffer(Q=95, keep=pyvips.enums.ForeignKeep.NONE))
    return {
        "no-icc": no_profile,
        "with-icc": bytes(with_profile.jpegsave_buffer(Q=95)),
        "corrupt-icc": bombs.with_icc_segment(no_profile, bombs.random_bytes(600)),
    }


@pytest.mark.parametrize("kind", ["no-icc", "with-icc", "corrupt-icc"])
@pytest.mark.parametrize("strip", [True, False], ids=["strip-profile", "keep-profile"])
def test_row_40_cmyk_jpeg_becomes_8_bit_srgb(
    thumbnailer: Thumbnailer, source_dir: Path, kind: str, strip: bool
) -> None:
    data = cmyk_jpegs()[kind]
    assert decode(data).interpretation == "cmyk"
    (source_dir / "cmyk.jpg").write_bytes(data)
    reply = get(thumbnailer, f"/scp:{int(strip)}/plain/cmyk.jpg@jpeg")
    assert reply.status == 200
    image = decode(reply.body)
    assert (image.bands, image.format, image.interpretation) == (3, "uchar", "srgb")
    assert all(abs(a - b) < 25 for a, b in zip(image(32, 32), RED, strict=True))


def test_row_40_a_corrupt_profile_on_rgb_is_ignored(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    red = pyvips.Image.black(64, 64, bands=3).linear(1, list(RED)).cast("uchar")
    plain = bytes(red.jpegsave_buffer(Q=95, keep=pyvips.enums.ForeignKeep.NONE))
    (source_dir / "bad-icc.jpg").write_bytes(bombs.with_icc_segment(plain, bombs.random_bytes(600)))
    for strip in (1, 0):
        reply = get(thumbnailer, f"/scp:{strip}/plain/bad-icc.jpg@jpeg")
        assert reply.status == 200
        assert all(abs(a - b) < 6 for a, b in zip(decode(reply.body)(32, 32), RED, strict=True))


def average_hash(image: pyvips.Image) -> int:
    """A 64-bit perceptual hash: 8x8 grey thumbnail, each cell above or below the mean."""
    grey = image.flatten(background=255) if image.hasalpha() else image
    grey = grey.colourspace("b-w")[0].thumbnail_image(8, height=8, size="force")
    cells = [grey(x, y)[0] for y in range(8) for x in range(8)]
    mean = sum(cells) / 64
    return sum(1 << index for index, cell in enumerate(cells) if cell > mean)


def hamming(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


def scene(width: int = 96, height: int = 64) -> pyvips.Image:
    """Flat areas and marks that no rotation or flip maps onto themselves."""
    image = pyvips.Image.black(width, height, bands=3).linear(1, [40, 60, 90]).cast("uchar")
    image = image.draw_rect([250, 250, 250], 4, 4, 30, 20, fill=True)
    image = image.draw_rect([220, 40, 40], 60, 36, 28, 20, fill=True)
    return image.draw_rect([40, 200, 40], 70, 4, 8, 8, fill=True).copy(interpretation="srgb")


def black_and_white(grey: pyvips.Image) -> pyvips.Image:
    """Only 0 and 255, which a 1-bit PNG holds exactly."""
    return (grey > 127).ifthenelse(255, 0).cast("uchar").copy(interpretation="b-w")


def deep_pngs() -> dict[str, bytes]:
    rgb = scene()
    grey = rgb.colourspace("b-w")
    alpha = (rgb[0] > 100).ifthenelse(255, 0).cast("uchar")
    return {
        "rgb16": bytes((rgb.cast("ushort") * 257).copy(interpretation="rgb16").pngsave_buffer()),
        "grey16": bytes((grey.cast("ushort") * 257).copy(interpretation="grey16").pngsave_buffer()),
        "1bit": bytes(black_and_white(grey).pngsave_buffer(bitdepth=1)),
        "palette-trns": bytes(rgb.bandjoin(alpha).pngsave_buffer(palette=True, dither=0)),
    }


def references() -> dict[str, pyvips.Image]:
    """The 8-bit image each deep PNG should come out as."""
    rgb = scene()
    grey = rgb.colourspace("b-w")
    alpha = (rgb[0] > 100).ifthenelse(255, 0).cast("uchar")
    return {
        "rgb16": rgb,
        "grey16": grey,
        "1bit": black_and_white(grey),
        "palette-trns": rgb.bandjoin(alpha).copy(interpretation="srgb"),
    }


@pytest.mark.parametrize("kind", ["rgb16", "grey16", "1bit", "palette-trns"])
def test_row_41_deep_grey_one_bit_and_palette_pngs_become_8_bit(
    thumbnailer: Thumbnailer, source_dir: Path, kind: str
) -> None:
    data = deep_pngs()[kind]
    (source_dir / f"{kind}.png").write_bytes(data)
    reply = get(thumbnailer, f"/plain/{kind}.png@png")
    assert reply.status == 200
    image = decode(reply.body)
    assert image.format == "uchar"
    assert image.interpretation in ("srgb", "b-w")
    reference = references()[kind]
    assert image.hasalpha() == reference.hasalpha()
    assert hamming(average_hash(image), average_hash(reference)) <= 2
    assert (opaque(image) - opaque(reference)).abs().avg() < 3
    if reference.hasalpha():  # palette + tRNS: transparency kept exactly
        assert (image[3] - reference[3]).abs().max() == 0


def opaque(image: pyvips.Image) -> pyvips.Image:
    """sRGB on white: what a page shows (hidden colours of transparent pixels do not count)."""
    image = image.colourspace("srgb")
    return image.flatten(background=255) if image.hasalpha() else image


#: What to do to an upright picture so that EXIF orientation N displays it upright.
STORED_FOR_ORIENTATION: dict[int, Callable[[pyvips.Image], pyvips.Image]] = {
    1: lambda im: im,
    2: lambda im: im.fliphor(),
    3: lambda im: im.rot180(),
    4: lambda im: im.flipver(),
    5: lambda im: im.rot90().fliphor(),
    6: lambda im: im.rot270(),
    7: lambda im: im.rot270().fliphor(),
    8: lambda im: im.rot90(),
}


def oriented_jpeg(orientation: int) -> bytes:
    stored = STORED_FOR_ORIENTATION[orientation](scene(192, 128)).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(stored.jpegsave_buffer(Q=95, keep=pyvips.enums.ForeignKeep.EXIF))


def test_row_42_every_exif_orientation_comes_out_upright_and_untagged(
    thumbnailer: Thumbnailer, source_dir: Path
) -> None:
    outputs = {}
    for orientation in range(1, 9):
        (source_dir / f"o{orientation}.jpg").write_bytes(oriented_jpeg(orientation))
        assert decode(oriented_jpeg(orientation)).get("orientation") == orientation
        reply = get(thumbnailer, f"/rs:fit:96:96/plain/o{orientation}.jpg@jpeg")
        assert reply.status == 200
        image = decode(reply.body)
        assert (image.width, image.height) == (96, 64)
        assert not image.get_typeof("orientation") or image.get("orientation") == 1
        outputs[orientation] = image
    upright = outputs[1]
    for orientation, image in outputs.items():
        assert average_hash(image) == average_hash(upright), orientation
        assert (image - upright).abs().avg() < 3, orientation  # JPEG noise only


# -- row 43: parameters ------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    ["w:-1", "h:-200", "w:1.5", "w:1e3", "w:100001", "s:-1:-1", "rs:fit:abc:10", "w:0x10"],
)
def test_row_43_invalid_sizes_are_400(
    thumbnailer: Thumbnailer, sources: CountingSourceStore, cache_dir: Path, options: str
) -> None:
    reply = get(thumbnailer, f"/{options}/plain/photos/landscape.jpg@jpeg")
    assert_refused(reply, 400, cache_dir)
    assert sources.reads == 0


def test_row_43_sizes_are_clamped_and_never_enlarged_unless_signed(
    make: Callable[..., Thumbnailer], source_dir: Path
) -> None:
    thumbnailer = make(render=RenderSettings(max_result_dimension=1024))
    (source_dir / "dot.png").write_bytes(bytes(pyvips.Image.black(1, 1).pngsave_buffer()))
    expected = {
        "/w:0/h:0/plain/photos/landscape.jpg@jpeg": (640, 480),
        "/w:100000/h:100000/plain/photos/landscape.jpg@jpeg": (640, 480),
        "/w:100000/h:100000/el:1/plain/photos/landscape.jpg@jpeg": (1024, 768),
        "/rs:fit:500:500/plain/dot.png@png": (1, 1),
        "/rs:fill:500:500/plain/dot.png@png": (1, 1),
        "/rs:fit:500:500/el:1/plain/dot.png@png": (500, 500),
    }
    for path, size in expected.items():
        reply = get(thumbnailer, path)
        assert reply.status == 200, path
        image = decode(reply.body)
        assert (image.width, image.height) == size, path


# -- row 48: a failing cache is logged once per interval ---------------------------


def test_row_48_failing_cache_writes_are_logged_once_per_interval(
    thumbnailer: Thumbnailer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with caplog.at_level(logging.ERROR, logger="django_oximg"):
        for width in (100, 101, 102):
            reply = get(thumbnailer, f"/rs:fit:{width}:{width}/plain/photos/landscape.jpg@jpeg")
            assert reply.status == 200
            assert header(reply, "Cache-Control") == "public, max-age=31536000, immutable"
    failures = [r for r in caplog.records if "cache write failed" in r.getMessage()]
    assert len(failures) == 1
    assert thumbnailer.renders == 3


# == One live gunicorn worker: bombs and broken files ==============================

#: The server's render budget and queue. More render threads than the budget
#: can feed with these sources, so the budget, not the thread count, bounds
#: the memory of row 45 (an estimate that was too low would show there).
LIVE_LIMITS = {
    "WORKERS": 8,
    "QUEUE_SIZE": 4,
    "QUEUE_TIMEOUT": 10.0,
    "MEMORY_BUDGET": 384 * MIB,
    "LIBVIPS_CONCURRENCY": 1,
}

#: Requests of row 45 fired at once (the server has more threads than this).
CROWD = 64

#: Extra resident memory allowed over the budget (docs/security.md, bad input 45).
RSS_SLACK = 64 * MIB

#: Row 28: growth allowed over 20 pixel floods.
FLOOD_RSS_GROWTH = 10 * MIB


@dataclass
class Live:
    """The module's server, the worker pids it started with and its canary socket."""

    server: Server
    pids: set[int]
    canary: socket.socket
    sentinel: Path

    @property
    def media(self) -> Path:
        return self.server.media

    def url(self, path: str) -> str:
        return imgproxy_url(self.server.base, path)

    def worker(self) -> int:
        [pid] = self.pids
        return pid


def bad_sources(directory: Path, sentinel: Path, canary_url: str) -> dict[str, bytes]:
    """Every bomb and broken file the live tests request, by file name."""
    jpeg, png, gif = images.jpeg(400, 300), images.png_with_alpha(400, 300), images.animated_gif()
    files = {
        "flood.png": bombs.png_claiming(65535, 65535),
        "one-bit-20k.png": bombs.flat_grey_png(20000, 20000, bit_depth=1),
        "webp-16383.webp": bombs.webp_claiming(16383, 16383),
        "jpeg-20k.jpg": bombs.flat_grey_jpeg(20000, 20000),
        "lottapixel.jpg": bombs.lottapixel_jpeg(64250, 64250),
        "uber.gif": bombs.gif_animation(64, 64, 20000),
        "hundred-frames.gif": bombs.gif_animation(800, 800, 100),
        "avif-17000.avif": bombs.avif_claiming(17000, 17000),
        "empty.jpg": b"",
        "random.jpg": bombs.random_bytes(1024),
        "error-page.jpg": bombs.HTML_PAGE,
        "native.v": bombs.vips_native(directory),
        "matrix.jpg": bombs.MATRIX,
        "table.csv": bombs.CSV,
        "raw.jpg": bytes(range(256)) * 16,
        "pixmap.ppm": bombs.PPM,
        "progressive-36mp.jpg": bombs.progressive_jpeg(7000, 5150),
    }
    for fraction in (0.1, 0.5, 0.9):
        percent = int(fraction * 100)
        files[f"truncated-{percent}.jpg"] = bombs.truncated(jpeg, fraction)
        files[f"truncated-{percent}.png"] = bombs.truncated(png, fraction)
        files[f"truncated-{percent}.gif"] = bombs.truncated(gif, fraction)
    for name, svg in bombs.svg_attacks(sentinel, canary_url).items():
        files[f"{name}.svg"] = svg
    crowd = {
        "jpg": bombs.flat_grey_jpeg(8000, 6000),
        "png": bombs.flat_grey_png(8000, 6000, bit_depth=8),
        "gif": bombs.flat_gif(7000, 7000),
    }
    for index in range(CROWD):
        extension = list(crowd)[index % 3]
        files[f"crowd/{index}.{extension}"] = crowd[extension]
    return files


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """ONE gunicorn worker (72 threads) serving every bad source; stopped after the module."""
    media = tmp_path_factory.mktemp("bad-inputs") / "media"
    sentinel = media.parent / "sentinel.txt"
    sentinel.write_text("SENTINEL-7f3a9c contents that must never be served\n")
    canary = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    canary.bind(("127.0.0.1", 0))
    canary.listen(8)
    canary.setblocking(False)
    canary_url = f"http://127.0.0.1:{canary.getsockname()[1]}/canary.png"
    try:
        (media / "photos").mkdir(parents=True)
        (media / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
        for name, data in bad_sources(media.parent, sentinel, canary_url).items():
            (media / name).parent.mkdir(parents=True, exist_ok=True)
            (media / name).write_bytes(data)
        with gunicorn(media, workers=1, threads=CROWD + 8, oximg=LIVE_LIMITS) as server:
            yield Live(server, server.worker_pids(), canary, sentinel)
    finally:
        canary.close()


def cache_listing(media: Path) -> set[str]:
    root = media / "oximg"
    return (
        {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        if root.exists()
        else set()
    )


def status_line(process: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``process`` in bytes (Linux ``/proc``)."""
    fields = {}
    for line in Path(f"/proc/{process}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def reset_peak_rss(process: int) -> None:
    """Start ``process``'s VmHWM again from its current RSS (``clear_refs`` 5, Linux 4.0+)."""
    Path(f"/proc/{process}/clear_refs").write_text("5")


def assert_live_refusal(live: Live, answer: Fetched, status: int, cached_before: set[str]) -> None:
    assert answer.status == status, answer.body
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    after = cache_listing(live.media)
    assert after == cached_before  # nothing stored by the refusal
    assert not [name for name in after if Path(name).name.startswith(TEMP_PREFIX)]
    assert live.server.worker_pids() == live.pids  # the same worker survived


LIVE_REFUSALS = [
    pytest.param("flood.png", "jpeg", 422, id="28-png-ihdr-65535"),
    pytest.param("one-bit-20k.png", "jpeg", 422, id="29-one-bit-png-20000"),
    pytest.param("webp-16383.webp", "jpeg", 422, id="29-webp-16383"),
    pytest.param("jpeg-20k.jpg", "jpeg", 422, id="29-jpeg-20000"),
    pytest.param("lottapixel.jpg", "jpeg", 422, id="30-lottapixel"),
    pytest.param("hundred-frames.gif", "webp", 422, id="31-animated-frames-x-pixels"),
    pytest.param("avif-17000.avif", "jpeg", 422, id="39-avif-17000"),
    *(
        pytest.param(f"truncated-{p}.{ext}", "jpeg", 422, id=f"34-truncated-{ext}-{p}")
        for ext in ("jpg", "png", "gif")
        for p in (10, 50, 90)
    ),
    pytest.param("empty.jpg", "jpeg", 422, id="35-zero-length"),
    pytest.param("random.jpg", "jpeg", 422, id="35-random-bytes"),
    pytest.param("error-page.jpg", "jpeg", 422, id="35-html-page"),
    pytest.param("native.v", "png", 415, id="38-vips-native"),
    pytest.param("pixmap.ppm", "png", 415, id="38-ppm"),
    pytest.param("matrix.jpg", "png", 422, id="38-matrix"),
    pytest.param("table.csv", "png", 422, id="38-csv"),
    pytest.param("raw.jpg", "png", 422, id="38-raw-pixels"),
]


@live_worker
@pytest.mark.parametrize(("name", "fmt", "status"), LIVE_REFUSALS)
def test_bombs_and_broken_files_are_refused_by_a_worker_that_survives(
    live: Live, name: str, fmt: str, status: int
) -> None:
    before = cache_listing(live.media)
    answer = fetch(live.url(f"/rs:fit:100:100/plain/{name}@{fmt}"))
    assert_live_refusal(live, answer, status, before)


@live_worker
@pytest.mark.parametrize("attack", ["xxe", "script", "xlink-file", "xlink-http", "xinclude"])
def test_row_37_hostile_svg_is_415_reads_no_file_and_calls_nobody(live: Live, attack: str) -> None:
    before = cache_listing(live.media)
    answer = fetch(live.url(f"/rs:fit:100:100/plain/{attack}.svg@png"))
    assert_live_refusal(live, answer, 415, before)
    assert b"SENTINEL" not in answer.body
    with pytest.raises(BlockingIOError):
        live.canary.accept()  # nothing connected to the canary


@live_worker
def test_row_28_pixel_floods_cost_the_worker_no_memory(live: Live) -> None:
    url = live.url("/rs:fit:100:100/plain/flood.png@jpeg")
    for _ in range(3):  # warm up: first-use allocations are not the flood's
        assert fetch(url).status == 422
    before = status_line(live.worker())["VmRSS"]
    for _ in range(20):
        answer = fetch(url)
        assert answer.status == 422
        assert answer.body == b"Source image is too large\n"
    growth = status_line(live.worker())["VmRSS"] - before
    assert growth < FLOOD_RSS_GROWTH, f"RSS grew by {growth / MIB:.1f} MiB"
    assert live.server.worker_pids() == live.pids


@live_worker
@pytest.mark.parametrize("fmt", ["webp", "jpeg"])
def test_row_31_a_20000_frame_gif_is_rendered_as_its_first_frame(live: Live, fmt: str) -> None:
    answer = fetch(live.url(f"/rs:fit:32:32/plain/uber.gif@{fmt}"))
    assert answer.status == 200
    image = pyvips.Image.new_from_buffer(answer.body, "")
    assert (image.width, image.height) == (32, 32)
    assert not image.get_typeof("n-pages") or image.get("n-pages") == 1
    assert live.server.worker_pids() == live.pids


@live_worker
def test_row_31_too_many_animated_pixels_still_serve_a_still_frame(live: Live) -> None:
    """The 100-frame GIF refused as an animation (row 31's 422) is fine as one frame."""
    answer = fetch(live.url("/rs:fit:100:100/plain/hundred-frames.gif@jpeg"))
    assert answer.status == 200
    assert pyvips.Image.new_from_buffer(answer.body, "").width == 100


@live_worker
def test_row_33_a_36_mp_progressive_jpeg_is_served_within_the_budget(live: Live) -> None:
    worker = live.worker()
    before = status_line(worker)["VmRSS"]
    reset_peak_rss(worker)
    answer = fetch(live.url("/rs:fit:700:700/plain/progressive-36mp.jpg@jpeg"))
    assert answer.status == 200
    image = pyvips.Image.new_from_buffer(answer.body, "")
    assert (image.width, image.height) == (700, 515)
    peak_growth = status_line(worker)["VmHWM"] - before
    assert peak_growth <= LIVE_LIMITS["MEMORY_BUDGET"], f"{peak_growth / MIB:.0f} MiB"
    assert live.server.worker_pids() == live.pids


@live_worker
def test_row_45_sixty_four_concurrent_50_mp_sources_stay_within_the_budget(live: Live) -> None:
    worker = live.worker()
    before = status_line(worker)["VmRSS"]
    reset_peak_rss(worker)
    names = sorted(p.name for p in (live.media / "crowd").iterdir())
    urls = [live.url(f"/rs:fit:300:300/plain/crowd/{name}@jpeg") for name in names]
    answers: list[Fetched | BaseException] = [RuntimeError("no answer")] * len(urls)
    start = threading.Barrier(len(urls))

    def one(index: int) -> None:
        start.wait()
        try:
            answers[index] = request(urls[index])
        except OSError as error:  # recorded, and fails below
            answers[index] = error

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(urls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = [a.status if isinstance(a, Fetched) else repr(a) for a in answers]
    assert set(statuses) <= {200, 429, 503}, statuses
    assert 200 in statuses
    peak_growth = status_line(worker)["VmHWM"] - before
    allowed = LIVE_LIMITS["MEMORY_BUDGET"] + RSS_SLACK
    assert peak_growth <= allowed, f"peak RSS grew by {peak_growth / MIB:.0f} MiB"
    assert live.server.worker_pids() == live.pids


@live_worker
def test_the_same_worker_still_serves_after_every_bad_input(live: Live) -> None:
    answer = fetch(live.url("/rs:fit:200:200/plain/photos/landscape.jpg@jpeg"))
    assert answer.status == 200
    assert int(answer.headers["x-worker-pid"]) == live.worker()
    assert live.server.worker_pids() == live.pids
