""":class:`~.model.Options` and a source written back as the canonical path.

The canonical path is what the result-cache key is made from (never the raw
URL), so two requests with the same effect (reordered options, long and
short names, no-op variants) share one cache object. It holds each option
the table (:mod:`.table`) writes, in the table's order, by its short name,
leaving out what is at its default; the format is the extension.
"""

from __future__ import annotations

from urllib.parse import quote

from django_oximg.core.options.extensions import check_buildable
from django_oximg.core.options.model import DEFAULTS, Options, normalized
from django_oximg.core.options.table import OPTIONS
from django_oximg.core.options.values import base64url, invalid, invalid_source

#: Each field's option, by its place in the table (the canonical order).
WRITER_OF = {field: place for place, option in enumerate(OPTIONS) for field in option.fields}

#: Each written field's index in :class:`Options`, its option's place in the
#: table and its default: to find the few options a path sets without asking
#: every option for its text.
WRITTEN_DEFAULTS = tuple(
    (index, WRITER_OF[name], default)
    for index, (name, default) in enumerate(zip(Options._fields, DEFAULTS, strict=True))
    if name in WRITER_OF
)


def _check_buildable(options: Options, source: str) -> None:
    """Refuse what no URL can carry, rather than build a path that parses differently."""
    if not source or "\x00" in source:
        raise invalid_source("empty or contains NUL")
    try:
        source.encode("utf-8")
        options.cachebuster.encode("utf-8")
    except UnicodeEncodeError as error:
        raise invalid_source("not encodable text") from error
    if ":" in options.cachebuster:
        raise invalid("cachebuster", options.cachebuster, "contains ':'")
    try:
        options.filename.encode("utf-8")
    except UnicodeEncodeError as error:
        raise invalid("filename", options.filename, "not encodable text") from error
    if options.extensions:
        check_buildable(options.extensions)


def build_path(options: Options, source: str, *, encode: str = "plain") -> str:
    """Build the canonical path for ``options`` and ``source``.

    Only options that differ from the defaults appear, in a fixed order, by
    their short names, with the output format as the extension. ``encode`` is
    ``"plain"`` (source percent-encoded, "/" and ":" kept) or ``"base64"``.
    ``parse_path(build_path(o, s)) == ParsedPath(o, s)`` for every valid,
    normalised ``o`` (no-op variants such as a 0x0 crop are folded first, so
    requests with the same effect share one path, and so one cache key).
    """
    if encode not in ("plain", "base64"):
        raise ValueError(f"encode must be 'plain' or 'base64', not {encode!r}")
    _check_buildable(options, source)
    options = normalized(options)
    # An option whose fields all hold their defaults writes nothing (tested for
    # every option): most paths set a handful of some sixty fields, so only
    # their options are asked for their text.
    places = sorted(
        {
            place
            for index, place, default in WRITTEN_DEFAULTS
            # Mostly the very default object: "is" settles it without an __eq__ call.
            if (value := options[index]) is not default and value != default
        }
    )
    segments = [
        segment for place in places if (segment := OPTIONS[place].segment(options)) is not None
    ]
    segments += [f"{name}:{text}" for name, text in options.extensions]
    if encode == "plain":
        segments.append("plain")
        tail = quote(source, safe="/:")
        mark = "@"
    else:
        tail = base64url(source)
        mark = "."
    segments.append(f"{tail}{mark}{options.format}" if options.format else tail)
    return "/" + "/".join(segments)
