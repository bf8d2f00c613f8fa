"""Quality per byte: the arithmetic and the tables of bench/quality.py, pure functions only.

A contender's quality sweep gives points (bytes, score), one per quality
setting. Two numbers are read off that curve at another contender's size:

- :func:`score_at_bytes`: its score at a given byte size ("matched bytes"),
- :func:`bytes_at_score`: the bytes it needs for a given score ("matched look").

Both interpolate linearly in log(bytes) between the two neighbouring
points, as codec comparisons (BD-rate) do: bytes grow roughly
exponentially with the score over a quality sweep. A target outside the
sweep gives NaN rather than an extrapolation.

No pyvips, no Django, nothing read from disk: tests/test_bench.py tests it.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

#: (bytes, score) of one encoded output.
Point = tuple[float, float]


def parse_qualities(text: str) -> list[int]:
    """``"40,50,60"`` or a range ``"40..95:5"`` (first..last:step, last included)."""
    if ".." not in text:
        return sorted({int(part) for part in text.split(",") if part})
    span, _, step = text.partition(":")
    first, last = (int(part) for part in span.split(".."))
    return list(range(first, last + 1, int(step or 1)))


def score_at_bytes(points: Iterable[Point], target: float) -> float:
    """The score at ``target`` bytes, linear in log(bytes) between the neighbouring points."""
    ordered = sorted(points)
    for (b0, s0), (b1, s1) in itertools.pairwise(ordered):
        if b0 <= target <= b1:
            if b1 == b0:
                return max(s0, s1)
            t = (math.log(target) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return s0 + t * (s1 - s0)
    if len(ordered) == 1 and ordered[0][0] == target:
        return ordered[0][1]
    return math.nan


def bytes_at_score(points: Iterable[Point], target: float) -> float:
    """The fewest bytes reaching ``target`` on the curve, linear in log(bytes) between points.

    Points are taken in order of size; the first segment whose scores
    bracket ``target`` answers, so a curve that is not monotonic (a
    quality step that costs bytes and buys nothing) gives its cheapest way
    to the score.
    """
    ordered = sorted(points)
    for (b0, s0), (b1, s1) in itertools.pairwise(ordered):
        if min(s0, s1) <= target <= max(s0, s1):
            if s1 == s0:
                return b0
            t = (target - s0) / (s1 - s0)
            return math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
    if len(ordered) == 1 and ordered[0][1] == target:
        return ordered[0][0]
    return math.nan


def median(values: Iterable[float]) -> float:
    """Median of the values that are numbers (NaN, an off-curve target, left out)."""
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


def worst(values: Mapping[str, float]) -> tuple[str, float]:
    """The key with the lowest value (NaN left out), or ("", NaN) when there is none."""
    kept = {key: value for key, value in values.items() if not math.isnan(value)}
    if not kept:
        return "", math.nan
    key = min(kept, key=lambda name: (kept[name], name))
    return key, kept[key]


def percent_change(new: float, old: float) -> float:
    """``new`` against ``old`` in per cent (negative: smaller)."""
    if math.isnan(new) or math.isnan(old) or old == 0:
        return math.nan
    return 100.0 * (new / old - 1.0)


def number(value: float, digits: int = 1, signed: bool = False) -> str:
    """A table cell: ``value`` rounded, "-" for NaN."""
    if math.isnan(value):
        return "-"
    rounded = round(value, digits) or 0.0  # no "-0.0"
    return f"{rounded:+.{digits}f}" if signed and rounded else f"{rounded:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub/MkDocs Markdown table; numeric-looking columns are right-aligned."""
    rows = [list(row) for row in rows]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row has {len(row)} cells, header {len(header)}: {row}")

    def numeric(column: int) -> bool:
        cells = [row[column] for row in rows if row[column] not in ("-", "")]
        return bool(cells) and all(_is_number(cell) for cell in cells)

    aligns = ["---:" if numeric(i) else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _is_number(cell: str) -> bool:
    try:
        float(cell.rstrip("%").replace(" ", ""))
    except ValueError:
        return False
    return True
