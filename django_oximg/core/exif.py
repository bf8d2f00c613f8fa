"""The EXIF block a thumbnail keeps with ``keep_copyright``: Artist and Copyright, nothing else.

A camera or photo editor leaves a whole EXIF block in a photo: camera
settings, GPS, serial numbers and an embedded preview image (IFD1), often
several kilobytes. Copied into a 20 KB thumbnail it can be half the file
(docs/quality.md). With ``keep_copyright`` a result carries a fresh block
built here instead: the TIFF header and one IFD holding the source's
``Artist`` and ``Copyright`` values, byte for byte, and nothing else (a
value that is empty or only spaces, as some editors' templates leave them,
is not kept). Pure Python: no pyvips, no Django; the pipeline hands the
block to whichever encoder writes the result.
"""

from __future__ import annotations

import struct

#: The APP1 / chunk prefix of an EXIF block, before its TIFF header.
EXIF_PREFIX = b"Exif\x00\x00"

#: The two tags kept: who made the picture (Artist) and who owns it (Copyright).
ARTIST, COPYRIGHT = 0x013B, 0x8298
KEPT_TAGS = (ARTIST, COPYRIGHT)

#: TIFF field type ASCII, the type both tags have.
ASCII = 2

#: Longest value kept; a longer one is cut (no real credit line is this long).
MAX_VALUE_BYTES = 1024

#: Entries read from IFD0 at most; a real IFD0 has a few dozen.
MAX_ENTRIES = 1000


def copyright_values(block: bytes) -> dict[int, bytes]:
    """The non-blank Artist and Copyright values of an EXIF block, raw (with their NULs).

    ``block`` is an EXIF block as libvips' loaders give it (``exif-data``,
    with or without the ``Exif\\0\\0`` prefix). Anything malformed reads as
    no value: the block is untrusted input, and losing a credit line is
    better than failing a render.
    """
    tiff = block[len(EXIF_PREFIX) :] if block.startswith(EXIF_PREFIX) else block
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return {}
    ifd = struct.unpack(order + "I", tiff[4:8])[0]
    if ifd + 2 > len(tiff):
        return {}
    count = min(struct.unpack(order + "H", tiff[ifd : ifd + 2])[0], MAX_ENTRIES)
    found: dict[int, bytes] = {}
    for index in range(count):
        start = ifd + 2 + 12 * index
        entry = tiff[start : start + 12]
        if len(entry) < 12:
            break
        tag, kind, length = struct.unpack(order + "HHI", entry[:8])
        if tag not in KEPT_TAGS or kind != ASCII:
            continue
        if length <= 4:
            value = entry[8 : 8 + length]
        else:
            offset = struct.unpack(order + "I", entry[8:12])[0]
            value = tiff[offset : offset + length]
            if len(value) < length:
                continue
        value = value[:MAX_VALUE_BYTES]
        if value.strip(b" \x00"):
            found[tag] = value if value.endswith(b"\x00") else value + b"\x00"
    return found


def minimal_block(values: dict[int, bytes]) -> bytes:
    """A little-endian EXIF block (with its ``Exif\\0\\0`` prefix) holding only ``values``.

    ``values`` maps tags to raw ASCII values, NUL-terminated, as
    :func:`copyright_values` returns them. No IFD1, so no preview.
    """
    entries = sorted(values.items())
    data_start = 8 + 2 + 12 * len(entries) + 4
    table = struct.pack("<H", len(entries))
    data = b""
    for tag, value in entries:
        if len(value) <= 4:
            table += struct.pack("<HHI", tag, ASCII, len(value)) + value.ljust(4, b"\x00")
        else:
            table += struct.pack("<HHII", tag, ASCII, len(value), data_start + len(data))
            data += value + b"\x00" * (len(value) % 2)  # values start on word boundaries
    return EXIF_PREFIX + b"II*\x00" + struct.pack("<I", 8) + table + b"\x00" * 4 + data


def copyright_block(block: bytes) -> bytes | None:
    """The block a result keeps with ``keep_copyright``: None when the source credits nobody."""
    values = copyright_values(block)
    return minimal_block(values) if values else None
