"""Text from a request, made safe to write into a log line.

A URL can carry any character once percent-decoded: a line break would let
it forge a log line of its own, a terminal escape sequence would act on
whoever reads the log in a terminal. Every log line that quotes something
from a request (a path, a source name, an error's detail built from them)
passes it through :func:`printable` first.

Pure Python: no Django, no pyvips.
"""

from __future__ import annotations

#: Characters kept as they are: printable ASCII except the backslash, which
#: starts the escapes below (so an escape in the log cannot be faked either).
KEPT = frozenset(chr(code) for code in range(0x20, 0x7F)) - {"\\"}


def printable(value: object, limit: int = 300) -> str:
    """``value`` as text on one line of printable ASCII, at most about ``limit`` characters.

    Everything else is written as a Python escape (``\\n``, ``\\x1b``,
    ``\\u2028``, ``\\\\``), so nothing is lost and nothing acts; text longer
    than ``limit`` is cut and ends with "...".
    """
    text = str(value)
    cut = len(text) > limit
    text = text[:limit]
    escaped = "".join(
        char if char in KEPT else char.encode("unicode_escape").decode("ascii") for char in text
    )
    return escaped + "..." if cut else escaped
