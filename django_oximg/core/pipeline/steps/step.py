"""What a per-frame step is: a function of ``(image, plan)``, and what it says about itself.

Each step declares when it has nothing to do (:attr:`Step.is_noop`, asked
before it runs, so the declaration cannot drift from the behaviour) and
whether it works on each pixel alone (:attr:`Step.per_pixel`). From those
two, :func:`~django_oximg.core.pipeline.steps.per_pixel_only` tells when an
animation's frames may be processed as one strip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan

#: A frame's width and height.
Size = tuple[int, int]


def never(plan: Plan, frame: Size) -> bool:
    """For steps that decide for themselves, pixel by pixel, whether to change anything."""
    return False


class Step(NamedTuple):
    """One per-frame step of the pipeline."""

    #: The work: ``(image, plan) -> image``. It reads the plan, never settings.
    run: Callable[[Image, Plan], Image]
    #: Whether the step leaves a frame of this size as it is under this plan;
    #: then :meth:`__call__` returns the frame without running the step.
    is_noop: Callable[[Plan, Size], bool] = never
    #: Whether each output pixel comes from the input pixel at the same place
    #: alone: the step then gives the same pixels over a strip of frames as
    #: frame by frame.
    per_pixel: bool = False

    def __call__(self, image: Image, plan: Plan, size: Size | None = None) -> Image:
        """The step applied to ``image``, or ``image`` itself when it is a no-op.

        ``size`` is the image's size when the caller knows it already: each
        read of it is a libvips property fetch (five C calls, each releasing
        and taking back the GIL).
        """
        if self.is_noop(plan, size or (image.width, image.height)):
            return image
        return self.run(image, plan)
