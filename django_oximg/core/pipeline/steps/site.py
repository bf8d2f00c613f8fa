"""A site's own steps (``OXIMG["EXTENSIONS"]``), placed among the built-in ones.

A site writes its step as ``(image, value) -> image``
(:class:`~django_oximg.core.options.Extension`); here it becomes a
:class:`~.step.Step` like the others, run right after the built-in step it
names, only for a request that gives its option (the plan lists those,
:attr:`~django_oximg.core.pipeline.plan.Plan.site_steps`). Its frame is
8-bit sRGB; what it gives back is held to the promise every step keeps:
the frame's size and bands (the tags printed that size, the encoder
expects those bands), and its band format, which a site's arithmetic
often leaves as floats, is cast back.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pyvips

from django_oximg.core.options import Extension
from django_oximg.core.pipeline.libvips import Image
from django_oximg.core.pipeline.plan import Plan
from django_oximg.core.pipeline.steps.step import Step


def run_site_step(extension: Extension, value: Any, image: Image, plan: Plan) -> Image:
    """``extension``'s step with ``value`` over ``image``, checked and cast back."""
    stepped = extension.step(image, value)
    if not isinstance(stepped, pyvips.Image):
        raise TypeError(f"extension {extension.name}: its step returned {type(stepped).__name__}")
    before = (image.width, image.height, image.bands)
    after = (stepped.width, stepped.height, stepped.bands)
    if after != before:
        raise ValueError(
            f"extension {extension.name}: its step made a {after} frame (width, height, "
            f"bands) of a {before} one; a step keeps the frame's size and bands"
        )
    return stepped if stepped.format == image.format else stepped.cast(image.format)


def site_step(extension: Extension, value: Any) -> Step:
    """A step running ``extension`` with ``value`` (no no-op: the plan lists given ones only)."""
    return Step(partial(run_site_step, extension, value), per_pixel=extension.per_pixel)


def placed(named: tuple[tuple[str, Step], ...], plan: Plan) -> Iterator[Step]:
    """The ``named`` built-in steps in order, each followed by the site's steps placed after it."""
    for name, step in named:
        yield step
        for extension, value in plan.site_steps:
            if extension.after == name:
                yield site_step(extension, value)
