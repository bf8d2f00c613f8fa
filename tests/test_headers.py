"""core/headers.py: width, height, orientation and alpha from a prefix, exactly as libvips says.

Every answer is compared with ``pipeline.probe`` on the same bytes: images
pyvips writes in every format the server reads, at many sizes and in all
eight orientations, the test suite's own sources and bombs, hand-made GIFs
for libnsgif's size quirks, and JPEGs whose frame header sits behind large
segments. Prefixes of those files and random or mutated bytes must give
the same answer or a :class:`HeaderError`, never another exception.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable

import pytest
import pyvips
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_oximg.core import pipeline
from django_oximg.core.headers import (
    FIRST_READ,
    MAX_READ,
    Header,
    HeaderError,
    NeedMoreBytes,
    UnknownHeader,
    parse_header,
    read_header,
)
from tests import bombs, images

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

#: Savers and their options for each format the server reads (all with every
#: metadata field kept, so the orientation is written as each format writes it).
WRITERS: dict[str, Callable[[pyvips.Image], bytes]] = {
    "jpeg": lambda image: image.jpegsave_buffer(keep="all"),
    "jpeg-progressive": lambda image: image.jpegsave_buffer(keep="all", interlace=True),
    "png": lambda image: image.pngsave_buffer(keep="all"),
    "png-interlaced": lambda image: image.pngsave_buffer(keep="all", interlace=True),
    "png-16bit": lambda image: (image.cast("ushort") * 256).pngsave_buffer(keep="all"),
    "png-palette": lambda image: image.pngsave_buffer(keep="all", palette=True),
    "webp-lossy": lambda image: image.webpsave_buffer(keep="all"),
    "webp-lossless": lambda image: image.webpsave_buffer(keep="all", lossless=True),
    "webp-plain": lambda image: image.webpsave_buffer(keep="none"),
    "gif": lambda image: image.gifsave_buffer(),
    "avif": lambda image: image.heifsave_buffer(keep="all", compression="av1", effort=0),
    "tiff": lambda image: image.tiffsave_buffer(keep="all"),
    "tiff-jpeg": lambda image: image.tiffsave_buffer(keep="all", compression="jpeg"),
}


def drawn(width: int, height: int, orientation: int, alpha: bool = False) -> pyvips.Image:
    """A small uchar image of ``width`` x ``height`` carrying ``orientation`` (0: none)."""
    image = pyvips.Image.black(width, height, bands=3).linear([1, 1, 1], [40, 120, 200])
    image = image.cast("uchar")
    if alpha:
        image = image.bandjoin(200)
    image = image.copy()
    if orientation:
        image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    return image


def probed(data: bytes) -> Header:
    """libvips' answer for ``data``, as a Header."""
    info = pipeline.probe(data)
    return Header(info.format, info.width, info.height, info.orientation, info.has_alpha)


def assert_agrees(data: bytes) -> Header:
    header = parse_header(data)
    assert header == probed(data)
    return header


# -- agreement on whole files ---------------------------------------------------------


@pytest.mark.parametrize("orientation", range(0, 10))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_format_and_orientation_agrees_with_libvips(writer: str, orientation: int) -> None:
    """Orientations 1-8, none (0) and out of range (9): as libvips reads them."""
    data = WRITERS[writer](drawn(37, 23, orientation))
    header = assert_agrees(data)
    if writer.startswith(("jpeg", "png", "tiff")) or writer in ("webp-lossy", "webp-lossless"):
        # Formats that carry the orientation as a tag say what was written.
        assert header.orientation == (orientation if 1 <= orientation <= 8 else 1)


@pytest.mark.parametrize("writer", ["png", "webp-lossless", "avif", "tiff"])
@pytest.mark.parametrize("orientation", [1, 5, 6])
def test_images_with_alpha_agree(writer: str, orientation: int) -> None:
    assert_agrees(WRITERS[writer](drawn(41, 17, orientation, alpha=True)))


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_alpha_is_read_from_the_header_as_libvips_reports_it(writer: str) -> None:
    """With an alpha band and without (a PNG palette's tRNS chunk, a grey PNG's too)."""
    with_alpha = assert_agrees(WRITERS[writer](drawn(41, 17, 0, alpha=True)))
    opaque = assert_agrees(WRITERS[writer](drawn(41, 17, 0)))
    if writer.startswith(("png", "webp", "avif")) or writer == "tiff":  # not JPEG-in-TIFF
        assert with_alpha.alpha and not opaque.alpha
    grey = drawn(41, 17, 0)[0].bandjoin(90).cast("uchar")
    assert assert_agrees(grey.pngsave_buffer()).alpha


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    width=st.integers(1, 700),
    height=st.integers(1, 700),
    orientation=st.integers(0, 8),
    writer=st.sampled_from(sorted(WRITERS)),
)
def test_any_size_agrees_with_libvips(
    width: int, height: int, orientation: int, writer: str
) -> None:
    assert_agrees(WRITERS[writer](drawn(width, height, orientation)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: images.jpeg(640, 480),
        lambda: images.jpeg(640, 480, interlace=True),
        images.png_with_alpha,
        images.animated_gif,
        lambda: bombs.png_claiming(65535, 65535),
        lambda: bombs.flat_grey_png(2000, 1000),
        lambda: bombs.flat_grey_jpeg(64, 48),
        lambda: bombs.lottapixel_jpeg(),
        lambda: bombs.progressive_jpeg(800, 600),
        lambda: bombs.webp_claiming(16383, 16383),
        lambda: bombs.webp_with_svg_inside(),
        lambda: bombs.avif_claiming(17000, 17000),
        lambda: bombs.gif_animation(300, 200, 12),
        lambda: bombs.flat_gif(7000, 7000),
        lambda: WRITERS["webp-lossy"](animation(5)),
        lambda: WRITERS["gif"](animation(4)),
    ],
    ids=[
        "jpeg",
        "jpeg-progressive",
        "png-alpha",
        "gif-animated",
        "png-flood",
        "png-1bit-large",
        "jpeg-flat",
        "jpeg-lottapixel",
        "jpeg-progressive-large",
        "webp-16383",
        "webp-svg-xmp",
        "avif-17000",
        "gif-walking",
        "gif-large",
        "webp-animated",
        "gif-pages",
    ],
)
def test_the_suites_own_sources_and_bombs_agree(make: Callable[[], bytes]) -> None:
    assert_agrees(make())


def animation(frames: int) -> pyvips.Image:
    """An animation of ``frames`` 30x20 pages, as pyvips keeps one (a tall strip)."""
    strip = pyvips.Image.arrayjoin([drawn(30, 20, 0) + index for index in range(frames)], across=1)
    strip = strip.cast("uchar").copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", 20)
    strip.set_type(pyvips.GValue.array_int_type, "delay", [100] * frames)
    return strip


def test_a_heif_rotated_a_quarter_turn_reports_the_turned_size() -> None:
    """libheif applies ``irot`` itself: libvips says 23x37 and orientation 1."""
    header = assert_agrees(WRITERS["avif"](drawn(37, 23, 6)))
    assert (header.width, header.height, header.orientation) == (23, 37, 1)


def test_a_heif_whose_meta_follows_other_boxes_is_read_further() -> None:
    """Boxes before ``meta`` (``free`` here) only mean reading further."""
    data = WRITERS["avif"](drawn(37, 23, 1))
    ftyp_size = struct.unpack(">I", data[:4])[0]
    padding = 40_000
    padded = data[:ftyp_size] + struct.pack(">I4s", padding, b"free") + bytes(padding - 8)
    padded += data[ftyp_size:]
    with pytest.raises(NeedMoreBytes):
        parse_header(padded[:FIRST_READ])
    assert parse_header(padded) == parse_header(data)


# -- GIF: libnsgif's size rules -----------------------------------------------------------


def gif(screen: tuple[int, int], frames: list[tuple[int, int, int, int]]) -> bytes:
    """A GIF with a two-colour global table, an extension, and empty frames at given rectangles."""
    data = b"GIF89a" + struct.pack("<HHBBB", *screen, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    data += b"!\xf9\x04\x00\x0a\x00\x00\x00"  # a graphic control extension
    for left, top, width, height in frames:
        data += b"," + struct.pack("<HHHHB", left, top, width, height, 0) + b"\x02\x02\x4c\x01\x00"
    return data + b";"


@pytest.mark.parametrize(
    ("screen", "frames"),
    [
        ((100, 80), [(0, 0, 100, 80)]),
        ((100, 80), [(5, 5, 100, 80)]),  # the first frame grows the image
        ((100, 80), [(0, 0, 10, 10), (10, 10, 200, 200)]),  # later frames do not
        ((640, 480), [(0, 0, 300, 200)]),  # a distrusted screen size
        ((800, 600), [(0, 0, 900, 700)]),
        ((640, 481), [(0, 0, 300, 200)]),
        ((0, 80), [(0, 0, 50, 40)]),
        ((3000, 100), [(0, 0, 300, 200)]),
        ((2048, 2048), [(0, 0, 10, 10)]),
        ((1, 1), [(2, 3, 10, 10)]),
    ],
)
def test_gif_sizes_follow_libnsgif(
    screen: tuple[int, int], frames: list[tuple[int, int, int, int]]
) -> None:
    assert_agrees(gif(screen, frames))


# -- reading further --------------------------------------------------------------------


def with_segments(jpeg: bytes, count: int, size: int = 60_000) -> bytes:
    """``jpeg`` with ``count`` APP13 segments of ``size`` bytes before everything else."""
    segment = b"\xff\xed" + struct.pack(">H", size + 2) + bytes(size)
    return jpeg[:2] + segment * count + jpeg[2:]


class Recorder:
    """A store's ``read_header`` over bytes in memory, recording each limit asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.limits: list[int] = []

    def __call__(self, limit: int) -> bytes:
        self.limits.append(limit)
        return self.data[:limit]


def test_a_frame_header_behind_large_segments_is_read_with_a_longer_prefix() -> None:
    """A camera JPEG: EXIF with its thumbnail and ICC before SOF, beyond the first read."""
    photo = WRITERS["jpeg"](drawn(37, 23, 6))
    data = with_segments(photo, 3)
    read = Recorder(data)
    assert read_header(read) == probed(data)
    assert read.limits[0] == FIRST_READ
    assert 1 < len(read.limits) <= 3
    assert read.limits == sorted(read.limits)
    assert max(read.limits) < 2 * len(data)


def test_a_header_longer_than_the_bound_is_left_to_libvips() -> None:
    data = with_segments(WRITERS["jpeg"](drawn(37, 23, 1)), MAX_READ // 60_000 + 2)
    read = Recorder(data)
    with pytest.raises(UnknownHeader, match="past"):
        read_header(read)
    assert max(read.limits) <= MAX_READ


def test_a_file_ending_inside_its_header_is_left_to_libvips() -> None:
    data = WRITERS["jpeg"](drawn(37, 23, 1))
    cut = data[: data.index(b"\xff\xc0")]
    with pytest.raises(UnknownHeader, match="ends"):
        read_header(Recorder(cut))


def test_a_small_file_is_read_once() -> None:
    read = Recorder(WRITERS["png"](drawn(37, 23, 1)))
    read_header(read)
    assert read.limits == [FIRST_READ]


# -- what is not answered here ----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>", "not a format"),
        (b"%PDF-1.4\n" + bytes(100), "not a format"),
        (b"\xff\xd8\xff\xda\x00\x08" + bytes(100), "without a frame header"),
        (b"\xff\xd8\x00\x00" + bytes(100), "marker"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + bytes(13) + bytes(4), "size"),
        (b"GIF89a\x0a\x00\x0a\x00\x00\x00\x00;" + bytes(20), "block"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(30), "start code"),
        (b"MM\x00+" + bytes(40), "not a format"),
    ],
    ids=[
        "svg",
        "pdf",
        "jpeg-no-sof",
        "jpeg-garbage",
        "png-empty",
        "gif-no-frame",
        "webp",
        "bigtiff",
    ],
)
def test_what_is_not_read_exactly_is_left_to_libvips(data: bytes, reason: str) -> None:
    with pytest.raises(UnknownHeader, match=reason):
        parse_header(data)


def test_a_jpeg_with_two_exif_segments_is_left_to_libvips() -> None:
    photo = WRITERS["jpeg"](drawn(37, 23, 6))
    end = 4 + struct.unpack(">H", photo[4:6])[0]
    assert photo[6:10] == b"Exif"
    doubled = photo[:end] + photo[2:end] + photo[end:]
    with pytest.raises(UnknownHeader, match="two EXIF"):
        parse_header(doubled)


# -- prefixes, random and mutated bytes ----------------------------------------------------


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_prefix_gives_the_whole_files_answer_or_asks_for_more(writer: str) -> None:
    """Cut anywhere: the same header as the whole file, or a HeaderError."""
    data = WRITERS[writer](drawn(53, 29, 6))
    whole = parse_header(data)
    for end in sorted({*range(0, min(len(data), 600)), *range(0, len(data), 97)}):
        try:
            header = parse_header(data[:end])
        except HeaderError:
            continue
        assert header == whole, end


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_raise_only_header_errors(data: bytes) -> None:
    with contextlib.suppress(HeaderError):
        parse_header(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writer=st.sampled_from(sorted(WRITERS)),
    flips=st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_mutated_headers_raise_only_header_errors(
    writer: str, flips: list[tuple[int, int]]
) -> None:
    """Corrupted lengths, offsets and counts in real headers: a Header or a HeaderError."""
    data = bytearray(MUTABLE[writer])
    for position, value in flips:
        if position < len(data):
            data[position] = value
    try:
        header = parse_header(bytes(data))
    except HeaderError:
        return
    assert header.width > 0 and header.height > 0 and 1 <= header.orientation <= 8


#: One small file per writer, made once for the mutation test.
MUTABLE = {name: write(drawn(53, 29, 6)) for name, write in WRITERS.items()}
