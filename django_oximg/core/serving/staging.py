"""A miss's work, staged: its source checked, its render planned, its peak memory estimated.

Step 6 of a request (the map: :mod:`django_oximg.core.serving`).

The executor bounds memory by each job's cost, and the cost of a render is
known only once its source is read, its header probed and the render
planned. So a miss is made in two stages
(:meth:`~django_oximg.core.limits.executor.Executor.run_staged`): here, a job's
work (:class:`RenderWork`, :class:`InfoWork`) is *staged* from the source's
bytes and header, refused when the source breaks a limit (a URL may lower
every limit, never raise one), and its cost estimated from the very plan the
render then runs; a worker then reserves that cost and runs it. What staging
hands the worker is one of three named works, each with its ``cost`` and its
``run()``: :class:`StagedRender`, :class:`StagedSummary` (an ``/info``
document with a BlurHash or a dominant colour) and :class:`StagedBytes` (an
answer made already: the source itself, or an ``/info`` document from the
header alone).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from django_oximg.core import defaults, errors, pipeline
from django_oximg.core.limits import source_limits
from django_oximg.core.options import BEST_FORMAT, Options, lowered_limit
from django_oximg.core.pipeline.budget import estimate_peak_bytes
from django_oximg.core.serving import info as info_endpoint

#: Formats that can carry animation.
ANIMATED_FORMATS = frozenset({"webp", "gif"})

#: Formats ``format:best`` may answer any client with (it makes JPEG and PNG,
#: and keeps an animation GIF), whatever its ``Accept``.
BEST_UNIVERSAL_FORMATS = frozenset({"jpeg", "png", "gif"})


class SourceRead(NamedTuple):
    """A source's bytes and its header: read once, shared by the jobs in flight on it."""

    data: bytes
    info: pipeline.SourceInfo


class Limits(NamedTuple):
    """What a source is checked against, and what its work runs with (from the settings).

    ``runtime.limits`` builds it from ``OXIMG`` and hands it to the
    thumbnailer, which passes it on to the maker unchanged; the defaults
    (:mod:`django_oximg.core.defaults`) serve a core built by hand.
    """

    render: pipeline.RenderSettings = pipeline.RenderSettings()
    max_src_resolution: int = defaults.MAX_SRC_RESOLUTION
    max_src_file_size: int = defaults.MAX_SRC_FILE_SIZE
    #: Seconds a render (or an ``/info`` summary) may take once it has started.
    render_timeout: float = defaults.RENDER_TIMEOUT
    #: ``format:best`` serves a source in a format ``skip_processing`` lists
    #: as it is (``FORMAT_BEST_ALLOW_SKIPS``).
    best_allows_skips: bool = defaults.FORMAT_BEST_ALLOW_SKIPS

    def max_frames(self, options: Options) -> int:
        """The most frames an animation is served with (the URL may lower the setting)."""
        return lowered_limit(self.render.max_animation_frames, options.max_animation_frames)

    def frames_to_render(self, info: pipeline.SourceInfo, fmt: str, options: Options) -> int:
        """Every frame of an animation that stays one; else the first alone."""
        if fmt in ANIMATED_FORMATS and 1 < info.frames <= self.max_frames(options):
            return info.frames
        return 1

    def check_file_size(self, data: bytes, options: Options) -> None:
        """The URL's ``max_src_file_size`` (the configured one bounds the read itself)."""
        limit = lowered_limit(self.max_src_file_size, options.max_src_file_size)
        source_limits.check_file_size(len(data), limit)

    def check_resolution(self, info: pipeline.SourceInfo, frames: int, options: Options) -> None:
        """Refuse a source over the resolution limits (the URL may lower them).

        Every rendered frame counts; ``max_animation_frame_resolution``
        limits each frame of an animation as well (imgproxy checks only that
        one then, so a URL could raise the limit: here it only lowers it).
        """
        limit = lowered_limit(self.max_src_resolution, options.max_src_resolution)
        frame_limit = options.max_animation_frame_resolution
        source_limits.check_resolution(info.width, info.height, frames, limit, frame_limit)

    def check_encode_time(self, plan: pipeline.Plan) -> None:
        """Refuse a result whose encoder alone would outlast the render deadline.

        Only the encoders the deadline cannot stop in this process are
        predicted (AVIF, GIF, WebP's alpha: :attr:`pipeline.Plan.encode_seconds`):
        such a render would run in a child process until the deadline killed
        it, every time it was asked for. Refused up front instead: 422, as
        for a result too large.
        """
        if plan.encode_seconds > self.render_timeout:
            geometry = plan.geometry
            raise errors.ResultTooLarge(
                f"a {geometry.width}x{geometry.height} {plan.format} result would take about "
                f"{plan.encode_seconds:.1f} s to encode, more than the render deadline "
                f"of {self.render_timeout:g} s"
            )


# -- what a worker runs ---------------------------------------------------------------


class Made(NamedTuple):
    """What a staged work's ``run()`` gives: the answer's bytes, and how its quality was found."""

    data: bytes
    #: The quality ``autoquality`` chose (sent as ``X-Oximg-Quality``); 0
    #: when none was searched.
    quality: int = 0
    #: The search's method (``size``, ``dssim``); "" when none ran.
    search: str = ""
    #: Encodes the search made.
    search_encodes: int = 0


class StagedRender(NamedTuple):
    """A render checked and planned: its estimated peak memory, and the render of that plan."""

    cost: int
    data: bytes
    plan: pipeline.Plan
    settings: pipeline.RenderSettings
    timeout: float
    #: Told how long the render took, whether it succeeded or not (the metrics).
    observe: Callable[[float], None]

    def run(self) -> Made:
        """Render, stopped at the deadline ``timeout`` seconds from now."""
        started = time.monotonic()
        try:
            rendered = pipeline.render(
                self.data,
                self.plan.options,
                self.plan.format,
                self.settings,
                deadline=started + self.timeout,
                plan=self.plan,
            )
            method = self.plan.search_method
            if not method or not rendered.search_encodes:
                return Made(rendered.data)
            return Made(rendered.data, rendered.quality, method, rendered.search_encodes)
        finally:  # failed and killed renders took their time too
            self.observe(time.monotonic() - started)


class StagedSummary(NamedTuple):
    """An ``/info`` document whose BlurHash or dominant colour needs a tiny thumbnail."""

    cost: int
    source: SourceRead
    request: info_endpoint.InfoRequest
    timeout: float

    def run(self) -> Made:
        """Summarise the source's pixels (stopped at the deadline) into the document."""
        deadline = time.monotonic() + self.timeout
        summary = pipeline.summarise(
            self.source.data,
            self.request.blurhash,
            self.request.dominant_color,
            deadline=deadline,
        )
        return Made(info_endpoint.info_document(self.source.info, len(self.source.data), summary))


class StagedBytes(NamedTuple):
    """An answer made already; what it costs is the memory it holds."""

    cost: int
    data: bytes

    def run(self) -> Made:
        return Made(self.data)


#: What staging a job's work gives (an :class:`~django_oximg.core.limits.executor.Staged`).
Staged = StagedRender | StagedSummary | StagedBytes


# -- what a job makes -----------------------------------------------------------------


@dataclass(frozen=True)
class RenderWork:
    """A thumbnail: the source rendered with ``options`` into ``format``."""

    options: Options
    format: str
    #: ``format:best``: the formats besides JPEG and PNG it may choose
    #: (:func:`~django_oximg.core.serving.negotiation.best_formats`).
    accepted: tuple[str, ...] = ()

    #: Counted among the renders once made (``oximg_renders_total``).
    is_render: ClassVar[bool] = True

    @property
    def needs_worker(self) -> bool:
        """Whether making it decodes pixels, on a render worker: always."""
        return True

    def stage(self, source: SourceRead, limits: Limits, observe: Callable[[float], None]) -> Staged:
        """Check the source, plan the render once and estimate its peak memory from that plan.

        ``observe`` is told how long the render takes once it runs.
        """
        options = self.options
        limits.check_file_size(source.data, options)
        if options.raw or self.skips_processing(source.info, limits):
            return self.stage_unprocessed(source, limits)
        info = source.info
        if options.enforce_thumbnail:
            info = pipeline.embedded_thumbnail(source.data, info)
        # Planned once: the estimate and the render share the plan.
        if self.format == BEST_FORMAT:
            plan = pipeline.plan_best(info, options, self.accepted, limits.render)
            frames = limits.frames_to_render(info, plan.format, options)
            limits.check_resolution(info, frames, options)
        else:
            frames = limits.frames_to_render(info, self.format, options)
            limits.check_resolution(info, frames, options)
            plan = pipeline.plan_render(info, options, self.format, limits.render)
        limits.check_encode_time(plan)
        cost = estimate_peak_bytes(plan, frames, source.data)
        return StagedRender(
            cost, source.data, plan, limits.render, limits.render_timeout, observe=observe
        )

    def skips_processing(self, info: pipeline.SourceInfo, limits: Limits) -> bool:
        """Whether ``skip_processing`` serves this source as it is.

        As imgproxy: when its format is one named, and is the output format.
        An animation with more frames than allowed is rendered instead (as
        its first frame). For ``format:best``, only with
        ``FORMAT_BEST_ALLOW_SKIPS``, and only in a format ``best`` may
        answer this request with (:data:`BEST_UNIVERSAL_FORMATS` or one the
        client accepts).
        """
        found = pipeline.web_format(info)
        if found not in self.options.skip_processing or info.frames > limits.max_frames(
            self.options
        ):
            return False
        if self.format == BEST_FORMAT:
            return limits.best_allows_skips and (
                found in BEST_UNIVERSAL_FORMATS or found in self.accepted
            )
        return found == self.format

    def stage_unprocessed(self, source: SourceRead, limits: Limits) -> StagedBytes:
        """``raw`` and ``skip_processing``: the source's bytes, once checked as
        a render's source is (every frame counted, as the client decodes them all)."""
        info = source.info
        found = pipeline.web_format(info)
        if found != self.format and self.format != BEST_FORMAT:
            raise errors.UnsupportedFormat(
                f"raw: the source is {found or info.format}, its name says {self.format}"
            )
        source_limits.check_frames(info.frames, limits.max_frames(self.options), "raw: ")
        limits.check_resolution(info, info.frames, self.options)
        return StagedBytes(len(source.data), source.data)


@dataclass(frozen=True)
class InfoWork:
    """An ``/info`` document about the source."""

    request: info_endpoint.InfoRequest

    is_render: ClassVar[bool] = False

    @property
    def needs_worker(self) -> bool:
        """Whether making it decodes pixels (a document from the header alone does not)."""
        return self.request.needs_pixels

    def stage(self, source: SourceRead, limits: Limits, observe: Callable[[float], None]) -> Staged:
        """The header answers everything but the BlurHash and dominant colour;
        those come from a tiny shrink-on-load thumbnail, with its own (small)
        memory estimate and the render deadline. (``observe`` times renders only.)"""
        info, data = source.info, source.data
        if not self.request.needs_pixels:
            return StagedBytes(0, info_endpoint.info_document(info, len(data), None))
        limits.check_resolution(info, 1, Options())
        cost = estimate_peak_bytes(pipeline.summary_plan(info, limits.render), 1, data)
        return StagedSummary(cost, source, self.request, limits.render_timeout)


# -- before a source is stored ----------------------------------------------------------

#: The cheapest thumbnail a page can ask of a source: one pixel wide, fitted.
#: Whatever refuses it refuses every thumbnail of the source.
CHEAPEST = Options(width=1)


def check_servable(data: bytes, limits: Limits, memory_budget: int) -> pipeline.SourceInfo:
    """Refuse ``data`` when the server would refuse every thumbnail of it; its header.

    For an upload form: the checks a request makes, in its order, from the
    same functions. Its bytes (``MAX_SRC_FILE_SIZE``); its header, which
    libvips must read with the loaders the server allows (an unreadable file
    is an :class:`~django_oximg.core.errors.InvalidImage`, a blocked or
    unknown format an :class:`~django_oximg.core.errors.UnsupportedFormat`);
    its resolution, counting every frame of an animation that stays one in
    its own format (as the tags ask for it); and the memory estimate of its
    cheapest thumbnail (:data:`CHEAPEST`) against the whole ``memory_budget``.
    The cheapest, so that no source is refused that some thumbnail could
    still be made of: one over the budget even then can never be rendered.
    """
    source_limits.check_file_size(len(data), limits.max_src_file_size)
    info = pipeline.probe(data)
    work = RenderWork(CHEAPEST, pipeline.web_format(info) or "jpeg")
    staged = work.stage(SourceRead(data, info), limits, lambda _seconds: None)
    source_limits.check_memory(staged.cost, memory_budget)
    return info
