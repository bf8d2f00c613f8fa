"""Colour to 8-bit sRGB, and ``strip_color_profile``."""

from __future__ import annotations

import pyvips

from django_oximg.core.pipeline.libvips import ICC_FIELD, Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Step


def srgb(image: Image, strip_profile: bool) -> Image:
    """``image`` as 8-bit sRGB (alpha kept) from any colour space and depth.

    With ``strip_profile`` an embedded profile is applied and dropped; a
    broken profile is ignored rather than failing the request. Without it,
    an RGB image keeps its profile (the encoder embeds it).
    """
    has_profile = bool(image.get_typeof(ICC_FIELD))
    if not has_profile and image.format == "uchar" and image.interpretation == "srgb":
        return image  # the common case, asked in as few libvips calls as possible
    if image.interpretation == "cmyk":
        image = image.icc_transform("srgb", input_profile="cmyk", embedded=True, depth=8)
    elif has_profile and (strip_profile or image.interpretation != "srgb"):
        try:
            image = image.icc_transform("srgb", embedded=True, intent="perceptual", depth=8)
        except pyvips.Error:
            image = image.copy()
            image.remove(ICC_FIELD)
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
    if image.format != "uchar":
        image = image.cast("uchar")
    if strip_profile and image.get_typeof(ICC_FIELD):
        image = image.copy()
        image.remove(ICC_FIELD)
    return image


def to_srgb(image: Image, plan: Plan) -> Image:
    """Make the frame 8-bit sRGB; ``strip_color_profile`` drops its profile."""
    return srgb(image, plan.options.strip_color_profile)


TO_SRGB = Step(to_srgb, per_pixel=True)
