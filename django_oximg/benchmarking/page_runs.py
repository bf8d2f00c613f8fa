"""``--pages``: the run, and where its page's images come from.

The sources are the ``--source`` names, else the first images found in the
source storage (a result cache sharing it is skipped), else sample photos
saved under ``oximg-bench/`` for the run and deleted after it. Each
contender renders the page of :mod:`.pages`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import storages

from django_oximg import conf
from django_oximg.benchmarking.bare_libvips import sample_jpeg
from django_oximg.benchmarking.pages import (
    PageTimes,
    contenders,
    field_files,
    import_time_ms,
    measure,
    template_for,
)
from django_oximg.benchmarking.sources import SAMPLE_SIZES
from django_oximg.core.keys import RESULT_KEY
from django_oximg.core.options import FORMAT_NAMES

#: Sources a page shows at most (each at five sizes).
PAGE_SOURCES = 10

#: Directories listed at most while looking for a page's sources.
PAGE_SEARCH_DIRECTORIES = 200


@dataclass
class PagesRun:
    """What ``--pages`` measured: each contender's renders and the tag library's import."""

    names: list[str]
    results: list[PageTimes]
    import_ms: float
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": self.names,
            "import_ms": self.import_ms,
            "results": [vars(result) for result in self.results],
            "notes": self.notes,
        }


def run(names: list[str], template_name: str | None, renders: int, compare: bool) -> PagesRun:
    """Render the page ``renders`` times per contender; samples saved for it are deleted after."""
    from django_oximg.source_metadata import forget_source_metadata

    storage = storages[conf.get_settings().SOURCE_STORAGE]
    names, made = page_sources(storage, names)
    found, notes = contenders(compare)

    def forget() -> None:
        for name in names:
            forget_source_metadata(name)

    results = []
    try:
        for contender in found:
            own = contender == "django-oximg"
            template = template_for(contender, template_name if own else None)
            sources = field_files(storage, names)
            results.append(measure(contender, template, sources, renders, forget if own else noop))
    finally:
        for name in made:
            storage.delete(name)
    return PagesRun(names, results, import_time_ms(), notes)


def noop() -> None:
    """Nothing to do before a peer's first render (its own caches are its business)."""


def page_sources(storage: Any, names: list[str]) -> tuple[list[str], list[str]]:
    """The page's source names, and those this run saved (to delete after).

    ``--source`` names, else the first images found in the source storage
    (results of a result cache sharing it are skipped), else sample photos
    saved under ``oximg-bench/``.
    """
    if names:
        return names, []
    found = find_images(storage)
    if found:
        return found, []
    token = secrets.token_hex(4)
    data = sample_jpeg(*SAMPLE_SIZES["medium"])
    made = [
        storage.save(f"oximg-bench/page-{token}-{index}.jpg", ContentFile(data))
        for index in range(PAGE_SOURCES)
    ]
    return made, made


def find_images(storage: Any) -> list[str]:
    """Up to :data:`PAGE_SOURCES` image names in ``storage``, breadth first."""
    found: list[str] = []
    directories = [""]
    for _ in range(PAGE_SEARCH_DIRECTORIES):
        if not directories or len(found) >= PAGE_SOURCES:
            break
        directory = directories.pop(0)
        try:
            subdirectories, files = storage.listdir(directory)
        except (OSError, NotImplementedError):
            continue
        for filename in sorted(files):
            name = f"{directory}/{filename}" if directory else filename
            extension = filename.rpartition(".")[2].lower()
            if extension in FORMAT_NAMES and not RESULT_KEY.search(name):
                found.append(name)
        directories += [f"{directory}/{d}" if directory else d for d in sorted(subdirectories)]
    return found[:PAGE_SOURCES]
