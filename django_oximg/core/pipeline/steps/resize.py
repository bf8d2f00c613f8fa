"""The resize to the planned scaled size (``width``, ``height``, resizing type, dpr...).

Usually nothing is left to do: the loader already shrank the source to
this size on load. What remains is the ``crop`` path (loaded at full size),
the last pixel of a rounding, and the high-quality mode
(:attr:`~django_oximg.core.pipeline.plan.Plan.linear_light`), whose loader
stops at least twice the target size so that the whole reduction happens
here, in linear light.
"""

from __future__ import annotations

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Size, Step

#: Interpretations whose 8-bit values resize in linear light (sRGB's transfer
#: curve, which greyscale JPEG and PNG share).
LINEAR_LIGHT_INTERPRETATIONS = frozenset({"srgb", "b-w"})


def resize_to(image: Image, width: int, height: int, linear: bool = False) -> Image:
    """Resize to exactly ``width`` x ``height`` (alpha premultiplied, so edges stay clean).

    ``linear``: in linear light where :func:`resizes_linearly` allows.
    """
    source_width, source_height = image.width, image.height  # a libvips call each
    if source_width == width and source_height == height:
        return image
    x_scale, y_scale = width / source_width, height / source_height
    if linear and resizes_linearly(image):
        resized = linear_light_resize(image, x_scale, y_scale)
    elif image.hasalpha():
        resized = image.premultiply().resize(x_scale, vscale=y_scale).unpremultiply()
        resized = resized.cast(image.format)
    else:
        resized = image.resize(x_scale, vscale=y_scale)
    if resized.width != width or resized.height != height:
        # libvips rounds the same way, but guard a 1 px disagreement anyway.
        resized = resized.embed(0, 0, width, height, extend="copy")
    return resized


def resizes_linearly(image: Image) -> bool:
    """8-bit sRGB or grey without alpha: a photo, the case the mode is for.

    Anything else (alpha, 16-bit, CMYK, Lab) is resized as in the standard
    mode: premultiplied alpha in linear light, and the other spaces'
    transfer curves, would each need their own path for no measured gain.
    """
    return (
        image.format == "uchar"
        and image.interpretation in LINEAR_LIGHT_INTERPRETATIONS
        and not image.hasalpha()
    )


def linear_light_resize(image: Image, x_scale: float, y_scale: float) -> Image:
    """Lanczos3 over linear light (scRGB floats), every source pixel weighed in, back to 8 bits.

    Resizing sRGB values darkens fine contrasty detail (foliage against sky,
    ripples): the mean of two encoded values is darker than the encoded mean
    of their light. ``gap=0`` turns off libvips' box pre-shrink, so the
    kernel sees every decoded pixel; the loader already left only 2-4x.
    """
    linear = image.colourspace("scrgb")
    resized = linear.resize(x_scale, vscale=y_scale, kernel="lanczos3", gap=0.0)
    return resized.colourspace(image.interpretation).cast("uchar")


def resize(image: Image, plan: Plan) -> Image:
    """Resize the frame to the plan's scaled size (in linear light in the high-quality mode)."""
    geometry = plan.geometry
    return resize_to(image, geometry.scaled_width, geometry.scaled_height, plan.linear_light)


def at_scaled_size(plan: Plan, frame: Size) -> bool:
    return frame == (plan.geometry.scaled_width, plan.geometry.scaled_height)


RESIZE = Step(resize, is_noop=at_scaled_size)
