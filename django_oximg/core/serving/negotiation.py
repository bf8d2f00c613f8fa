"""A request's output format: the URL's, or negotiated from ``Accept`` before any I/O.

Part of step 3 of a request (the map: :mod:`django_oximg.core.serving`).

The format is part of the cache key, so it must be chosen before the source
is read: from the URL (an extension or ``f:``), else from the client's
``Accept`` header (AVIF, then WebP) and the source's name, which is all
there is then. :func:`accept_class` is what the negotiation reads of a
header, and what lets :mod:`~django_oximg.core.serving.hits` remember a hit per
class rather than per header.
"""

from __future__ import annotations

import functools
import posixpath

from django_oximg.core.options import BEST_FORMAT, Options

#: Source names that may hold an animation: never negotiated to AVIF.
ANIMATED_SOURCE_EXTENSIONS = frozenset({".gif", ".webp"})

#: Web formats a source can be served as when the client accepts neither AVIF
#: nor WebP, by the source name's extension; anything else becomes JPEG.
FALLBACK_FORMATS = {".png": "png", ".gif": "gif", ".jpg": "jpeg", ".jpeg": "jpeg"}

#: What the answer to a URL with a negotiated format depends on.
VARY_ACCEPT = ("Accept",)

#: Distinct Accept headers whose format class is kept (browsers send a few).
ACCEPT_CLASSES_KEPT = 256


def output_format(
    options: Options, name: str, accept: str, auto_format: bool, best_by_default: bool = False
) -> tuple[str, bool]:
    """The output format for source ``name`` and whether it was negotiated from ``accept``.

    ``raw`` answers, and ``skip_processing`` answers for a format the
    source's name says, are the source itself: in the format of its name,
    never negotiated (the name is all there is before the source is read).
    ``auto_format`` off (``AUTO_FORMAT``) never negotiates. ``best`` (the
    URL's, or any URL without a format with ``best_by_default``,
    ``FORMAT_BEST_BY_DEFAULT``) is chosen per image among the formats of
    :func:`best_formats`: negotiated when ``auto_format`` is on. As in
    imgproxy, ``skip_processing`` does not make it the name's format: a
    source in a listed format is served as it is only with
    ``FORMAT_BEST_ALLOW_SKIPS``, decided on the source's bytes
    (:mod:`~django_oximg.core.serving.staging`).
    """
    if options.format and options.format != BEST_FORMAT:
        return options.format, False
    fallback = FALLBACK_FORMATS.get(posixpath.splitext(name)[1].lower(), "jpeg")
    if options.raw:
        return fallback, False
    if options.format == BEST_FORMAT or best_by_default:
        return BEST_FORMAT, auto_format
    if fallback in options.skip_processing:
        return fallback, False
    if not auto_format:
        return fallback, False
    return negotiate(accept, fallback, may_be_animated(name)), True


def best_formats(accept: str, auto_format: bool) -> tuple[str, ...]:
    """The formats besides JPEG and PNG that ``format:best`` may choose for ``accept``.

    As imgproxy, AVIF and WebP only when the client names them and
    negotiation is on (``AUTO_FORMAT``); a source's alpha and animation,
    which decide the rest, are known only once it is read
    (:func:`django_oximg.core.pipeline.plan.plan_best`).
    """
    return tuple(accept_class(accept).split()) if auto_format else ()


def accepted_types(accept: str) -> set[str]:
    """Media types in an Accept header with a non-zero q value."""
    accepted = set()
    for item in accept.lower().split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            accepted.add(media)
    return accepted


def may_be_animated(name: str) -> bool:
    """Whether a source's name says it may hold an animation (GIF, WebP)."""
    return posixpath.splitext(name)[1].lower() in ANIMATED_SOURCE_EXTENSIONS


def negotiate(accept: str, fallback: str, animated: bool = False) -> str:
    """AVIF if the client accepts it, then WebP, then ``fallback``.

    Only explicit ``image/avif`` / ``image/webp`` entries count (``*/*`` does
    not: every browser sends it, including ones that cannot decode AVIF).
    A source that may be ``animated`` is never made AVIF, whose saver keeps
    one frame: WebP if accepted, else ``fallback``. The format must be known
    before the source is read (it is in the cache key), so the name decides,
    as imgproxy's own format choice passes AVIF over for animations.
    """
    for fmt in accept_class(accept).split():
        if not (animated and fmt == "avif"):
            return fmt
    return fallback


@functools.lru_cache(maxsize=ACCEPT_CLASSES_KEPT)
def accept_class(accept: str) -> str:
    """What :func:`negotiate` reads of an ``Accept`` header: "avif webp", "avif", "webp" or "".

    The formats it lists that negotiation may choose, in order of preference.
    Two headers of one class get the same answer to every URL, which is what
    lets cache hits be remembered per class. Kept per distinct header:
    browsers send a handful, and every request with a negotiated format asks.
    """
    accepted = accepted_types(accept)
    return " ".join(fmt for fmt in ("avif", "webp") if f"image/{fmt}" in accepted)
