"""``rotate``, ``flip_horizontal`` and ``flip_vertical``.

EXIF orientation is not here: the loader applies it (``auto_rotate``).
"""

from __future__ import annotations

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step

#: libvips' names for clockwise quarter turns.
TURNS = {90: "d90", 180: "d180", 270: "d270"}


def rotate_and_flip(image: Image, plan: Plan) -> Image:
    """Apply ``rotate`` (clockwise quarter turns), then ``flip_horizontal``/``flip_vertical``."""
    options = plan.options
    if options.rotate % 360 in TURNS:
        image = image.rot(TURNS[options.rotate % 360])
    if options.flip_horizontal:
        image = image.fliphor()
    if options.flip_vertical:
        image = image.flipver()
    return image


def no_turn_or_flip(plan: Plan, frame: Size) -> bool:
    options = plan.options
    return options.rotate % 360 == 0 and not options.flip_horizontal and not options.flip_vertical


ROTATE_AND_FLIP = Step(rotate_and_flip, is_noop=no_turn_or_flip)
