"""The Jinja2 globals through Django's Jinja2 backend: same URLs as the Django tags."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.template import Context, Template
from django.template.backends.jinja2 import Jinja2
from jinja2 import Environment, TemplateSyntaxError

from django_oximg.jinja2 import GLOBALS, OximgExtension
from django_oximg.thumbnails import ThumbnailError

LANDSCAPE = "photos/landscape.jpg"  # 640x480


def environment(**options: Any) -> Environment:
    """A project's own environment function, adding the globals by hand."""
    env = Environment(**options)
    env.globals.update(GLOBALS)
    return env


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def backend(**options: Any) -> Jinja2:
    return Jinja2({"NAME": "jinja2", "DIRS": [], "APP_DIRS": False, "OPTIONS": options})


@pytest.fixture(
    params=[
        {"extensions": ["django_oximg.jinja2.OximgExtension"]},
        {"environment": "tests.test_jinja2.environment"},
    ],
    ids=["extension", "environment"],
)
def jinja(request: pytest.FixtureRequest) -> Jinja2:
    return backend(**request.param)


def render(engine: Jinja2, text: str, **context: Any) -> str:
    return engine.from_string(text).render(context)


def django_render(text: str, **context: Any) -> str:
    return Template("{% load oximg %}" + text).render(Context(context))


def test_thumbnail_returns_the_object(media: Path, jinja: Jinja2) -> None:
    out = render(
        jinja,
        '{% set t = thumbnail(src, "200x100", crop="center") %}'
        "{{ t.url }} {{ t.width }} {{ t.height }}",
        src=LANDSCAPE,
    )
    url, width, height = out.split()
    assert (width, height) == ("200", "100")
    expected = django_render('{% thumbnail_url src "200x100" crop="center" %}', src=LANDSCAPE)
    assert url == expected


def test_every_global_matches_its_django_tag(media: Path, jinja: Jinja2) -> None:
    pairs = [
        (
            '{{ thumbnail_url(src, "120", format="webp") }}',
            '{% thumbnail_url src "120" format="webp" %}',
        ),
        (
            '{{ thumbnail_srcset(src, "200x100", widths="100,200", crop="center") }}',
            '{% thumbnail_srcset src "200x100" widths="100,200" crop="center" %}',
        ),
        (
            '{{ picture(src, "300", widths=[150, 300], alt=words, placeholder=True) }}',
            '{% picture src "300" widths="150,300" alt=words placeholder=True %}',
        ),
    ]
    for jinja_text, django_text in pairs:
        context = {"src": LANDSCAPE, "words": "A <b>"}
        out = render(jinja, jinja_text, **context)
        assert out == django_render(django_text, **context)
    assert 'alt="A &lt;b&gt;"' in out


def test_output_is_escaped_once(media: Path, jinja: Jinja2) -> None:
    out = render(jinja, '{{ picture(src, "100", alt=words) }}', src=LANDSCAPE, words='"<x>')
    assert "&#34;&lt;x&gt;" in out or "&quot;&lt;x&gt;" in out
    assert "&amp;lt;" not in out  # not escaped twice
    assert out.startswith("<picture><source")


def test_empty_source_gives_nothing(media: Path, jinja: Jinja2) -> None:
    out = render(
        jinja,
        '{% set t = thumbnail(src, "100") %}{% if t %}IMG{% else %}EMPTY{% endif %}'
        '[{{ thumbnail_url(src, "100") }}][{{ thumbnail_srcset(src, "100") }}]'
        '[{{ picture(src, "100") }}]',
        src="",
    )
    assert out == "EMPTY[][][]"


def test_failures_follow_the_tags_policy(
    media: Path, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = backend(extensions=["django_oximg.jinja2.OximgExtension"])
    text = "[{{ picture(src, size) }}]"
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": True}
    with pytest.raises(ThumbnailError):
        render(engine, text, src=LANDSCAPE, size="big")
    settings.OXIMG = {**settings.OXIMG, "RAISE_TEMPLATE_ERRORS": False}
    with caplog.at_level(logging.WARNING, logger="django_oximg"):
        assert render(engine, text, src=LANDSCAPE, size="big") == "[]"
    (record,) = [r for r in caplog.records if r.name == "django_oximg"]
    assert record.levelno == logging.WARNING and record.exc_info is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{{ thumbnail_url(src, "100", padding=3) }}', "thumbnail_url(): bad padding 3"),
        ('{{ thumbnail(src, "big") }}', "thumbnail(): bad geometry 'big'"),
        ('{{ thumbnail(src, "100", crop="10px 20px") }}', "bad crop '10px 20px'"),
        (
            '{{ thumbnail(src, "100", progressive=true) }}',
            "unknown thumbnail keyword(s): progressive",
        ),
        ("{{ thumbnail(src) }}", "no geometry"),
        ('{{ thumbnail_url(src, preset="nope") }}', "unknown preset 'nope'"),
        ('{{ thumbnail_srcset(src, "200", crop="sideways") }}', "bad crop 'sideways'"),
        ('{{ picture(src, "200", onload="x()") }}', "unknown thumbnail keyword(s): onload"),
        ('{% if x %}\n{{ thumbnail(src, "100", quality=[1]) }}{% endif %}', None),
    ],
)
def test_literal_mistakes_fail_when_the_template_is_compiled(
    jinja: Jinja2, text: str, words: str | None
) -> None:
    """With the extension; a value that is no literal (a list) is left for the call."""
    if not any(isinstance(e, OximgExtension) for e in jinja.env.extensions.values()):
        jinja.from_string(text)  # an environment of one's own: no checks
        return
    if words is None:
        jinja.from_string(text)
        return
    with pytest.raises(TemplateSyntaxError) as raised:
        jinja.from_string(text)
    assert words in str(raised.value)


def test_literal_arguments_that_are_right_compile(jinja: Jinja2) -> None:
    jinja.from_string(
        '{{ thumbnail(src, "100x100", crop=true, upscale=False, format="webp", quality=80) }}'
        "{{ thumbnail_url(src, size, crop=how) }}{{ obj.thumbnail(1, 2, nonsense=3) }}"
        '{{ picture(src, "300", widths=[150, 300], alt="x", placeholder=True) }}'
    )


def test_the_filters(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"avatar": "rs:fill:50:50"}}
    engine = backend(extensions=["django_oximg.jinja2.OximgExtension"])
    out = render(
        engine,
        '{{ src|thumbnail_url("avatar") }} {{ src|is_portrait }} '
        '{% set t = thumbnail(src, "100") %}{{ t|margin("120x120") }} {{ t.url|resolution("2x") }}',
        src=LANDSCAPE,
    )
    url, portrait, *margin, doubled = out.split()
    assert url == django_render("{% thumbnail_url src preset='avatar' %}", src=LANDSCAPE)
    assert (portrait, " ".join(margin)) == ("False", "22px 10px 23px 10px")
    assert doubled == django_render(
        "{% thumbnail src '100' as t %}{{ t|resolution:'2x' }}{% endthumbnail %}", src=LANDSCAPE
    )
