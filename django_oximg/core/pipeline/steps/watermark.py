"""``watermark``: the site's watermark image laid over each frame, last of all.

As imgproxy lays it: the image (``WATERMARK``, in the plan) is taken
upright, as 8-bit sRGB with alpha; with a ``scale`` it is fitted (enlarged
if need be) into that share of the frame's size; its alpha is multiplied by
the opacity (the URL's times ``WATERMARK_OPACITY``); then it goes where the
position says, its offsets times the dpr like gravity offsets, and may stick
out of the frame. ``re`` tiles it over the whole frame from the centre, the
offsets then being the spacing between copies, at most :data:`MAX_COPIES`
each way.
"""

from __future__ import annotations

import math

import pyvips

from django_oximg.core.options import Gravity, Options
from django_oximg.core.options.geometry import place, plan_geometry, scale_size_to_even
from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.colour import srgb
from django_oximg.core.pipeline.steps.resize import resize_to
from django_oximg.core.pipeline.steps.step import Size, Step

#: The most copies of a ``re`` watermark laid across, and down, a frame (odd,
#: so one sits in the middle): 16129 in all. A mark that, with its spacing,
#: is smaller than 1/127 of the frame (a URL's tiny ``scale``, which fits it
#: into a pixel) is enlarged to that, so the tiling's work stays bounded; a
#: 2 px mark would otherwise be millions of copies on a large result. Any
#: mark of 1/127 of the frame or more is tiled as it is.
MAX_COPIES = 127


def decoded(plan: Plan) -> Image:
    """The watermark image as 8-bit sRGB with alpha, upright (first frame only)."""
    assert plan.watermark is not None
    image = pyvips.Image.new_from_buffer(plan.watermark.data, "", access="random").autorot()
    image = srgb(image, strip_profile=True)
    return image if image.hasalpha() else image.bandjoin(255)


def fitted(mark: Image, plan: Plan, frame: Size) -> Image:
    """``mark`` fitted into ``scale`` times the frame's size (enlarged if smaller)."""
    scale = plan.options.watermark.scale
    if not scale:
        return mark
    box = Options(
        width=max(scale_size_to_even(frame[0], scale), 1),
        height=max(scale_size_to_even(frame[1], scale), 1),
        enlarge=True,
    )
    size = plan_geometry(mark.width, mark.height, box, max_result_dimension=0)
    return resize_to(mark, size.width, size.height)


def spacing(offset: float, size: int, dpr_scale: float) -> int:
    """A ``re`` offset in pixels: absolute (times the dpr) when >= 1, else a share of ``size``."""
    if abs(offset) >= 1:
        return max(0, round(offset * dpr_scale))
    return max(0, scale_size_to_even(size, offset))


def tiled(mark: Image, plan: Plan, frame: Size) -> Image:
    """``mark`` with its spacing, repeated over the frame from its centre."""
    options, dpr_scale = plan.options.watermark, plan.geometry.dpr_scale
    space_x = spacing(options.x, frame[0], dpr_scale)
    space_y = spacing(options.y, frame[1], dpr_scale)
    mark = enlarged_for_tiling(mark, frame, space_x, space_y)
    if space_x or space_y:
        mark = mark.embed(
            space_x // 2,
            space_y // 2,
            mark.width + space_x,
            mark.height + space_y,
            extend="background",
            background=[0, 0, 0, 0],
        )
    across = -(-frame[0] // mark.width) | 1  # odd, so one copy sits in the middle
    down = -(-frame[1] // mark.height) | 1
    tiles = mark.replicate(across, down)
    return tiles.crop((tiles.width - frame[0]) // 2, (tiles.height - frame[1]) // 2, *frame)


def enlarged_for_tiling(mark: Image, frame: Size, space_x: int, space_y: int) -> Image:
    """``mark``, enlarged if need be so that, with its spacing, at most MAX_COPIES fit each way."""
    factor = max(
        (frame[0] / MAX_COPIES - space_x) / mark.width,
        (frame[1] / MAX_COPIES - space_y) / mark.height,
    )
    if factor <= 1:
        return mark
    return resize_to(mark, math.ceil(mark.width * factor), math.ceil(mark.height * factor))


def lay_watermark(image: Image, plan: Plan) -> Image:
    frame = (image.width, image.height)
    options = plan.options.watermark
    mark = fitted(decoded(plan), plan, frame)
    if options.position == "re":
        mark, left, top = tiled(mark, plan, frame), 0, 0
    else:
        gravity = Gravity(options.position, options.x, options.y)
        left, top = place(
            *frame, mark.width, mark.height, gravity, plan.geometry.dpr_scale, overflow=True
        )
    alpha = mark.extract_band(mark.bands - 1) * plan.watermark_opacity
    mark = mark.extract_band(0, n=mark.bands - 1).bandjoin(alpha)
    laid = image.composite2(mark, "over", x=left, y=top, compositing_space="srgb")
    laid = laid.cast(image.format)
    return laid if image.hasalpha() else laid.extract_band(0, n=laid.bands - 1)


def no_watermark(plan: Plan, frame: Size) -> bool:
    return plan.watermark is None or plan.watermark_opacity <= 0


WATERMARK = Step(lay_watermark, is_noop=no_watermark)
