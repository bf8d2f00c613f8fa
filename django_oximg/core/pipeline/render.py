"""One render, top to bottom: plan, load, the steps per frame, encode.

Step 7 of a request (the map: :mod:`django_oximg.core.serving`).
"""

from __future__ import annotations

from dataclasses import replace

import pyvips

from django_oximg.core.limits.deadlines import Deadline
from django_oximg.core.options import Options
from django_oximg.core.options.geometry import plan_geometry
from django_oximg.core.pipeline import animation, steps
from django_oximg.core.pipeline.best import encode_best
from django_oximg.core.pipeline.encode import check_format, encode
from django_oximg.core.pipeline.isolated import render_isolated
from django_oximg.core.pipeline.libvips import Image, ensure_configured, failure, watched
from django_oximg.core.pipeline.load import Loaded, load
from django_oximg.core.pipeline.plan import Plan, RenderSettings, plan_render
from django_oximg.core.pipeline.probe import embedded_thumbnail, probe
from django_oximg.core.pipeline.rendered import Rendered
from django_oximg.core.pipeline.steps.trim import trimmed


def render(
    data: bytes,
    options: Options,
    fmt: str,
    settings: RenderSettings,
    *,
    deadline: float | None = None,
    plan: Plan | None = None,
) -> Rendered:
    """Render ``data`` with ``options`` into format ``fmt`` (one of ``CONTENT_TYPES``).

    ``deadline`` is a ``time.monotonic()`` value; libvips is stopped once it
    passes and :class:`~django_oximg.core.errors.ProcessingTimeout` is
    raised. The output size always equals the plan's geometry. ``plan`` is
    :func:`~django_oximg.core.pipeline.plan.plan_render`'s answer for the
    same source, options, format and settings when the caller has it
    already (the thumbnailer plans before admitting a job, for the memory
    estimate): the header is then not read again. A plan that says
    :attr:`~Plan.isolated` is rendered in a child process, which is killed
    at the deadline (:mod:`~django_oximg.core.pipeline.isolated`).
    """
    ensure_configured()
    check_format(fmt)
    if plan is None:
        info = probe(data)
        if options.enforce_thumbnail:
            info = embedded_thumbnail(data, info)
        plan = plan_render(info, options, fmt, settings)
    elif (plan.options, plan.format) != (options, fmt):
        raise ValueError("the plan was made for other options or another format")
    if plan.isolated:
        return render_isolated(data, plan, settings, deadline)
    return render_here(data, plan, settings, deadline)


def render_here(
    data: bytes, plan: Plan, settings: RenderSettings, deadline: float | None
) -> Rendered:
    """:func:`render` in this process: libvips stops at ``deadline``, its encoders may not."""
    with Deadline(deadline) as watch:
        try:
            return render_loaded(load(data, plan, settings), plan, settings, watch)
        except pyvips.Error as error:
            raise failure(error, watch) from error


def render_loaded(
    loaded: Loaded, plan: Plan, settings: RenderSettings, watch: Deadline
) -> Rendered:
    """Everything after the load: trim, the steps per frame, encode.

    Apart from :func:`render_here`, the renders of one source from one
    decode (:mod:`~django_oximg.core.pipeline.batch`) start here with
    pixels they loaded themselves, so both take the same steps after it.
    The caller turns a ``pyvips.Error`` into the project's (:func:`failure`).
    """
    if plan.trims:
        loaded, plan = trim_and_replan(loaded, plan, settings, watch)
    if plan.options.gravity.type == "sm" and plan.smart_crop:
        # The attention crop reads the frame twice: compute it once, watched.
        loaded = Loaded(watched(loaded.image, watch).copy_memory(), True)
    image, frames, frame_height = process_frames(loaded.image, plan)
    if plan.candidates:
        encoded = encode_best(image, plan, settings, watch)
    else:
        encoded = encode(image, plan, settings, watch, loaded.in_memory)
    return Rendered(
        encoded.data,
        encoded.format,
        int(image.width),
        int(frame_height),
        frames,
        encoded.quality,
        encoded.search_encodes,
    )


def trim_and_replan(
    loaded: Loaded, plan: Plan, settings: RenderSettings, watch: Deadline
) -> tuple[Loaded, Plan]:
    """``trim`` the source (loaded whole and upright), and plan the sizes from what is left.

    The trim reads every pixel and the steps read them again: they are
    decoded once, into memory, under the deadline.
    """
    image = trimmed(watched(loaded.image, watch).copy_memory(), plan)
    geometry = plan_geometry(
        image.width,
        image.height,
        plan.options,
        max_result_dimension=settings.max_result_dimension,
    )
    return Loaded(image, True), replace(plan, geometry=geometry)


def process_frames(source: Image, plan: Plan) -> tuple[Image, int, int]:
    """Every frame of ``source`` through the steps; the result, its frames and their height."""
    count, frame_height = animation.frame_layout(source, plan.animated)
    if count > 1 and steps.per_pixel_only(plan, (source.width, frame_height)):
        # One pass over the strip: libvips computes the frames' crops of
        # a lazy strip anew for each frame (about 40 % more CPU for a
        # 12-frame GIF, docs/pipeline.md), and these steps need no crops.
        strip = steps.process_strip(source, plan)
        return animation.animation_strip(strip, frame_height, source), count, frame_height
    frames = [
        steps.process_frame(frame, plan)
        for frame in animation.split_frames(source, count, frame_height)
    ]
    return animation.join_frames(frames, source), count, frames[0].height
