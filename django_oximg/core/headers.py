"""Width, height, EXIF orientation and alpha from the first bytes of an image, in pure Python.

The template tags need a source's size to write ``width`` and ``height``;
asking libvips costs importing it (Pillow comes along with the pipeline)
and reading the whole file, which on S3 means downloading a
28 MB photo to learn two numbers. The size is in the first few kilobytes of
every format the server reads, so :func:`parse_header` reads it there, and
:func:`read_header` asks a store for a short prefix, and for a longer one
only when the format says the answer lies further in (a JPEG whose frame
header follows a large EXIF or ICC block).

The answer is libvips' answer (``pipeline.probe``), including its quirks;
``alpha`` is whether libvips gives the image an alpha band (the template
tags leave the placeholder out behind an image with one):

* JPEG: the first SOFn frame header; orientation from the first ``Exif``
  APP1 segment's IFD0, as libvips reads it (values outside 1..8 mean 1).
  Never alpha.
* PNG: IHDR; orientation from an ``eXIf`` chunk before the first IDAT.
  Alpha for a colour type with alpha, or a ``tRNS`` chunk before IDAT.
* GIF: the logical screen, replaced by 1x1 when it is one of the screen
  sizes libnsgif distrusts, then grown to hold the first frame (libnsgif).
  Alpha when the first frame's graphic control names a transparent colour
  (libvips also counts later frames' transparency, which a prefix does not
  reach: a GIF whose first frame is opaque and a later one is not says no).
* WebP: the VP8X canvas, or the VP8/VP8L bitstream's size; orientation
  from the EXIF chunk. Alpha from the VP8X flags or the VP8L header.
* HEIF/AVIF: the primary item's ``ispe``, turned by its ``irot`` (libheif
  applies ``irot``/``imir`` itself, so libvips reports orientation 1).
  Alpha when an alpha auxiliary item (``auxC``) refers to it (``auxl``).
* TIFF: IFD0's width, length and orientation; alpha from its samples per
  pixel and photometric interpretation.

Whatever this module cannot answer exactly (another format, an odd
structure, a clean-aperture crop, an orientation entry of an unusual type)
raises :class:`UnknownHeader`, and the caller asks libvips instead; a
prefix too short raises :class:`NeedMoreBytes`. Nothing else is raised,
whatever the input.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from django_oximg.core.exif import EXIF_PREFIX

#: Bytes read first: enough for PNG, GIF, WebP, HEIF/AVIF and most JPEGs.
FIRST_READ = 16 * 1024

#: The longest prefix read before giving up and asking libvips to read the
#: whole file. A JPEG's segments before the frame header are at most 64 KiB
#: each; camera files carry two or three (EXIF with its thumbnail, ICC, XMP).
MAX_READ = 1024 * 1024

#: Extra bytes asked for beyond what a format says it needs, so that the
#: segment after the one that needed them is usually read in the same go.
READ_SLACK = 64 * 1024

EXIF_ORIENTATION_TAG = 0x0112
TIFF_WIDTH_TAG = 0x0100
TIFF_HEIGHT_TAG = 0x0101
TIFF_PHOTOMETRIC_TAG = 0x0106
TIFF_SAMPLES_TAG = 0x0115

#: TIFF photometric interpretations -> the samples per pixel from which libvips
#: counts the last one as alpha (grey: 2, RGB and YCbCr: 4, CMYK: 5).
TIFF_ALPHA_SAMPLES = {0: 2, 1: 2, 2: 4, 5: 5, 6: 4}

#: PNG colour types with an alpha channel (grey + alpha, RGBA).
PNG_ALPHA_TYPES = frozenset({4, 6})

#: HEIF auxiliary types of an alpha plane (MPEG-B CICP, and HEVC's older one).
HEIF_ALPHA_TYPES = (
    b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha",
    b"urn:mpeg:hevc:2015:auxid:1",
)

#: JPEG frame headers (SOF0-SOF15 without DHT, JPG and DAC).
JPEG_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}

#: Markers that stand alone (no length): TEM, RST0-RST7, SOI.
JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8), 0xD8})

#: Logical screen sizes libnsgif treats as wrong (screens of the machine a
#: GIF was made on, not the image): the image is then as large as its
#: first frame. So are 0 and anything over 2048 pixels on a side.
GIF_SUSPECT_SCREENS = frozenset(
    {(640, 480), (640, 512), (800, 600), (1024, 768), (1280, 1024), (1600, 1200)}
)
GIF_MAX_SCREEN = 2048

#: HEIF major brands libvips' heifload claims.
HEIF_BRANDS = frozenset(
    {
        b"heic",
        b"heix",
        b"hevc",
        b"hevx",
        b"heim",
        b"heis",
        b"hevm",
        b"hevs",
        b"mif1",
        b"msf1",
        b"avif",
        b"avis",
    }
)

#: ISOBMFF boxes read inside ``meta`` (others are skipped).
HEIF_META_BOXES = frozenset({b"pitm", b"iprp", b"iref"})

#: HEIF item properties that change the displayed size in ways not handled
#: here (clean aperture, scaling): libvips is asked instead.
HEIF_UNHANDLED_PROPERTIES = frozenset({b"clap", b"iscl"})

#: Most boxes, segments or chunks walked in one header, so a hostile file of
#: empty boxes costs bounded time.
MAX_STEPS = 10_000


class HeaderError(ValueError):
    """The header could not be read from these bytes (see the subclasses)."""


class NeedMoreBytes(HeaderError):
    """The answer lies beyond the bytes given: read at least ``needed`` bytes."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"the header needs at least {needed} bytes")
        self.needed = needed


class UnknownHeader(HeaderError):
    """Not a header this module reads exactly; libvips must be asked."""


@dataclass(frozen=True)
class Header:
    """What the first bytes of an image say, as libvips would report it."""

    #: libvips' loader family: "jpeg", "png", "gif", "webp", "heif", "tiff".
    format: str
    width: int
    height: int
    #: EXIF orientation 1..8 (1 when absent or out of range).
    orientation: int = 1
    #: Whether libvips gives the image an alpha band (it may have transparent pixels).
    alpha: bool = False


def read_header(
    read: Callable[[int], bytes], first: int = FIRST_READ, most: int = MAX_READ
) -> Header:
    """The header of a source read by ``read(limit)`` (its first ``limit`` bytes).

    Reads ``first`` bytes, and again with a longer limit while the format
    asks for more, up to ``most``. Raises :class:`UnknownHeader` when the
    answer needs libvips (or the whole file), and the store's own errors.
    """
    limit = first
    for _ in range(MAX_STEPS):
        data = read(limit)
        try:
            return parse_header(data)
        except NeedMoreBytes as more:
            if len(data) < limit:
                raise UnknownHeader("the file ends inside its header") from more
            if more.needed > most or limit >= most:
                raise UnknownHeader(f"the header runs past {most} bytes") from more
            limit = min(most, max(more.needed + READ_SLACK, limit * 2))
    raise UnknownHeader("too many reads")  # pragma: no cover - limit grows every round


def parse_header(data: bytes) -> Header:
    """The :class:`Header` in ``data``, a prefix of an image file.

    Raises :class:`NeedMoreBytes` when ``data`` ends before the answer and
    :class:`UnknownHeader` when libvips must be asked; nothing else.
    """
    if len(data) < 12:
        raise NeedMoreBytes(12)
    try:
        if data.startswith(b"\xff\xd8"):
            return _jpeg(data)
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            return _png(data)
        if data.startswith((b"GIF87a", b"GIF89a")):
            return _gif(data)
        if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
            return _webp(data)
        if data[4:8] == b"ftyp" and data[8:12] in HEIF_BRANDS:
            return _heif(data)
        if data.startswith((b"II*\x00", b"MM\x00*")):
            return _tiff(data)
    except (struct.error, IndexError) as exc:  # a read past the end we did not foresee
        raise UnknownHeader(f"malformed header: {exc}") from exc
    raise UnknownHeader("not a format read here")


def _sized(fmt: str, width: int, height: int, orientation: int = 1, alpha: bool = False) -> Header:
    if width <= 0 or height <= 0:
        raise UnknownHeader(f"{fmt} header gives a size of {width}x{height}")
    return Header(fmt, width, height, orientation, alpha)


def _need(data: bytes, end: int) -> None:
    """Raise NeedMoreBytes unless ``data`` holds its first ``end`` bytes."""
    if len(data) < end:
        raise NeedMoreBytes(end)


# -- EXIF and TIFF ---------------------------------------------------------------


def _ifd0(tiff: bytes) -> tuple[str, dict[int, tuple[int, int, bytes]]]:
    """Byte order and IFD0's entries of a TIFF structure: tag -> (type, count, value field).

    Raises UnknownHeader for anything malformed (libvips then decides), and
    NeedMoreBytes (offsets relative to ``tiff``) when IFD0 lies beyond it.
    """
    if len(tiff) < 8:
        raise NeedMoreBytes(8)
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or struct.unpack(order + "H", tiff[2:4])[0] != 42:
        raise UnknownHeader("not a TIFF structure (or BigTIFF)")
    (offset,) = struct.unpack(order + "I", tiff[4:8])
    if offset < 8:
        raise UnknownHeader("IFD0 inside the TIFF header")
    _need(tiff, offset + 2)
    (count,) = struct.unpack(order + "H", tiff[offset : offset + 2])
    _need(tiff, offset + 2 + 12 * count)
    entries: dict[int, tuple[int, int, bytes]] = {}
    for index in range(count):
        start = offset + 2 + 12 * index
        tag, kind, number = struct.unpack(order + "HHI", tiff[start : start + 8])
        if tag in entries:
            raise UnknownHeader(f"IFD0 has tag {tag:#x} twice")
        entries[tag] = (kind, number, tiff[start + 8 : start + 12])
    return order, entries


#: TIFF field types read as integers here: SHORT, LONG, SSHORT, SLONG.
TIFF_INTEGERS = {3: "H", 4: "I", 8: "h", 9: "i"}


def _ifd_integer(order: str, entry: tuple[int, int, bytes]) -> int:
    """The one integer an IFD entry holds in its value field."""
    kind, number, field = entry
    code = TIFF_INTEGERS.get(kind)
    if code is None or number != 1:
        raise UnknownHeader(f"IFD entry of type {kind} with {number} values")
    return int(struct.unpack(order + code, field[: struct.calcsize(code)])[0])


def _exif_orientation(exif: bytes) -> int:
    """The orientation in an EXIF block (raw TIFF, or after ``Exif\\0\\0``), as libvips reads it.

    The whole block is at hand (it came from one segment or chunk), so an
    IFD0 past its end is malformed rather than a short read.
    """
    if exif.startswith(b"Exif"):
        if not exif.startswith(EXIF_PREFIX):
            raise UnknownHeader("EXIF block with an unusual prefix")
        exif = exif[len(EXIF_PREFIX) :]
    try:
        order, entries = _ifd0(exif)
    except NeedMoreBytes as exc:
        raise UnknownHeader("EXIF IFD0 runs past its block") from exc
    entry = entries.get(EXIF_ORIENTATION_TAG)
    if entry is None:
        return 1
    value = _ifd_integer(order, entry)
    return value if 1 <= value <= 8 else 1


def _tiff(data: bytes) -> Header:
    order, entries = _ifd0(data)
    if TIFF_WIDTH_TAG not in entries or TIFF_HEIGHT_TAG not in entries:
        raise UnknownHeader("TIFF IFD0 without a size")
    width = _ifd_integer(order, entries[TIFF_WIDTH_TAG])
    height = _ifd_integer(order, entries[TIFF_HEIGHT_TAG])
    orientation = 1
    if EXIF_ORIENTATION_TAG in entries:
        orientation = _ifd_integer(order, entries[EXIF_ORIENTATION_TAG])
        if not 1 <= orientation <= 8:
            raise UnknownHeader(f"TIFF orientation {orientation}")
    return _sized("tiff", width, height, orientation, _tiff_alpha(order, entries))


def _tiff_alpha(order: str, entries: dict[int, tuple[int, int, bytes]]) -> bool:
    """Whether libvips counts a sample as alpha: more samples than the colours need."""
    samples = 1
    if TIFF_SAMPLES_TAG in entries:
        samples = _ifd_integer(order, entries[TIFF_SAMPLES_TAG])
    if TIFF_PHOTOMETRIC_TAG not in entries:
        raise UnknownHeader("TIFF without a photometric interpretation")
    photometric = _ifd_integer(order, entries[TIFF_PHOTOMETRIC_TAG])
    if photometric not in TIFF_ALPHA_SAMPLES:
        raise UnknownHeader(f"TIFF photometric interpretation {photometric}")
    return samples >= TIFF_ALPHA_SAMPLES[photometric]


# -- JPEG -----------------------------------------------------------------------


def _jpeg(data: bytes) -> Header:
    """Walk the segments up to the scan: the frame header and any EXIF before it.

    libjpeg reads every marker up to the first scan (SOS), so an EXIF
    segment after the frame header counts too.
    """
    position = 2
    size: tuple[int, int] | None = None
    exif: bytes | None = None
    for _ in range(MAX_STEPS):
        _need(data, position + 2)
        if data[position] != 0xFF:
            raise UnknownHeader("JPEG segment does not start with a marker")
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker == 0xDA:  # start of scan: every header segment is behind us
            break
        if marker in JPEG_STANDALONE or marker == 0xD9:
            raise UnknownHeader(f"JPEG marker {marker:#04x} before the scan")
        _need(data, position + 4)
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if length < 2:
            raise UnknownHeader("JPEG segment shorter than its length field")
        end = position + 2 + length
        if marker in JPEG_SOF_MARKERS and size is None:
            _need(data, position + 9)
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            size = (width, height)
        elif marker == 0xE1 and data[position + 4 : position + 8] == b"Exif":
            _need(data, end)
            if exif is not None:
                raise UnknownHeader("JPEG with two EXIF segments")
            exif = data[position + 4 : end]
        position = end
    else:
        raise UnknownHeader("too many JPEG segments")
    if size is None:
        raise UnknownHeader("JPEG without a frame header")
    orientation = _exif_orientation(exif) if exif is not None else 1
    return _sized("jpeg", *size, orientation)


# -- PNG ------------------------------------------------------------------------


def _png(data: bytes) -> Header:
    """IHDR, then the chunks before the first IDAT for an ``eXIf`` (read before pixels)."""
    if data[12:16] != b"IHDR":
        raise UnknownHeader("PNG without IHDR first")
    _need(data, 26)
    width, height = struct.unpack(">II", data[16:24])
    _sized("png", width, height)  # a zero side needs no further reading
    alpha = data[25] in PNG_ALPHA_TYPES
    position = 8
    exif: bytes | None = None
    for _ in range(MAX_STEPS):
        _need(data, position + 8)
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        if kind == b"IDAT":
            break
        end = position + 12 + length
        if kind == b"eXIf":
            _need(data, end)
            if exif is not None:
                raise UnknownHeader("PNG with two eXIf chunks")
            exif = data[position + 8 : end - 4]
        elif kind == b"tRNS":
            alpha = True  # a transparent colour: libvips loads it as alpha
        elif kind == b"IEND":
            raise UnknownHeader("PNG without image data")
        position = end
    else:
        raise UnknownHeader("too many PNG chunks")
    orientation = _exif_orientation(exif) if exif is not None else 1
    return _sized("png", width, height, orientation, alpha)


# -- GIF ------------------------------------------------------------------------


def _gif(data: bytes) -> Header:
    """The logical screen as libnsgif corrects it, grown to hold the first frame."""
    width, height, flags = struct.unpack("<HHB", data[6:11])
    distrusted = (width, height) in GIF_SUSPECT_SCREENS
    if distrusted or not width or not height or max(width, height) > GIF_MAX_SCREEN:
        width, height = 1, 1
    position = 13
    if flags & 0x80:  # global colour table
        position += 3 * 2 ** ((flags & 0x07) + 1)
    transparent = False
    for _ in range(MAX_STEPS):
        _need(data, position + 1)
        block = data[position]
        if block == 0x2C:  # image descriptor
            _need(data, position + 10)
            left, top, frame_width, frame_height = struct.unpack(
                "<HHHH", data[position + 1 : position + 9]
            )
            width, height = max(width, left + frame_width), max(height, top + frame_height)
            return _sized("gif", width, height, alpha=transparent)
        if block != 0x21:  # only extensions may come before the first frame
            raise UnknownHeader(f"GIF block {block:#04x} before the first frame")
        _need(data, position + 4)
        if data[position + 1] == 0xF9 and data[position + 2] >= 1:  # graphic control
            transparent = transparent or bool(data[position + 3] & 0x01)
        position += 2  # introducer and label
        while True:  # data sub-blocks, up to the empty one
            _need(data, position + 1)
            length = data[position]
            position += 1 + length
            if not length:
                break
    raise UnknownHeader("too many GIF extensions")


# -- WebP -----------------------------------------------------------------------


def _webp(data: bytes) -> Header:
    _need(data, 30)
    kind = data[12:16]
    if kind == b"VP8 ":
        if data[23:26] != b"\x9d\x01\x2a":
            raise UnknownHeader("VP8 frame without its start code")
        width, height = struct.unpack("<HH", data[26:30])
        return _sized("webp", width & 0x3FFF, height & 0x3FFF)
    if kind == b"VP8L":
        if data[20] != 0x2F:
            raise UnknownHeader("VP8L without its signature")
        (bits,) = struct.unpack("<I", data[21:25])
        alpha = bool(bits >> 28 & 1)  # alpha_is_used
        return _sized("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, alpha=alpha)
    if kind == b"VP8X":
        flags = data[20]
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        orientation = _webp_orientation(data) if flags & 0x08 else 1
        return _sized("webp", width, height, orientation, bool(flags & 0x10))
    raise UnknownHeader(f"WebP chunk {kind!r} first")


def _webp_orientation(data: bytes) -> int:
    """The orientation in the EXIF chunk, which follows the image data."""
    position = 12
    for _ in range(MAX_STEPS):
        _need(data, position + 8)
        kind, length = struct.unpack("<4sI", data[position : position + 8])
        end = position + 8 + length
        if kind == b"EXIF":
            _need(data, end)
            return _exif_orientation(data[position + 8 : end])
        position = end + (length & 1)  # chunks are padded to an even size
    raise UnknownHeader("too many WebP chunks")


# -- HEIF and AVIF --------------------------------------------------------------


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """The ISOBMFF boxes in ``data[start:end]``: (type, content start, box end).

    Raises NeedMoreBytes when a box header lies past the data, UnknownHeader
    for a box that does not fit in ``end`` or says nothing sensible.
    """
    found: list[tuple[bytes, int, int]] = []
    position = start
    while position < end:
        if len(found) >= MAX_STEPS:
            raise UnknownHeader("too many boxes")
        _need(data, position + 8)
        size, kind = struct.unpack(">I4s", data[position : position + 8])
        content = position + 8
        if size == 1:
            _need(data, position + 16)
            (size,) = struct.unpack(">Q", data[position + 8 : position + 16])
            content = position + 16
        elif size == 0:
            size = end - position  # to the end of the enclosing box
        if size < content - position or position + size > end:
            raise UnknownHeader(f"box {kind!r} does not fit")
        found.append((kind, content, position + size))
        position += size
    return found


def _heif(data: bytes) -> Header:
    """The primary item's ``ispe``, turned by its ``irot``, as libheif reports it."""
    primary: int | None = None
    properties: list[tuple[bytes, int, int]] = []
    associations: dict[int, list[int]] = {}
    auxiliaries: list[tuple[int, list[int]]] = []  # (item, the items it is an auxiliary of)
    for kind, start, end in _boxes(data, *_heif_meta(data)):
        if kind == b"iref":
            auxiliaries = _auxiliary_references(data, start, end)
        elif kind == b"pitm":
            wide = data[start] != 0  # version 1: 32-bit item ids
            primary = int.from_bytes(data[start + 4 : start + (8 if wide else 6)], "big")
        elif kind == b"iprp":
            for inner, inner_start, inner_end in _boxes(data, start, end):
                if inner == b"ipco":
                    properties = _boxes(data, inner_start, inner_end)
                elif inner == b"ipma":
                    associations.update(_item_properties(data, inner_start, inner_end))
    if primary is None or primary not in associations:
        raise UnknownHeader("HEIF without a primary item and its properties")
    extent: tuple[int, int] | None = None
    quarter_turns = 0
    for index in associations[primary]:
        if not 1 <= index <= len(properties):
            raise UnknownHeader(f"HEIF property index {index} out of range")
        kind, start, _end = properties[index - 1]
        if kind in HEIF_UNHANDLED_PROPERTIES:
            raise UnknownHeader(f"HEIF {kind.decode('ascii')} property")
        if kind == b"ispe":
            extent = struct.unpack(">II", data[start + 4 : start + 12])
        elif kind == b"irot":
            quarter_turns = data[start] & 0x03
    if extent is None:
        raise UnknownHeader("HEIF primary item without ispe")
    width, height = extent
    if quarter_turns % 2:
        width, height = height, width
    alpha = any(
        primary in targets and _is_alpha_item(data, associations.get(item, []), properties)
        for item, targets in auxiliaries
    )
    return _sized("heif", width, height, alpha=alpha)


def _auxiliary_references(data: bytes, start: int, end: int) -> list[tuple[int, list[int]]]:
    """An ``iref`` box's ``auxl`` references: (auxiliary item, the items it serves)."""
    wide = data[start] != 0  # version 1: 32-bit item ids
    size = 4 if wide else 2
    found = []
    for kind, inner_start, inner_end in _boxes(data, start + 4, end):
        if kind != b"auxl":
            continue
        _need(data, inner_end)
        item = int.from_bytes(data[inner_start : inner_start + size], "big")
        (count,) = struct.unpack(">H", data[inner_start + size : inner_start + size + 2])
        first = inner_start + size + 2
        if first + count * size > inner_end:
            raise UnknownHeader("auxl reference runs past its box")
        targets = [
            int.from_bytes(data[first + n * size : first + (n + 1) * size], "big")
            for n in range(count)
        ]
        found.append((item, targets))
    return found


def _is_alpha_item(
    data: bytes, indexes: list[int], properties: list[tuple[bytes, int, int]]
) -> bool:
    """Whether an item's ``auxC`` property says it is an alpha plane."""
    for index in indexes:
        if 1 <= index <= len(properties):
            kind, start, end = properties[index - 1]
            if kind == b"auxC" and data[start + 4 : end].split(b"\0")[0] in HEIF_ALPHA_TYPES:
                return True
    return False


def _heif_meta(data: bytes) -> tuple[int, int]:
    """Where the ``meta`` box's children are: top-level boxes are walked up to it
    (``mdat`` may come first)."""
    position = 0
    for _ in range(MAX_STEPS):
        _need(data, position + 8)
        size, kind = struct.unpack(">I4s", data[position : position + 8])
        header = 8
        if size == 1:
            _need(data, position + 16)
            (size,) = struct.unpack(">Q", data[position + 8 : position + 16])
            header = 16
        if size < header + (4 if kind == b"meta" else 0):
            raise UnknownHeader(f"top-level box {kind!r} of size {size}")
        if kind == b"meta":
            _need(data, position + size)
            return position + header + 4, position + size  # after version and flags
        position += size
    raise UnknownHeader("too many top-level boxes")


def _item_properties(data: bytes, start: int, end: int) -> dict[int, list[int]]:
    """An ``ipma`` box: item id -> its property indexes (1-based into ``ipco``)."""
    version, flags = data[start], int.from_bytes(data[start + 1 : start + 4], "big")
    (count,) = struct.unpack(">I", data[start + 4 : start + 8])
    position = start + 8
    found: dict[int, list[int]] = {}
    for _ in range(min(count, MAX_STEPS)):
        if version < 1:
            (item,) = struct.unpack(">H", data[position : position + 2])
            position += 2
        else:
            (item,) = struct.unpack(">I", data[position : position + 4])
            position += 4
        links = data[position]
        position += 1
        indexes = []
        for _link in range(links):
            if flags & 1:
                (value,) = struct.unpack(">H", data[position : position + 2])
                index = value & 0x7FFF
                position += 2
            else:
                index = data[position] & 0x7F
                position += 1
            if index:  # 0: no property
                indexes.append(index)
        if position > end:
            raise UnknownHeader("ipma runs past its box")
        found[item] = indexes
    return found
