"""Tests for the EXIF block ``keep_copyright`` writes (core/exif.py).

Blocks are read back by Pillow's own EXIF parser, an independent reader.
"""

from __future__ import annotations

import struct

import pytest
from PIL import Image as PILImage

from django_oximg.core import exif

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


def tiff_block(order: str, entries: list[tuple[int, int, bytes]], prefix: bool = True) -> bytes:
    """An EXIF block with one IFD of ``(tag, type, value)`` entries, in byte ``order``."""
    mark = {"<": b"II", ">": b"MM"}[order]
    data_start = 8 + 2 + 12 * len(entries) + 4
    table, data = struct.pack(order + "H", len(entries)), b""
    for tag, kind, value in entries:
        if len(value) <= 4:
            table += struct.pack(order + "HHI", tag, kind, len(value)) + value.ljust(4, b"\0")
        else:
            table += struct.pack(order + "HHII", tag, kind, len(value), data_start + len(data))
            data += value
    tiff = mark + struct.pack(order + "HI", 42, 8) + table + b"\0" * 4 + data
    return (exif.EXIF_PREFIX if prefix else b"") + tiff


MAKE = 0x010F


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("order", ["<", ">"])
def test_reads_artist_and_copyright_only(order: str, prefix: bool) -> None:
    block = tiff_block(
        order,
        [
            (MAKE, exif.ASCII, b"Camera Maker\0"),
            (exif.ARTIST, exif.ASCII, b"Jo\0"),
            (exif.COPYRIGHT, exif.ASCII, b"(c) Jane \xc3\xa9\0Editor\0"),
        ],
        prefix,
    )
    assert exif.copyright_values(block) == {
        exif.ARTIST: b"Jo\0",
        exif.COPYRIGHT: b"(c) Jane \xc3\xa9\0Editor\0",
    }


def test_blank_and_mistyped_values_are_not_kept() -> None:
    block = tiff_block(
        "<", [(exif.ARTIST, exif.ASCII, b" " * 32 + b"\0"), (exif.COPYRIGHT, 7, b"ACME\0")]
    )
    assert exif.copyright_values(block) == {}
    assert exif.copyright_block(block) is None


def test_a_value_without_its_nul_gets_one() -> None:
    block = tiff_block("<", [(exif.ARTIST, exif.ASCII, b"Jane Doe")])
    assert exif.copyright_values(block) == {exif.ARTIST: b"Jane Doe\0"}


GOOD = tiff_block("<", [(exif.ARTIST, exif.ASCII, b"Jane Doe\0")])


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"Exif\0\0",
        b"XX*\0\x08\0\0\0",  # no byte order
        GOOD[:20],  # cut inside the entry
        GOOD[:-4],  # the value runs past the end
        b"II*\0" + struct.pack("<I", 10_000),  # IFD past the end
    ],
    ids=["empty", "prefix only", "bad order", "cut entry", "cut value", "ifd out of range"],
)
def test_malformed_blocks_read_as_no_credit(block: bytes) -> None:
    assert exif.copyright_values(block) == {}


def test_the_block_holds_the_two_tags_and_nothing_else() -> None:
    values = {exif.ARTIST: b"Jane Doe\0", exif.COPYRIGHT: b"AC\0"}
    block = exif.minimal_block(values)
    read = PILImage.Exif()
    read.load(block)
    assert dict(read) == {exif.ARTIST: "Jane Doe", exif.COPYRIGHT: "AC"}
    assert exif.copyright_values(block) == values  # and it reads back byte for byte
    assert len(block) < 100
