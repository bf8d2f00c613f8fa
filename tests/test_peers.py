"""A sorl-thumbnail template set and an easy-thumbnails alias set, migrated, show what they showed.

The templates in tests/peers/ are written for their package; the only edit
is ``{% load thumbnail %}`` -> ``{% load oximg %}``, with the settings the
migration guides give (``TAG_DEFAULTS`` with ``sizing``, the aliases as
presets). Every page is compared, element by element, with what
sorl-thumbnail 13.4 and easy-thumbnails 2.10 render from the same
templates: attributes (width, height, margins, classes), text (sizes,
ratios), and the pixel size of every image served. Their side is pinned in
tests/peers/measured.json by bench/peers/peer_sizes.py, which the last test
runs again when their venv exists (bench/peers/setup_django_peers.sh).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.template import Context, Template
from django.test import Client

from django_oximg.thumbnails import get_thumbnailer
from tests import images
from tests.peers import spec
from tests.test_templatetags import empty_cache  # noqa: F401 (an autouse fixture)
from tests.testapp.models import Photo

REPO = Path(__file__).resolve().parent.parent
PEERS_PYTHON = REPO / "bench" / "peers" / ".venv-django-peers" / "bin" / "python"
MEASURED = json.loads(spec.MEASURED.read_text(encoding="utf-8"))

#: What a site moving from each package sets (docs/migrating-from-*.md).
SORL_SETTINGS = {"TAG_DEFAULTS": {"upscale": True, "sizing": "sorl"}}
EASY_SETTINGS = {"TAG_DEFAULTS": {"sizing": "easy-thumbnails"}, "PRESETS": spec.PRESETS}


@pytest.fixture
def peer_media(media: Path) -> Path:
    """The media fixture plus spec.SOURCES, drawn at their sizes and orientations."""
    for name, (width, height, orientation) in spec.SOURCES.items():
        path = media / name
        if name.endswith(".png"):
            path.write_bytes(images.png_with_alpha(width, height))
            continue
        image = images.photo(width, height).copy()
        image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
        path.write_bytes(bytes(image.jpegsave_buffer(Q=90)))
    return media


def measure(src: str) -> list[int] | None:
    """The size of the image ``src`` points to: served by the thumbnail view, or inline."""
    if src.startswith("data:"):
        image = pyvips.Image.new_from_buffer(base64.b64decode(src.partition(",")[2]), "")
        return [image.width, image.height]
    if not src.startswith("/img/"):
        return None
    response = Client().get(src)
    try:
        assert response.status_code == 200, src
        body = b"".join(response.streaming_content) if response.streaming else response.content
    finally:
        response.close()
    image = pyvips.Image.new_from_buffer(body, "")
    return [image.width, image.height]


def page(package: str, name: str) -> list[list[Any]]:
    text = spec.template_text(package, name, "oximg")
    html = Template(text).render(Context(spec.context(Photo)))
    return spec.observations(html, measure)


@pytest.mark.parametrize("name", spec.SORL_TEMPLATES)
def test_the_sorl_thumbnail_set_shows_what_sorl_thumbnail_showed(
    peer_media: Path, settings: Any, name: str
) -> None:
    settings.OXIMG = {**settings.OXIMG, **SORL_SETTINGS}
    assert page("sorl", name) == MEASURED["sorl"][name]


@pytest.mark.parametrize("name", spec.EASY_TEMPLATES)
def test_the_easy_thumbnails_set_shows_what_easy_thumbnails_showed(
    peer_media: Path, settings: Any, name: str
) -> None:
    settings.OXIMG = {**settings.OXIMG, **EASY_SETTINGS}
    assert page("easy", name) == MEASURED["easy"][name]


def test_easy_thumbnails_aliases_from_python(peer_media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, **EASY_SETTINGS}
    rows = []
    for photo in spec.photos(Photo):
        if not photo.image:
            continue
        for alias in spec.PYTHON_ALIASES:
            thumbnail = get_thumbnailer(photo.image)[alias]
            assert measure(thumbnail.url) == [thumbnail.width, thumbnail.height]
            rows.append([photo.image.name, alias, thumbnail.width, thumbnail.height])
    assert rows == MEASURED["easy_python"]


def test_the_pinned_pages_cover_every_source_and_the_roundings_that_differ() -> None:
    """So the comparisons above cannot pass on pages that show little."""
    listed = [entry[1] for entry in MEASURED["sorl"]["product_list.html"] if entry[0] == "text"]
    assert listed == [*spec.TITLES.values(), "Nothing yet"]
    sizes = {
        tuple(entry[2])
        for pages in (MEASURED["sorl"], MEASURED["easy"])
        for shown in pages.values()
        for entry in shown
        if entry[0] == "img" and entry[2]
    }
    assert (112, 149) in sizes  # sorl's "x150" of the sideways phone photo; imgproxy: 113x150
    assert (150, 112) in sizes  # 112.5 rounded to even; imgproxy rounds it up
    assert len(sizes) > 40


@pytest.mark.skipif(not PEERS_PYTHON.exists(), reason="no bench/peers/.venv-django-peers")
def test_the_pinned_table_is_what_the_packages_give() -> None:
    """Runs bench/peers/peer_sizes.py with the real sorl-thumbnail and easy-thumbnails."""
    printed = subprocess.run(
        [str(PEERS_PYTHON), str(REPO / "bench" / "peers" / "peer_sizes.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    assert json.loads(printed) == MEASURED
