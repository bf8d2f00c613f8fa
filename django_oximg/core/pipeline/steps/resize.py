"""The resize to the planned scaled size (``width``, ``height``, resizing type, dpr...).

Usually nothing is left to do: the loader already shrank the source to
this size on load. What remains is the ``crop`` path (loaded at full size)
and the last pixel of a rounding.
"""

from __future__ import annotations

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step


def resize_to(image: Image, width: int, height: int) -> Image:
    """Resize to exactly ``width`` x ``height`` (alpha premultiplied, so edges stay clean)."""
    if image.width == width and image.height == height:
        return image
    x_scale, y_scale = width / image.width, height / image.height
    if image.hasalpha():
        resized = image.premultiply().resize(x_scale, vscale=y_scale).unpremultiply()
        resized = resized.cast(image.format)
    else:
        resized = image.resize(x_scale, vscale=y_scale)
    if resized.width != width or resized.height != height:
        # libvips rounds the same way, but guard a 1 px disagreement anyway.
        resized = resized.embed(0, 0, width, height, extend="copy")
    return resized


def resize(image: Image, plan: Plan) -> Image:
    """Resize the frame to the plan's scaled size."""
    return resize_to(image, plan.geometry.scaled_width, plan.geometry.scaled_height)


def at_scaled_size(plan: Plan, frame: Size) -> bool:
    return frame == (plan.geometry.scaled_width, plan.geometry.scaled_height)


RESIZE = Step(resize, is_noop=at_scaled_size)
