"""Extensions as a site writes them, for the tests to list in ``OXIMG["EXTENSIONS"]``.

Module-level functions only, as docs/extensions.md asks: an isolated
render's child process imports this module to run them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django_oximg.core.options import Arguments, Extension, Number

#: The classic sepia tone: each output channel a mix of the input's three.
SEPIA_MATRIX = [
    [0.393, 0.769, 0.189],
    [0.349, 0.686, 0.168],
    [0.272, 0.534, 0.131],
]


def colour_and_alpha(image: Any) -> tuple[Any, Any]:
    """The three colour bands, and the alpha band (or None)."""
    alpha = image.extract_band(3) if image.bands > 3 else None
    return image.extract_band(0, n=3), alpha


def with_alpha(colour: Any, alpha: Any) -> Any:
    return colour if alpha is None else colour.bandjoin(alpha)


def sepia(image: Any, amount: float) -> Any:
    """Tone the frame towards sepia by ``amount`` (floats: the pipeline casts them back)."""
    colour, alpha = colour_and_alpha(image)
    toned = colour.recomb(SEPIA_MATRIX)
    return with_alpha(colour * (1 - amount) + toned * amount, alpha)


SEPIA = Extension(
    names=("sepia", "sep"),
    arguments=Number(0, 1),
    default=0.0,
    step=sepia,
    after="pixelate",
    version="1",
    per_pixel=True,
)

#: The same step under another version: what a site writes when it changes the code.
SEPIA_V2 = SEPIA._replace(version="2")

HEX = re.compile(r"[0-9a-fA-F]{6}")


def read_tint(args: Sequence[str]) -> tuple[str, float]:
    """``tint:RRGGBB:strength``: two arguments, the colour written in lower case."""
    if len(args) != 2 or HEX.fullmatch(args[0]) is None:
        raise ValueError("takes RRGGBB:strength")
    return args[0].lower(), Number(0, 1).read(args[1:])


def write_tint(value: tuple[str, float]) -> Sequence[str]:
    colour, strength = value
    return (colour, *Number(0, 1).write(strength))


def tint(image: Any, value: tuple[str, float]) -> Any:
    """Mix the frame with a colour."""
    colour_text, strength = value
    colour, alpha = colour_and_alpha(image)
    rgb = [int(colour_text[i : i + 2], 16) for i in (0, 2, 4)]
    return with_alpha(colour * (1 - strength) + [c * strength for c in rgb], alpha)


TINT = Extension(
    names=("tint",),
    arguments=Arguments(read_tint, write_tint),
    default=("000000", 0.0),
    step=tint,
    after="colour",
    version="1",
    per_pixel=True,
)

#: Sepia again, placed after the tint (both after ``colour``).
SEPIA_AFTER_COLOUR = SEPIA._replace(after="colour")


def grow(image: Any, amount: float) -> Any:
    """A step that breaks the promise: one more column."""
    return image.embed(0, 0, image.width + 1, image.height)


GROW = Extension(("grow",), Number(0, 1), 0.0, grow, "pixelate", "1")

# -- what oximg.E030 refuses ---------------------------------------------------------

NOT_AN_EXTENSION = {"names": ("sepia",)}

#: A lambda cannot be pickled for an isolated render's child process.
LAMBDA_STEP = SEPIA._replace(names=("lambda_step",), step=lambda image, value: image)

#: ``blur`` is imgproxy's.
TAKEN_NAME = SEPIA._replace(names=("blur_more", "blur"))

#: ``upscale`` is a keyword of the tags.
TAG_KEYWORD = SEPIA._replace(names=("upscale", "ups"))

#: Before ``colour`` the frame may be CMYK or 16-bit.
TOO_EARLY = SEPIA._replace(names=("early",), after="resize")


def read_tenths(args: Sequence[str]) -> float:
    return round(Number(0, 1).read(args), 1)


def write_hundredths(value: float) -> Sequence[str]:
    return (f"{value:.2f}",)


#: Its default, 0.25, is written "0.25" and reads back as 0.2.
ROUNDING = Extension(
    ("rounding",), Arguments(read_tenths, write_hundredths), 0.25, sepia, "pixelate", "1"
)
