"""A request path read into a :class:`~.model.ParsedPath`: options, presets, the source.

The path (after the signature) is split as imgproxy splits it: options run
up to the first segment without a ":", the rest is the source, plain
(``plain/<percent-encoded>@<ext>``) or URL-safe base64 (``<base64>.<ext>``).
Each option is looked up in the table (:mod:`.table`) and applied to a draft
in order, so later options override earlier ones; presets expand where they
are named, the ``default`` preset before everything else. A name the table
does not know may be one of the site's own options (:mod:`.extensions`).
Every byte of the path is percent-decoded exactly once, here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import unquote

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options.extensions import Extension, entries_with, extension_named
from django_oximg.core.options.model import (
    ANY_URL,
    DEFAULTS,
    MAX_APPLIED_OPTIONS,
    Draft,
    Options,
    ParsedPath,
    URLRules,
    normalized,
)
from django_oximg.core.options.table import BY_NAME, PRESET_NAMES, UNSUPPORTED
from django_oximg.core.options.values import (
    base64url_text,
    invalid,
    invalid_source,
    output_format_name,
    shown,
)


class _OptionParser:
    """Applies options and presets to a draft, counting them against the cap."""

    def __init__(self, presets: Mapping[str, str], extensions: Sequence[Extension]) -> None:
        self.presets = presets
        self.extensions = extensions
        self.applied = 0

    def apply(self, draft: Draft, name: str, args: list[str], chain: tuple[str, ...]) -> None:
        self.applied += 1
        if self.applied > MAX_APPLIED_OPTIONS:
            raise InvalidOptions(
                detail=f"more than {MAX_APPLIED_OPTIONS} options", public="Too many options"
            )
        if name in PRESET_NAMES:
            self.apply_presets(draft, args, chain)
            return
        option = BY_NAME.get(name)
        if option is not None:
            option.read(draft, args)
            return
        extension = extension_named(self.extensions, name)
        if extension is None and name in UNSUPPORTED:
            raise InvalidOptions(detail=UNSUPPORTED[name], public=UNSUPPORTED[name])
        if extension is None:
            raise InvalidOptions(
                detail=f"unknown option {name[:200]!r}", public=f"Unknown option: {shown(name)}"
            )
        draft["extensions"] = entries_with(draft["extensions"], extension, extension.read(args))

    def apply_presets(self, draft: Draft, names: list[str], chain: tuple[str, ...]) -> None:
        """Apply each named preset; one already being applied is skipped, as imgproxy does."""
        for name in names:
            text = self.presets.get(name)
            if text is None:
                raise invalid("preset", name, "unknown preset")
            if name in chain:
                continue
            for segment in filter(None, text.split("/")):
                option, sep, rest = segment.partition(":")
                if not sep:
                    raise invalid("preset", name, f"segment {segment!r} has no arguments")
                self.apply(draft, option, rest.split(":"), (*chain, name))


def _unquote(text: str) -> str:
    """Percent-decode once; bytes that are not UTF-8 are an error, never replaced."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as error:
        raise InvalidOptions(
            detail=f"not UTF-8 once percent-decoded: {text[:200]!r}", public="Invalid URL encoding"
        ) from error


def _split_extension(text: str, mark: str) -> tuple[str, str]:
    head, _, extension = text.partition(mark)
    if mark in extension:
        raise invalid_source(f"more than one {mark!r}")
    return head, extension


def _decode_base64(text: str) -> str:
    """URL-safe base64 (padding optional) of UTF-8 text."""
    decoded = base64url_text(text)
    if decoded is None:
        raise invalid_source("not URL-safe base64 of UTF-8 text")
    return decoded


def _decode_source(segments: list[str]) -> tuple[str, str]:
    """The source and the extension ("" when absent) from the segments after the options."""
    if segments and segments[0] == "plain":
        head, extension = _split_extension("/".join(segments[1:]), "@")
        source = _unquote(head)
    else:
        head, extension = _split_extension("".join(segments), ".")
        source = _decode_base64(head)
    if not source:
        raise invalid_source("empty")
    if "\x00" in source:
        raise invalid_source("contains NUL")
    return source, extension


def _option_segments(path: str) -> tuple[list[str], list[str]]:
    """Split the path into option segments (percent-decoded) and the source's segments.

    As imgproxy does: options run up to the first segment without a ":".
    """
    segments = path.removeprefix("/").split("/")
    options: list[str] = []
    for index, segment in enumerate(segments):
        text = _unquote(segment) if "%" in segment else segment
        if ":" not in text:
            return options, segments[index:]
        options.append(text)
    return options, []


def _preset_segments(path: str) -> tuple[list[str], list[str]]:
    """``ONLY_PRESETS``: the first segment names presets, the rest is the source."""
    first, _, rest = path.removeprefix("/").partition("/")
    names = _unquote(first) if "%" in first else first
    return names.split(":"), rest.split("/")


def _check_allowed(name: str, rules: URLRules) -> None:
    if rules.allowed_options and name not in rules.allowed_options:
        raise InvalidOptions(
            detail=f"option {name[:200]!r} is not in ALLOWED_PROCESSING_OPTIONS",
            public=f"Forbidden option: {shown(name)}",
        )


def parse_path(
    path: str,
    presets: Mapping[str, str] | None = None,
    rules: URLRules = ANY_URL,
    extensions: Sequence[Extension] = (),
) -> ParsedPath:
    """Parse a request path (the part after the signature, starting with "/").

    ``path`` is raw, still percent-encoded: option segments and the plain
    source are each percent-decoded exactly once here. ``presets`` maps preset
    names to option strings such as ``"rs:fill:300:300/q:70"``; a ``default``
    preset applies to every request, before the URL's options. ``rules``
    are the site's limits on what a URL may say (:class:`~.model.URLRules`);
    ``extensions`` the site's own options (``OXIMG["EXTENSIONS"]``).
    Raises :class:`~django_oximg.core.errors.InvalidOptions` naming the option,
    and nothing else, whatever the input.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidOptions(detail="path is not encodable text", public="Invalid URL") from error
    parser = _OptionParser(presets or {}, extensions)
    draft = Draft(DEFAULTS._asdict())
    if "default" in parser.presets:
        parser.apply_presets(draft, ["default"], ())
    if rules.only_presets:
        preset_names, source_segments = _preset_segments(path)
        parser.apply_presets(draft, preset_names, ())
    else:
        option_segments, source_segments = _option_segments(path)
        for segment in option_segments:
            name, _, rest = segment.partition(":")
            _check_allowed(name, rules)
            parser.apply(draft, name, rest.split(":"), ())
    source, extension = _decode_source(source_segments)
    if extension and not draft["raw"]:
        # imgproxy applies the extension after the options, so it wins over ``format``.
        draft["format"] = output_format_name("format", extension)
    return ParsedPath(normalized(Options(**draft)), source, frozenset(draft.assigned))
