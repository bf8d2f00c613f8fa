"""The demo's own processing option: a sepia tone (docs/extensions.md).

Listed in ``OXIMG["EXTENSIONS"]`` (example/settings.py), it is the URL
option ``sepia``/``sep`` and the tags' keyword ``sepia=0.8``. The step is
the only code here that touches pyvips, through the image it is given.
"""

from __future__ import annotations

from typing import Any

from django_oximg.core.options import Extension, Number

#: The classic sepia tone: each output channel a mix of the input's three.
SEPIA_MATRIX = [
    [0.393, 0.769, 0.189],
    [0.349, 0.686, 0.168],
    [0.272, 0.534, 0.131],
]


def sepia(image: Any, amount: float) -> Any:
    """Tone the frame (8-bit sRGB, maybe with alpha) towards sepia by ``amount`` (0..1)."""
    alpha = image.extract_band(3) if image.bands > 3 else None
    colour = image.extract_band(0, n=3)
    toned = colour * (1 - amount) + colour.recomb(SEPIA_MATRIX) * amount
    return toned if alpha is None else toned.bandjoin(alpha)


SEPIA = Extension(
    names=("sepia", "sep"),
    arguments=Number(0, 1),
    default=0.0,
    step=sepia,
    after="pixelate",
    version="1",
    per_pixel=True,
)
