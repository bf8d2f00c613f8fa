"""Durations and sizes as operators type them: ``30d``, ``12h``, ``5G``.

The parsers are argparse ``type=`` functions: their ArgumentTypeError
becomes "argument --older-than: bad duration ..." on the command line.
"""

from __future__ import annotations

import re
from argparse import ArgumentTypeError

#: Seconds per duration unit.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

#: Bytes per size unit: binary multiples, as ``du -h`` and nginx's ``max_size`` count.
SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}

DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")
SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?")


def parse_duration(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``90m``, ``1d12h``; raise ArgumentTypeError otherwise."""
    compact = text.strip().lower()
    parts = DURATION_PART.findall(compact)
    if not parts or "".join(number + unit for number, unit in parts) != compact:
        raise ArgumentTypeError(f"bad duration {text!r}: use e.g. 30d, 12h, 90m, 45s or 1d12h")
    return sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)


def parse_size(text: str) -> int:
    """Bytes in ``5G``, ``500M``, ``1.5GiB``, ``1024``; raise ArgumentTypeError otherwise."""
    match = SIZE.fullmatch(text.strip().lower())
    if match is None:
        raise ArgumentTypeError(f"bad size {text!r}: use e.g. 5G, 500M, 64K or a number of bytes")
    return int(float(match[1]) * SIZE_UNITS[match[2]])


def format_size(size: int) -> str:
    """``size`` bytes in the largest binary unit that keeps it at 1 or more."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
