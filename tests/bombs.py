"""Hostile and broken source files for the bad-inputs table (docs/security.md), built in ms.

Decompression bombs are built from their bytes rather than encoded: a real
20000x20000 JPEG takes seconds to encode, but its entropy-coded data for a
flat grey picture is one 6-bit code per 8x8 block, so it can be written out
directly and is still a complete, decodable file. Where a header alone makes
the point (a pixel flood), a small image drawn by pyvips gets its size fields
patched. Nothing is downloaded.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import pyvips

# -- PNG ---------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png_file(ihdr: bytes, idat: bytes) -> bytes:
    return (
        PNG_SIGNATURE
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose IHDR claims ``width`` x ``height`` RGB (a pixel flood)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return (
        PNG_SIGNATURE
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


def flat_grey_png(width: int, height: int, bit_depth: int = 1) -> bytes:
    """A complete black greyscale PNG: all-zero rows compress to almost nothing.

    At 1 bit, 20000x20000 is 49 KB (bad input 29).
    """
    row = b"\x00" * (1 + (width * bit_depth + 7) // 8)  # filter byte + packed samples
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


# -- JPEG --------------------------------------------------------------------------

#: Entropy-coded data of four flat mid-grey 8x8 blocks with the standard
#: Huffman tables: DC difference 0 ("00") then end-of-block ("1010"), four
#: times = 24 bits. No 0xFF byte, so no stuffing is needed.
FOUR_FLAT_BLOCKS = bytes([0b00101000, 0b10100010, 0b10001010])


def _segments(data: bytes) -> tuple[bytes, int]:
    """The bytes of a baseline JPEG up to and including its SOS header, and where SOF is."""
    position = 2
    sof = -1
    while True:
        marker, length = struct.unpack(">2sH", data[position : position + 4])
        if marker in (b"\xff\xc0", b"\xff\xc2"):
            sof = position
        position += 2 + length
        if marker == b"\xff\xda":
            return data[:position], sof


def with_size(jpeg_data: bytes, width: int, height: int) -> bytes:
    """``jpeg_data`` with its SOF frame header saying ``width`` x ``height``."""
    _, sof = _segments(jpeg_data)
    return jpeg_data[: sof + 5] + struct.pack(">HH", height, width) + jpeg_data[sof + 9 :]


def flat_grey_jpeg(width: int, height: int) -> bytes:
    """A complete, decodable mid-grey baseline JPEG of any size that is a multiple of 8.

    The headers come from a small JPEG encoded by libvips with the standard
    tables; the scan is written out, so 20000x20000 (4.7 MB) takes milliseconds.
    """
    if width % 8 or height % 8 or (width * height // 64) % 4:
        raise ValueError("width and height must be multiples of 8, blocks a multiple of 4")
    small = pyvips.Image.black(16, 16).linear(1, 128).cast("uchar")
    template = bytes(small.jpegsave_buffer(Q=75, optimize_coding=False, keep=0))
    head, _ = _segments(template)
    blocks = width * height // 64
    return with_size(head, width, height) + FOUR_FLAT_BLOCKS * (blocks // 4) + b"\xff\xd9"


def lottapixel_jpeg(width: int = 64250, height: int = 64250) -> bytes:
    """A small real JPEG whose SOF claims ``width`` x ``height`` (fuzzdb lottapixel.jpg)."""
    small = pyvips.Image.black(64, 64).linear(1, 100).cast("uchar")
    return with_size(bytes(small.jpegsave_buffer()), width, height)


def progressive_jpeg(width: int, height: int) -> bytes:
    """A photo-like progressive JPEG: small colour noise enlarged 50 times, then encoded."""
    small = pyvips.Image.gaussnoise(-(-width // 50), -(-height // 50), sigma=40, mean=128)
    colour = small.bandjoin([small.rot180(), small.fliphor()]).cast("uchar")
    image = colour.zoom(50, 50).crop(0, 0, width, height).copy(interpretation="srgb")
    return bytes(image.jpegsave_buffer(Q=80, interlace=True))


def with_icc_segment(jpeg_data: bytes, profile: bytes) -> bytes:
    """``jpeg_data`` with an APP2 ICC_PROFILE segment holding ``profile`` as is.

    libvips refuses to write a profile it cannot parse, so a corrupt one has to
    be put in by hand.
    """
    payload = b"ICC_PROFILE\x00\x01\x01" + profile
    segment = b"\xff\xe2" + struct.pack(">H", len(payload) + 2) + payload
    return jpeg_data[:2] + segment + jpeg_data[2:]


# -- WebP, AVIF --------------------------------------------------------------------


def webp_claiming(width: int, height: int) -> bytes:
    """A lossless one-colour WebP of ``width`` x ``height`` (at most 16383 a side).

    A flat lossless image costs zero bits per pixel, so libvips' 64x64 encoding
    with its two size fields (VP8X canvas and VP8L header) changed is a
    complete image of the new size: 246 bytes for 16383x16383.
    """
    small = bytes(pyvips.Image.black(64, 64).cast("uchar").webpsave_buffer(lossless=True))
    vp8x = small.index(b"VP8X")
    canvas = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    data = small[: vp8x + 12] + canvas + small[vp8x + 18 :]
    vp8l = data.index(b"VP8L") + 9  # chunk id, size, signature byte
    (bits,) = struct.unpack("<I", data[vp8l : vp8l + 4])
    bits = (bits & ~((1 << 28) - 1)) | (width - 1) | ((height - 1) << 14)
    return data[:vp8l] + struct.pack("<I", bits) + data[vp8l + 4 :]


def webp_with_svg_inside() -> bytes:
    """A red 8x8 WebP whose XMP chunk is an SVG document (libvips looks-like-svg.webp)."""
    image = pyvips.Image.black(8, 8, bands=3).linear(1, [200, 30, 30]).cast("uchar").copy()
    image.set_type(
        pyvips.GValue.blob_type,
        "xmp-data",
        b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
    )
    return bytes(image.webpsave_buffer(lossless=True, keep=pyvips.enums.ForeignKeep.XMP))


def avif_claiming(width: int, height: int) -> bytes:
    """A small AVIF whose ``ispe`` (image spatial extents) box claims ``width`` x ``height``."""
    small = pyvips.Image.black(64, 64, bands=3).linear(1, 100).cast("uchar")
    data = bytes(small.heifsave_buffer(compression="av1", effort=0))
    ispe = data.index(b"ispe") + 8  # type, version and flags
    return data[:ispe] + struct.pack(">II", width, height) + data[ispe + 8 :]


# -- GIF ---------------------------------------------------------------------------

#: LZW data of one pixel of colour index 1 at minimum code size 2: clear, 1, end.
ONE_WHITE_PIXEL = b"\x02\x02\x4c\x01\x00"


def gif_animation(width: int, height: int, frames: int, delay_cs: int = 10) -> bytes:
    """An animated GIF of ``frames`` 1x1 white frames walking over a black canvas.

    Every frame differs from the one before (encoders merge identical frames),
    and each costs 19 bytes, so 20000 frames is 380 KB (fuzzdb uber.gif style).
    A decoder renders every frame at the full ``width`` x ``height``.
    """
    parts = [
        b"GIF89a",
        struct.pack("<HHBBB", width, height, 0x80, 0, 0),  # 2-colour global table
        b"\x00\x00\x00\xff\xff\xff",
        b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00",  # loop forever
    ]
    for index in range(frames):
        x, y = index % width, (index // width) % height
        control = b"\x21\xf9\x04\x00" + struct.pack("<H", delay_cs) + b"\x00\x00"
        descriptor = b"\x2c" + struct.pack("<HHHHB", x, y, 1, 1, 0)
        parts.append(control + descriptor + ONE_WHITE_PIXEL)
    parts.append(b"\x3b")
    return b"".join(parts)


def _lzw_of_one_colour(pixels: int, min_code_size: int = 2) -> bytes:
    """GIF LZW data (sub-blocks included) for ``pixels`` pixels of colour index 0.

    LZW of a constant stream is predictable: after the first literal, every
    code is the entry being defined (the "KwKwK" case) and covers one pixel
    more than the previous one, so no dictionary is needed. Code widths grow
    as a GIF decoder grows them; the table is cleared before it fills up.
    """
    clear, end = 1 << min_code_size, (1 << min_code_size) + 1
    width, next_code = min_code_size + 1, end + 1
    codes = [(clear, width)]
    first, remaining = True, pixels
    while remaining:
        if first:
            codes.append((0, width))
            remaining, first = remaining - 1, False
            continue
        run = next_code - end + 1
        code = next_code
        if run > remaining:
            run = remaining
            code = 0 if run == 1 else end + run - 1
        codes.append((code, width))
        remaining -= run
        next_code += 1
        if next_code == 1 << width and width < 12:
            width += 1
        if next_code == 4096 and remaining:
            codes.append((clear, width))
            width, next_code, first = min_code_size + 1, end + 1, True
    codes.append((end, width))
    packed, filled, data = 0, 0, bytearray()
    for code, bits in codes:
        packed |= code << filled
        filled += bits
        while filled >= 8:
            data.append(packed & 0xFF)
            packed, filled = packed >> 8, filled - 8
    if filled:
        data.append(packed)
    blocks = b"".join(
        bytes([len(data[i : i + 255])]) + data[i : i + 255] for i in range(0, len(data), 255)
    )
    return bytes([min_code_size]) + blocks + b"\x00"


def flat_gif(width: int, height: int) -> bytes:
    """A complete one-frame black GIF of any size: 49 MP is 33 KB."""
    descriptor = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    return b"GIF89a" + screen + descriptor + _lzw_of_one_colour(width * height) + b"\x3b"


# -- broken and unwanted bytes -----------------------------------------------------


def truncated(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


def random_bytes(size: int = 1024, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>\n"
)

CSV = b"0,0,0\n0,255,0\n0,0,0\n"
MATRIX = b"3 3\n0 0 0\n0 255 0\n0 0 0\n"
PPM = b"P6\n4 4\n255\n" + bytes(range(48))


def vips_native(directory: Path) -> bytes:
    """A libvips native ``.v`` file (vipsload, CVE-2026-33327)."""
    path = directory / "native.v"
    pyvips.Image.black(4, 4).cast("uchar").vipssave(str(path))
    return path.read_bytes()


def svg_attacks(sentinel: Path, canary_url: str) -> dict[str, bytes]:
    """SVGs that would read ``sentinel`` or fetch ``canary_url`` if they were parsed."""
    open_tag = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'width="64" height="64">'
    )
    uri = sentinel.as_uri()
    documents = {
        "xxe": (
            f'<?xml version="1.0"?>\n<!DOCTYPE svg [<!ENTITY leak SYSTEM "{uri}">]>\n'
            f"{open_tag}<text y='20'>&leak;</text></svg>"
        ),
        "script": f"{open_tag}<script>fetch('{canary_url}')</script><rect width='9'/></svg>",
        "xlink-file": f"{open_tag}<image xlink:href='{uri}' width='64' height='64'/></svg>",
        "xlink-http": f"{open_tag}<image xlink:href='{canary_url}' width='64' height='64'/></svg>",
        "xinclude": (
            '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xi="http://www.w3.org/2001/XInclude">'
            f"<text><xi:include href='{uri}' parse='text'/></text></svg>"
        ),
    }
    return {name: text.encode() for name, text in documents.items()}
