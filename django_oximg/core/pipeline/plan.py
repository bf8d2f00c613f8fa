"""The plan of one render, decided once from the header, the options and the settings.

Before any pixel is decoded, :func:`plan_render` settles everything the
request's options and the site's settings decide: the geometry (every size
from the crop to the padded canvas, :mod:`django_oximg.core.geometry`),
whether an animation stays animated, whether the smart crop may run, the
output format and the quality to start encoding at. The thumbnailer makes
the plan once per job and hands it to both the memory estimate
(:mod:`django_oximg.core.budget`) and :func:`~django_oximg.core.pipeline.render`,
so the two cannot plan different sizes. The steps read only the plan,
never the settings.

Pure Python: no pixels, no pyvips call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django_oximg.core import defaults
from django_oximg.core.geometry import Geometry, plan_geometry
from django_oximg.core.options import Options, lowered_limit
from django_oximg.core.pipeline.probe import SourceInfo

#: Source formats whose frames we keep as an animation.
ANIMATED_SOURCES = frozenset({"gif", "webp"})

#: Output formats that can carry an animation.
ANIMATED_OUTPUTS = frozenset({"gif", "webp"})

#: Quality used when neither the request nor the settings give one.
FALLBACK_QUALITY = 80


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
    #: libvips AVIF encoder effort (0 fastest .. 9 slowest); see docs/pipeline.md.
    avif_effort: int = 2
    #: JPEG sources decode at the smallest DCT scale that still leaves this
    #: many times the target size for the final resize.
    jpeg_shrink_margin: float = defaults.JPEG_SHRINK_MARGIN
    jpeg_decoder: defaults.JpegDecoder = defaults.JPEG_DECODER
    encoder: defaults.Encoder = defaults.ENCODER
    #: The image the ``watermark`` option lays over results; None: none is set.
    watermark: WatermarkImage | None = None
    #: Multiplies every URL's watermark opacity (imgproxy's ``WATERMARK_OPACITY``).
    watermark_opacity: float = defaults.WATERMARK_OPACITY


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
    #: The watermark to lay over each frame, and its opacity; None for none.
    watermark: WatermarkImage | None = None
    watermark_opacity: float = 0.0

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
    return Plan(
        source=info,
        options=options,
        format=fmt,
        geometry=geometry,
        animated=keeps_animation(info, fmt, settings, options),
        quality=quality_for(fmt, options, settings),
        watermark=watermark,
        watermark_opacity=options.watermark.opacity * settings.watermark_opacity,
    )


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
