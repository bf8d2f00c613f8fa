"""Output pixels pinned: each render's decoded pixels against a digest in tests/golden/renders.json.

Tests elsewhere check sizes, a few pixels or that two ways of rendering
agree; a change that keeps the size but moves the pixels (a crop placed
from the wrong side, a result stored under another size's key, a default
size swapped for the widest one) passes them all. Here, as imgproxy pins
each of its processing cases with a hash, a few dozen option combinations
are rendered from small sources the module draws (landscape and portrait
gradients with coloured marks, so that every crop, flip and turn changes
pixels; an image with alpha; a framed one to trim; a JPEG with an EXIF
orientation; an animated GIF) and each result is reduced to one line: its
format, size, bands (and frames and delays for an animation), and the
sha256 of its decoded pixels. Decoded, not encoded, so that metadata an
encoder writes does not count; the pixels still depend on the libvips,
libjpeg-turbo and Pillow builds, which the project's two virtualenvs
share (the same pyvips-binary and Pillow wheels).

Three ways in are pinned, each the one the server or the site uses:

- requests: :meth:`Thumbnailer.reply` with a signed path, as the WSGI
  middleware and the view call it (signature, parsing, staging, executor,
  pipeline, cache), for :data:`CASES`;
- rendering ahead: :func:`~django_oximg.render_ahead.rendering.render_ahead` over
  :data:`AHEAD_PATHS`, one of them refused at planning, and what is then in
  the cache under each path's key (:data:`AHEAD_CASES`);
- the DRF field: :class:`~django_oximg.drf.ThumbnailField` outputs
  (:data:`DRF_FIELDS`), each URL with its size, and the pixels the thumbnail
  view serves for it.

After a deliberate change to output pixels (or a new case), regenerate the
file, and review its diff with the change:

    OXIMG_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_renders.py -p no:xdist

That run rewrites tests/golden/renders.json and prints the cases that
changed, appeared or went. It needs every case to run in one process: with
``-k`` or pytest-xdist's ``-n`` it fails and writes nothing. A normal run
writes nothing outside its temporary directories; a case missing from the
file, or a line of the file no case makes, fails it. A case whose output
format this libvips cannot write is skipped, and its line is kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core.cache import cache as django_cache
from django.test import Client

from django_oximg.core import pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
from django_oximg.core.serving.staging import Limits
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.drf import ThumbnailField
from django_oximg.render_ahead.rendering import AheadRequest, render_ahead
from tests.constants import MIB, SIGNER
from tests.test_thumbnailer import get

GOLDEN_FILE = Path(__file__).resolve().parent / "golden" / "renders.json"

#: Set to 1 to rewrite :data:`GOLDEN_FILE` from this run (see the docstring).
UPDATE_VARIABLE = "OXIMG_UPDATE_GOLDEN"
UPDATING = os.environ.get(UPDATE_VARIABLE) == "1"

#: What each test made, by case name: the file's new lines when updating.
MADE: dict[str, str] = {}


# -- sources, drawn here ----------------------------------------------------------------


def gradient(width: int, height: int) -> pyvips.Image:
    """Red grows to the right, green downwards, blue along the other diagonal, with a
    white box top left, a black one bottom right and a magenta disc top right: no
    two crops, flips or turns of it have the same pixels."""
    xyz = pyvips.Image.xyz(width, height)
    red = xyz[0] * (255 / (width - 1))
    green = xyz[1] * (255 / (height - 1))
    blue = (xyz[0] + (height - 1 - xyz[1])) * (255 / (width + height - 2))
    image = red.bandjoin([green, blue]).cast("uchar").copy(interpretation="srgb")
    image = image.draw_rect([255, 255, 255], 4, 4, 10, 8, fill=True)
    image = image.draw_rect([0, 0, 0], width - 14, height - 12, 10, 8, fill=True)
    return image.draw_circle([255, 0, 255], width - 10, 10, 5, fill=True)


def with_alpha(image: pyvips.Image) -> pyvips.Image:
    """Opaque in the middle, fading to transparent towards the corners."""
    xyz = pyvips.Image.xyz(image.width, image.height)
    cx, cy = image.width / 2, image.height / 2
    distance = ((xyz[0] - cx) ** 2 + (xyz[1] - cy) ** 2) ** 0.5
    alpha = (255 - distance * (255 / min(cx, cy)) + 128).cast("uchar")
    return image.bandjoin(alpha)


def framed() -> pyvips.Image:
    """A 40x28 gradient on a flat 64x48 border, off centre: what ``trim`` cuts away."""
    border = pyvips.Image.black(64, 48).new_from_image([30, 60, 90]).cast("uchar")
    return border.insert(gradient(40, 28), 6, 14).copy(interpretation="srgb")


def oriented(orientation: int) -> bytes:
    """A JPEG stored turned, shown as the 64x48 landscape once its EXIF orientation
    is applied (6: stored a quarter turn anticlockwise; 3: upside down)."""
    upright = gradient(64, 48)
    stored = (upright.rot270() if orientation == 6 else upright.rot180()).copy()
    stored.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return bytes(stored.jpegsave_buffer(Q=90, keep=pyvips.enums.ForeignKeep.EXIF))


def animation(width: int = 32, height: int = 24, frames: int = 4) -> bytes:
    """A GIF whose black square moves right, frame by frame, with unequal delays."""
    pages = [
        gradient(width, height).draw_rect([0, 0, 0], 2 + 6 * index, 8, 6, 6, fill=True)
        for index in range(frames)
    ]
    strip = pyvips.Image.arrayjoin(pages, across=1).copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", height)
    strip.set_type(pyvips.GValue.array_int_type, "delay", [80, 120] * (frames // 2))
    strip.set_type(pyvips.GValue.gint_type, "loop", 0)
    return bytes(strip.gifsave_buffer())


@functools.cache
def sources() -> Mapping[str, bytes]:
    """The sources under ``photos/``: the same bytes on every run (nothing random)."""
    return {
        "landscape.png": bytes(gradient(64, 48).pngsave_buffer()),
        "portrait.png": bytes(gradient(48, 64).pngsave_buffer()),
        "landscape.jpg": bytes(gradient(64, 48).jpegsave_buffer(Q=90)),
        "alpha.png": bytes(with_alpha(gradient(64, 48)).pngsave_buffer()),
        "framed.png": bytes(framed().pngsave_buffer()),
        "orientation6.jpg": oriented(6),
        "orientation3.jpg": oriented(3),
        "anim.gif": animation(),
    }


def watermark_image() -> pipeline.WatermarkImage:
    """A 12x8 red mark with a blue stripe and a half-transparent edge (``WATERMARK``)."""
    mark = pyvips.Image.black(12, 8).new_from_image([255, 0, 0]).cast("uchar")
    mark = mark.draw_rect([0, 0, 255], 0, 3, 12, 2, fill=True)
    alpha = (pyvips.Image.black(12, 8) + 128).cast("uchar").draw_rect(255, 1, 1, 10, 6, fill=True)
    mark = mark.bandjoin(alpha).copy(interpretation="srgb")
    return pipeline.WatermarkImage(bytes(mark.pngsave_buffer()), 12, 8)


# -- the cases ----------------------------------------------------------------------------

#: Each case is ``options/source@format``, requested as
#: ``/options/plain/photos/source@format``; its name is that text.
CASES = [
    # Every source as it is, into its own format: pins the drawn sources too.
    *(
        f"rs:fit:0:0/{source}@{source.rsplit('.', 1)[1].replace('jpg', 'jpeg')}"
        for source in (
            "landscape.png",
            "portrait.png",
            "landscape.jpg",
            "alpha.png",
            "framed.png",
            "orientation6.jpg",
            "anim.gif",
        )
    ),
    # Resizing types, on both orientations.
    "rs:fit:32:32/landscape.png@png",
    "rs:fit:32:32/portrait.png@png",
    "rs:fill:32:32/landscape.png@png",
    "rs:fill:32:32/portrait.png@png",
    "rs:fill-down:96:48/landscape.png@png",
    "rs:force:40:20/portrait.png@png",
    "rs:auto:20:40/landscape.png@png",
    "rs:fit:96:96:1/landscape.png@png",
    "w:16/dpr:2/portrait.png@png",
    "w:16/mw:24/mh:24/landscape.png@png",
    "rs:fit:24:24/z:1.5/portrait.png@png",
    "w:20/landscape.jpg@jpeg",
    "w:20/qm:high/landscape.jpg@jpeg",
    # fill crops the scaled frame: rows for a box wider than the source's
    # shape, columns for a taller one; compass points, offsets, sm and fp.
    *(f"rs:fill:32:16/g:{g}/landscape.png@png" for g in ("no", "so", "ce", "no:0:3", "so:0:2")),
    *(f"rs:fill:16:32/g:{g}/landscape.png@png" for g in ("ea", "we", "ea:3:0", "we:0.1:0")),
    *(f"rs:fill:32:16/g:{g}/portrait.png@png" for g in ("no", "so", "ce:0:-6", "no:0:0.2")),
    "rs:fill:24:24/g:sm/landscape.png@png",
    "rs:fill:24:24/g:sm/portrait.png@png",
    "rs:fill:32:16/g:fp:0.25:0.7/portrait.png@png",
    "rs:fill:32:16/g:fp:0.8:0.3/portrait.png@png",
    "rs:fill:32:12/g:fp:0.7:0.35/landscape.png@png",
    "rs:fill:16:32/g:fp:0.3:0.6/landscape.png@png",
    "w:16/dpr:2/rs:fill:16:8/g:fp:0.6:0.25/portrait.png@png",
    # crop cuts the source first: both axes, so every compass point moves it.
    *(
        f"c:40:30:{g}/landscape.png@png"
        for g in ("no", "so", "ea", "we", "noea", "nowe", "soea", "sowe", "ce", "nowe:4:6")
    ),
    "c:0.5:0.5:fp:0.3:0.6/portrait.png@png",
    "c:30:40:sm/landscape.png@png",
    "c:40:30/g:sowe/w:20/landscape.jpg@jpeg",
    # Trim, extend, extend_aspect_ratio, padding, background.
    "t:10/framed.png@png",
    "t:10:1e3c5a/rs:fit:20:20/framed.png@png",
    "rs:fit:64:64/ex:1/landscape.png@png",
    "rs:fit:64:64/ex:1:so/bg:255:0:0/landscape.png@png",
    "rs:fit:64:64/ex:1:noea:2:4/portrait.png@png",
    "rs:fit:40:20/exar:1/landscape.png@png",
    "rs:fit:20:40/exar:1:no/bg:00ff00/landscape.png@png",
    "w:32/pd:2:4:6:8/landscape.png@png",
    "w:16/pd:1:2/dpr:2/bg:0:0:255/portrait.png@png",
    "w:32/pd:4/alpha.png@png",
    "w:32/bg:0:0:255/alpha.png@jpeg",
    "w:32/bg:ffff00/alpha.png@png",
    # Filters.
    "w:32/bl:1.5/landscape.png@png",
    "w:32/sh:1/landscape.png@png",
    "w:32/pix:4/landscape.png@png",
    "w:32/pix:3/alpha.png@png",
    # Turns and flips, and the EXIF orientation.
    *(f"w:32/{o}/landscape.png@png" for o in ("rot:90", "rot:180", "rot:270", "fl:1:0", "fl:0:1")),
    "w:24/rot:90/fl:1:0/portrait.png@png",
    "w:32/orientation6.jpg@png",
    "w:32/orientation3.jpg@png",
    "w:32/ar:0/orientation6.jpg@png",
    "w:32/rot:90/orientation6.jpg@png",
    # The watermark.
    "wm:1:nowe/landscape.png@png",
    "wm:0.5:soea:2:2/portrait.png@png",
    "wm:1:re:4:4/landscape.png@png",
    "wm:1:ce:0:0:0.5/alpha.png@png",
    "w:24/wm:1:no/anim.gif@gif",
    # Animations kept, or their first frame.
    "w:16/anim.gif@gif",
    "w:16/anim.gif@webp",
    "w:16/anim.gif@png",
    "rs:fill:16:16/g:ea/fl:1:0/anim.gif@gif",
    "w:16/rot:90/bg:ff0000/pd:2/anim.gif@gif",
    # Formats and quality.
    *(f"w:32/landscape.png@{fmt}" for fmt in ("jpeg", "webp", "avif", "gif")),
    *(f"w:32/alpha.png@{fmt}" for fmt in ("webp", "avif", "gif")),
    "w:32/q:20/landscape.png@jpeg",
    "w:32/q:95/landscape.png@jpeg",
    "w:32/q:30/landscape.png@webp",
    "w:32/q:30/landscape.png@avif",
    "w:32/fq:jpeg:40:webp:50/landscape.png@jpeg",
    "w:64/mb:1200/landscape.png@jpeg",
    "w:32/landscape.jpg@webp",
]


def request_path(case: str) -> str:
    """The unsigned request path of a case named ``options/source@format``."""
    options, source = case.rsplit("/", 1)
    return f"/{options}/plain/photos/{source}"


def output_format(case: str) -> str:
    return case.rsplit("@", 1)[1]


#: Sizes of one JPEG rendered ahead, in this order: the second is refused at
#: planning (its ``msr`` is below the source's 0.003 megapixels), the others
#: share decodes or load on their own (``crop``), each stored under its key.
AHEAD_PATHS = [
    "/w:48/plain/photos/landscape.jpg@jpeg",
    "/msr:0.001/w:40/plain/photos/landscape.jpg@jpeg",
    "/rs:fill:24:24/g:fp:0.7:0.3/plain/photos/landscape.jpg@webp",
    "/c:40:30:soea/w:20/plain/photos/landscape.jpg@png",
    "/w:16/fl:1:0/plain/photos/landscape.jpg@jpeg",
    "/w:44/plain/photos/landscape.jpg@png",
]
AHEAD_CASES = [f"ahead{path}" for path in AHEAD_PATHS]

#: DRF fields, by name, and the source each is given (a storage name).
DRF_FIELDS: Mapping[str, tuple[dict[str, Any], str]] = {
    "thumbnail": ({"geometry": "24x24", "crop": True, "format": "webp"}, "photos/landscape.png"),
    "focal": (
        {"geometry": "32x16", "crop": True, "focal_point": "0.3,0.8"},
        "photos/portrait.png",
    ),
    # A default size (32x16) narrower than the widest candidate (48x24).
    "srcset": (
        {"geometry": "32x16", "crop": True, "widths": [16, 32, 48]},
        "photos/portrait.png",
    ),
}
#: Each field's output: its own url/width/height, then each candidate's.
DRF_CASES = [
    "drf/thumbnail",
    "drf/focal",
    "drf/srcset",
    "drf/srcset/candidates/0",
    "drf/srcset/candidates/1",
    "drf/srcset/candidates/2",
]


def output_formats() -> dict[str, str]:
    """Each case that needs a saver, and the format it needs."""
    found = {case: output_format(case) for case in CASES}
    found.update({f"ahead{path}": output_format(path) for path in AHEAD_PATHS})
    return found


def all_cases() -> list[str]:
    return [*CASES, *AHEAD_CASES, *DRF_CASES]


def unwritable_cases() -> set[str]:
    """The cases whose output format this libvips cannot write (skipped)."""
    return {case for case, fmt in output_formats().items() if not pipeline.saver_available(fmt)}


# -- digests and the golden file ----------------------------------------------------------


def pixels(data: bytes) -> str:
    """One line for an encoded image: format, size, bands (frames and delays of an
    animation) and the sha256 of its decoded pixels with their layout."""
    image = pyvips.Image.new_from_buffer(data, "")
    frames = image.get("n-pages") if image.get_typeof("n-pages") else 1
    if frames > 1:
        image = pyvips.Image.new_from_buffer(data, "", n=-1)
    height = image.get("page-height") if frames > 1 else image.height
    layout = f"{image.width}x{height}x{image.bands} {image.format} {frames}\n"
    digest = hashlib.sha256(layout.encode() + image.write_to_memory()).hexdigest()
    loader = str(image.get("vips-loader")).removesuffix("load_buffer")
    line = f"{loader} {image.width}x{height}x{image.bands}"
    if frames > 1:
        delays = ",".join(str(delay) for delay in image.get("delay"))
        line += f" frames={frames} delay={delays}"
    return f"{line} {digest}"


def read_golden() -> dict[str, str]:
    if not GOLDEN_FILE.exists():
        return {}
    return dict(json.loads(GOLDEN_FILE.read_text()))


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return read_golden()


def check(golden: Mapping[str, str], made: Mapping[str, str]) -> None:
    """Compare what a test made with the pinned lines (when updating: only record it)."""
    MADE.update(made)
    if UPDATING:
        return
    hint = f"after a deliberate change: {UPDATE_VARIABLE}=1 pytest tests/{Path(__file__).name}"
    differences = [
        f"{case}\n  pinned:   {golden.get(case, '(nothing)')}\n  rendered: {line}"
        for case, line in made.items()
        if golden.get(case) != line
    ]
    assert not differences, "\n".join([*differences, hint])


@pytest.fixture(scope="module", autouse=True)
def update_golden(request: pytest.FixtureRequest) -> Iterator[None]:
    """When updating, rewrite the file once every case has run, and say what changed."""
    yield
    if not UPDATING:
        return
    skipped = unwritable_cases()
    missing = [case for case in all_cases() if case not in MADE and case not in skipped]
    if missing:
        pytest.fail(
            f"{UPDATE_VARIABLE}=1 wrote nothing: {len(missing)} case(s) did not run in this "
            f"process (run the whole module, without -k or -n), e.g. {missing[:3]}"
        )
    old = read_golden()
    new = {
        case: MADE[case] if case in MADE else old[case]
        for case in all_cases()
        if case in MADE or case in old
    }
    GOLDEN_FILE.parent.mkdir(exist_ok=True)
    temporary = GOLDEN_FILE.with_suffix(".tmp")
    temporary.write_text(json.dumps(new, indent=1) + "\n")
    temporary.replace(GOLDEN_FILE)
    report = [f"changed  {case}" for case in new if case in old and old[case] != new[case]]
    report += [f"added    {case}" for case in new if case not in old]
    report += [f"removed  {case}" for case in old if case not in new]
    summary = f"{GOLDEN_FILE.name}: {len(report)} of {len(new)} line(s) changed"
    show(request.config, [summary, *report])


def show(config: pytest.Config, lines: list[str]) -> None:
    """Write ``lines`` to the terminal, past pytest's output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


def test_the_golden_file_pins_exactly_the_cases(golden: dict[str, str]) -> None:
    if UPDATING:
        pytest.skip("the file is being rewritten")
    skipped = unwritable_cases()
    expected = {case for case in all_cases() if case not in skipped}
    assert len(all_cases()) == len(set(all_cases())), "a case is listed twice"
    missing = sorted(expected - set(golden))
    extra = sorted(set(golden) - set(all_cases()))
    assert not missing and not extra, (
        f"cases without a pinned line: {missing}; lines no case makes: {extra}; "
        f"{UPDATE_VARIABLE}=1 rewrites the file"
    )


# -- requests ------------------------------------------------------------------------------


def build_thumbnailer(root: Path, cache: str) -> tuple[Thumbnailer, Executor]:
    """A core thumbnailer over ``root/sources`` with the watermark set, caching in
    ``root/<cache>``; the caller shuts its executor down."""
    executor = Executor(2, 64, 30.0, 512 * MIB)
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(),
        SIGNER,
        {"": FileSystemSourceStore(root / "sources")},
        FileSystemCacheStore(root / cache),
        executor,
        limits=Limits(render=pipeline.RenderSettings(watermark=watermark_image())),
    )
    return thumbnailer, executor


@pytest.fixture(scope="module")
def source_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    photos = root / "sources" / "photos"
    photos.mkdir(parents=True)
    for name, data in sources().items():
        (photos / name).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def thumbnailer(source_root: Path) -> Iterator[Thumbnailer]:
    thumbnailer, executor = build_thumbnailer(source_root, "cache")
    yield thumbnailer
    executor.shutdown(wait=True)


def skip_unwritable(fmt: str) -> None:
    if not pipeline.saver_available(fmt):
        pytest.skip(f"this libvips has no {fmt} saver")


@pytest.mark.parametrize("case", CASES)
def test_a_request_renders_the_pinned_pixels(
    case: str, thumbnailer: Thumbnailer, golden: dict[str, str]
) -> None:
    skip_unwritable(output_format(case))
    reply = get(thumbnailer, request_path(case))
    assert reply.status == 200, reply.body[:300]
    check(golden, {case: pixels(reply.body)})


# -- rendering ahead -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ahead_stored(source_root: Path) -> Iterator[dict[str, str]]:
    """Render :data:`AHEAD_PATHS` ahead once, with a cache of its own; what is
    then stored under each path's key (a line, or "nothing stored")."""
    thumbnailer, executor = build_thumbnailer(source_root, "ahead-cache")
    try:
        outcome = render_ahead(
            thumbnailer, [AheadRequest(SIGNER.signed_path(path)) for path in AHEAD_PATHS]
        )
        keys = {path: thumbnailer.job_for(SIGNER.signed_path(path), "").key for path in AHEAD_PATHS}
        assert [key for key, _ in outcome.refused] == [keys[AHEAD_PATHS[1]]]
        assert (outcome.rendered, outcome.failures) == (len(AHEAD_PATHS) - 1, [])
        stored = {}
        for path, key in keys.items():
            found = thumbnailer.cache.get(key)
            if found is None:
                stored[path] = "nothing stored"
            else:
                assert found.path is not None
                stored[path] = pixels(Path(found.path).read_bytes())
        yield stored
    finally:
        executor.shutdown(wait=True)


@pytest.mark.parametrize("path", AHEAD_PATHS)
def test_rendering_ahead_stores_the_pinned_pixels_under_each_key(
    path: str, ahead_stored: dict[str, str], golden: dict[str, str]
) -> None:
    skip_unwritable(output_format(path))
    check(golden, {f"ahead{path}": ahead_stored[path]})


# -- the DRF field -------------------------------------------------------------------------

#: The signature segment after the mount point, and the version token: both
#: change with the keys and the output fingerprint, not with what is shown.
SIGNATURE = re.compile(r"^/img/[^/]+/")
VERSION = re.compile(r"/cb:[^/]+/")


def served(client: Client, url: str) -> bytes:
    response = client.get(url)
    try:
        assert response.status_code == 200, response.content[:300]
        return b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()


def described(client: Client, size: Mapping[str, Any]) -> str:
    """A thumbnail the field gives, as a line: its size, its URL's options and source,
    and the pixels the view serves for that URL (which must be of that size)."""
    url = str(size["url"])
    assert SIGNATURE.match(url) and VERSION.search(url), url
    line = pixels(served(client, url))
    assert f" {size['width']}x{size['height']}x" in line, (size, line)
    shown = VERSION.sub("/", SIGNATURE.sub("/", url))
    return f"{size['width']}x{size['height']} {shown} -> {line}"


@pytest.fixture
def drf_media(media: Path) -> Iterator[Path]:
    """The media root of conftest's ``media``, with this module's sources in it."""
    for name, data in sources().items():
        (media / "photos" / name).write_bytes(data)
    django_cache.clear()  # source metadata is cached by name
    yield media
    django_cache.clear()


@pytest.mark.parametrize("name", list(DRF_FIELDS))
def test_the_drf_field_gives_the_pinned_urls_sizes_and_pixels(
    name: str, drf_media: Path, client: Client, golden: dict[str, str]
) -> None:
    arguments, source = DRF_FIELDS[name]
    keywords = dict(arguments)
    field = ThumbnailField(keywords.pop("geometry"), **keywords)
    output = field.to_representation(source)
    made = {f"drf/{name}": described(client, output)}
    if "widths" not in arguments:
        assert set(output) == {"url", "width", "height"}
    else:
        assert set(output) == {"url", "width", "height", "srcset", "candidates"}
        candidates = output["candidates"]
        assert output["srcset"] == ", ".join(f"{c['url']} {c['width']}w" for c in candidates)
        for index, candidate in enumerate(candidates):
            made[f"drf/{name}/candidates/{index}"] = described(client, candidate)
    check(golden, made)
