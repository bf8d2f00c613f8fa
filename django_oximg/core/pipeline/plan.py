"""The plan of one render, decided once from the header, the options and the settings.

Before any pixel is decoded, :func:`plan_render` settles everything the
request's options and the site's settings decide: the geometry (every size
from the crop to the padded canvas, :mod:`django_oximg.core.options.geometry`),
whether an animation stays animated, whether the smart crop may run, the
output format, the quality to start encoding at and, for the encoders the
render deadline cannot stop once they have started (AVIF, GIF, WebP's
alpha), the effort they run at, their predicted time and whether the render
runs in a child process the deadline can kill (:func:`plan_encoder`). The
thumbnailer makes
the plan once per job and hands it to both the memory estimate
(:mod:`django_oximg.core.pipeline.budget`) and :func:`~django_oximg.core.pipeline.render`,
so the two cannot plan different sizes. The steps read only the plan,
never the settings.

Pure Python: no pixels, no pyvips call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from django_oximg.core import defaults
from django_oximg.core.options import Extension, Options, lowered_limit
from django_oximg.core.options.autoquality import (
    AUTOQUALITY_OFF,
    AutoQualitySettings,
    QualityTarget,
    best_target,
    planned_encodes,
    quality_target,
)
from django_oximg.core.options.geometry import Geometry, plan_geometry
from django_oximg.core.pipeline import encoder
from django_oximg.core.pipeline.probe import SourceInfo

#: Source formats whose frames we keep as an animation.
ANIMATED_SOURCES = frozenset({"gif", "webp"})

#: Output formats that can carry an animation.
ANIMATED_OUTPUTS = frozenset({"gif", "webp"})

#: Quality used when neither the request nor the settings give one.
FALLBACK_QUALITY = 80

#: The high-quality mode decodes at least this many times the target size
#: before its linear-light resize: 2x holds nearly all of the gain, 4x adds
#: 0.2 SSIMULACRA2 for 1.8-3x the CPU (docs/quality.md).
HIGH_QUALITY_MARGIN = 2.0


@dataclass(frozen=True)
class WatermarkImage:
    """The site's watermark image (``WATERMARK``): its bytes, read once per
    process and decoded by each render that lays it, and its size."""

    data: bytes = field(repr=False)
    width: int
    height: int


@dataclass(frozen=True)
class RenderSettings:
    """Site-wide pipeline settings, built once from ``OXIMG`` by the caller.

    Defaults are those of :mod:`django_oximg.core.defaults`; what each one
    does is documented with the setting of the same name (docs/settings.md).
    """

    #: Default quality per output format (``QUALITY``).
    quality: Mapping[str, int] = field(default_factory=lambda: dict(defaults.QUALITY))
    #: Largest output side in pixels; larger requests are clamped.
    max_result_dimension: int = defaults.MAX_RESULT_DIMENSION
    #: More frames than this and only the first frame is used.
    max_animation_frames: int = defaults.MAX_ANIMATION_FRAMES
    #: JPEG sources decode at the smallest DCT scale that still leaves this
    #: many times the target size for the final resize.
    jpeg_shrink_margin: float = defaults.JPEG_SHRINK_MARGIN
    #: JPEG results written progressive rather than baseline.
    jpeg_progressive: bool = defaults.JPEG_PROGRESSIVE
    jpeg_decoder: defaults.JpegDecoder = defaults.JPEG_DECODER
    encoder: defaults.Encoder = defaults.ENCODER
    #: The image the ``watermark`` option lays over results; None: none is set.
    watermark: WatermarkImage | None = None
    #: Multiplies every URL's watermark opacity (imgproxy's ``WATERMARK_OPACITY``).
    watermark_opacity: float = defaults.WATERMARK_OPACITY
    #: "high": resize in linear light (``QUALITY_MODE``); a request's
    #: ``quality_mode`` option wins.
    quality_mode: defaults.QualityMode = defaults.QUALITY_MODE
    #: The site's own options and their steps (``EXTENSIONS``), in the order
    #: their steps run where two follow the same built-in step.
    extensions: tuple[Extension, ...] = ()
    #: ``format:best`` tries lossless formats too for a thumbnail with fewer
    #: than this per cent of its pixels on an edge (``FORMAT_BEST_COMPLEXITY_THRESHOLD``).
    best_complexity_threshold: float = defaults.FORMAT_BEST_COMPLEXITY_THRESHOLD
    #: ``format:best`` encodes one format it picks for a result of more
    #: megapixels than this (``FORMAT_BEST_MAX_RESOLUTION``; 0: no limit).
    best_max_resolution: float = defaults.FORMAT_BEST_MAX_RESOLUTION
    #: The quality searched per image (``AUTOQUALITY``); a URL's ``autoquality`` redefines it.
    autoquality: AutoQualitySettings = AUTOQUALITY_OFF


class Candidate(NamedTuple):
    """One encoding ``format:best`` tries: a format, its quality and effort, lossy or not."""

    format: str
    #: The format's quality (:func:`quality_for`), or the maximum of its
    #: :attr:`target`'s search; unused by lossless encodings.
    quality: int
    #: Palette PNG or lossless WebP, tried only for flat graphics.
    lossless: bool = False
    #: The effort of an encoder in :data:`UNSTOPPABLE_ENCODERS` (None: the others).
    effort: int | None = None
    #: ``autoquality`` by DSSIM: the search for this format's quality (its
    #: own bounds), so that every format is compared at the same look.
    target: QualityTarget | None = None

    @property
    def encodes(self) -> int:
        """The most encodes this candidate makes: its search's, else one."""
        return 1 if self.target is None else planned_encodes(self.target)


@dataclass(frozen=True)
class Plan:
    """What one render will do, decided before any pixel is decoded."""

    #: The source's header (:func:`~django_oximg.core.pipeline.probe`).
    source: SourceInfo
    options: Options
    #: The output format, one of ``CONTENT_TYPES``.
    format: str
    #: Every size the render goes through, in output pixels.
    geometry: Geometry
    #: Whether every frame of an animation is kept (:func:`keeps_animation`).
    animated: bool
    #: The quality the encoder starts at (the ``max_bytes`` loop may go lower).
    quality: int
    #: The high-quality mode: decode at least :data:`HIGH_QUALITY_MARGIN` x
    #: the target, resize to it in linear light (:func:`resizes_in_linear_light`).
    linear_light: bool = False
    #: The watermark to lay over each frame, and its opacity; None for none.
    watermark: WatermarkImage | None = None
    watermark_opacity: float = 0.0
    #: The site's steps this request runs, each with its option's value
    #: (:func:`site_steps`), in the order of ``EXTENSIONS``.
    site_steps: tuple[tuple[Extension, Any], ...] = ()
    #: ``autoquality``: the search the encoder makes between its bounds (and
    #: :attr:`quality` is then its maximum); None: one encode at :attr:`quality`.
    quality_target: QualityTarget | None = None

    @property
    def trims(self) -> bool:
        """Whether ``trim`` runs: not on animations (as in imgproxy), whose
        frames would each lose another border."""
        return self.options.trim_threshold is not None and not self.animated

    @property
    def full_load(self) -> bool:
        """Whether the source is loaded at full size (``crop`` and ``trim``
        work on the source's own pixels, before any scaling)."""
        return self.options.crop is not None or self.trims

    #: Whether the result keeps an alpha channel (the source has one, and
    #: neither JPEG nor a ``background`` flattens it).
    alpha: bool = False
    #: The effort of an encoder in :data:`UNSTOPPABLE_ENCODERS`; None for the others.
    effort: int | None = None
    #: CPU seconds the encoder of an :data:`UNSTOPPABLE_ENCODERS` format is
    #: predicted to take for the whole result (0 for the others).
    encode_seconds: float = 0.0
    #: Whether the render runs in a child process, because its encoder alone
    #: may outlast :data:`IN_PROCESS_ENCODE_SECONDS` with no way to stop it.
    isolated: bool = False
    #: ``format:best``: the encodings tried, the smallest kept (empty: ``format``
    #: alone). ``format`` is the first of them, which the steps see.
    candidates: tuple[Candidate, ...] = ()
    #: ``format:best``: the lossless encodings added when the thumbnail is flat
    #: (:attr:`RenderSettings.best_complexity_threshold`).
    flat_candidates: tuple[Candidate, ...] = ()
    complexity_threshold: float = 0.0
    #: ``format:best`` over ``FORMAT_BEST_MAX_RESOLUTION``: one candidate is
    #: encoded, the first flat one for a flat thumbnail, else the first lossy one.
    picks_one: bool = False

    @property
    def search_method(self) -> str:
        """The method of the quality searches the render makes (``size``, ``dssim``); "" for none.

        ``format:best``'s plan has no target of its own: its candidates carry
        theirs, each a DSSIM search.
        """
        targets = (self.quality_target, *(candidate.target for candidate in self.candidates))
        return next((target.method for target in targets if target is not None), "")

    @property
    def encodes(self) -> int:
        """How many encodings the render may make at most (``max_bytes`` aside).

        ``format:best`` counts every candidate's, each search's in full.
        """
        if not self.candidates:
            return 1 if self.quality_target is None else planned_encodes(self.quality_target)
        counts = [candidate.encodes for candidate in self.candidates + self.flat_candidates]
        return max(counts) if self.picks_one else sum(counts)

    @property
    def smart_crop(self) -> bool:
        """Whether ``sm`` gravity may ask for the attention crop.

        Not for animations: each frame would be cut at a different place.
        """
        return not self.animated

    @property
    def load_size(self) -> tuple[int, int]:
        """The size the loader makes: the scaled size, before the ``rotate`` option turns it."""
        width, height = self.geometry.scaled_width, self.geometry.scaled_height
        if self.options.rotate % 180 == 90:
            return height, width
        return width, height


def plan_render(info: SourceInfo, options: Options, fmt: str, settings: RenderSettings) -> Plan:
    """The plan for rendering the source ``info`` describes with ``options`` into ``fmt``."""
    geometry = plan_geometry(
        info.width,
        info.height,
        options,
        orientation=info.orientation,
        max_result_dimension=settings.max_result_dimension,
    )
    watermark = settings.watermark if options.watermark.opacity else None
    animated = keeps_animation(info, fmt, settings, options)
    frames = info.frames if animated else 1
    alpha = info.has_alpha and fmt != "jpeg" and options.background is None
    pixels = geometry.width * geometry.height
    effort, seconds, isolated = plan_encoder(fmt, pixels, frames, alpha)
    target = None if animated else quality_target(options, fmt, settings.autoquality, pixels)
    if target is not None:
        # The encodes of the search run one after another.
        seconds *= planned_encodes(target)
    return Plan(
        source=info,
        options=options,
        format=fmt,
        geometry=geometry,
        animated=animated,
        quality=quality_for(fmt, options, settings) if target is None else target.max_quality,
        watermark=watermark,
        watermark_opacity=options.watermark.opacity * settings.watermark_opacity,
        alpha=alpha,
        effort=effort,
        encode_seconds=seconds,
        isolated=isolated,
        linear_light=resizes_in_linear_light(options, animated, settings),
        site_steps=site_steps(options, settings),
        quality_target=target,
    )


def site_steps(options: Options, settings: RenderSettings) -> tuple[tuple[Extension, Any], ...]:
    """The extensions ``options`` give, each with its value read back from the request's text.

    An option no configured extension owns (options built for another
    configuration) is a ValueError: rendering without its effect would
    store wrong bytes under its key.
    """
    if not options.extensions:
        return ()
    given = dict(options.extensions)
    found = tuple(
        (extension, extension.value(given.pop(extension.short)))
        for extension in settings.extensions
        if extension.short in given
    )
    if given:
        raise ValueError(f"no extension for the options {', '.join(sorted(given))}")
    return found


class EncodeRate(NamedTuple):
    """How long an encoder the deadline cannot stop takes at one effort, in CPU seconds."""

    effort: int
    #: Seconds for a result, whatever its size (set-up, palette search).
    fixed: float
    #: Seconds per pixel of a still result, or of an animation's first frame.
    per_pixel: float
    #: Seconds per pixel of each further frame (None: as the first). libvips'
    #: GIF saver reuses the first frame's palette work for the others.
    per_pixel_next: float | None = None

    def seconds(self, frame_pixels: int, frames: int = 1) -> float:
        following = self.per_pixel if self.per_pixel_next is None else self.per_pixel_next
        return (
            self.fixed
            + self.per_pixel * frame_pixels
            + following * frame_pixels * max(frames - 1, 0)
        )


class UnstoppableEncoder(NamedTuple):
    """An encoder the deadline cannot stop: its two efforts, and the cost of alpha."""

    #: For results small enough to afford it.
    slow: EncodeRate
    #: The fastest effort, for every larger result.
    fast: EncodeRate
    #: How much longer a result with an alpha channel takes.
    alpha_factor: float = 1.0


#: Encoders (or parts of them) that libvips' kill flag, the render deadline,
#: cannot stop once they have their pixels: libheif's AV1 encoder (aom) for
#: AVIF; libvips' GIF quantiser and ditherer (for an animation, each
#: frame's); libwebp's compression of an alpha channel, and a little of the
#: rest of a WebP. The rates are CPU time, the worst measured on the
#: reference machine (on noise, or for GIF a photo encoded after an AVIF in
#: the same process, which made it 4x slower; photos alone take a half to a
#: quarter) by ``bench/encoders.py rates``; docs/security.md has the table.
#: AVIF at effort 0 takes a quarter to a fifth of effort 2's CPU but, on
#: real photos at thumbnail sizes, 14-23 % more bytes for effort 2's
#: SSIMULACRA2; effort 1 half the CPU for 4-7 % more bytes
#: (``bench/avif_effort.py``, docs/pipeline.md): so effort 2 wherever the
#: deadline affords it, 0 only where it must. GIF is always encoded at effort 1: libvips'
#: default, 7, took 13-23 us a pixel, a second for a 256x256 thumbnail, for
#: a file about 15 % smaller.
GIF_RATE = EncodeRate(1, 0.03, 1.8e-6, per_pixel_next=0.4e-6)
WEBP_RATE = EncodeRate(encoder.WEBP_EFFORT, 0.0, 0.05e-6)  # one effort, core/pipeline/encoder.py's
UNSTOPPABLE_ENCODERS = {
    "avif": UnstoppableEncoder(
        EncodeRate(2, 0.01, 0.6e-6), EncodeRate(0, 0.01, 0.125e-6), alpha_factor=1.7
    ),
    "gif": UnstoppableEncoder(GIF_RATE, GIF_RATE),
    "webp": UnstoppableEncoder(WEBP_RATE, WEBP_RATE, alpha_factor=3.0),
}

#: The longest an unstoppable encoder may run in the server process, in
#: predicted CPU seconds. The slower effort is used while the whole result is
#: predicted to take no longer than this, and a render whose encoder may take
#: longer for one frame runs in a child process, which the deadline can kill
#: (:mod:`~django_oximg.core.pipeline.isolated`). So a render overruns its
#: deadline by at most this much CPU time (a busy machine stretches it: the
#: promise is less than a second).
IN_PROCESS_ENCODE_SECONDS = 0.25


def plan_encoder(
    fmt: str, frame_pixels: int, frames: int = 1, alpha: bool = False
) -> tuple[int | None, float, bool]:
    """The effort, the predicted CPU seconds and whether to isolate, for ``fmt``.

    ``frame_pixels`` is one output frame's, ``frames`` the frames encoded,
    ``alpha`` whether the result keeps an alpha channel. Formats whose
    savers the deadline stops (JPEG, PNG) have no effort here, take no
    time that cannot be stopped and are never isolated.
    """
    encoder = UNSTOPPABLE_ENCODERS.get(fmt)
    if encoder is None:
        return None, 0.0, False
    factor = encoder.alpha_factor if alpha else 1.0

    def seconds(rate: EncodeRate, count: int) -> float:
        return rate.seconds(frame_pixels, count) * factor

    slow = seconds(encoder.slow, frames) <= IN_PROCESS_ENCODE_SECONDS
    rate = encoder.slow if slow else encoder.fast
    isolated = seconds(rate, 1) > IN_PROCESS_ENCODE_SECONDS
    return rate.effort, seconds(rate, frames), isolated


def keeps_animation(info: SourceInfo, fmt: str, settings: RenderSettings, options: Options) -> bool:
    """Animated GIF/WebP into GIF/WebP stays animated, within the frame limit
    (the URL's ``max_animation_frames`` may lower it)."""
    requested = options.max_animation_frames
    return (
        info.frames > 1
        and info.format in ANIMATED_SOURCES
        and fmt in ANIMATED_OUTPUTS
        and info.frames <= lowered_limit(settings.max_animation_frames, requested)
    )


def quality_for(fmt: str, options: Options, settings: RenderSettings) -> int:
    """Quality: the request's, else its per-format one, else the site default."""
    if options.quality:
        return options.quality
    per_format = dict(options.format_quality)
    if per_format.get(fmt):
        return per_format[fmt]
    return settings.quality.get(fmt) or FALLBACK_QUALITY


def resizes_in_linear_light(options: Options, animated: bool, settings: RenderSettings) -> bool:
    """The high-quality mode: the request's ``quality_mode``, else the site's.

    Not for animations: each of their frames would pay the cost again.
    """
    return (options.quality_mode or settings.quality_mode) == "high" and not animated


#: Lossy formats ``format:best`` tries when the client accepts them, in the
#: order that wins a tie; JPEG (or PNG, for a result with alpha) always follows.
BEST_LOSSY_FORMATS = ("avif", "webp")

#: Lossless WebP (at the effort :mod:`~django_oximg.core.pipeline.best` uses)
#: took up to this many times lossy WebP's time per pixel: 4 x on a gradient,
#: 10 x on a photo; palette PNG is stopped by the deadline.
LOSSLESS_WEBP_FACTOR = 10.0


def plan_best(
    info: SourceInfo, options: Options, accepted: tuple[str, ...], settings: RenderSettings
) -> Plan:
    """The plan of ``format:best``: the encodings to try, of formats in ``accepted`` or universal.

    ``accepted`` are the formats the client's ``Accept`` names (of
    :data:`BEST_LOSSY_FORMATS`). An animation that stays one is never made a
    still: animated WebP when accepted, else GIF, one encoding. Otherwise
    each accepted lossy format, then JPEG, or PNG when the result keeps an
    alpha channel JPEG cannot carry; and, for a flat thumbnail (decided on
    its pixels), palette PNG and lossless WebP. Each lossy format is encoded
    at its quality, or, when ``autoquality`` asks for DSSIM, at the quality
    its search finds within the format's own bounds
    (:func:`~django_oximg.core.options.autoquality.quality_target`): the
    formats are then compared at the same look. A result of more than
    :attr:`RenderSettings.best_max_resolution` megapixels is encoded once,
    in the format that usually wins (:func:`picked`). The plan's ``format``
    is the first candidate, which the steps see (none of them flattens
    alpha unless it is JPEG); its encoder's time is the sum of every
    encode's, and it runs in a child process when any one encoder alone may
    outlast :data:`IN_PROCESS_ENCODE_SECONDS`.
    """
    if keeps_animation(info, "gif", settings, options):
        return plan_render(info, options, "webp" if "webp" in accepted else "gif", settings)
    alpha = info.has_alpha and options.background is None
    formats = [fmt for fmt in BEST_LOSSY_FORMATS if fmt in accepted]
    formats.append("png" if alpha else "jpeg")
    plan = plan_render(info, options, formats[0], settings)
    pixels = plan.geometry.width * plan.geometry.height
    limit = settings.best_max_resolution
    picks_one = bool(limit) and pixels > limit * 1_000_000

    def candidate(fmt: str, lossless: bool = False) -> Candidate:
        effort, _, _ = plan_encoder(fmt, pixels, 1, plan.alpha)
        target = None if lossless else best_target(options, fmt, settings.autoquality, pixels)
        if target is None:
            return Candidate(fmt, quality_for(fmt, options, settings), lossless, effort)
        return Candidate(fmt, target.max_quality, lossless, effort, target)

    lossy = tuple(candidate(fmt) for fmt in formats)
    flat: tuple[Candidate, ...] = (candidate("png", True),)
    if "webp" in accepted:
        flat += (candidate("webp", True),)
    if picks_one:
        lossy, flat = picked(lossy, flat)
    seconds, isolated = encode_time(lossy + flat, pixels, plan.alpha, picks_one)
    return replace(
        plan,
        # Each candidate carries its own search; the plan's is the first format's alone.
        quality_target=None,
        quality=lossy[0].quality,
        candidates=lossy,
        flat_candidates=flat,
        complexity_threshold=settings.best_complexity_threshold,
        picks_one=picks_one,
        encode_seconds=seconds,
        isolated=isolated,
    )


def picked(
    lossy: tuple[Candidate, ...], flat: tuple[Candidate, ...]
) -> tuple[tuple[Candidate, ...], tuple[Candidate, ...]]:
    """The one lossy and the one flat candidate ``format:best`` encodes over its resolution limit.

    WebP when the client accepts it, else the first of the others: at
    ``QUALITY``'s defaults WebP was the smallest for 10 of 14 photos and
    lossless WebP for every drawn image (docs/BENCHMARKS.md), and it
    encodes in a fraction of AVIF's time. Lossless WebP, else palette PNG.
    """
    webp = [candidate for candidate in lossy if candidate.format == "webp"]
    return (webp[0] if webp else lossy[0],), (flat[-1],)


def encode_time(
    candidates: tuple[Candidate, ...], pixels: int, alpha: bool, picks_one: bool
) -> tuple[float, bool]:
    """The predicted encoder seconds of ``candidates`` and whether any one needs a child process.

    A candidate's search runs its encodes one after another. When
    ``picks_one``, only the slowest of them runs.
    """
    times, isolated = [], False
    for candidate in candidates:
        _, took, alone = plan_encoder(candidate.format, pixels, 1, alpha)
        if candidate.lossless and candidate.format == "webp":
            took *= LOSSLESS_WEBP_FACTOR
            alone = took > IN_PROCESS_ENCODE_SECONDS
        times.append(took * candidate.encodes)
        isolated = isolated or alone
    return (max(times) if picks_one else sum(times)), isolated
