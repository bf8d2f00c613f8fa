"""Removing cached results: every variant of one source (purge), or by age and size (clean).

Used by the ``oximg_purge`` and ``oximg_clean`` commands and by the model hooks
in :mod:`django_oximg.signals`. Results of one source share one directory of
the result cache (:mod:`django_oximg.core.keys`), so purging a source is one prefix
delete, and the tag's cached metadata for it is one Django cache key
(:func:`django_oximg.source_metadata.metadata_key`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django_oximg import conf, runtime
from django_oximg.core.keys import RESULT_KEY, source_directory
from django_oximg.core.stores import CacheEntry, CacheStore
from django_oximg.source_metadata import forget_source_metadata


@dataclass(frozen=True)
class Purged:
    """What purging one source removed."""

    source: str
    #: Cached results deleted.
    results: int
    #: Whether the tag's metadata for the source was in Django's cache.
    metadata: bool


def result_cache() -> CacheStore:
    """The configured result cache, without building the render pool.

    A purge from a model signal or a command needs only the storage, not
    libvips or worker threads.
    """
    return runtime.cache_store(conf.get_settings())


def purge_source(source: str, store: CacheStore | None = None) -> Purged:
    """Delete every cached variant of ``source`` and its cached metadata.

    ``source`` is written as in URLs: a storage name, ``alias:name`` for a
    source in ``OXIMG['SOURCES']``, or an http(s) URL.
    """
    store = result_cache() if store is None else store
    directory = source_directory(source)
    results = store.delete_prefix(directory)
    runtime.forget_results(directory)
    return Purged(source, results, forget_source_metadata(source))


def result_entries(store: CacheStore) -> Iterator[CacheEntry]:
    """The store's entries whose keys have the form of a result key."""
    return (entry for entry in store.iter_entries() if RESULT_KEY.fullmatch(entry.key))


def select_for_clean(
    entries: Iterable[CacheEntry],
    now: float,
    older_than: float | None = None,
    max_size: int | None = None,
) -> list[CacheEntry]:
    """The entries a clean removes, oldest first.

    First every entry last modified more than ``older_than`` seconds before
    ``now``; then, while the rest still add up to more than ``max_size``
    bytes, the least recently modified of them. A hit does not change a
    result's modification time, so "least recently modified" means "rendered
    longest ago".
    """
    ordered = sorted(entries, key=lambda entry: (entry.modified, entry.key))
    if older_than is None:
        chosen, kept = [], ordered
    else:
        cutoff = now - older_than
        chosen = [entry for entry in ordered if entry.modified < cutoff]
        kept = [entry for entry in ordered if entry.modified >= cutoff]
    if max_size is not None:
        remaining = sum(entry.size for entry in kept)
        for entry in kept:
            if remaining <= max_size:
                break
            chosen.append(entry)
            remaining -= entry.size
    return chosen
