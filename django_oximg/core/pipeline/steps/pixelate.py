"""``pixelate``: the frame as blocks of one colour, ``pixelate`` output pixels wide.

As imgproxy does it: the frame is mirrored out to a whole number of blocks,
each block is averaged (``shrink``) and blown up again (``zoom``), and the
frame is cut back to its size, so blocks start at the top-left corner and
those on the right and bottom edges are averaged over mirrored pixels.
"""

from __future__ import annotations

import math

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step


def block_size(plan: Plan, frame: Size) -> int:
    """The block side for this frame: never more than its longer side."""
    return min(plan.options.pixelate, max(frame))


def pixelate(image: Image, plan: Plan) -> Image:
    size = block_size(plan, (image.width, image.height))
    width, height = image.width, image.height
    padded = (math.ceil(width / size) * size, math.ceil(height / size) * size)
    if padded != (width, height):
        image = image.embed(0, 0, *padded, extend="mirror")
    blocks = image.shrink(size, size).zoom(size, size)
    return blocks.crop(0, 0, width, height) if padded != (width, height) else blocks


def no_blocks(plan: Plan, frame: Size) -> bool:
    return block_size(plan, frame) <= 1


PIXELATE = Step(pixelate, is_noop=no_blocks)
