"""The complex settings read into their values, and every value checked against its type.

:mod:`django_oximg.conf` builds the settings; what takes more than a type
check to read (a dict of lists, dotted paths to import, a tag's keywords)
is read here, raising ``ImproperlyConfigured`` that names the setting.
Nothing here touches ``django.conf.settings``: ``conf`` hands each value in.
"""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_oximg.core.options import AUTOQUALITY_METHODS, OUTPUT_FORMATS, Extension
from django_oximg.core.options.autoquality import AutoQualitySettings
from django_oximg.core.options.extensions import problems

#: Non-negative limits (0 means "choose for me" or "no limit", as documented).
COUNTS = (
    "WORKERS",
    "QUEUE_SIZE",
    "MEMORY_BUDGET",
    "MAX_SRC_RESOLUTION",
    "MAX_SRC_FILE_SIZE",
    "MAX_ANIMATION_FRAMES",
    "MAX_RESULT_DIMENSION",
    "LIBVIPS_CONCURRENCY",
    "MALLOC_THRESHOLD",
    "METADATA_CACHE_TIMEOUT",
    "HTTP_MAX_REDIRECTS",
    "SOURCE_READS",
    "HIT_CACHE_BYTES",
    "RENDER_AHEAD_RETRIES",
    "FALLBACK_IMAGE_TTL",
)

#: ``format:best``'s settings: in the output fingerprint only when one differs
#: from its default, so a site that leaves them keeps its keys and URLs.
FORMAT_BEST_SETTINGS = (
    "FORMAT_BEST_BY_DEFAULT",
    "FORMAT_BEST_COMPLEXITY_THRESHOLD",
    "FORMAT_BEST_MAX_RESOLUTION",
    "FORMAT_BEST_ALLOW_SKIPS",
)


class InvalidExtension(ImproperlyConfigured):
    """``EXTENSIONS`` names something that cannot serve (system check ``oximg.E030``)."""


def extensions(value: Any) -> tuple[Extension, ...]:
    """``EXTENSIONS``: each dotted path imported, and the list checked as one site's.

    An extension's long name is also a keyword of the tags, so it may not
    be one of theirs (:data:`~django_oximg.arguments.KEYWORDS`, imported
    here only when a site has extensions).
    """
    paths = (value,) if isinstance(value, str) else value
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
        raise InvalidExtension(
            f"OXIMG: EXTENSIONS must be a list of dotted paths to extensions, not {value!r}."
        )
    if not paths:
        return ()
    from django_oximg.arguments import KEYWORDS

    loaded = []
    for path in paths:
        try:
            loaded.append(import_string(path))
        except ImportError as exc:
            message = f"OXIMG: EXTENSIONS: {path!r} cannot be imported: {exc}"
            raise InvalidExtension(message) from exc
    found = problems(loaded)
    found += [
        f"{extension.name!r} is a keyword of the tags"
        for extension in loaded
        if isinstance(extension, Extension) and extension.name in KEYWORDS
    ]
    if found:
        raise InvalidExtension(f"OXIMG: EXTENSIONS: {'; '.join(found)}.")
    return tuple(loaded)


#: A width-list name; it cannot start with a digit, which starts a literal list.
SRCSET_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def srcset_widths(
    value: Any, default: Mapping[str, tuple[int, ...]]
) -> Mapping[str, tuple[int, ...]]:
    """``SRCSET_WIDTHS`` checked, each list sorted without repeats, merged over ``default``."""
    message = "OXIMG: SRCSET_WIDTHS must be a dict of name -> list of positive integers"
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"{message}, not {value!r}.")
    merged = dict(default)
    for name, widths in value.items():
        if not isinstance(name, str) or not SRCSET_NAME_PATTERN.fullmatch(name):
            raise ImproperlyConfigured(
                f"OXIMG: SRCSET_WIDTHS name {name!r} must be letters, digits, '_' or '-', "
                "not starting with a digit."
            )
        valid = (
            isinstance(widths, list | tuple)
            and widths
            and all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths)
        )
        if not valid:
            raise ImproperlyConfigured(f"{message}; {name!r} is {widths!r}.")
        merged[name] = tuple(sorted(set(widths)))
    return types.MappingProxyType(merged)


def tag_defaults(value: Any, extensions: tuple[Extension, ...]) -> Mapping[str, Any]:
    """``TAG_DEFAULTS`` checked as a tag's keywords are (a read-only copy).

    ``extensions`` are the site's, whose keywords it may give. The tags'
    argument module is imported here, not at the top: the thumbnail server
    reads these settings too, and never needs it.
    """
    from django_oximg.arguments import NOT_DEFAULTS, ThumbnailError, tag_options

    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"OXIMG: TAG_DEFAULTS must be a dict, not {value!r}.")
    for name in value:
        if not isinstance(name, str):
            raise ImproperlyConfigured(f"OXIMG: TAG_DEFAULTS keys must be strings, not {name!r}.")
        if name in NOT_DEFAULTS:
            why = NOT_DEFAULTS[name]
            raise ImproperlyConfigured(f"OXIMG: TAG_DEFAULTS cannot set {name}: {why}.")
    try:
        tag_options("1", value, extensions)
    except ThumbnailError as exc:
        raise ImproperlyConfigured(f"OXIMG: TAG_DEFAULTS: {exc}.") from exc
    return types.MappingProxyType(dict(value))


#: A ``RENDER_AHEAD`` key: ``app_label.Model.field``.
RENDER_AHEAD_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_]\w*")


def render_ahead(value: Any) -> Mapping[str, tuple[tuple[str, str], ...]]:
    """``RENDER_AHEAD`` in one shape: each field's ``(name, size)`` pairs ("" when unnamed).

    Only the shape is checked here; that each field exists and each size
    is one the tag takes is the system check's (``oximg.E020``), which
    can look the models up.
    """
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"OXIMG: RENDER_AHEAD must be a dict, not {value!r}.")
    found = {}
    for target, sizes in value.items():
        if not isinstance(target, str) or not RENDER_AHEAD_TARGET.fullmatch(target):
            raise ImproperlyConfigured(
                f"OXIMG: RENDER_AHEAD keys are 'app_label.Model.field', not {target!r}."
            )
        try:
            found[target] = size_pairs(sizes)
        except ValueError as exc:
            raise ImproperlyConfigured(f"OXIMG: RENDER_AHEAD[{target!r}]: {exc}.") from exc
    return types.MappingProxyType(found)


def size_pairs(sizes: Any) -> tuple[tuple[str, str], ...]:
    """A list of sizes, or a dict of names to sizes, as ``(name, size)`` pairs."""
    if isinstance(sizes, Mapping):
        pairs = tuple(sizes.items())
    elif isinstance(sizes, list | tuple):
        pairs = tuple(("", size) for size in sizes)
    else:
        raise ValueError(f"a list of sizes or a dict of names to sizes, not {sizes!r}")
    for name, size in pairs:
        if not isinstance(name, str) or not isinstance(size, str) or not size.strip():
            raise ValueError(f"sizes and their names are strings, not {name!r}: {size!r}")
    return pairs


#: ``AUTOQUALITY``'s keys: imgproxy's ``IMGPROXY_AUTOQUALITY_*`` settings less the prefix.
AUTOQUALITY_KEYS = {
    "METHOD": "method",
    "TARGET": "target",
    "MIN": "min_quality",
    "MAX": "max_quality",
    "FORMAT_MIN": "format_min",
    "FORMAT_MAX": "format_max",
    "ALLOWED_ERROR": "allowed_error",
    "MAX_RESOLUTION": "max_resolution",
}


def autoquality(value: Any) -> AutoQualitySettings:
    """``AUTOQUALITY`` read over imgproxy's defaults; ``FORMAT_MIN``/``FORMAT_MAX`` merge
    over theirs, as imgproxy's per-format settings do."""
    if not isinstance(value, Mapping) or set(value) - set(AUTOQUALITY_KEYS):
        raise ImproperlyConfigured(
            f"OXIMG: AUTOQUALITY must be a dict of {', '.join(AUTOQUALITY_KEYS)}, not {value!r}."
        )
    defaults = AutoQualitySettings()
    read: dict[str, Any] = {}
    for key, given in value.items():
        name, default = AUTOQUALITY_KEYS[key], getattr(defaults, AUTOQUALITY_KEYS[key])
        if key.startswith("FORMAT_"):
            read[name] = _format_qualities(key, given, default)
            continue
        check_type(f"AUTOQUALITY[{key!r}]", given, type(default))
        read[name] = given
    result = defaults._replace(**read)
    qualities = [result.min_quality, result.max_quality]
    qualities += [q for _, q in result.format_min + result.format_max]
    if result.method not in AUTOQUALITY_METHODS:
        raise ImproperlyConfigured(
            f"OXIMG: AUTOQUALITY['METHOD'] must be one of {', '.join(AUTOQUALITY_METHODS)}."
        )
    if not all(1 <= quality <= 100 for quality in qualities):
        raise ImproperlyConfigured("OXIMG: AUTOQUALITY qualities must be between 1 and 100.")
    if result.target < 0 or result.max_resolution < 0 or not 0 <= result.allowed_error <= 1:
        raise ImproperlyConfigured(
            "OXIMG: AUTOQUALITY TARGET and MAX_RESOLUTION must not be negative, "
            "ALLOWED_ERROR must be between 0 and 1."
        )
    return result


def _format_qualities(
    key: str, value: Any, default: tuple[tuple[str, int], ...]
) -> tuple[tuple[str, int], ...]:
    """A ``{"avif": 60}`` dict merged over ``default``, as sorted pairs."""
    if not isinstance(value, Mapping) or not all(
        fmt in OUTPUT_FORMATS and _is_instance(quality, int) for fmt, quality in value.items()
    ):
        raise ImproperlyConfigured(
            f"OXIMG: AUTOQUALITY[{key!r}] must be a dict of output format -> quality, "
            f"not {value!r}."
        )
    return tuple(sorted({**dict(default), **value}.items()))


def check_type(name: str, value: Any, hint: Any) -> None:
    """Refuse a value of the wrong type, naming the key (a str for an int, ...)."""
    origin = typing.get_origin(hint) or hint
    args = typing.get_args(hint)
    if origin is typing.Literal:
        ok = value in args
    elif origin is tuple:
        ok = isinstance(value, tuple) and all(isinstance(item, str) for item in value)
    elif origin is Mapping:
        ok = isinstance(value, Mapping) and all(
            isinstance(key, str) and _is_instance(item, args[1]) for key, item in value.items()
        )
    else:
        ok = _is_instance(value, origin)
    if not ok:
        raise ImproperlyConfigured(f"OXIMG: {name} must be {_type_name(hint)}, not {value!r}.")


def _is_instance(value: Any, kind: type) -> bool:
    """``isinstance`` where a bool is not an int, and an int is a float."""
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


#: How an error message names the expected type.
TYPE_NAMES = {int: "an integer", float: "a number", bool: "True or False", str: "a string"}


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if typing.get_origin(hint) is tuple:
        return "a string or a list of strings"
    if typing.get_origin(hint) is Mapping:
        return f"a dict with {TYPE_NAMES[typing.get_args(hint)[1]].split()[-1]} values"
    return TYPE_NAMES[hint]


def file_path(name: str, value: Any) -> str:
    """A path given as ``str`` or ``Path`` (``BASE_DIR / "x.png"``), as text."""
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    check_type(name, value, str)
    return str(value)


def check_fallback(path: str, data: str, status: int) -> None:
    """``FALLBACK_IMAGE_*``: one image at most, and a status an answer can have.

    Whether the image is one the server reads is checked when it is read
    (``runtime.read_fallback``), with the server's own probe.
    """
    if path and data:
        raise ImproperlyConfigured(
            "OXIMG: set FALLBACK_IMAGE_PATH or FALLBACK_IMAGE_DATA, not both."
        )
    if not 200 <= status <= 599:
        raise ImproperlyConfigured("OXIMG: FALLBACK_IMAGE_HTTP_CODE must be between 200 and 599.")
