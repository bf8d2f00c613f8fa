"""Client hints: the browser's ``DPR`` and ``Width`` as a URL's defaults.

With ``CLIENT_HINTS`` on (off by default, as imgproxy's
``IMGPROXY_ENABLE_CLIENT_HINTS``), a request's ``Sec-CH-DPR`` (or the older
``DPR``) sets ``dpr`` and its ``Sec-CH-Width`` (or ``Width``) sets ``width``,
as imgproxy reads them: the hint is a default, so any option of the URL or
its presets that sets the value wins; ``Width`` is in physical pixels, so
the width is the hint divided by the DPR hint; a value imgproxy would not
take (not a number, not above 0, a DPR above 8) is no hint.

An answer that a hint could change says so in ``Vary``, whether or not the
request sent the hint, so that a cache never hands one client's size to
another: the DPR headers when the URL leaves ``dpr`` or ``width`` open, the
Width headers when it leaves ``width`` open. The hints' effect is part of
the options, so of the cache key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from django_oximg.core.geometry import round_half_up
from django_oximg.core.options import (
    INTEGER_TEXT,
    MAX_DIMENSION,
    MAX_DPR,
    REAL_TEXT,
    Options,
    ParsedPath,
)

#: The request headers carrying each hint, the standard name first (WSGI
#: environ key, header name as sent in ``Vary``), as imgproxy reads them.
DPR_HEADERS = (("HTTP_SEC_CH_DPR", "Sec-CH-DPR"), ("HTTP_DPR", "DPR"))
WIDTH_HEADERS = (("HTTP_SEC_CH_WIDTH", "Sec-CH-Width"), ("HTTP_WIDTH", "Width"))


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


def with_hints(parsed: ParsedPath, hints: ClientHints) -> tuple[Options, tuple[str, ...]]:
    """``parsed``'s options with the hints it leaves room for, and the headers to vary on.

    ``raw`` answers are the source itself: no hint changes them.
    """
    options = parsed.options
    if options.raw:
        return options, ()
    takes_width = "width" not in parsed.assigned
    takes_dpr = "dpr" not in parsed.assigned
    changes: dict[str, Any] = {}
    if takes_dpr and hints.dpr:
        changes["dpr"] = hints.dpr
    if takes_width and hints.width:
        changes["width"] = round_half_up(hints.width / (hints.dpr or 1.0))
    vary: tuple[str, ...] = ()
    if takes_dpr or takes_width:
        vary += tuple(name for _, name in DPR_HEADERS)
    if takes_width:
        vary += tuple(name for _, name in WIDTH_HEADERS)
    return (options._replace(**changes) if changes else options), vary
