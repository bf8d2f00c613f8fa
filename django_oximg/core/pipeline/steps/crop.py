"""``crop`` (a region of the source, before scaling) and the crop to the requested box.

Both cut where the gravity says; ``sm`` gravity asks libvips for the most
interesting region (attention strategy: edges, skin tones, saturated
colour) when the plan allows the smart crop.
"""

from __future__ import annotations

from django_oximg.core.options import Gravity
from django_oximg.core.options.geometry import place
from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step


def crop_region(
    image: Image, width: int, height: int, gravity: Gravity, offset_scale: float, smart: bool
) -> Image:
    """Cut ``width`` x ``height`` out of ``image`` where ``gravity`` says."""
    width, height = min(width, image.width), min(height, image.height)
    if width == image.width and height == image.height:
        return image
    if gravity.type == "sm" and smart:
        return image.smartcrop(width, height, interesting="attention")
    left, top = place(image.width, image.height, width, height, gravity, offset_scale)
    return image.crop(left, top, width, height)


def crop_source(image: Image, plan: Plan) -> Image:
    """``crop``: cut the region before scaling (offsets are source pixels).

    Its own gravity (``crop``'s third argument) wins over ``gravity``.
    """
    crop = plan.options.crop
    assert crop is not None
    gravity = crop.gravity or plan.options.gravity
    geometry = plan.geometry
    return crop_region(
        image, geometry.crop_width, geometry.crop_height, gravity, 1.0, plan.smart_crop
    )


def crop_to_result(image: Image, plan: Plan) -> Image:
    """Crop the scaled frame to the requested box (``fill``, ``fill-down``, min sizes).

    ``gravity`` places the box; its pixel offsets are multiplied by the dpr.
    """
    geometry = plan.geometry
    return crop_region(
        image,
        geometry.result_width,
        geometry.result_height,
        plan.options.gravity,
        geometry.dpr_scale,
        plan.smart_crop,
    )


def no_crop(plan: Plan, frame: Size) -> bool:
    return plan.options.crop is None


def at_result_size(plan: Plan, frame: Size) -> bool:
    return frame == (plan.geometry.result_width, plan.geometry.result_height)


CROP = Step(crop_source, is_noop=no_crop)
CROP_TO_RESULT = Step(crop_to_result, is_noop=at_result_size)
