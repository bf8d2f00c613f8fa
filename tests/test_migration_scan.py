"""The migration scanner: what it finds in a sorl-thumbnail and an easy-thumbnails project.

The two projects are fixture files under tests/migration_fixtures/ (four sorl
templates with the Python around them; an easy-thumbnails alias setup with a
template and views). The findings are pinned exactly, and the scanner's
claims are checked against django-oximg itself: every tag it calls unchanged,
and every tag edit it writes, renders through the real ``{% thumbnail %}``
with ``RAISE_TEMPLATE_ERRORS`` on; every preset it writes parses and means what the tag keywords
mean.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import inspect
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from re import _constants as re_constants  # type: ignore[attr-defined]
from re import _parser as re_parser  # type: ignore[attr-defined]
from types import ModuleType
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.template import Context, Template

from django_oximg import migration_scan, thumbnails
from django_oximg.core.options import build_path, parse_path
from django_oximg.migration_scan import (
    EASY,
    EDIT,
    SORL,
    UNCHANGED,
    UNSUPPORTED,
    Finding,
    files,
    scan_python,
    scan_template,
)
from django_oximg.migration_scan.options import rewritten, sorl_option
from django_oximg.migration_scan.python import python_value
from django_oximg.migration_scan.support import judged

FIXTURES = Path(__file__).parent / "migration_fixtures"
SORL_PROJECT = FIXTURES / "sorl_project"
EASY_PROJECT = FIXTURES / "easy_project"
SORL_TEMPLATES = SORL_PROJECT / "shop" / "templates" / "shop"

Row = tuple[str, int, str, str, str]


def scan(project: Path, relative: str, library: str) -> list[Finding]:
    path = project / relative
    scanner = scan_python if path.suffix == ".py" else scan_template
    return scanner(relative, path.read_text(), library)


def rows(findings: list[Finding]) -> list[Row]:
    """What a reader acts on: where, the verdict, the code found and its replacement."""
    return [(f.path, f.line, f.verdict, f.code, f.replacement) for f in findings]


SORL_TEMPLATE_ROWS: dict[str, list[Row]] = {
    "product_list.html": [
        ("product_list.html", 2, EDIT, "{% load thumbnail %}", "{% load oximg %}"),
        (
            "product_list.html",
            8,
            UNCHANGED,
            '{% thumbnail product.image "300x200" crop="center" quality=85 as im %}',
            "",
        ),
    ],
    "product_detail.html": [
        ("product_detail.html", 2, EDIT, "{% load static thumbnail %}", "{% load static oximg %}"),
        ("product_detail.html", 5, UNCHANGED, "{% if product.image|is_portrait %}", ""),
        (
            "product_detail.html",
            6,
            UNCHANGED,
            '{% thumbnail product.image "800" upscale=False format="PNG" as im %}',
            "",
        ),
        (
            "product_detail.html",
            9,
            UNCHANGED,
            '{% thumbnail product.image "600x600" padding=True padding_color="#eee" as im %}',
            "",
        ),
        ("product_detail.html", 10, UNCHANGED, "im.x", ""),
    ],
    "banner.html": [
        ("banner.html", 1, EDIT, "{% load thumbnail %}", "{% load oximg %}"),
        (
            "banner.html",
            3,
            EDIT,
            '{% thumbnail banner.image "1200x630" crop="50% 30%" progressive=False as im %}',
            '{% thumbnail banner.image "1200x630" crop="50% 30%" as im %}',
        ),
        ("banner.html", 5, UNCHANGED, "{{ im.url|resolution:'2x' }}", ""),
        ("banner.html", 7, UNCHANGED, "{{ banner.logo|margin:'200x200' }}", ""),
        ("banner.html", 8, UNCHANGED, '{% thumbnail banner.logo "200x200" as logo %}', ""),
    ],
    "avatar.html": [
        ("avatar.html", 1, EDIT, "{% load thumbnail %}", "{% load oximg %}"),
        (
            "avatar.html",
            3,
            UNCHANGED,
            '{% thumbnail user.avatar "80x80" crop="smart" as im %}',
            "",
        ),
        (
            "avatar.html",
            4,
            UNSUPPORTED,
            '{% thumbnail user.avatar "40x40" crop="noop" colorspace="GRAY" as im %}',
            '{% thumbnail user.avatar "40x40" crop="noop" as im %}',
        ),
        ("avatar.html", 5, UNCHANGED, "im.is_portrait", ""),
        (
            "avatar.html",
            7,
            EDIT,
            '{% thumbnail user.avatar "x100" cropbox="10,10,110,110" as im %}',
            '{% thumbnail user.avatar "x100" options="c:100:100:nowe:10:10" as im %}',
        ),
    ],
}


@pytest.mark.parametrize("name", sorted(SORL_TEMPLATE_ROWS))
def test_sorl_templates(name: str) -> None:
    findings = scan(SORL_TEMPLATES, name, SORL)
    assert rows(findings) == SORL_TEMPLATE_ROWS[name]
    assert {f.library for f in findings} == {SORL}
    # Every finding that is not unchanged says why or how.
    assert all(f.advice for f in findings if f.verdict != UNCHANGED)


def test_sorl_advice_names_what_to_do() -> None:
    [*_, cropbox] = scan(SORL_TEMPLATES, "avatar.html", SORL)
    assert cropbox.features == ("geometry", "cropbox")
    assert cropbox.advice == 'a fixed cut before resizing is options="c:W:H:nowe:X:Y"'
    unsupported = scan(SORL_TEMPLATES, "avatar.html", SORL)[2]
    assert unsupported.features == ("geometry", "crop", "colorspace")
    assert "no grayscale output" in unsupported.advice


SORL_PYTHON_ROWS: dict[str, list[Row]] = {
    "shop/models.py": [
        (
            "shop/models.py",
            2,
            EDIT,
            "from sorl.thumbnail import ImageField",
            "from django.db.models import ImageField",
        )
    ],
    "shop/views.py": [
        (
            "shop/views.py",
            2,
            EDIT,
            "from sorl.thumbnail import delete, get_thumbnail",
            "from django_oximg.purge import purge_source",
        ),
        (
            "shop/views.py",
            2,
            EDIT,
            "from sorl.thumbnail import delete, get_thumbnail",
            "from django_oximg.thumbnails import get_thumbnail",
        ),
        (
            "shop/views.py",
            9,
            UNCHANGED,
            'get_thumbnail(product.image, "100x100", crop="center", quality=90)',
            "",
        ),
        (
            "shop/views.py",
            10,
            EDIT,
            'get_thumbnail(product.image, "1000", progressive=False, upscale=False)',
            'get_thumbnail(product.image, "1000", upscale=False)',
        ),
        ("shop/views.py", 15, EDIT, "delete(product.image)", "purge_source(product.image.name)"),
    ],
    "shop/migrations/0001_initial.py": [
        # Both fail a fresh migrate once sorl-thumbnail is uninstalled.
        ("shop/migrations/0001_initial.py", 1, EDIT, "import sorl.thumbnail.fields", ""),
        (
            "shop/migrations/0001_initial.py",
            15,
            EDIT,
            "sorl.thumbnail.fields.ImageField",
            "models.ImageField",
        ),
    ],
    "settings.py": [
        ("settings.py", 3, EDIT, '"sorl.thumbnail"', '"django_oximg"'),
        ("settings.py", 7, EDIT, "THUMBNAIL_DEBUG = True", 'OXIMG["RAISE_TEMPLATE_ERRORS"] = True'),
        (
            "settings.py",
            8,
            EDIT,
            'THUMBNAIL_KVSTORE = "sorl.thumbnail.kvstores.redis_kvstore.KVStore"',
            "",
        ),
        ("settings.py", 9, EDIT, 'THUMBNAIL_REDIS_URL = "redis://localhost:6379/1"', ""),
        (
            "settings.py",
            10,
            EDIT,
            'THUMBNAIL_FORMAT = "WEBP"',
            'OXIMG["TAG_DEFAULTS"] = {"format": "webp"}',
        ),
        ("settings.py", 11, EDIT, "THUMBNAIL_QUALITY = 85", 'OXIMG["QUALITY"] = {"jpeg": 85}'),
        ("settings.py", 12, EDIT, "THUMBNAIL_UPSCALE = False", ""),
        ("settings.py", 13, UNSUPPORTED, "THUMBNAIL_DUMMY = True", ""),
    ],
}


@pytest.mark.parametrize("name", sorted(SORL_PYTHON_ROWS))
def test_sorl_python(name: str) -> None:
    assert rows(scan(SORL_PROJECT, name, SORL)) == SORL_PYTHON_ROWS[name]


EASY_PRESETS = {
    "avatar": "rs:fill:50:50/g:ce",
    "card": "rs:fill:400:300/g:sm/q:70",
    "wide": "rs:fit:1200:0/el:1",
    "grey": "rs:fit:100:100",
    "profiles.Profile.banner.hero": "rs:fill:1600:400/g:no/sh:0.5",
}


def test_easy_aliases_become_presets() -> None:
    findings = scan(EASY_PROJECT, "settings.py", EASY)
    presets = ", ".join(f'"{name}": "{text}"' for name, text in EASY_PRESETS.items())
    assert rows(findings) == [
        ("settings.py", 3, EDIT, '"easy_thumbnails"', '"django_oximg"'),
        ("settings.py", 7, EDIT, "THUMBNAIL_ALIASES = {", f'OXIMG["PRESETS"] = {{{presets}}}'),
        ("settings.py", 9, EDIT, '"avatar"', '"avatar": "rs:fill:50:50/g:ce"'),
        ("settings.py", 10, EDIT, '"card"', '"card": "rs:fill:400:300/g:sm/q:70"'),
        ("settings.py", 11, EDIT, '"wide"', '"wide": "rs:fit:1200:0/el:1"'),
        ("settings.py", 12, UNSUPPORTED, '"grey"', '"grey": "rs:fit:100:100"'),
        (
            "settings.py",
            15,
            EDIT,
            '"hero"',
            '"profiles.Profile.banner.hero": "rs:fill:1600:400/g:no/sh:0.5"',
        ),
        ("settings.py", 18, EDIT, "THUMBNAIL_QUALITY = 90", 'OXIMG["QUALITY"] = {"jpeg": 90}'),
        ("settings.py", 19, EDIT, "THUMBNAIL_HIGH_RESOLUTION = True", ""),
    ]
    grey = findings[5]
    assert grey.features == ("alias definition", "bw")
    assert "no grayscale output" in grey.advice
    assert "a preset named with its scope" in findings[6].advice


#: Each preset and the tag arguments of the alias it was translated from.
ALIAS_ARGUMENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "avatar": ("50x50", {"crop": "center"}),
    "card": ("400x300", {"crop": "smart", "quality": 70}),
    "wide": ("1200x0", {"upscale": True}),
    "grey": ("100x100", {}),
    "profiles.Profile.banner.hero": ("1600x400", {"crop": "top", "sharpen": 0.5}),
}


@pytest.mark.parametrize("name", sorted(EASY_PRESETS))
def test_each_preset_means_what_the_tag_keywords_mean(name: str) -> None:
    """The preset parses as the server will parse it, into the tag's own options."""
    preset = parse_path(f"/pr:{name}/plain/x.jpg", EASY_PRESETS).options
    geometry, keywords = ALIAS_ARGUMENTS[name]
    tag = thumbnails.tag_options(geometry, keywords)
    assert preset == parse_path(build_path(tag, "x.jpg")).options


def test_easy_templates() -> None:
    findings = scan(EASY_PROJECT, "profiles/templates/profiles/profile.html", EASY)
    path = "profiles/templates/profiles/profile.html"
    assert rows(findings) == [
        (path, 1, EDIT, "{% load thumbnail %}", "{% load oximg %}"),
        (path, 2, UNCHANGED, "{{ profile.photo|thumbnail_url:'avatar' }}", ""),
        (path, 3, UNCHANGED, "{% thumbnail profile.photo 'card' as t %}", ""),
        (path, 6, UNSUPPORTED, "t.path", ""),
        (path, 7, UNCHANGED, "{% thumbnail profile.photo 100x100 crop upscale %}", ""),
        (
            path,
            8,
            EDIT,
            '{% thumbnail profile.banner 1600x400 crop=",0" quality=90 %}',
            '{% thumbnail profile.banner "1600x400" quality=90 crop="top" %}',
        ),
        (
            path,
            9,
            EDIT,
            '{% thumbnail profile.photo "200x200" crop="smart" replace_alpha="#fff" %}',
            '{% thumbnail profile.photo "200x200" crop="smart" background="ffffff" '
            'format="jpeg" %}',
        ),
        (
            path,
            10,
            UNSUPPORTED,
            "{% with photo=profile.photo|thumbnailer %}",
            "",
        ),
    ]
    assert {f.library for f in findings} == {EASY}


def test_easy_crop_words_it_would_centre() -> None:
    """easy-thumbnails centres any crop it does not know; the tag reads "top" as top."""
    text = (
        '{% load thumbnail %}{% thumbnail p 10x10 crop="top" %}'
        '{% thumbnail p 10x10 crop="center" %}'
    )
    [_, top, centre] = scan_template("a.html", text, EASY)
    assert (top.verdict, top.replacement) == (EDIT, '{% thumbnail p "10x10" crop="center" %}')
    assert centre.verdict == UNCHANGED


def test_easy_python() -> None:
    assert rows(scan(EASY_PROJECT, "profiles/models.py", EASY)) == [
        (
            "profiles/models.py",
            2,
            EDIT,
            "from easy_thumbnails.fields import ThumbnailerImageField",
            "from django.db.models import ImageField",
        )
    ]
    assert rows(scan(EASY_PROJECT, "profiles/views.py", EASY)) == [
        (
            "profiles/views.py",
            2,
            EDIT,
            "from easy_thumbnails.files import get_thumbnailer",
            "from django_oximg.thumbnails import get_thumbnailer",
        ),
        ("profiles/views.py", 9, UNCHANGED, 'get_thumbnailer(profile.photo)["avatar"]', ""),
        (
            "profiles/views.py",
            10,
            UNCHANGED,
            'get_thumbnailer(profile.photo).get_thumbnail({"size": (100, 100), "crop": True})',
            "",
        ),
    ]


# -- the scanner's claims, checked against django-oximg ----------------------------------


def thumbnail_tags(findings: list[Finding]) -> list[str]:
    """The tags as django-oximg will read them: as found when unchanged, else the edit."""
    return [
        f.code if f.verdict == UNCHANGED else f.replacement
        for f in findings
        if f.code.startswith("{% thumbnail") and f.verdict in (UNCHANGED, EDIT)
    ]


def context_for(tag: str, source: str) -> dict[str, Any]:
    """A context where the tag's source variable (``a.b``) names ``source``."""
    *path, leaf = tag.split()[2].split(".")
    value: Any = {leaf: source}
    for name in reversed(path):
        value = {name: value}
    return value  # type: ignore[no-any-return]


def render_tag(tag: str, source: str) -> str:
    as_var = tag.split()[-2] if tag.split()[-3] == "as" else None
    body = f"{{{{ {as_var}.url }}}}{{% endthumbnail %}}" if as_var else ""
    text = "{% load oximg %}" + tag + body
    return Template(text).render(Context(context_for(tag, source)))


@pytest.mark.parametrize("name", sorted(SORL_TEMPLATE_ROWS))
def test_sorl_tags_said_to_run_do_run(media: Path, settings: Any, name: str) -> None:
    # A failure raises instead of rendering nothing.
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    tags = thumbnail_tags(scan(SORL_TEMPLATES, name, SORL))
    assert tags
    for tag in tags:
        assert render_tag(tag, "photos/landscape.jpg").startswith("/img/"), tag


def test_easy_tags_said_to_run_do_run(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": EASY_PRESETS, "RAISE_TEMPLATE_ERRORS": True}
    findings = scan(EASY_PROJECT, "profiles/templates/profiles/profile.html", EASY)
    tags = thumbnail_tags(findings)
    assert len(tags) == 4
    for tag in tags:
        assert render_tag(tag, "photos/alpha.png").startswith("/img/"), tag
    [url_filter] = [f for f in findings if "|thumbnail_url" in f.code]
    assert url_filter.verdict == UNCHANGED
    out = Template("{% load oximg %}" + url_filter.code).render(
        Context({"profile": {"photo": "photos/alpha.png"}})
    )
    assert out.startswith("/img/")


def test_templates_that_load_only_oximg_are_not_read() -> None:
    text = '{% load oximg %}{% thumbnail photo "100x100" crop="noop" %}{{ x|is_portrait }}'
    assert scan_template("ours.html", text) == []
    # Unless the library is a builtin of the engine.
    plain = '{% thumbnail photo "100x100" %}'
    assert rows(scan_template("b.html", plain, loaded=True)) == [
        ("b.html", 1, UNCHANGED, plain, "")
    ]


def test_the_library_follows_the_template_syntax() -> None:
    easy_syntax = "{% load thumbnail %}{% thumbnail photo 100x100 %}"
    [_, tag] = scan_template("a.html", easy_syntax, SORL)
    assert tag.library == EASY
    sorl_syntax = '{% load thumbnail %}{% thumbnail p "9" as im %}{% endthumbnail %}'
    [_, tag] = scan_template("a.html", sorl_syntax, EASY)
    assert tag.library == SORL


# -- templates the scanner does not control -------------------------------------------------

#: The modules whose patterns run over whole templates, tags and their values.
TEMPLATE_PATTERN_MODULES = (migration_scan.templates, migration_scan.options)
REPEATS = (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT)


def module_patterns(module: ModuleType) -> list[str]:
    """Every pattern ``module`` hands to ``re``, read from its source."""
    patterns = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
        ):
            pattern = node.args[0]
            # A pattern built at run time could not be checked here.
            assert isinstance(pattern, ast.Constant) and isinstance(pattern.value, str), (
                ast.unparse(node)
            )
            patterns.append(pattern.value)
    return patterns


def slow_repeats(pattern: str) -> list[str]:
    """The repeats that make a regex slower than linear on some text.

    An unbounded repeat inside another can backtrack through every way of
    cutting a run between them; a lazy unbounded one (``{%.*?%}``) stretches
    to its closer from every opener, reading the rest of the line once per
    opener.
    """
    found = []

    def walk(items: Any, inside: bool) -> None:
        for op, value in items:
            if op in REPEATS:
                _, high, body = value
                unbounded = high == re_constants.MAXREPEAT
                if unbounded and inside:
                    found.append(f"nested: {pattern}")
                if unbounded and op == re_constants.MIN_REPEAT:
                    found.append(f"lazy: {pattern}")
                walk(body, inside or unbounded)
            elif op == re_constants.SUBPATTERN:
                walk(value[-1], inside)
            elif op == re_constants.BRANCH:
                for branch in value[1]:
                    walk(branch, inside)
            elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
                walk(value[1], inside)
            elif op == re_constants.ATOMIC_GROUP:
                walk(value, inside)

    walk(re_parser.parse(pattern), False)
    return found


def test_slow_repeats_are_recognised() -> None:
    assert slow_repeats(r"{%(.*?)%}") == [r"lazy: {%(.*?)%}"]
    assert slow_repeats(r"""(?:"[^"]*"|[^\s"])+""") == [r"""nested: (?:"[^"]*"|[^\s"])+"""]
    assert slow_repeats(r"(a(?=b+))?\s*(\d+)") == []


def test_no_template_pattern_is_slower_than_linear() -> None:
    patterns = [p for module in TEMPLATE_PATTERN_MODULES for p in module_patterns(module)]
    assert len(patterns) > 10  # the patterns were found
    assert [found for pattern in patterns for found in slow_repeats(pattern)] == []


#: A megabyte of one thing, on one line.
MEGABYTE = 2**20
TAG = '{% thumbnail photo "100x100" %}'


@pytest.mark.parametrize(
    ("junk", "found"),
    [
        ("{%" * (MEGABYTE // 2), []),
        ("{{" * (MEGABYTE // 2), []),
        ("{#" * (MEGABYTE // 2), []),
        ("{% thumbnail " * (MEGABYTE // 13), []),
        ('{% thumbnail a "1" as im %}' * (MEGABYTE // 27), [UNCHANGED] * (MEGABYTE // 27)),
    ],
    ids=[
        "{% run",
        "{{ run",
        "{# run",
        "unclosed thumbnail tags",
        "unclosed blocks",
    ],
)
def test_a_megabyte_line_is_scanned(junk: str, found: list[str]) -> None:
    """A line no template has is read to the end (32 KB of ``{%`` once took 10.8 s)."""
    text = "{% load thumbnail %}\n" + junk + "\n" + TAG + "\n"
    findings = scan_template("t.html", text)
    assert rows(findings[:1]) == [("t.html", 1, EDIT, "{% load thumbnail %}", "{% load oximg %}")]
    assert rows(findings[-1:]) == [("t.html", 3, UNCHANGED, TAG, "")]
    assert [(f.line, f.verdict) for f in findings[1:-1]] == [(2, verdict) for verdict in found]


@pytest.mark.parametrize("library", [SORL, EASY])
def test_each_use_of_a_thumbnail_attribute_is_reported_once(library: str) -> None:
    """A use belongs to the tag that binds its name there, so findings grow with the text."""
    if library == SORL:
        # Blocks inside blocks, never closed: an inner "as im" hides the outer ones.
        once = '{% thumbnail a "1" as im %}{{ im.size }}\n'
    else:
        once = "{% thumbnail a 10x10 as t %}{{ t.path }}\n"
    for copies in (50, 200):
        findings = scan_template("t.html", "{% load thumbnail %}\n" + once * copies, library)
        # The load, then each tag and its one use.
        assert len(findings) == 1 + 2 * copies
        uses = findings[2::2]
        assert [f.line for f in uses] == list(range(2, copies + 2))
        assert {f.code for f in uses} == {"im.size" if library == SORL else "t.path"}


def test_a_finding_is_as_bad_as_its_worst_feature_and_replaced_only_when_it_needs_to_be() -> None:
    """Every scanner's findings come from judged(): the table decides, not the scanner."""
    unchanged = judged("a.html", 3, SORL, ("geometry", "crop"), "{% thumbnail %}", "ignored")
    assert (unchanged.verdict, unchanged.replacement, unchanged.advice) == (UNCHANGED, "", "")
    mixed = judged("a.html", 3, SORL, ("geometry", "rounded", "progressive"), "code", "new")
    assert (mixed.verdict, mixed.replacement) == (UNSUPPORTED, "new")
    assert mixed.advice == (
        "no rounded corners; remove it: JPEGs are written baseline, "
        'or all progressive with OXIMG["JPEG_PROGRESSIVE"]'
    )


def test_edited_arguments_follow_the_unchanged_ones_with_raw_options_joined() -> None:
    parts = [
        sorl_option("cropbox", "0,0,100,50", 'cropbox="0,0,100,50"'),
        sorl_option("crop", "center", 'crop="center"'),
        sorl_option("orientation", False, "orientation=False"),
        sorl_option("quality", 80, "quality=80"),
    ]
    assert rewritten(SORL, parts, python_value) == [
        'crop="center"',
        "quality=80",
        'options="c:100:50:nowe:0:0/ar:0"',
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("from sorl.thumbnail import (", "not valid Python: '(' was never closed (line 1)"),
        ("import sorl.thumbnail\0", "not valid Python: source code"),
        # 5,000 levels: too deep for the parser of Python 3.11, not of 3.13's.
        ("import sorl.thumbnail\nx = " + "-" * 5000 + "1\n", "nested too deeply"),
        # Parsed everywhere, but deeper than a recursive walk of the tree can go.
        (
            "import sorl.thumbnail\nx = 1" + "+1" * (sys.getrecursionlimit() * 4 // 5),
            "nested too deeply",
        ),
    ],
    ids=["syntax error", "null byte", "5,000 deep", "deeper than the walk"],
)
def test_python_that_cannot_be_read_says_why(text: str, reason: str) -> None:
    with pytest.raises(migration_scan.ScanError) as raised:
        scan_python("broken.py", text)
    assert str(raised.value).startswith(reason)


def test_python_after_a_byte_order_mark_is_read() -> None:
    text = "from sorl.thumbnail import get_thumbnail\n"
    [finding] = scan_python("bom.py", "\ufeff" + text)
    assert finding == scan_python("bom.py", text)[0]
    assert finding.code == "from sorl.thumbnail import get_thumbnail"


def test_a_python_megabyte_line_is_scanned() -> None:
    """Each finding's code is cut from the text without reading the whole text again."""
    references = 40_000
    text = "import sorl.thumbnail\nx = [" + "sorl.thumbnail.delete, " * references + "]\n"
    assert len(text) > 900_000
    findings = scan_python("many.py", text)[1:]  # after the import's
    assert len(findings) == references
    assert {(f.line, f.code, f.replacement) for f in findings} == {
        (2, "sorl.thumbnail.delete", "purge_source")
    }


def test_the_module_does_not_import_django() -> None:
    code = "import sys, django_oximg.migration_scan; print('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_text_report() -> None:
    findings = scan(SORL_TEMPLATES, "product_list.html", SORL)
    assert migration_scan.text_report(findings) == (
        "product_list.html:2: edit (sorl-thumbnail)\n"
        "    {% load thumbnail %}\n"
        "    -> {% load oximg %}\n"
        "    load django-oximg's tag library instead\n"
        "product_list.html:8: unchanged (sorl-thumbnail)\n"
        '    {% thumbnail product.image "300x200" crop="center" quality=85 as im %}\n'
        "2 places: 1 unchanged, 1 to edit, 0 unsupported\n"
    )
    assert migration_scan.text_report([]) == "No sorl-thumbnail or easy-thumbnails usage found.\n"


def test_a_report_grows_with_the_text_not_with_its_square() -> None:
    """Each filter of a long variable is a finding; the report cuts the token they share."""
    filters = 2000
    token = "{{ x" + "|resolution" * filters + " }}"
    findings = scan_template("t.html", "{% load thumbnail %}\n" + token)
    assert len(findings) == 1 + filters
    assert {f.code for f in findings[1:]} == {token}  # the finding keeps it whole
    shown = f"{token[:400]}… ({len(token)} characters)"
    report = migration_scan.text_report(findings)
    assert report.count(f"\n    {shown}\n") == filters
    assert len(report) < 1000 * (1 + filters)  # the token alone is 22 KB
    assert {f["code"] for f in migration_scan.json_report(findings)["findings"][1:]} == {shown}


# -- manage.py oximg_migration_scan ---------------------------------------------------------


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("oximg_migration_scan", *args, stdout=out)
    return out.getvalue()


def test_command_finds_nothing_in_a_project_without_either() -> None:
    assert command() == "No sorl-thumbnail or easy-thumbnails usage found.\n"


def test_command_reads_the_given_paths_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SORL_PROJECT)
    output = command("--path", str(SORL_PROJECT))
    assert output.startswith(
        'settings.py:3: edit (sorl-thumbnail)\n    "sorl.thumbnail"\n    -> "django_oximg"\n'
    )
    # The four templates and the four Python files, as pinned above.
    pinned = [*SORL_TEMPLATE_ROWS.values(), *SORL_PYTHON_ROWS.values()]
    verdicts = [row[2] for found in pinned for row in found]
    assert (len(verdicts), verdicts.count(UNCHANGED), verdicts.count(UNSUPPORTED)) == (33, 11, 2)
    assert output.endswith("33 places: 11 unchanged, 20 to edit, 2 unsupported\n")
    assert "shop/templates/shop/avatar.html:7: edit (sorl-thumbnail)\n" in output


def test_command_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EASY_PROJECT)
    report = json.loads(command("--path", str(EASY_PROJECT), "--format", "json"))
    scanned = [
        *scan(EASY_PROJECT, "profiles/models.py", EASY),
        *scan(EASY_PROJECT, "profiles/templates/profiles/profile.html", EASY),
        *scan(EASY_PROJECT, "profiles/views.py", EASY),
        *scan(EASY_PROJECT, "settings.py", EASY),
    ]
    assert report == migration_scan.json_report(scanned)
    assert report["summary"] == {UNCHANGED: 5, EDIT: 13, UNSUPPORTED: 3}
    assert report["findings"][0] == {
        "path": "profiles/models.py",
        "line": 2,
        "library": EASY,
        "features": ["easy_thumbnails.fields.ThumbnailerImageField"],
        "code": "from easy_thumbnails.fields import ThumbnailerImageField",
        "verdict": EDIT,
        "replacement": "from django.db.models import ImageField",
        "advice": "Django's own ImageField (same column: a migration that only changes the "
        "class). An admin that previews it through formfield_overrides keyed by "
        "ThumbnailerImageField goes blank without a word: django_oximg.admin.ThumbnailAdminMixin "
        "previews Django's",
    }


def test_command_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a directory"):
        command("--path", str(tmp_path / "nowhere"))


# -- trees the scan does not control ----------------------------------------------------

SORL_TAG = '{% load thumbnail %}{% thumbnail photo "100x100" %}\n'
SORL_IMPORT = "from sorl.thumbnail import get_thumbnail\n"


def scanned(*args: str) -> tuple[str, str | None]:
    """The command's report and, when it fails, its error."""
    out = io.StringIO()
    try:
        call_command("oximg_migration_scan", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), None


@contextlib.contextmanager
def never_waiting_on(fifo: Path) -> Iterator[None]:
    """Fail if what runs inside waits to open ``fifo`` (rather than hang the test run).

    After a minute, ``fifo`` is opened for writing: whatever waits to open it
    for reading then goes on, and the test fails. That open never blocks:
    with no reader waiting it fails, and is not retried.
    """
    done = threading.Event()
    waited: list[bool] = []

    def unblock() -> None:
        if not done.wait(timeout=60):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                waited.append(True)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    assert not waited, f"waited to open {fifo}"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A --path directory with one sorl template, shown relative to its parent."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "project"
    root.mkdir()
    (root / "page.html").write_text(SORL_TAG)
    return root


@pytest.mark.parametrize("kind", ["FIFO", "socket"])
def test_command_skips_what_is_not_a_regular_file(project: Path, kind: str) -> None:
    special = project / "special.html"
    if kind == "FIFO":
        os.mkfifo(special)
    else:
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(special))
    with never_waiting_on(special):
        report, error = scanned("--path", "project")
    assert error is None
    assert report.startswith("project/page.html:1: edit (sorl-thumbnail)\n")
    assert report.endswith(
        "2 places: 1 unchanged, 1 to edit, 0 unsupported\n"
        "1 file skipped:\n"
        f"    project/special.html: not a regular file: a {kind}\n"
    )


def test_reading_a_file_swapped_for_a_fifo_neither_blocks_nor_reads(tmp_path: Path) -> None:
    fifo = tmp_path / "swapped.html"
    os.mkfifo(fifo)
    with never_waiting_on(fifo), pytest.raises(OSError, match="not a regular file"):
        files.read(fifo)


def test_command_does_not_follow_a_link_to_a_directory_outside(project: Path) -> None:
    outside = project.parent / "outside"
    outside.mkdir()
    (outside / "secret.html").write_text(SORL_TAG)
    (project / "linked").symlink_to(outside, target_is_directory=True)
    # A link to a directory inside adds nothing: its target is read under its own name.
    (project / "here").symlink_to(".", target_is_directory=True)
    report, error = scanned("--path", "project")
    assert error is None
    assert "secret" not in report
    assert report.count("project/page.html:1: ") == 2
    assert report.endswith(
        "1 file skipped:\n    project/linked: a symbolic link to a directory outside project\n"
    )


def test_command_reads_a_linked_file_only_inside(project: Path) -> None:
    outside = project.parent / "secret.html"
    outside.write_text(SORL_TAG)
    (project / "leak.html").symlink_to(outside)
    (project / "alias.html").symlink_to(project / "page.html")
    (project / "nowhere.html").symlink_to(project / "missing.html")
    report, error = scanned("--path", "project")
    assert error is None
    assert "secret" not in report
    # The link inside is read as its target, once.
    assert report.count("project/page.html:1: ") == 2
    assert "alias" not in report.split("skipped")[0]
    assert report.endswith(
        "2 files skipped:\n"
        "    project/leak.html: a symbolic link to a file outside project\n"
        "    project/nowhere.html: a symbolic link that cannot be followed "
        "(No such file or directory)\n"
    )


def test_command_walks_a_tree_deeper_than_the_stack(project: Path) -> None:
    """os.walk recursed once per directory before Python 3.12; the walk keeps its own list."""
    made = [project]
    for _ in range(sys.getrecursionlimit() + 100):
        made.append(made[-1] / "d")
        made[-1].mkdir()
    deepest = made[-1] / "deep.html"
    deepest.write_text(SORL_TAG)
    try:
        report, error = scanned("--path", "project")
    finally:  # before pytest's own clean-up, which recurses too
        deepest.unlink()
        for directory in reversed(made[1:]):
            directory.rmdir()
    assert error is None
    assert report.count("/d/deep.html:1: ") == 2
    assert report.endswith("4 places: 2 unchanged, 2 to edit, 0 unsupported\n")


def test_command_reports_the_files_it_cannot_scan_and_fails(project: Path) -> None:
    (project / "deep.py").write_text(SORL_IMPORT + "x = " + "-" * 5000 + "1\n")
    (project / "broken.py").write_text(SORL_IMPORT + "def (\n")
    (project / "latin.html").write_bytes(SORL_TAG.encode() + "café".encode("latin-1"))
    (project / "views.py").write_text(SORL_IMPORT)
    report, error = scanned("--path", "project")
    assert error == "3 files could not be scanned"
    # The other files are scanned.
    assert report.startswith(
        "project/page.html:1: edit (sorl-thumbnail)\n"
        "    {% load thumbnail %}\n"
        "    -> {% load oximg %}\n"
        "    load django-oximg's tag library instead\n"
        "project/page.html:1: unchanged (sorl-thumbnail)\n"
        '    {% thumbnail photo "100x100" %}\n'
        "project/views.py:1: edit (sorl-thumbnail)\n"
    )
    not_scanned = [
        {"path": "project/broken.py", "reason": "not valid Python: invalid syntax (line 2)"},
        {"path": "project/deep.py", "reason": "nested too deeply for Python's parser"},
        {"path": "project/latin.html", "reason": "not UTF-8 text: byte 0xe9 at offset 55"},
    ]
    if sys.version_info >= (3, 12):  # the parser of 3.12 and later takes it; the walk does not
        not_scanned[1]["reason"] = "nested too deeply to scan"
    assert report.endswith(
        "3 places: 1 unchanged, 2 to edit, 0 unsupported\n3 files not scanned:\n"
        + "".join(f"    {entry['path']}: {entry['reason']}\n" for entry in not_scanned)
    )
    output, error = scanned("--path", "project", "--format", "json")
    assert error == "3 files could not be scanned"
    report_json = json.loads(output)
    assert report_json["not_scanned"] == not_scanned
    assert report_json["skipped"] == []
    assert report_json["summary"] == {UNCHANGED: 1, EDIT: 2, UNSUPPORTED: 0}


def test_command_lists_binary_files_as_skipped(project: Path) -> None:
    (project / "logo.html").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + SORL_TAG.encode())
    report, error = scanned("--path", "project")
    assert error is None
    assert report.endswith("1 file skipped:\n    project/logo.html: not text: it holds NUL bytes\n")


def test_command_reads_files_as_python_and_django_decode_them(project: Path) -> None:
    """A byte-order mark, or a coding cookie, as Python and Django accept them."""
    (project / "bom.html").write_bytes(codecs.BOM_UTF8 + SORL_TAG.encode())
    (project / "bom.py").write_bytes(codecs.BOM_UTF8 + SORL_IMPORT.encode())
    cookie = "# -*- coding: latin-1 -*-\n# café\n" + SORL_IMPORT
    (project / "latin.py").write_bytes(cookie.encode("latin-1"))
    report, error = scanned("--path", "project")
    assert error is None
    assert "project/bom.html:1: edit (sorl-thumbnail)\n    {% load thumbnail %}\n" in report
    assert "project/bom.py:1: edit (sorl-thumbnail)\n    " + SORL_IMPORT in report
    assert "project/latin.py:3: edit (sorl-thumbnail)\n    " + SORL_IMPORT in report
    assert report.endswith("6 places: 2 unchanged, 4 to edit, 0 unsupported\n")


# -- every place that breaks once the library is uninstalled -----------------------------

#: A project built like a published sorl-thumbnail app with a django-oscar shop: an
#: admin.py saved with a byte-order mark, a historical migration importing sorl's
#: field, templates with sorl's and Oscar's tags, OSCAR_THUMBNAILER, a broken module.
BREAKING_PROJECT = {
    "settings.py": (
        "INSTALLED_APPS = [\n"
        '    "django.contrib.admin",\n'
        '    "oscar.config.Shop",\n'
        '    "sorl.thumbnail",\n'
        '    "classified",\n'
        "]\n"
        'OSCAR_THUMBNAILER = "oscar.core.thumbnails.SorlThumbnail"\n'
    ),
    "classified/__init__.py": "",
    "classified/admin.py": (
        "\ufefffrom django.contrib import admin\n"
        "from sorl.thumbnail.admin import AdminImageMixin\n"
        "\n"
        "from .models import Image\n"
        "\n"
        "\n"
        "class ImageInline(AdminImageMixin, admin.StackedInline):\n"
        "    model = Image\n"
    ),
    "classified/models.py": (
        "from django.db import models\n"
        "from sorl.thumbnail import ImageField\n"
        "\n"
        "\n"
        "class Image(models.Model):\n"
        '    file = ImageField(upload_to="images")\n'
    ),
    "classified/migrations/__init__.py": "",
    "classified/migrations/0001_initial.py": (
        "from django.db import migrations, models\n"
        "import sorl.thumbnail.fields\n"
        "\n"
        "\n"
        "class Migration(migrations.Migration):\n"
        "    operations = [\n"
        "        migrations.CreateModel(\n"
        '            name="Image",\n'
        "            fields=[\n"
        '                ("file", sorl.thumbnail.fields.ImageField(upload_to="images")),\n'
        "            ],\n"
        "        ),\n"
        "    ]\n"
    ),
    "classified/legacy.py": "from sorl.thumbnail import get_thumbnail\ndef (\n",
    "classified/templates/classified/item.html": (
        "{% load thumbnail %}\n"
        '{% thumbnail image.file "200x200" crop="center" as im %}\n'
        '  <img src="{{ im.url }}" width="{{ im.width }}">\n'
        "{% endthumbnail %}\n"
    ),
    "shop/templates/oscar/catalogue/product.html": (
        "{% extends 'oscar/layout.html' %}\n"
        "{% load image_tags %}\n"
        '{% oscar_thumbnail product.primary_image.original "x155" upscale=False as thumb %}\n'
        '<img src="{{ thumb.url }}" alt="">\n'
    ),
}

#: Where it breaks without sorl-thumbnail: path, line, verdict, code, replacement.
BREAKING_PLACES = [
    ("project/classified/admin.py", 2, EDIT, "from sorl.thumbnail.admin import AdminImageMixin",
     "from django_oximg.admin import ThumbnailAdminMixin"),
    ("project/classified/admin.py", 7, EDIT, "AdminImageMixin", "ThumbnailAdminMixin"),
    ("project/classified/migrations/0001_initial.py", 2, EDIT, "import sorl.thumbnail.fields", ""),
    ("project/classified/migrations/0001_initial.py", 10, EDIT,
     "sorl.thumbnail.fields.ImageField", "models.ImageField"),
    ("project/classified/models.py", 2, EDIT, "from sorl.thumbnail import ImageField",
     "from django.db.models import ImageField"),
    ("project/classified/templates/classified/item.html", 1, EDIT, "{% load thumbnail %}",
     "{% load oximg %}"),
    ("project/classified/templates/classified/item.html", 2, UNCHANGED,
     '{% thumbnail image.file "200x200" crop="center" as im %}', ""),
    ("project/settings.py", 4, EDIT, '"sorl.thumbnail"', '"django_oximg"'),
    ("project/settings.py", 7, EDIT, 'OSCAR_THUMBNAILER = "oscar.core.thumbnails.SorlThumbnail"',
     'OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.SorlThumbnail"'),
    ("project/shop/templates/oscar/catalogue/product.html", 3, UNCHANGED,
     '{% oscar_thumbnail product.primary_image.original "x155" upscale=False as thumb %}', ""),
]  # fmt: skip

#: Lines that name sorl-thumbnail or use a tag or setting that renders through it.
BREAKS_WITHOUT_SORL = re.compile(r"sorl|{% ?thumbnail|oscar_thumbnail|OSCAR_THUMBNAILER|ImageMixin")


def test_the_report_lists_every_place_that_breaks_without_sorl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for relative, text in BREAKING_PROJECT.items():
        path = tmp_path / "project" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    assert (tmp_path / "project/classified/admin.py").read_bytes().startswith(codecs.BOM_UTF8)
    output, error = scanned("--path", "project", "--format", "json")
    assert error == "1 file could not be scanned"
    report = json.loads(output)
    found = [
        (f["path"], f["line"], f["verdict"], f["code"], f["replacement"])
        for f in report["findings"]
    ]
    assert found == BREAKING_PLACES
    assert report["not_scanned"] == [
        {
            "path": "project/classified/legacy.py",
            "reason": "not valid Python: invalid syntax (line 2)",
        }
    ]
    # Checked another way: every line that names sorl or one of the tags is a finding,
    # or is in the file that could not be scanned.
    reported = {(f["path"], f["line"]) for f in report["findings"]}
    for relative, text in BREAKING_PROJECT.items():
        for number, line in enumerate(text.splitlines(), 1):
            if BREAKS_WITHOUT_SORL.search(line) and relative != "classified/legacy.py":
                assert (f"project/{relative}", number) in reported, line
    advice = {(f["path"], f["line"]): f["advice"] for f in report["findings"]}
    # The migration says how to stop importing sorl, Django's way.
    migration = advice[("project/classified/migrations/0001_initial.py", 2)]
    assert "a fresh migrate fails (No module named 'sorl')" in migration
    assert "models.ImageField" in migration and "squashmigrations" in migration
    # The field and the admin mixin are one change, and say where the other is.
    field = advice[("project/classified/models.py", 2)]
    assert "previews go blank" in field
    assert field.endswith(
        "(the admin that previews it: project/classified/admin.py:2, project/classified/admin.py:7)"
    )
    for line in (2, 7):
        mixin = advice[("project/classified/admin.py", line)]
        assert mixin.startswith("django_oximg.admin.ThumbnailAdminMixin")
        assert mixin.endswith("(the field it previews: project/classified/models.py:2)")
    assert (
        "django_oximg.contrib.oscar.SorlThumbnail"
        in advice[("project/shop/templates/oscar/catalogue/product.html", 3)]
    )
    text, _ = scanned("--path", "project")
    assert "1 file not scanned:\n    project/classified/legacy.py: not valid Python" in text


def test_imports_in_historical_migrations_say_how_to_stop_needing_the_library() -> None:
    migration = (
        "import easy_thumbnails.fields\n"
        "from easy_thumbnails.fields import ThumbnailerField\n"
        "x = easy_thumbnails.fields.ThumbnailerImageField(upload_to='a')\n"
        "y = easy_thumbnails.fields.ThumbnailerField(upload_to='b')\n"
    )
    findings = scan_python("profiles/migrations/0002_photo.py", migration, EASY)
    assert [(f.line, f.features, f.replacement) for f in findings] == [
        (1, ("import in a migration",), ""),
        (2, ("import in a migration",), ""),
        (3, ("field in a migration",), "models.ImageField"),
        (4, ("field in a migration",), "models.FileField"),
    ]
    assert "No module named 'easy_thumbnails'" in findings[0].advice
    assert "makemigrations --check" in findings[2].advice
    # The same import outside a migration fails too, with the other advice.
    [outside] = scan_python("profiles/utils.py", "import easy_thumbnails.files\n", EASY)
    assert (outside.verdict, outside.features) == (EDIT, ("import",))
    assert "No module named 'easy_thumbnails'" in outside.advice


def test_oscar_tag_and_thumbnailer_setting_are_found() -> None:
    oscar_only = '{% load i18n image_tags %}\n{% oscar_thumbnail img "100x100" %}\n'
    [tag] = scan_template("p.html", oscar_only)
    assert (tag.library, tag.line, tag.verdict) == ("django-oscar", 2, UNCHANGED)
    both = '{% load image_tags thumbnail %}{% oscar_thumbnail a "1" %}{% thumbnail b "2" %}'
    assert [f.features[0] for f in scan_template("p.html", both)] == [
        "{% load thumbnail %}",
        "{% oscar_thumbnail %}",
        "geometry",
    ]
    # Another library's tag of that name is not Oscar's.
    assert scan_template("p.html", '{% load shop_tags %}{% oscar_thumbnail a "1" %}') == []

    apps = 'INSTALLED_APPS = ["oscar.config.Shop", "oscar.apps.catalogue"]\n'
    [default] = scan_python("settings.py", apps)
    assert (default.library, default.line, default.code) == (
        "django-oscar",
        1,
        '"oscar.config.Shop"',
    )
    assert default.replacement == 'OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.SorlThumbnail"'
    easy = 'OSCAR_THUMBNAILER = "oscar.core.thumbnails.EasyThumbnails"\n'
    [setting] = scan_python("settings.py", apps + easy)
    assert (setting.line, setting.verdict, setting.replacement) == (
        2,
        EDIT,
        'OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.EasyThumbnails"',
    )
    for ours in ("SorlThumbnail", "EasyThumbnails"):
        done = f'OSCAR_THUMBNAILER = "django_oximg.contrib.oscar.{ours}"\n'
        assert scan_python("settings.py", apps + done) == []


def test_a_field_and_its_admin_are_paired_app_by_app() -> None:
    def finding(path: str, line: int, feature: str, library: str = SORL) -> Finding:
        return judged(path, line, library, (feature,), "code")

    field = finding("shop/models/product.py", 3, "sorl.thumbnail.ImageField")
    mixin = finding("shop/admin.py", 2, "sorl.thumbnail.admin.AdminImageMixin")
    elsewhere = finding("blog/admin.py", 2, "sorl.thumbnail.admin.AdminImageMixin")
    easy_field = finding("shop/models.py", 5, "easy_thumbnails.fields.ThumbnailerImageField", EASY)
    easy_widget = finding(
        "shop/admin.py", 9, "easy_thumbnails.widgets.ImageClearableFileInput", EASY
    )
    findings = [field, mixin, elsewhere, easy_field, easy_widget]
    result = migration_scan.paired(findings)
    added = [f.advice.removeprefix(b.advice) for f, b in zip(result, findings, strict=True)]
    assert added == [
        " (the admin that previews it: shop/admin.py:2)",
        " (the field it previews: shop/models/product.py:3)",
        "",  # another app: no pair
        " (the admin that previews it: shop/admin.py:9)",
        " (the field it previews: shop/models.py:5)",
    ]
    assert result[2] == elsewhere


def test_command_does_not_scan_a_python_file_holding_nul_bytes(project: Path) -> None:
    (project / "compiled.py").write_bytes(b"import sorl.thumbnail\0\n")
    report, error = scanned("--path", "project")
    assert error == "1 file could not be scanned"
    assert report.endswith(
        "1 file not scanned:\n    project/compiled.py: not text: it holds NUL bytes\n"
    )
