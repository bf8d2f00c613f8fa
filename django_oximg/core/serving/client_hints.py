"""Client hints: the browser's ``DPR`` and ``Width`` as a URL's defaults.

Part of step 3 of a request (the map: :mod:`django_oximg.core.serving`).

With ``CLIENT_HINTS`` on (off by default, as imgproxy's
``IMGPROXY_ENABLE_CLIENT_HINTS``), a request's ``Sec-CH-DPR`` (or the older
``DPR``) sets ``dpr`` and its ``Sec-CH-Width`` (or ``Width``) sets ``width``,
as imgproxy reads them: the hint is a default, so any option of the URL or
its presets that sets the value wins; ``Width`` is in physical pixels, so
the width is the hint divided by the DPR hint; a value imgproxy would not
take (not a number, not above 0, a DPR above 8) is no hint.

A hint is rounded up to a few fixed values before it becomes an option:
the DPR to :data:`DPR_STEPS`, the width (in CSS pixels) to a ladder of
:func:`ladder_width`, never past the rung that holds the result's largest
size. The image is then never smaller than the hint asked for, and the
answers one URL can have through hints are a small fixed number (at most
``(len(DPR_STEPS) + 1) * (rungs + 1)``, 304 with ``MAX_RESULT_DIMENSION``
8192), however many distinct values a client sends: each would otherwise
be a render and a cache object of its own.

An answer that a hint could change says so in ``Vary``, whether or not the
request sent the hint, so that a cache never hands one client's size to
another: the DPR headers when the URL leaves ``dpr`` or ``width`` open, the
Width headers when it leaves ``width`` open. The hints' effect is part of
the options, so of the cache key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from django_oximg.core.options import (
    INTEGER_TEXT,
    MAX_DIMENSION,
    MAX_DPR,
    REAL_TEXT,
    Options,
    ParsedPath,
    result_dimension_limit,
)

#: The request headers carrying each hint, the standard name first (WSGI
#: environ key, header name as sent in ``Vary``), as imgproxy reads them.
DPR_HEADERS = (("HTTP_SEC_CH_DPR", "Sec-CH-DPR"), ("HTTP_DPR", "DPR"))
WIDTH_HEADERS = (("HTTP_SEC_CH_WIDTH", "Sec-CH-Width"), ("HTTP_WIDTH", "Width"))


#: The DPRs a DPR hint is rounded up to: the densities screens have (1.25
#: and 1.75 of desktop scaling go to 1.5 and 2, Android's 2.625 to 3), and
#: 6 and 8 so that no hint up to MAX_DPR is rounded down.
DPR_STEPS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)

#: The lowest rung of the width ladder (CSS pixels): narrower hints get it.
LOWEST_WIDTH = 16


def ladder_width(width: float) -> int:
    """``width`` rounded up to the ladder 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, ...

    Four rungs per doubling (each power of two from 16 times 1, 1.25, 1.5
    and 1.75), so a rung is at most a quarter wider than the width asked
    for, and the steps are the usual ``srcset`` widths (320, 640, 768,
    1024, 1280, 1536, 2048).
    """
    # Rounded first, so that a quotient such as 448 / 1.4 (320.00000000000006) is 320.
    needed = max(math.ceil(round(width, 6)), LOWEST_WIDTH)
    step = (1 << (needed.bit_length() - 1)) // 4  # a quarter of the power of two below
    return -(-needed // step) * step


def hinted_dpr(dpr: float) -> float:
    """``dpr`` rounded up to :data:`DPR_STEPS` (a hint is at most MAX_DPR, the last step)."""
    return next((step for step in DPR_STEPS if step >= dpr), DPR_STEPS[-1])


class ClientHints(NamedTuple):
    """The hints a request sent; 0 for a hint it did not send (or sent badly)."""

    dpr: float = 0.0
    width: int = 0


NO_HINTS = ClientHints()


def _sent(request_headers: Mapping[str, str], names: tuple[tuple[str, str], ...]) -> list[str]:
    """The values of the headers ``names`` that the request sent, in that order."""
    return [value for key, _ in names if (value := str(request_headers.get(key) or ""))]


def read_hints(request_headers: Mapping[str, str]) -> ClientHints:
    """The hints in ``request_headers`` (WSGI environ names): the first valid one of each."""
    dpr = 0.0
    for text in _sent(request_headers, DPR_HEADERS):
        if REAL_TEXT.fullmatch(text) and 0 < (value := float(text)) <= MAX_DPR:
            dpr = value
            break
    width = 0
    for text in _sent(request_headers, WIDTH_HEADERS):
        if INTEGER_TEXT.fullmatch(text) and 0 < (number := int(text)) <= MAX_DIMENSION:
            width = number
            break
    return ClientHints(dpr, width)


def with_hints(
    parsed: ParsedPath, hints: ClientHints, max_result_dimension: int = 0
) -> tuple[Options, tuple[str, ...]]:
    """``parsed``'s options with the hints it leaves room for, and the headers to vary on.

    The hints are rounded up (:func:`hinted_dpr`, :func:`ladder_width`); a
    width is at most the rung holding ``max_result_dimension`` (0: no limit
    but MAX_DIMENSION), lowered by the URL's own, since no result is wider.
    ``raw`` answers are the source itself: no hint changes them.
    """
    options = parsed.options
    max_result_dimension = result_dimension_limit(
        max_result_dimension, options.max_result_dimension
    )
    if options.raw:
        return options, ()
    takes_width = "width" not in parsed.assigned
    takes_dpr = "dpr" not in parsed.assigned
    changes: dict[str, Any] = {}
    if takes_dpr and hints.dpr:
        changes["dpr"] = hinted_dpr(hints.dpr)
    if takes_width and hints.width:
        widest = min(ladder_width(max_result_dimension or MAX_DIMENSION), MAX_DIMENSION)
        changes["width"] = min(ladder_width(hints.width / (hints.dpr or 1.0)), widest)
    vary: tuple[str, ...] = ()
    if takes_dpr or takes_width:
        vary += tuple(name for _, name in DPR_HEADERS)
    if takes_width:
        vary += tuple(name for _, name in WIDTH_HEADERS)
    return (options._replace(**changes) if changes else options), vary
