"""What ``autoquality`` asks of one render: the site's settings, a URL's, one format's bounds.

imgproxy's ``IMGPROXY_AUTOQUALITY_*`` settings and its ``autoquality``
option, read the way its documentation gives them: a URL's argument
redefines the setting of the same meaning; the quality bounds come from the
URL, else the setting for the output format (``FORMAT_MIN``/``FORMAT_MAX``),
else the setting for all formats. The search itself, which encodes, is
:mod:`django_oximg.core.pipeline.autoquality`.
"""

from __future__ import annotations

from typing import NamedTuple

from django_oximg.core.options.model import AutoQuality, Options

#: The most encodes one search makes: a binary search over 1..100 needs 7.
MAX_ENCODES = 7

#: Formats whose encoders take a quality: the only ones searched.
SEARCHED_FORMATS = frozenset({"jpeg", "webp", "avif"})


class AutoQualitySettings(NamedTuple):
    """The site's ``AUTOQUALITY`` setting, with imgproxy's defaults (method ``none``: off)."""

    method: str = "none"
    #: DSSIM for ``dssim``; bytes for ``size``.
    target: float = 0.02
    min_quality: int = 70
    max_quality: int = 80
    #: Per-format bounds as sorted (format, quality) pairs; imgproxy's
    #: defaults: AVIF's quality 60-65 looks like JPEG's 70-80.
    format_min: tuple[tuple[str, int], ...] = (("avif", 60),)
    format_max: tuple[tuple[str, int], ...] = (("avif", 65),)
    allowed_error: float = 0.001
    #: Results of more megapixels are encoded at the fixed quality; 0: no limit.
    max_resolution: float = 0.0


#: The site's setting when it sets none: off.
AUTOQUALITY_OFF = AutoQualitySettings()


class QualityTarget(NamedTuple):
    """One render's search: its method, target and bounds, resolved for one format."""

    #: "size" or "dssim".
    method: str
    target: float
    min_quality: int
    max_quality: int
    allowed_error: float


def quality_target(
    options: Options, fmt: str, settings: AutoQualitySettings, pixels: int
) -> QualityTarget | None:
    """The search ``options`` ask for in ``fmt``, or None for the fixed quality.

    None when the method is ``none``, for a format without a quality, and
    for a result over ``max_resolution`` megapixels. A site-wide method
    gives way to a quality the URL names for this format (``q``, or ``fq``):
    only a URL's own ``autoquality`` overrides that.
    """
    given: AutoQuality = options.autoquality
    method = given.method or settings.method
    if method == "none" or fmt not in SEARCHED_FORMATS:
        return None
    if not given.method and (options.quality or dict(options.format_quality).get(fmt)):
        return None
    if settings.max_resolution and pixels > settings.max_resolution * 1_000_000:
        return None
    low = given.min_quality or dict(settings.format_min).get(fmt, settings.min_quality)
    high = given.max_quality or dict(settings.format_max).get(fmt, settings.max_quality)
    return QualityTarget(
        method="dssim" if method == "ml" else method,
        target=settings.target if given.target is None else given.target,
        min_quality=min(low, high),
        max_quality=high,
        allowed_error=(
            settings.allowed_error if given.allowed_error is None else given.allowed_error
        ),
    )


def best_target(
    options: Options, fmt: str, settings: AutoQualitySettings, pixels: int
) -> QualityTarget | None:
    """The search a ``format:best`` candidate in ``fmt`` makes, or None for its fixed quality.

    :func:`quality_target`, for DSSIM only: the candidates are compared at
    one measured look, and a byte target would leave nothing to compare.
    """
    target = quality_target(options, fmt, settings, pixels)
    return target if target is not None and target.method == "dssim" else None


def planned_encodes(target: QualityTarget) -> int:
    """The most encodes a search of ``target``'s bounds makes (for the estimates).

    A binary search over the bounds; ``size`` tries the maximum first.
    """
    span = target.max_quality - target.min_quality + 1
    return min(MAX_ENCODES, span.bit_length() + (target.method == "size"))
