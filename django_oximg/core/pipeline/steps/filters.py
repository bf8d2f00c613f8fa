"""``blur`` and ``sharpen``: each output pixel mixes its neighbours'."""

from __future__ import annotations

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step


def blur(image: Image, plan: Plan) -> Image:
    """``blur``: Gaussian blur with the given sigma."""
    return image.gaussblur(plan.options.blur)


def sharpen(image: Image, plan: Plan) -> Image:
    """``sharpen``: unsharp mask with the given sigma (libvips ``sharpen``)."""
    return image.sharpen(sigma=plan.options.sharpen).colourspace("srgb").cast("uchar")


def no_blur(plan: Plan, frame: Size) -> bool:
    return plan.options.blur <= 0


def no_sharpen(plan: Plan, frame: Size) -> bool:
    return plan.options.sharpen <= 0


BLUR = Step(blur, is_noop=no_blur)
SHARPEN = Step(sharpen, is_noop=no_sharpen)
