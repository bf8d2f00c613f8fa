"""One argument's text, read and written: numbers, booleans, formats, colours, gravities.

Each kind of argument is read (checked, into the value :class:`~.model.Options`
holds) and written back (its canonical text) here, side by side, so that the
text a canonical path holds always reads back to the value it was written
from. Reading is strict: a value imgproxy would silently ignore would still
make a distinct cache key, so anything malformed or out of range is an
:class:`~django_oximg.core.errors.InvalidOptions` naming the option.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar
from urllib.parse import quote

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options.model import (
    GRAVITY_TYPES,
    MAX_DIMENSION,
    MAX_DPR,
    MAX_MEGAPIXELS,
    MAX_SIGMA,
    Gravity,
)

#: Accepted format names (URL extension, ``format``, ``format_quality``) and the
#: name each one means.
FORMAT_NAMES = {
    "jpg": "jpeg",
    "jpeg": "jpeg",
    "png": "png",
    "webp": "webp",
    "avif": "avif",
    "gif": "gif",
}

#: Go's strconv.ParseBool, which is what imgproxy uses.
BOOLEANS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}

# Numbers are matched before conversion because int() and float() also accept
# whitespace, "_", non-ASCII digits, "inf" and "nan", and int() refuses more than
# 4300 digits with a ValueError. The length caps keep every match in range.
INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,18}")
REAL_TEXT = re.compile(
    r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,3})?"
)
_HEX_COLOR = re.compile(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")

#: File names written as they are in ``fn``; any other is base64-encoded.
_PLAIN_FILENAME = re.compile(r"[A-Za-z0-9._~-]+")

#: Largest count, size in bytes or timestamp a URL may give.
MAX_COUNT = 10**18

#: Largest ``rot`` angle read (any multiple of 90 is folded into 0..270).
MAX_ANGLE = 10**9


# -- errors ---------------------------------------------------------------------


def shown(value: str) -> str:
    """``value`` made safe to echo in a response body: short, printable ASCII."""
    text = "".join(c if " " <= c <= "~" and c not in "<>&\"'\\" else "?" for c in value[:64])
    return text + "..." if len(value) > 64 else text


def invalid(option: str, value: str, why: str = "invalid value") -> InvalidOptions:
    """The error for a bad ``value`` of ``option``; the public text names both."""
    return InvalidOptions(
        detail=f"{option}: {why}: {value[:200]!r}",
        public=f"Invalid {option}: {shown(value)}",
    )


def invalid_source(why: str) -> InvalidOptions:
    return InvalidOptions(detail=f"source: {why}", public="Invalid source URL")


# -- reading --------------------------------------------------------------------


def one_argument(option: str, args: list[str]) -> str:
    """The one argument of an option that takes exactly one."""
    if len(args) != 1:
        raise invalid(option, ":".join(args), "takes one argument")
    return args[0]


def integer(option: str, text: str, low: int, high: int) -> int:
    if INTEGER_TEXT.fullmatch(text) is None:
        raise invalid(option, text, "not an integer")
    value = int(text)
    if not low <= value <= high:
        raise invalid(option, text, f"not in {low}..{high}")
    return value


def real(option: str, text: str, low: float, high: float, *, above_low: bool = False) -> float:
    """A finite float in ``low..high`` (``low`` itself excluded when ``above_low``)."""
    if REAL_TEXT.fullmatch(text) is None:
        raise invalid(option, text, "not a number")
    value = float(text)
    if not low <= value <= high or (above_low and value == low):
        raise invalid(option, text, f"not in {low}..{high}")
    return value


def dimension(option: str, text: str) -> int:
    return integer(option, text, 0, MAX_DIMENSION)


def boolean(option: str, text: str) -> bool:
    value = BOOLEANS.get(text)
    if value is None:
        raise invalid(option, text, "not a boolean")
    return value


def format_name(option: str, text: str) -> str:
    name = FORMAT_NAMES.get(text)
    if name is None:
        raise invalid(option, text, "unsupported format")
    return name


#: The output format that is chosen per image (imgproxy's ``best``): the
#: smallest encoding of the formats the client accepts.
BEST_FORMAT = "best"


def output_format_name(option: str, text: str) -> str:
    """An output format (``format``, the extension): a format name, or ``best``."""
    return BEST_FORMAT if text == BEST_FORMAT else format_name(option, text)


def gravity(option: str, args: list[str], current: Gravity, *, allow_smart: bool) -> Gravity:
    """Parse ``%type:%x:%y``: offsets not given, or given empty, keep ``current``'s.

    imgproxy keeps offsets left out too, but refuses an empty one
    (``g:no::5``); here an empty offset is skipped, as an empty argument of
    every other option is. A focus point needs both of its coordinates.
    """
    kind = args[0]
    if kind not in GRAVITY_TYPES or (kind == "sm" and not allow_smart):
        raise invalid(option, kind, "unknown gravity type")
    if kind == "sm":
        if len(args) > 1:
            raise invalid(option, ":".join(args), "smart gravity takes no offsets")
        return Gravity("sm")
    if kind == "fp":
        if len(args) != 3:
            raise invalid(option, ":".join(args), "focus point needs x and y")
        return Gravity("fp", real(option, args[1], 0.0, 1.0), real(option, args[2], 0.0, 1.0))
    if len(args) > 3:
        raise invalid(option, ":".join(args), "too many arguments")
    x, y = current.x, current.y
    if len(args) > 1 and args[1]:
        x = real(option, args[1], -MAX_DIMENSION, MAX_DIMENSION)
    if len(args) > 2 and args[2]:
        y = real(option, args[2], -MAX_DIMENSION, MAX_DIMENSION)
    return Gravity(kind, x, y)


def hex_color(text: str, option: str = "background") -> tuple[int, int, int]:
    if _HEX_COLOR.fullmatch(text) is None:
        raise invalid(option, text, "not RRGGBB or RGB hex")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    return (int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16))


def base64url_text(text: str) -> str | None:
    """URL-safe base64 (padding optional) of UTF-8 text, or None."""
    text = text.rstrip("=")
    if _BASE64URL.fullmatch(text) is None or len(text) % 4 == 1:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def base64_text(text: str, option: str) -> str:
    decoded = base64url_text(text)
    if decoded is None:
        raise invalid(option, text, "not URL-safe base64 of UTF-8 text")
    return decoded


def base64url(text: str) -> str:
    """``text`` (UTF-8) as URL-safe base64 without padding: what :func:`base64url_text` reads."""
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


# -- writing --------------------------------------------------------------------


def number(value: float) -> str:
    """The shortest text that parses back to exactly ``value``."""
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def flag(value: bool) -> str:
    return "1" if value else "0"


def gravity_text(gravity: Gravity) -> str:
    if gravity.type == "sm":
        return "sm"
    if gravity.type != "fp" and gravity.x == 0 and gravity.y == 0:
        return gravity.type
    return f"{gravity.type}:{number(gravity.x)}:{number(gravity.y)}"


def color_text(color: tuple[int, int, int]) -> str:
    return "".join(f"{channel:02x}" for channel in color)


def megapixels_text(pixels: int) -> str:
    """Megapixels that parse back (as imgproxy parses them, truncating) to ``pixels``."""
    candidate = pixels / 1_000_000
    while int(candidate * 1_000_000) < pixels:
        candidate = math.nextafter(candidate, math.inf)
    return number(candidate)


def filename_text(name: str) -> str:
    """``fn``'s arguments: the name as it is when that is safe, else its base64 and ``1``."""
    if _PLAIN_FILENAME.fullmatch(name):
        return name
    return f"{base64url(name)}:1"


def trailing_defaults_dropped(args: list[str], defaults: list[str]) -> str:
    """``args`` joined, without the trailing ones that equal their default (one stays)."""
    while len(args) > 1 and args[-1] == defaults[len(args) - 1]:
        args.pop()
    return ":".join(args)


# -- kinds: the reading and the writing of one argument, as a pair ----------------

T = TypeVar("T")


class Kind(NamedTuple, Generic[T]):
    """One kind of single argument: how its text is read and how its value is written.

    ``read(option, text)`` checks the text and returns the value, naming
    ``option`` in its error; ``write(value)`` gives the canonical text,
    which ``read`` turns back into exactly ``value``.
    """

    read: Callable[[str, str], T]
    write: Callable[[T], str]


def choice(values: tuple[str, ...], why: str) -> Kind[str]:
    """One of ``values``, written as it is; anything else is refused saying ``why``."""

    def read(option: str, text: str) -> str:
        if text not in values:
            raise invalid(option, text, why)
        return text

    return Kind(read, str)


def _megapixels(option: str, text: str) -> int:
    """A resolution in megapixels (a real number), kept as pixels."""
    return int(real(option, text, 0.0, MAX_MEGAPIXELS) * 1_000_000)


def _rotation(option: str, text: str) -> int:
    """A multiple of 90, kept clockwise in 0..270."""
    angle = integer(option, text, -MAX_ANGLE, MAX_ANGLE)
    if angle % 90:
        raise invalid(option, text, "not a multiple of 90")
    return angle % 360


def _verbatim(option: str, text: str) -> str:
    return text


def _escaped(text: str) -> str:
    """Text percent-encoded whole, so no "/" or ":" of it splits the path."""
    return quote(text, safe="")


DIMENSION: Kind[int] = Kind(dimension, str)
BOOLEAN: Kind[bool] = Kind(boolean, flag)
DPR: Kind[float] = Kind(
    lambda option, text: real(option, text, 0.0, MAX_DPR, above_low=True), number
)
SIGMA: Kind[float] = Kind(lambda option, text: real(option, text, 0.0, MAX_SIGMA), number)
QUALITY: Kind[int] = Kind(lambda option, text: integer(option, text, 0, 100), str)
#: A whole number from 0 up (a count, a size in bytes, a timestamp).
COUNT: Kind[int] = Kind(lambda option, text: integer(option, text, 0, MAX_COUNT), str)
MEGAPIXELS: Kind[int] = Kind(_megapixels, megapixels_text)
ROTATION: Kind[int] = Kind(_rotation, str)
FORMAT: Kind[str] = Kind(output_format_name, str)
TEXT: Kind[str] = Kind(_verbatim, _escaped)
