"""Test images drawn with pyvips: nothing is downloaded or vendored."""

from __future__ import annotations

import io
import struct

import pyvips


def photo(width: int = 640, height: int = 480) -> pyvips.Image:
    """A photo-like RGB image: smooth gradients plus fine noise, no flat areas."""
    xyz = pyvips.Image.xyz(width, height)
    x = xyz[0] * (255.0 / max(width - 1, 1))
    y = xyz[1] * (255.0 / max(height - 1, 1))
    noise = pyvips.Image.gaussnoise(width, height, sigma=12, mean=0)
    image = x.bandjoin([y, (x + y) / 2]) + noise
    return image.cast("uchar")


def jpeg(width: int = 640, height: int = 480, **save: object) -> bytes:
    return bytes(photo(width, height).jpegsave_buffer(Q=90, **save))


def png_with_alpha(width: int = 320, height: int = 240) -> bytes:
    rgb = photo(width, height)
    xyz = pyvips.Image.xyz(width, height)
    cx, cy = width / 2, height / 2
    distance = ((xyz[0] - cx) ** 2 + (xyz[1] - cy) ** 2) ** 0.5
    alpha = (distance < min(cx, cy)).ifthenelse(255, 0).cast("uchar")
    return bytes(rgb.bandjoin(alpha).pngsave_buffer())


def animated_gif(width: int = 120, height: int = 90, frames: int = 6) -> bytes:
    pages = []
    for index in range(frames):
        frame = pyvips.Image.black(width, height, bands=3).linear(1, 40)
        frame = frame.draw_rect([255, 200, 0], index * (width // frames), 10, 20, 20, fill=True)
        pages.append(frame.cast("uchar"))
    image = pyvips.Image.arrayjoin(pages, across=1)
    image = image.copy()
    image.set_type(pyvips.GValue.gint_type, "page-height", height)
    image.set_type(pyvips.GValue.array_int_type, "delay", [100] * frames)
    image.set_type(pyvips.GValue.gint_type, "loop", 0)
    return bytes(image.gifsave_buffer())


def noise(width: int, height: int) -> pyvips.Image:
    """Detail no resize smooths away: independent noise in each band of each pixel.

    A thumbnail of it is as large a JPEG as a thumbnail can be, about two
    bytes per pixel at quality 95.
    """
    bands = [pyvips.Image.gaussnoise(width, height, sigma=80, seed=seed) for seed in range(3)]
    return bands[0].bandjoin(bands[1:]).cast("uchar").copy(interpretation="srgb")


def credited_jpeg(
    width: int = 1200,
    height: int = 800,
    artist: str = "Jane Doe",
    copyright: str = "ACME Photo",
    pixels: pyvips.Image | None = None,
) -> bytes:
    """A JPEG as cameras and editors leave them: Artist and Copyright among other
    EXIF tags (camera, a private comment) and an embedded preview image (IFD1)
    of several kilobytes, which libvips' loaders read as ``jpeg-thumbnail-data``.
    ``pixels`` replaces the generated photo."""
    preview = bytes(photo(160, 120).jpegsave_buffer(Q=95))
    image = (photo(width, height) if pixels is None else pixels).copy()
    for name, value in [
        ("exif-ifd0-Artist", artist),
        ("exif-ifd0-Copyright", copyright),
        ("exif-ifd0-Make", "Camera Maker"),
        ("exif-ifd2-UserComment", "secret place"),
    ]:
        image.set_type(pyvips.GValue.gstr_type, name, value)
    image.set_type(pyvips.GValue.blob_type, "jpeg-thumbnail-data", preview)
    return bytes(image.jpegsave_buffer(Q=90, keep=pyvips.enums.ForeignKeep.ALL))


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(body), kind) + body


def _full_box(kind: bytes, version: int, body: bytes, flags: int = 0) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags) + body)


def _children(data: bytes, start: int, end: int) -> dict[bytes, tuple[int, int]]:
    """The boxes between ``start`` and ``end``: type -> (body start, box end)."""
    found = {}
    while start < end:
        size, kind = struct.unpack(">I4s", data[start : start + 8])
        found[kind] = (start + 8, start + size)
        start += size
    return found


def _heif_parts(
    data: bytes,
) -> tuple[bytes, bytes, bytes, list[bytes], list[tuple[int, int]], bytes]:
    """ftyp, hdlr, the one item's infe body, its properties, their associations, its data.

    For the single-image AVIF libvips writes without metadata.
    """
    top = _children(data, 0, len(data))
    meta_start, meta_end = top[b"meta"]
    meta = _children(data, meta_start + 4, meta_end)
    hdlr = data[meta[b"hdlr"][0] - 8 : meta[b"hdlr"][1]]
    iinf_start, iinf_end = meta[b"iinf"]
    infe = _children(data, iinf_start + 6, iinf_end)[b"infe"]
    infe_body = data[infe[0] : infe[1]]
    iloc = meta[b"iloc"][0] + 4  # version 0: 4-byte offsets and lengths, a 4-byte base
    assert data[iloc : iloc + 4] == b"\x44\x40\x00\x01", "not libvips' single-item AVIF"
    base, _, offset, length = struct.unpack(">IHII", data[iloc + 8 : iloc + 22])
    offset += base
    iprp = _children(data, *meta[b"iprp"])
    ipco_start, ipco_end = iprp[b"ipco"]
    properties = []
    while ipco_start < ipco_end:
        size = struct.unpack(">I", data[ipco_start : ipco_start + 4])[0]
        properties.append(data[ipco_start : ipco_start + size])
        ipco_start += size
    ipma = iprp[b"ipma"][0]
    count = data[ipma + 4 + 4 + 2]
    associations = [(byte >> 7, byte & 0x7F) for byte in data[ipma + 11 : ipma + 11 + count]]
    ftyp = data[: top[b"ftyp"][1]]
    return ftyp, hdlr, infe_body, properties, associations, data[offset : offset + length]


def heif_with_thumbnail(main: pyvips.Image, thumbnail: pyvips.Image) -> bytes:
    """An AVIF holding ``main`` with ``thumbnail`` as its embedded thumbnail.

    libvips writes no thumbnails, so the two single-image files it writes are
    joined by hand: item 1 the image, item 2 the thumbnail, and a ``thmb``
    reference from 2 to 1 (ISO/IEC 23008-12), which libheif reads.
    """
    keep = pyvips.enums.ForeignKeep.NONE
    first, second = (
        _heif_parts(bytes(image.heifsave_buffer(compression="av1", keep=keep)))
        for image in (main, thumbnail)
    )
    ftyp, hdlr, infe_main, props_main, assoc_main, data_main = first
    _, _, infe_thumb, props_thumb, assoc_thumb, data_thumb = second
    infe_thumb = infe_thumb[:4] + struct.pack(">H", 2) + infe_thumb[6:]
    iinf = _full_box(
        b"iinf", 0, struct.pack(">H", 2) + _box(b"infe", infe_main) + _box(b"infe", infe_thumb)
    )
    iref = _full_box(b"iref", 0, _box(b"thmb", struct.pack(">HHH", 2, 1, 1)))
    shift = len(props_main)
    ipma_entries = b""
    for item, associations in ((1, assoc_main), (2, [(e, i + shift) for e, i in assoc_thumb])):
        ipma_entries += struct.pack(">HB", item, len(associations))
        ipma_entries += bytes((essential << 7) | index for essential, index in associations)
    iprp = _box(
        b"iprp",
        _box(b"ipco", b"".join(props_main + props_thumb))
        + _full_box(b"ipma", 0, struct.pack(">I", 2) + ipma_entries),
    )
    pitm = _full_box(b"pitm", 0, struct.pack(">H", 1))

    def meta_with(offset: int) -> bytes:
        extents = struct.pack(">HHHII", 1, 0, 1, offset, len(data_main))
        extents += struct.pack(">HHHII", 2, 0, 1, offset + len(data_main), len(data_thumb))
        iloc = _full_box(b"iloc", 0, bytes([0x44, 0]) + struct.pack(">H", 2) + extents)
        return _full_box(b"meta", 0, hdlr + pitm + iloc + iinf + iref + iprp)

    start = len(ftyp) + len(meta_with(0)) + 8  # after the mdat header
    return ftyp + meta_with(start) + _box(b"mdat", data_main + data_thumb)


def heic(width: int = 320, height: int = 200, orientation: int = 1, artist: str = "") -> bytes:
    """A photo-like 8-bit HEIC (HEVC in HEIF) written by pillow-heif, the ``heic`` extra.

    A red block marks the stored image's top-left corner. An EXIF
    ``orientation`` other than 1 is given to pillow-heif, which writes it as
    the file's own turn (``irot``/``imir``), as a phone's camera does; an
    ``artist`` goes into the EXIF block.
    Callers check that pillow-heif is installed (tests/test_heic.py).
    """
    import pillow_heif
    from PIL import Image

    pixels = photo(width, height).draw_rect([255, 0, 0], 0, 0, width // 5, height // 5, fill=True)
    picture = Image.frombytes("RGB", (width, height), bytes(pixels.write_to_memory()))
    exif = Image.Exif()
    exif[0x0112] = orientation
    if artist:
        exif[0x013B] = artist
    buffer = io.BytesIO()
    pillow_heif.from_pillow(picture).save(buffer, quality=90, exif=exif.tobytes())
    return buffer.getvalue()


# -- drawn graphics: flat areas and sharp edges, what format:best makes lossless ----------


def logo(width: int = 400, height: int = 200) -> pyvips.Image:
    """A logo with alpha: two flat shapes on a transparent ground."""
    image = pyvips.Image.black(width, height, bands=4)
    image = image.draw_rect(
        [30, 90, 200, 255], width // 20, height // 10, width * 2 // 5, height * 4 // 5, fill=True
    )
    image = image.draw_circle(
        [230, 60, 40, 255], width * 3 // 4, height // 2, height * 7 // 20, fill=True
    )
    return image.cast("uchar").copy(interpretation="srgb")


def text(width: int = 600, height: int = 300) -> pyvips.Image:
    """Black text on white, anti-aliased as fonts are."""
    lines = "Lorem ipsum dolor sit amet, consectetur\nadipiscing elit, sed do eiusmod tempor."
    mask = pyvips.Image.text(lines, width=width - 20, dpi=96).embed(10, 10, width, height)
    grey = (255 - mask).cast("uchar")
    return grey.bandjoin([grey, grey]).copy(interpretation="srgb")


def screenshot(width: int = 800, height: int = 500) -> pyvips.Image:
    """An application window: a title bar, a sidebar of buttons, text on a flat page."""
    image = pyvips.Image.black(width, height, bands=3).linear(1, 245).cast("uchar")
    image = image.draw_rect([40, 60, 90], 0, 0, width, 40, fill=True)
    image = image.draw_rect([220, 225, 235], 0, 40, 180, height - 40, fill=True)
    for row in range(8):
        image = image.draw_rect([60, 120, 220], 20, 60 + row * 40, 140, 24, fill=True)
    words = "Settings  Profile  Billing\nThe quick brown fox jumps over the lazy dog.\n" * 4
    mask = pyvips.Image.text(words, width=560, dpi=96).embed(0, 0, 580, 300)
    page = (255 - mask).cast("uchar")
    image = image.insert(page.bandjoin([page, page]).copy(interpretation="srgb"), 200, 70)
    return image.copy(interpretation="srgb")


def illustration(width: int = 500, height: int = 400) -> pyvips.Image:
    """A flat illustration: sky, ground, sun and a house in a few colours."""
    image = pyvips.Image.black(width, height, bands=3).linear(1, [130, 200, 250]).cast("uchar")
    image = image.draw_rect([90, 170, 80], 0, height * 7 // 10, width, height, fill=True)
    image = image.draw_circle([255, 210, 60], width * 4 // 5, height // 5, height // 9, fill=True)
    image = image.draw_rect(
        [150, 90, 60], width // 5, height * 9 // 20, width // 4, height // 4, fill=True
    )
    return image.copy(interpretation="srgb")


def gradient(width: int = 500, height: int = 400) -> pyvips.Image:
    """A smooth three-colour gradient: no edges, and no flat area either."""
    xyz = pyvips.Image.xyz(width, height)
    x = xyz[0] * (255.0 / max(width - 1, 1))
    y = xyz[1] * (255.0 / max(height - 1, 1))
    return x.bandjoin([y, 255 - x]).cast("uchar").copy(interpretation="srgb")
