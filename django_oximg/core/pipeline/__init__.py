"""The image pipeline: pyvips only, no Django, no settings.

The only part of the core that imports pyvips (importing it initialises
libvips).
Like imgproxy's ``processing/``, it is a list of small steps run over a
plan computed once. A render walks these modules, top to bottom:

==================  ========================================================
``libvips``         set-up once per process (:func:`configure`): cache off,
                    untrusted loaders blocked; versions, savers, and the one
                    place libvips' errors become the project's
``probe``           the source's header, no pixels: :class:`SourceInfo`
``plan``            the :class:`Plan`: geometry, animation, quality, from the
                    header, the options and the :class:`RenderSettings`
``load``            the pixels, shrunk on load (libvips or libjpeg-turbo), or
                    whole for ``crop``
``steps``           per frame, a short module per group of options:
                    rotate/flip, crop, resize, colour, crop to the box,
                    blur, sharpen, extend, padding, flatten
``animation``       an animation's frames split from the strip, joined back
``best``            ``format:best``: the thumbnail in each candidate format,
                    the smallest kept
``encode``          metadata kept, quality, libvips' savers or Pillow, and
                    the ``max_bytes`` loop
``render``          :func:`render`: the walk itself
``rendered``        :class:`Rendered`, what the walk (here or in a child
                    process) answers
``summary``         the ``/info`` endpoint's BlurHash and dominant colour
==================  ========================================================

Render deadlines are enforced by :mod:`django_oximg.core.limits.deadlines`' watchdog
through libvips' kill flag. Sizes come from :mod:`django_oximg.core.options.geometry`,
so the output is exactly the size the template tag predicted.
"""

from __future__ import annotations

from django_oximg.core.pipeline.animation import MIN_FRAME_DELAY_MS
from django_oximg.core.pipeline.encode import CONTENT_TYPES
from django_oximg.core.pipeline.libvips import (
    SAVERS,
    check_libvips_version,
    configure,
    libvips_version,
    saver_available,
)
from django_oximg.core.pipeline.load import LIBVIPS_SHRINK_MARGIN
from django_oximg.core.pipeline.plan import (
    FALLBACK_QUALITY,
    Plan,
    RenderSettings,
    WatermarkImage,
    plan_best,
    plan_render,
)
from django_oximg.core.pipeline.probe import (
    SourceInfo,
    check_complete,
    embedded_thumbnail,
    probe,
    web_format,
)
from django_oximg.core.pipeline.render import render
from django_oximg.core.pipeline.rendered import Rendered
from django_oximg.core.pipeline.summary import SUMMARY_SIZE, Summary, summarise, summary_plan

__all__ = [
    "CONTENT_TYPES",
    "FALLBACK_QUALITY",
    "LIBVIPS_SHRINK_MARGIN",
    "MIN_FRAME_DELAY_MS",
    "SAVERS",
    "SUMMARY_SIZE",
    "Plan",
    "RenderSettings",
    "Rendered",
    "SourceInfo",
    "Summary",
    "WatermarkImage",
    "check_complete",
    "check_libvips_version",
    "configure",
    "embedded_thumbnail",
    "libvips_version",
    "plan_best",
    "plan_render",
    "probe",
    "render",
    "saver_available",
    "summarise",
    "summary_plan",
    "web_format",
]
