"""The scanner of templates: sorl's and easy-thumbnails' tags, filters and attributes.

It reads a template's tokens the way Django's lexer cuts them (skipping
``{% comment %}`` and ``{% verbatim %}``), decides which library its
``{% thumbnail %}`` is, and writes each tag, filter and use of the
thumbnail's attributes as a finding. django-oscar's ``{% oscar_thumbnail %}``
(in templates that load Oscar's ``image_tags``) is a finding too: it renders
through whatever ``OSCAR_THUMBNAILER`` names, sorl-thumbnail by default.

Templates come from a project tree the scanner does not control, so it takes
time in proportion to the template's length whatever the text: no pattern
nests one unbounded repeat in another or stretches lazily to a closer, the
lexer looks at each character a bounded number of times, and each use of a
thumbnail's attribute is matched to the one tag that binds its variable
rather than every tag looking through the rest of the template.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django_oximg.migration_scan.findings import EASY, EDIT, OSCAR, SORL, Finding
from django_oximg.migration_scan.options import (
    VARIABLE,
    Part,
    easy_option,
    easy_target,
    rewritten,
    sorl_option,
)
from django_oximg.migration_scan.support import SUPPORT, judged, rule

#: Template libraries by the name templates load them under.
TEMPLATE_LIBRARIES = {"sorl_thumbnail": SORL, "easy_thumbnails_tags": EASY}
SHARED_LIBRARY = "thumbnail"
OXIMG_LIBRARY = "oximg"
#: django-oscar's library, with its {% oscar_thumbnail %} tag.
OSCAR_LIBRARY = "image_tags"
OSCAR_TAG = "oscar_thumbnail"
#: Every name under which a template loads sorl's or easy-thumbnails' tags.
THUMBNAIL_LIBRARIES = frozenset({SHARED_LIBRARY, *TEMPLATE_LIBRARIES})

#: Attributes of a thumbnail that django-oximg's has too.
THUMBNAIL_ATTRIBUTES = frozenset({"url", "width", "height"})

#: easy-thumbnails' literal size: "100x100" (0 leaves a side free).
EASY_SIZE = re.compile(r"(\d+)x(\d+)")

#: Where a Django token can start. Like Django's lexer (``{%.*?%}|{{.*?}}|{#.*?#}``),
#: a token ends at the first closer of its kind after it on the same line, and an
#: opener with none is text. The lexer finds the closers with str.find instead of
#: that pattern, which rereads the rest of the line from every opener: quadratic
#: in the length of a line of unclosed openers.
OPENER = re.compile(r"{[%{#]")
#: Each opener's closer and the kind of token they make.
CLOSERS = {"%": ("%}", "tag"), "{": ("}}", "var"), "#": ("#}", "comment")}
#: One piece of a tag's bit: a quoted string, or a run of neither space nor quote.
#: Pieces that touch make one bit, as Django's smart_split cuts a tag.
BIT_PIECE = re.compile(r""""[^"]*"|'[^']*'|[^\s"']+""")
FILTER = re.compile(r"""\|\s*(\w+)(?:\s*:\s*("[^"]*"|'[^']*'|[^\s|]+))?""")
#: A name followed by an attribute (``im.url``); every name, even one that is
#: itself an attribute (``a.im.url`` has ``a.im`` and ``im.url``).
ATTRIBUTE_USE = re.compile(r"\b(\w+)(?=\.(\w+))")
#: A name a tag can bind with ``as``, and so a name its attributes can be found by.
NAME = re.compile(r"\w+")
INTEGER = re.compile(r"-?\d+")
DECIMAL = re.compile(r"-?\d*\.\d+")
#: What makes a template sorl-thumbnail's or easy-thumbnails' whatever it loads.
SORL_HABIT = re.compile(r"{%\s*endthumbnail\b")
EASY_HABITS = (
    re.compile(r"{%\s*thumbnail\s+\S+\s+\d+x\d+"),
    re.compile(r"\|\s*(thumbnail_url|thumbnailer|thumbnailer_passive)\b"),
)
SKIPPED_BLOCKS = {"comment": "endcomment", "verbatim": "endverbatim"}


def literal(text: str) -> Any:
    """The value of a template literal, or :data:`VARIABLE` for anything else."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if INTEGER.fullmatch(text):
        return int(text)
    if DECIMAL.fullmatch(text):
        return float(text)
    return VARIABLE


def template_value(value: Any) -> str:
    """``value`` written as a template literal."""
    if isinstance(value, int | float):  # bool included
        return str(value)
    text = str(value)
    return f"'{text}'" if '"' in text else f'"{text}"'


@dataclass(frozen=True)
class _Token:
    line: int
    start: int
    end: int
    #: "tag" or "var"
    kind: str
    text: str
    contents: str


class _NextOccurrence:
    """Where ``needle`` next occurs in ``text``, asked from places that never go back.

    Each search starts past the previous answer, so all of them together read
    the text once, however many openers ask.
    """

    def __init__(self, text: str, needle: str) -> None:
        self.text = text
        self.needle = needle
        self.found = -1

    def at_or_after(self, start: int) -> int:
        """The first place at or after ``start``; ``len(text)`` when there is none."""
        if self.found < start:
            found = self.text.find(self.needle, start)
            self.found = len(self.text) if found == -1 else found
        return self.found


def django_tokens(text: str) -> Iterator[tuple[int, int, str]]:
    """Every token as Django's lexer cuts it: start, end and kind (tag, var, comment)."""
    closers = {
        opener: (_NextOccurrence(text, closer), kind) for opener, (closer, kind) in CLOSERS.items()
    }
    newline = _NextOccurrence(text, "\n")
    position = 0
    while match := OPENER.search(text, position):
        start = match.start()
        closer, kind = closers[text[start + 1]]
        end = closer.at_or_after(start + 2)
        if end < newline.at_or_after(start + 2):
            position = end + 2
            yield start, position, kind
        else:
            position = start + 1


def template_tokens(text: str) -> Iterator[_Token]:
    """Tags and variables with their lines, outside {% comment %} and {% verbatim %}."""
    closing = ""
    line, counted = 1, 0
    for start, end, kind in django_tokens(text):
        if kind == "comment":
            continue
        contents = text[start + 2 : end - 2].strip()
        name = contents.split(None, 1)[0] if contents else ""
        if closing:
            if kind == "tag" and name == closing:
                closing = ""
            continue
        if kind == "tag" and name in SKIPPED_BLOCKS:
            closing = SKIPPED_BLOCKS[name]
            continue
        line += text.count("\n", counted, start)
        counted = start
        yield _Token(line, start, end, kind, text[start:end], contents)


def tag_bits(contents: str) -> list[str]:
    """A tag's contents cut at spaces outside quotes, as Django's smart_split cuts them."""
    bits = []
    first = last = -1
    for piece in BIT_PIECE.finditer(contents):
        if piece.start() != last:
            if first >= 0:
                bits.append(contents[first:last])
            first = piece.start()
        last = piece.end()
    if first >= 0:
        bits.append(contents[first:last])
    return bits


def template_library(text: str, default: str) -> str:
    """Which library a template's {% thumbnail %} is: its load, its syntax, else ``default``."""
    for token in template_tokens(text):
        bits = token.contents.split()
        if token.kind == "tag" and bits[:1] == ["load"]:
            for name in bits[1:]:
                if name in TEMPLATE_LIBRARIES:
                    return TEMPLATE_LIBRARIES[name]
    if SORL_HABIT.search(text):
        return SORL
    if any(habit.search(text) for habit in EASY_HABITS):
        return EASY
    return default


def scan_template(
    path: str, text: str, default_library: str = SORL, *, loaded: bool = False
) -> list[Finding]:
    """The findings of one template.

    Only templates that load sorl-thumbnail's or easy-thumbnails' library are
    read, unless ``loaded`` (the library is one of the engine's builtins);
    in those that load django-oscar's ``image_tags``, its tag is.
    ``default_library`` decides for ``{% load thumbnail %}`` when the template's
    syntax does not.
    """
    tokens = list(template_tokens(text))
    loads = {
        name
        for token in tokens
        if token.kind == "tag" and token.contents.startswith("load ")
        for name in token.contents.split()[1:]
    }
    oscar = OSCAR_LIBRARY in loads
    if not loaded and not THUMBNAIL_LIBRARIES & loads:
        if not oscar:
            return []
        return [_oscar_tag(path, token) for token in tokens if is_oscar_tag(token)]
    library = template_library(text, default_library)
    bits = [tag_bits(token.contents) if token.kind == "tag" else [] for token in tokens]
    uses = _attribute_uses(library, tokens, bits)
    findings: list[Finding] = []
    for index, token in enumerate(tokens):
        if bits[index][:1] == ["load"]:
            findings.extend(_load_finding(path, token, bits[index], library))
        elif bits[index][:1] == ["thumbnail"]:
            tag = _sorl_tag if library == SORL else _easy_tag
            findings.append(tag(path, token, bits[index]))
            findings.extend(_attribute_findings(path, library, uses.get(index, [])))
        elif oscar and is_oscar_tag(token):
            findings.append(_oscar_tag(path, token))
        findings.extend(_filter_findings(path, token, library))
    return findings


def is_oscar_tag(token: _Token) -> bool:
    return token.kind == "tag" and token.contents.split(None, 1)[:1] == [OSCAR_TAG]


def _oscar_tag(path: str, token: _Token) -> Finding:
    """Oscar's tag: its arguments go to the OSCAR_THUMBNAILER class, which decides."""
    return judged(path, token.line, OSCAR, ("{% oscar_thumbnail %}",), token.text)


def as_variable(library: str, bits: list[str]) -> str | None:
    """The variable a ``{% thumbnail ... as var %}`` binds, as the library's own tag reads it."""
    shortest = 2 if library == SORL else 5
    return bits[-1] if len(bits) >= shortest and bits[-2] == "as" else None


_Use = tuple[_Token, re.Match[str]]


def _attribute_uses(
    library: str, tokens: list[_Token], bits: list[list[str]]
) -> dict[int, list[_Use]]:
    """The uses of each binding tag's thumbnail attributes (``im.url``), by the tag's index.

    A use belongs to the one tag that binds its name there: with
    sorl-thumbnail, the innermost open ``{% thumbnail ... as im %}`` block
    that binds it (a block ends at its ``{% endthumbnail %}``, or with the
    template); with easy-thumbnails, which has no blocks, the last tag that
    bound it. So every use is reported once, after its tag, and one pass over
    the template finds them all.
    """
    uses: dict[int, list[_Use]] = {}
    #: By name, the tags that bind it now, the one that counts last.
    binding: dict[str, list[int]] = {}
    #: sorl-thumbnail's open blocks, innermost last: the name each binds, if one.
    blocks: list[str | None] = []
    for index, token in enumerate(tokens):
        for match in ATTRIBUTE_USE.finditer(token.contents):
            if binding.get(match[1]):
                uses[binding[match[1]][-1]].append((token, match))
        name = bits[index][:1]
        variable = as_variable(library, bits[index])
        if name == ["thumbnail"] and variable is not None:
            uses[index] = []
            bound = variable if NAME.fullmatch(variable) else None
            if library == SORL:
                blocks.append(bound)
            if bound is not None:
                stack = binding.setdefault(bound, [])
                if library != SORL:
                    stack.clear()
                stack.append(index)
        elif name == ["endthumbnail"] and library == SORL and blocks:
            bound = blocks.pop()
            if bound is not None:
                binding[bound].pop()
    return uses


def _load_finding(path: str, token: _Token, bits: list[str], library: str) -> list[Finding]:
    names = bits[1:]
    if "from" in names or not THUMBNAIL_LIBRARIES & set(names):
        return []
    kept: list[str] = []
    for name in names:
        new = OXIMG_LIBRARY if name in THUMBNAIL_LIBRARIES else name
        if new not in kept:
            kept.append(new)
    replacement = "{% load " + " ".join(kept) + " %}"
    return [judged(path, token.line, library, ("{% load thumbnail %}",), token.text, replacement)]


def _sorl_tag(path: str, token: _Token, bits: list[str]) -> Finding:
    as_var = as_variable(SORL, bits)
    arguments = bits[3:-2] if as_var else bits[3:]
    parts = [Part("geometry", " ".join(bits[1:3]))]
    for bit in arguments:
        name, _, value = bit.partition("=")
        parts.append(sorl_option(name, literal(value), bit))
    return _tag_finding(path, token, SORL, bits[:3], parts, as_var)


def _easy_tag(path: str, token: _Token, bits: list[str]) -> Finding:
    as_var = as_variable(EASY, bits)
    arguments = bits[3:-2] if as_var else bits[3:]
    size = bits[2] if len(bits) > 2 else ""
    value = literal(size)
    head = bits[:2]
    parts: list[Part] = []
    if EASY_SIZE.fullmatch(size):
        parts.append(Part("unquoted size", size))
        head.append(f'"{size}"')
    elif isinstance(value, str) and EASY_SIZE.fullmatch(value):
        parts.append(Part("quoted size", size))
        head.append(size)
    elif isinstance(value, str):
        parts.append(Part("alias", size, {"preset": value}))
        head.append('""')
    else:
        parts.append(Part("size from a variable", size))
        head.append(size)
    for bit in arguments:
        name, sep, text = bit.partition("=")
        parts.append(easy_option(name, literal(text), bit, flag=not sep))
    parts = easy_target(parts)
    if as_var:
        parts.append(Part("as", f"as {as_var}"))
    return _tag_finding(path, token, EASY, head, parts, as_var)


def _tag_finding(
    path: str, token: _Token, library: str, head: list[str], parts: list[Part], as_var: str | None
) -> Finding:
    """One tag's finding: its worst part's verdict and the tag as django-oximg takes it.

    ``head`` is the tag's name, source and size as django-oximg writes them,
    in place of the first part's text.
    """
    bits = [*head, *rewritten(library, parts[1:], template_value)]
    if as_var:
        bits += ["as", as_var]
    features = tuple(part.feature for part in parts)
    return judged(path, token.line, library, features, token.text, "{% " + " ".join(bits) + " %}")


def _attribute_findings(path: str, library: str, uses: list[_Use]) -> list[Finding]:
    """Uses of the thumbnail's attributes that django-oximg's thumbnail does not have."""
    findings = []
    for token, match in uses:
        var, attribute = match[1], match[2]
        if attribute in THUMBNAIL_ATTRIBUTES:
            continue
        prefix = "im" if library == SORL else "t"
        feature = f"{prefix}.{attribute}"
        if (library, feature) not in SUPPORT:
            feature = f"{prefix}.other"
        renamed = {"x": "width", "y": "height"}.get(attribute)
        edit = renamed and rule(library, feature).verdict == EDIT
        replacement = f"{var}.{renamed}" if edit else ""
        code = f"{var}.{attribute}"
        findings.append(judged(path, token.line, library, (feature,), code, replacement))
    return findings


def _filter_findings(path: str, token: _Token, library: str) -> list[Finding]:
    findings = []
    for match in FILTER.finditer(token.contents):
        name, argument = match[1], match[2]
        feature = f"|{name}"
        owner = next((lib for lib in (library, SORL, EASY) if (lib, feature) in SUPPORT), None)
        if owner is None:
            continue
        found = rule(owner, feature)
        replacement = ""
        if name == "thumbnail_url" and found.verdict == EDIT and token.kind == "var":
            source = token.contents[: match.start()].strip()
            after = token.contents[match.end() :].strip()
            if source and "|" not in source and not after and argument:
                alias = literal(argument)
                preset = template_value(alias) if alias is not VARIABLE else argument
                replacement = f'{{% thumbnail_url {source} "" preset={preset} %}}'
        findings.append(judged(path, token.line, owner, (feature,), token.text, replacement))
    return findings
