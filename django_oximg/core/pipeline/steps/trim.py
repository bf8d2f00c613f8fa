"""``trim``: cut away a border of one colour, before anything else happens.

Unlike the other steps this one changes the size everything after it is
planned from, so it is not in :data:`~django_oximg.core.pipeline.steps.STEPS`:
:func:`~django_oximg.core.pipeline.render.render` runs it on the source at
full size and plans the geometry again from what is left. As imgproxy
trims: the border colour is the option's, else the top-left pixel's; pixels
closer to it than the threshold (on 8-bit sRGB, alpha flattened onto
magenta so that transparency counts as a colour) are border; the equal
flags make the left and right (top and bottom) cuts the smaller of the two;
when nothing would be left, nothing is cut.
"""

from __future__ import annotations

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.colour import srgb

#: What transparent pixels are flattened onto before the border is looked for.
MAGENTA = [255.0, 0.0, 255.0]


def equal_sides(start: int, length: int, total: int) -> tuple[int, int]:
    """``start``/``length`` of a kept span, widened so both margins are the smaller one."""
    end_margin = total - start - length
    if end_margin > start:
        return start, length + end_margin - start
    return end_margin, length + start - end_margin


def trim_box(image: Image, plan: Plan) -> tuple[int, int, int, int]:
    """Left, top, width and height of what the trim keeps of ``image``."""
    options = plan.options
    probe = srgb(image, strip_profile=True)
    if probe.hasalpha():
        probe = probe.flatten(background=MAGENTA)
    colour = options.trim_color
    background = list(map(float, colour)) if colour else probe.getpoint(0, 0)[:3]
    assert options.trim_threshold is not None
    left, top, width, height = probe.find_trim(
        threshold=options.trim_threshold, background=background
    )
    if options.trim_equal_horizontal:
        left, width = equal_sides(left, width, image.width)
    if options.trim_equal_vertical:
        top, height = equal_sides(top, height, image.height)
    return left, top, width, height


def trimmed(image: Image, plan: Plan) -> Image:
    """``image`` without its border; as it is when the border would be everything."""
    left, top, width, height = trim_box(image, plan)
    if width <= 0 or height <= 0:
        return image
    return image.crop(left, top, width, height)
