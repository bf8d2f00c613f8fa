"""The per-frame steps, in the order they run: each ``(image, plan) -> image``.

A still image is one frame; an animation's frames each go through them
(or, when :func:`per_pixel_only` allows, its whole strip through the
per-pixel ones). Which file makes which option's pixels:

* ``rotate``, ``flip_horizontal``, ``flip_vertical``: :mod:`.orient`
* ``crop``, ``gravity`` (and the crop of ``fill`` and friends): :mod:`.crop`
* ``width``, ``height``, ``dpr``, ``enlarge``...: :mod:`.resize` (most of
  the shrinking happens on load, :mod:`django_oximg.core.pipeline.load`)
* colour to sRGB, ``strip_color_profile``: :mod:`.colour`
* ``blur``, ``sharpen``: :mod:`.filters`
* ``pixelate``: :mod:`.pixelate`
* ``extend``, ``extend_aspect_ratio``, ``padding``, ``background`` and
  alpha: :mod:`.canvas`
* ``watermark``: :mod:`.watermark`

``zoom`` needs no step of its own: it changes the planned sizes only.
``trim`` (:mod:`.trim`) runs before these, on the source at full size: what
it leaves is what the geometry is planned from, so the render plans again.
A site's own steps (``OXIMG["EXTENSIONS"]``, :mod:`.site`) run right after
the step each names, for the requests that give their options.
"""

from __future__ import annotations

from collections.abc import Iterable

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.canvas import EXTEND, EXTEND_ASPECT_RATIO, FLATTEN, PAD
from django_oximg.core.pipeline.steps.colour import TO_SRGB
from django_oximg.core.pipeline.steps.crop import CROP, CROP_TO_RESULT
from django_oximg.core.pipeline.steps.filters import BLUR, SHARPEN
from django_oximg.core.pipeline.steps.orient import ROTATE_AND_FLIP
from django_oximg.core.pipeline.steps.pixelate import PIXELATE
from django_oximg.core.pipeline.steps.resize import RESIZE
from django_oximg.core.pipeline.steps.site import placed
from django_oximg.core.pipeline.steps.step import Size, Step
from django_oximg.core.pipeline.steps.watermark import WATERMARK

#: Every per-frame step, in order (imgproxy's order, and sorl-thumbnail's
#: idea of a fixed one), by the name a site's step is placed after
#: (:data:`django_oximg.core.options.extensions.STEP_NAMES`).
NAMED_STEPS: tuple[tuple[str, Step], ...] = (
    ("rotate", ROTATE_AND_FLIP),
    ("crop", CROP),
    ("resize", RESIZE),
    ("colour", TO_SRGB),
    ("crop_to_box", CROP_TO_RESULT),
    ("blur", BLUR),
    ("sharpen", SHARPEN),
    ("pixelate", PIXELATE),
    ("extend", EXTEND),
    ("extend_aspect_ratio", EXTEND_ASPECT_RATIO),
    ("padding", PAD),
    ("flatten", FLATTEN),
    ("watermark", WATERMARK),
)

#: The built-in steps alone, in order.
STEPS: tuple[Step, ...] = tuple(step for _, step in NAMED_STEPS)


def steps_for(plan: Plan) -> tuple[Step, ...]:
    """The steps of ``plan``: the built-in ones, with the site's it gives in their places."""
    return tuple(placed(NAMED_STEPS, plan)) if plan.site_steps else STEPS


def process_frame(image: Image, plan: Plan) -> Image:
    """Every step in order."""
    return run_steps(image, plan, steps_for(plan))


def run_steps(image: Image, plan: Plan, chosen: Iterable[Step]) -> Image:
    """``chosen`` steps in order, the image's size read again only when one changed it.

    Most steps have nothing to do for a given request, and each read of the
    size is a libvips property fetch.
    """
    size = (image.width, image.height)
    for step in chosen:
        stepped = step(image, plan, size)
        if stepped is not image:
            image, size = stepped, (stepped.width, stepped.height)
    return image


def per_pixel_only(plan: Plan, frame: Size) -> bool:
    """Whether every step that would change a frame of this size works pixel by pixel.

    Then they can run once over a whole animation strip instead of frame by
    frame (:func:`process_strip`): the same pixels, without libvips computing
    each frame's crop of the lazily loaded strip anew. Derived from what
    each step declares, so a new step is counted without being listed here.
    """
    return all(step.per_pixel or step.is_noop(plan, frame) for step in steps_for(plan))


def process_strip(image: Image, plan: Plan) -> Image:
    """The per-pixel steps, in order, over a strip of frames (see :func:`per_pixel_only`)."""
    return run_steps(image, plan, (step for step in steps_for(plan) if step.per_pixel))
