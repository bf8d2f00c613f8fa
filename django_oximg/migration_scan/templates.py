"""The scanner of templates: sorl's and easy-thumbnails' tags, filters and attributes.

It reads a template's tokens the way Django's lexer cuts them (skipping
``{% comment %}`` and ``{% verbatim %}``), decides which library its
``{% thumbnail %}`` is, and writes each tag, filter and use of the
thumbnail's attributes as a finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from django_oximg.migration_scan.findings import EASY, EDIT, SORL, Finding
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
#: Every name under which a template loads sorl's or easy-thumbnails' tags.
THUMBNAIL_LIBRARIES = frozenset({SHARED_LIBRARY, *TEMPLATE_LIBRARIES})

#: Attributes of a thumbnail that django-oximg's has too.
THUMBNAIL_ATTRIBUTES = frozenset({"url", "width", "height"})

#: easy-thumbnails' literal size: "100x100" (0 leaves a side free).
EASY_SIZE = re.compile(r"(\d+)x(\d+)")

#: Django's own tokens; like Django's lexer, none spans lines.
TOKEN = re.compile(r"{%(.*?)%}|{{(.*?)}}|{#.*?#}")
BIT = re.compile(r"""(?:"[^"]*"|'[^']*'|[^\s"'])+""")
FILTER = re.compile(r"""\|\s*(\w+)(?:\s*:\s*("[^"]*"|'[^']*'|[^\s|]+))?""")
SKIPPED_BLOCKS = {"comment": "endcomment", "verbatim": "endverbatim"}


def literal(text: str) -> Any:
    """The value of a template literal, or :data:`VARIABLE` for anything else."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d*\.\d+", text):
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


def template_tokens(text: str) -> Iterator[_Token]:
    """Tags and variables with their lines, outside {% comment %} and {% verbatim %}."""
    closing = ""
    for match in TOKEN.finditer(text):
        if match[1] is None and match[2] is None:
            continue
        kind = "tag" if match[1] is not None else "var"
        contents = (match[1] if kind == "tag" else match[2]).strip()
        name = contents.split(None, 1)[0] if contents else ""
        if closing:
            if kind == "tag" and name == closing:
                closing = ""
            continue
        if kind == "tag" and name in SKIPPED_BLOCKS:
            closing = SKIPPED_BLOCKS[name]
            continue
        line = text.count("\n", 0, match.start()) + 1
        yield _Token(line, match.start(), match.end(), kind, match[0], contents)


def template_library(text: str, default: str) -> str:
    """Which library a template's {% thumbnail %} is: its load, its syntax, else ``default``."""
    for token in template_tokens(text):
        bits = token.contents.split()
        if token.kind == "tag" and bits[:1] == ["load"]:
            for name in bits[1:]:
                if name in TEMPLATE_LIBRARIES:
                    return TEMPLATE_LIBRARIES[name]
    if re.search(r"{%\s*endthumbnail\b", text):
        return SORL
    easy_habits = (
        r"{%\s*thumbnail\s+\S+\s+\d+x\d+",
        r"\|\s*(thumbnail_url|thumbnailer|thumbnailer_passive)\b",
    )
    if any(re.search(habit, text) for habit in easy_habits):
        return EASY
    return default


def scan_template(
    path: str, text: str, default_library: str = SORL, *, loaded: bool = False
) -> list[Finding]:
    """The findings of one template.

    Only templates that load sorl-thumbnail's or easy-thumbnails' library are
    read, unless ``loaded`` (the library is one of the engine's builtins).
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
    if not loaded and not THUMBNAIL_LIBRARIES & loads:
        return []
    library = template_library(text, default_library)
    findings: list[Finding] = []
    for index, token in enumerate(tokens):
        bits = BIT.findall(token.contents)
        if token.kind == "tag" and bits[:1] == ["load"]:
            findings.extend(_load_finding(path, token, bits, library))
        elif token.kind == "tag" and bits[:1] == ["thumbnail"]:
            if library == SORL:
                findings.extend(_sorl_tag(path, token, bits, tokens[index + 1 :]))
            else:
                findings.extend(_easy_tag(path, token, bits, tokens[index + 1 :]))
        findings.extend(_filter_findings(path, token, library))
    return findings


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


def _sorl_tag(path: str, token: _Token, bits: list[str], rest: list[_Token]) -> list[Finding]:
    as_var = bits[-1] if len(bits) >= 2 and bits[-2] == "as" else None
    arguments = bits[3:-2] if as_var else bits[3:]
    parts = [Part("geometry", " ".join(bits[1:3]))]
    for bit in arguments:
        name, _, value = bit.partition("=")
        parts.append(sorl_option(name, literal(value), bit))
    findings = [_tag_finding(path, token, SORL, bits[:3], parts, as_var)]
    if as_var:
        findings.extend(_attribute_findings(path, SORL, as_var, _block(rest)))
    return findings


def _easy_tag(path: str, token: _Token, bits: list[str], rest: list[_Token]) -> list[Finding]:
    as_var = bits[-1] if len(bits) > 4 and bits[-2] == "as" else None
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
    finding = _tag_finding(path, token, EASY, head, parts, as_var)
    findings = [finding]
    if as_var:
        uses = [t for t in rest if re.search(rf"\b{re.escape(as_var)}\b", t.contents)]
        last = uses[-1].line if uses else token.line
        advice = finding.advice.replace(
            "after the last use", f"after the last use of {as_var} (line {last})"
        )
        findings[0] = replace(finding, advice=advice)
        findings.extend(_attribute_findings(path, EASY, as_var, rest))
    return findings


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


def _block(rest: list[_Token]) -> list[_Token]:
    """The tokens up to the {% endthumbnail %} that closes a block (nesting counted)."""
    depth = 1
    for index, token in enumerate(rest):
        name = token.contents.split(None, 1)[0] if token.kind == "tag" and token.contents else ""
        if name == "thumbnail" and re.search(r"\bas\s+\w+$", token.contents):
            depth += 1
        elif name == "endthumbnail":
            depth -= 1
            if depth == 0:
                return rest[:index]
    return rest


def _attribute_findings(path: str, library: str, var: str, tokens: list[_Token]) -> list[Finding]:
    """Uses of the thumbnail's attributes that django-oximg's thumbnail does not have."""
    findings = []
    for token in tokens:
        for match in re.finditer(rf"\b{re.escape(var)}\.(\w+)", token.contents):
            attribute = match[1]
            if attribute in THUMBNAIL_ATTRIBUTES:
                continue
            prefix = "im" if library == SORL else "t"
            feature = f"{prefix}.{attribute}"
            if (library, feature) not in SUPPORT:
                feature = f"{prefix}.other"
            renamed = {"x": "width", "y": "height"}.get(attribute)
            edit = renamed and rule(library, feature).verdict == EDIT
            replacement = f"{var}.{renamed}" if edit else ""
            findings.append(judged(path, token.line, library, (feature,), match[0], replacement))
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
