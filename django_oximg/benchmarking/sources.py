"""The images a run renders: named sources of the site, or photo-like samples it saves.

A named source is read as the thumbnailer reads one (its name jailed, at
most ``MAX_SRC_FILE_SIZE`` bytes) and never deleted. Samples are drawn,
saved under ``oximg-bench/`` in the source storage for the run, and deleted
at the end with everything the run cached for them.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management.base import CommandError

from django_oximg import conf, runtime
from django_oximg.benchmarking.bare_libvips import sample_jpeg
from django_oximg.core.errors import OximgError
from django_oximg.core.keys import source_directory

#: The reference benchmarks' medium and large photo sizes.
SAMPLE_SIZES = {"medium": (2000, 1333), "large": (7360, 4912)}


@dataclass
class Source:
    """A source image the run renders: its name in the source storage and its bytes."""

    label: str
    name: str
    data: bytes
    #: Saved by this run (deleted at the end) rather than named with ``--source``.
    sample: bool


def run_sources(names: list[str], quick: bool) -> list[Source]:
    """The named sources, else a medium (and, unless ``quick``, a large) sample saved now."""
    if names:
        return [Source(name, name, read_source(name), sample=False) for name in names]
    storage = storages[conf.get_settings().SOURCE_STORAGE]
    made = []
    token = secrets.token_hex(4)
    for label, (width, height) in SAMPLE_SIZES.items():
        if quick and label != "medium":
            continue
        data = sample_jpeg(width, height)
        name = storage.save(f"oximg-bench/{label}-{token}.jpg", ContentFile(data))
        made.append(Source(label, name, data, sample=True))
    return made


def read_source(name: str) -> bytes:
    """``name``'s bytes, read through the site's source store with its limits."""
    settings = conf.get_settings()
    try:
        resolved = runtime.get_source_resolver().resolve(name)
        return resolved.store.read(resolved.name, settings.MAX_SRC_FILE_SIZE)
    except OximgError as error:
        raise CommandError(f"source {name!r} cannot be read: {error.detail or error}") from error


def clean_up(sources: list[Source]) -> None:
    """Delete what the run cached for each source, and the sample sources."""
    thumbnailer = runtime.get_thumbnailer()
    storage = storages[conf.get_settings().SOURCE_STORAGE]
    for source in sources:
        with contextlib.suppress(OSError, NotImplementedError):
            thumbnailer.cache.delete_prefix(source_directory(source.name) + "/")
        if source.sample:
            storage.delete(source.name)
