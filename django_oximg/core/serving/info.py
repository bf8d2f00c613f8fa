"""The ``/info`` endpoint: imgproxy's info URL in, a small JSON document out.

imgproxy's shape, under the same prefix as thumbnails::

    <prefix>/info/<signature>/<info options>/plain/<percent-encoded source>
    <prefix>/info/<signature>/<info options>/<base64url(source)>

As imgproxy does, ``/info`` stays outside the signed part: the signature
covers the path after it, exactly as for a thumbnail. The info options are
our own small set (imgproxy's Pro info options answer other questions):

* ``blurhash:X:Y`` / ``bh:X:Y`` - BlurHash components, 1..9 each (default
  4:3); ``bh:0:0`` leaves the BlurHash out;
* ``dominant_color:B`` / ``dc:B`` - include the dominant colour (default true);
* ``cachebuster`` / ``cb`` and ``expires`` / ``exp`` - as for thumbnails.

With both BlurHash and dominant colour off, the answer comes from the
source's header alone; otherwise from one tiny thumbnail of it
(:func:`django_oximg.core.pipeline.summarise`). The thumbnailer
(:class:`~django_oximg.core.serving.staging.InfoWork`, on the thumbnails' path) does
the I/O, caching and HTTP; this module only parses and formats.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, unquote

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options import BOOLEANS, parse_path

if TYPE_CHECKING:  # the template tags import this module, and must not load libvips
    from django_oximg.core.pipeline import SourceInfo, Summary

#: The first segment of an info path (after the mount prefix).
INFO_PREFIX = "/info"

CONTENT_TYPE = "application/json"

#: BlurHash components when the URL names none: 4 across, 3 down, the
#: BlurHash authors' suggestion for a landscape picture (28 characters).
DEFAULT_BLURHASH = (4, 3)

#: BlurHash allows 1..9 components per axis.
MAX_COMPONENTS = 9

#: Bump when the JSON for the same source and request would change (fields,
#: summary method): it is part of the cache key.
INFO_VERSION = "1"

#: Option names, long and short, to the field they set.
OPTION_FIELDS = {
    "blurhash": "blurhash",
    "bh": "blurhash",
    "dominant_color": "dominant_color",
    "dc": "dominant_color",
    "cachebuster": "cachebuster",
    "cb": "cachebuster",
    "expires": "expires",
    "exp": "expires",
}

#: Characters not echoed back in an error body.
UNSAFE_IN_BODY = re.compile(r"[^A-Za-z0-9_.-]")

#: Largest ``expires`` (unix time) taken; as for thumbnails, far beyond any use.
MAX_EXPIRES = 10**12


class InfoRequest(NamedTuple):
    """A parsed info path: the source and what to compute for it."""

    source: str
    #: (x, y) components, or None to leave the BlurHash out.
    blurhash: tuple[int, int] | None = DEFAULT_BLURHASH
    dominant_color: bool = True
    cachebuster: str = ""
    expires: int = 0

    @property
    def needs_pixels(self) -> bool:
        """Whether the answer needs decoded pixels, not just the header."""
        return self.blurhash is not None or self.dominant_color

    def canonical(self) -> str:
        """The request as one string, for the cache key: equal effects, equal strings.

        ``expires`` is left out (it changes whether, not what, is answered);
        the cachebuster is kept, because the tag puts the source's version there.
        """
        x, y = self.blurhash or (0, 0)
        cachebuster = quote(self.cachebuster, safe="")
        return (
            f"info:{INFO_VERSION}/bh:{x}:{y}/dc:{int(self.dominant_color)}"
            f"/cb:{cachebuster}/{self.source}"
        )


def is_info_path(path: str) -> bool:
    """Whether ``path`` (after the mount prefix) asks for info rather than a thumbnail."""
    return path.startswith(INFO_PREFIX + "/")


def signed_part(path: str) -> str:
    """``/<signature>/...`` of an info path: the path without ``/info``."""
    return path[len(INFO_PREFIX) :]


def parse_info_path(path: str) -> InfoRequest:
    """Parse the path after the signature: info options, then the source.

    Options run up to the first segment without a ":" (as in thumbnail URLs);
    the source is decoded by the thumbnail parser, so its plain and base64
    forms and their checks are the same. An extension is refused: the answer
    is always JSON. Raises :class:`InvalidOptions` naming the problem.
    """
    segments = path.removeprefix("/").split("/")
    fields: dict[str, Any] = {}
    index = 0
    while index < len(segments):
        text = _unquote(segments[index])
        if ":" not in text:
            break
        name, _, rest = text.partition(":")
        field = OPTION_FIELDS.get(name)
        if field is None:
            raise InvalidOptions(
                detail=f"unknown info option {name[:200]!r}",
                public=f"Unknown info option: {_shown(name)}",
            )
        fields[field] = _value(field, rest.split(":"))
        index += 1
    parsed = parse_path("/" + "/".join(segments[index:]))
    if parsed.options.format:
        raise InvalidOptions(detail="info path with an extension", public="Invalid source URL")
    return InfoRequest(parsed.source, **fields)


def _unquote(segment: str) -> str:
    if "%" not in segment:
        return segment
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError as error:
        raise InvalidOptions(detail="option not UTF-8", public="Invalid URL encoding") from error


def _shown(name: str) -> str:
    """An option name made safe to echo in a response body."""
    return UNSAFE_IN_BODY.sub("?", name[:32])


def _value(field: str, args: list[str]) -> object:
    """One option's value from its arguments."""
    if field == "blurhash":
        return _components(args)
    if len(args) != 1:
        raise _invalid(field, ":".join(args))
    text = args[0]
    if field == "dominant_color":
        if text not in BOOLEANS:
            raise _invalid(field, text)
        return BOOLEANS[text]
    if field == "expires":
        if not text.isascii() or not text.isdigit() or int(text[:13]) > MAX_EXPIRES:
            raise _invalid(field, text)
        return int(text)
    return text  # cachebuster: any text


def _components(args: list[str]) -> tuple[int, int] | None:
    """``X:Y`` in 1..9 each, or ``0:0`` for none."""
    if len(args) != 2 or not all(a.isascii() and a.isdigit() and len(a) == 1 for a in args):
        raise _invalid("blurhash", ":".join(args))
    x, y = int(args[0]), int(args[1])
    if x == y == 0:
        return None
    if not (1 <= x <= MAX_COMPONENTS and 1 <= y <= MAX_COMPONENTS):
        raise _invalid("blurhash", ":".join(args))
    return x, y


def _invalid(field: str, value: str) -> InvalidOptions:
    return InvalidOptions(detail=f"{field}: {value[:200]!r}", public=f"Invalid {field}")


def upright_size(info: SourceInfo) -> tuple[int, int]:
    """Width and height as displayed: EXIF orientations 5-8 swap the axes."""
    if info.orientation >= 5:
        return info.height, info.width
    return info.width, info.height


def info_document(info: SourceInfo, size: int, summary: Summary | None) -> bytes:
    """The JSON answer: header facts, file size, and the summary when asked for.

    ``width``/``height`` are after EXIF orientation (what a browser shows, and
    what the thumbnails are made from); ``orientation`` is the tag itself.
    """
    width, height = upright_size(info)
    document = {
        "format": info.format,
        "width": width,
        "height": height,
        "size": size,
        "frames": info.frames,
        "orientation": info.orientation,
        "has_alpha": info.has_alpha,
        "blurhash": summary.blurhash if summary else None,
        "dominant_color": summary.dominant_color if summary else None,
    }
    return json.dumps(document, separators=(",", ":")).encode()
