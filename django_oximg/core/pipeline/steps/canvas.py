"""New pixels and the background: ``extend``, ``extend_aspect_ratio``,
``padding``, and alpha flattened.

New pixels take the ``background`` colour, else transparent when the frame
has alpha and white when it has not. Alpha is flattened onto the background
(white by default) for JPEG, and for every format when ``background`` is set.
"""

from __future__ import annotations

from django_oximg.core.options import Gravity
from django_oximg.core.options.geometry import place
from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step

WHITE = (255, 255, 255)


def fill_colour(image: Image, plan: Plan) -> list[float]:
    """Colour of new pixels: the background option, else transparent or white."""
    background = plan.options.background
    if background is not None:
        colour = list(map(float, background))
        return [*colour, 255.0] if image.hasalpha() else colour
    return [*map(float, WHITE), 0.0] if image.hasalpha() else list(map(float, WHITE))


def embed(image: Image, plan: Plan, width: int, height: int, gravity: Gravity) -> Image:
    """The frame on a ``width`` x ``height`` canvas of the fill colour, placed by ``gravity``."""
    left, top = place(width, height, image.width, image.height, gravity, plan.geometry.dpr_scale)
    return image.embed(
        left, top, width, height, extend="background", background=fill_colour(image, plan)
    )


def extend(image: Image, plan: Plan) -> Image:
    """``extend``: put the frame on a canvas of the requested size (``extend_gravity``)."""
    geometry = plan.geometry
    gravity = plan.options.extend_gravity or Gravity()
    return embed(image, plan, geometry.extended_width, geometry.extended_height, gravity)


def extend_aspect_ratio(image: Image, plan: Plan) -> Image:
    """``extend_aspect_ratio``: grow the canvas on one side to the requested aspect ratio."""
    geometry = plan.geometry
    gravity = plan.options.extend_aspect_ratio_gravity or Gravity()
    return embed(image, plan, geometry.canvas_width, geometry.canvas_height, gravity)


def pad(image: Image, plan: Plan) -> Image:
    """``padding``: add a border (already multiplied by the dpr in the plan)."""
    top, right, bottom, left = plan.geometry.padding
    return image.embed(
        left,
        top,
        image.width + left + right,
        image.height + top + bottom,
        extend="background",
        background=fill_colour(image, plan),
    )


def flatten(image: Image, plan: Plan) -> Image:
    """Drop alpha onto the background for JPEG, or whenever ``background`` is set."""
    background = plan.options.background
    if not image.hasalpha() or (plan.format != "jpeg" and background is None):
        return image
    colour = list(map(float, background or WHITE))
    return image.flatten(background=colour).cast("uchar")


def at_extended_size(plan: Plan, frame: Size) -> bool:
    return frame == (plan.geometry.extended_width, plan.geometry.extended_height)


def at_canvas_size(plan: Plan, frame: Size) -> bool:
    return frame == (plan.geometry.canvas_width, plan.geometry.canvas_height)


def no_padding(plan: Plan, frame: Size) -> bool:
    return not any(plan.geometry.padding)


EXTEND = Step(extend, is_noop=at_extended_size)
EXTEND_ASPECT_RATIO = Step(extend_aspect_ratio, is_noop=at_canvas_size)
PAD = Step(pad, is_noop=no_padding)
FLATTEN = Step(flatten, per_pixel=True)
