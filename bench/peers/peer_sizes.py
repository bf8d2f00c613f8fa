"""The sizes sorl-thumbnail and easy-thumbnails give to the template sets in tests/peers/.

Runs in bench/peers/.venv-django-peers (the packages and Pillow live only
there; bash bench/peers/setup_django_peers.sh makes it):

    bench/peers/.venv-django-peers/bin/python bench/peers/peer_sizes.py --write

renders the sorl-thumbnail set (tests/peers/sorl/, four templates) with
sorl-thumbnail and the easy-thumbnails alias set (tests/peers/easy/, the
aliases in tests/peers/spec.py) with easy-thumbnails, as each package
leaves them by default, and records what each page shows: every element's
attributes but its URLs, the text, and the pixel size of every image a page
points to (read from the files the packages wrote, or decoded from a
``data:`` URI). ``--write`` stores that in tests/peers/measured.json, which
tests/test_peers.py compares django-oximg's rendering of the same templates
with; without it the JSON goes to standard output (the test runs it so when
this venv exists, to check the pinned table is still what the packages give).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.peers.django_peers import configure  # noqa: E402
from tests.peers import spec  # noqa: E402  (standard library only)

COMMAND = "bench/peers/.venv-django-peers/bin/python bench/peers/peer_sizes.py --write"


def draw_sources(media: Path) -> None:
    """Each source at its stored size, with its EXIF orientation (content does not matter)."""
    from PIL import Image

    for name, (width, height, orientation) in spec.SOURCES.items():
        path = media / name
        path.parent.mkdir(parents=True, exist_ok=True)
        image = Image.linear_gradient("L").resize((width, height))
        if name.endswith(".png"):
            image = Image.merge("RGBA", (image, image, image, image))
            image.save(path)
            continue
        exif = Image.Exif()
        exif[0x0112] = orientation
        Image.merge("RGB", (image, image.transpose(Image.Transpose.FLIP_LEFT_RIGHT), image)).save(
            path, quality=90, exif=exif
        )


def photo_model() -> Any:
    """A model like tests.testapp.models.Photo (easy-thumbnails scopes aliases by it)."""
    from django.db import models

    class Photo(models.Model):
        image = models.FileField(upload_to="photos/", blank=True)
        title = models.CharField(max_length=100, blank=True)

        class Meta:
            app_label = spec.ALIAS_TARGET.split(".")[0]

    return Photo


def measure(media: Path, src: str) -> list[int] | None:
    """The pixel size of the image ``src`` points to, or None for one the package did not make."""
    from PIL import Image

    if src.startswith("data:"):
        data = base64.b64decode(src.partition(",")[2])
        with Image.open(io.BytesIO(data)) as image:
            return list(image.size)
    if not src.startswith("/media/"):
        return None
    with Image.open(media / unquote(src.removeprefix("/media/"))) as image:
        return list(image.size)


def render_set(media: Path, package: str, names: tuple[str, ...]) -> dict[str, Any]:
    from django.template import Context, Engine

    library = {
        "sorl": "sorl.thumbnail.templatetags.thumbnail",
        "easy": "easy_thumbnails.templatetags.thumbnail",
    }[package]
    engine = Engine(libraries={"thumbnail": library})
    pages: dict[str, Any] = {}
    for name in names:
        forget_sorl_thumbnails(media)
        html = engine.from_string(spec.template_text(package, name, "thumbnail")).render(
            Context(spec.context(photo_model_class()))
        )
        pages[name] = spec.observations(html, lambda src: measure(media, src))
    return pages


_PHOTO: list[Any] = []


def photo_model_class() -> Any:
    if not _PHOTO:
        _PHOTO.append(photo_model())
    return _PHOTO[0]


def forget_sorl_thumbnails(media: Path) -> None:
    """A page rendered as on a fresh site: sorl's key-value store and files emptied."""
    from django.core.cache import cache
    from sorl.thumbnail.models import KVStore

    KVStore.objects.all().delete()
    cache.clear()
    shutil.rmtree(media / "cache", ignore_errors=True)


def python_aliases() -> list[list[Any]]:
    """``get_thumbnailer(photo.image)[alias]`` for every source and alias in spec.PYTHON_ALIASES."""
    from easy_thumbnails.files import get_thumbnailer

    model = photo_model_class()
    rows: list[list[Any]] = []
    for photo in spec.photos(model):
        if not photo.image:
            continue
        for alias in spec.PYTHON_ALIASES:
            thumbnail = get_thumbnailer(photo.image)[alias]
            rows.append([photo.image.name, alias, thumbnail.width, thumbnail.height])
    return rows


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {
        name: version(name) for name in ("sorl-thumbnail", "easy-thumbnails", "Pillow", "Django")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {spec.MEASURED.name}")
    args = parser.parse_args()
    media = Path(tempfile.mkdtemp(prefix="peer-sizes-"))
    try:
        draw_sources(media)
        configure(
            media,
            ["sorl.thumbnail", "easy_thumbnails"],
            THUMBNAIL_ALIASES=spec.EASY_ALIASES,
            THUMBNAIL_DEBUG=True,
        )
        measured = {
            "command": COMMAND,
            "versions": versions(),
            "sorl": render_set(media, "sorl", spec.SORL_TEMPLATES),
            "easy": render_set(media, "easy", spec.EASY_TEMPLATES),
            "easy_python": python_aliases(),
        }
    finally:
        shutil.rmtree(media, ignore_errors=True)
    text = json.dumps(measured, indent=1, sort_keys=True) + "\n"
    if args.write:
        spec.MEASURED.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
