"""Removing cached results: every variant of one source (purge), by age and size
(clean), and when a model's file changes (``purge_on_change``).

Used by the ``oximg_purge`` and ``oximg_clean`` commands, the model hooks
below and those of rendering ahead (:mod:`django_oximg.render_ahead.hooks`).
Results of one source share one directory of the result cache
(:mod:`django_oximg.core.keys`), so purging a source is one prefix delete,
and the tag's cached metadata for it is one Django cache key
(:func:`django_oximg.source_metadata.metadata_key`).

The model hooks are opt-in, per model and field::

    # myapp/apps.py
    class MyAppConfig(AppConfig):
        def ready(self):
            from django_oximg.purge import purge_on_change
            from myapp.models import Photo

            purge_on_change(Photo, "image")

When a saved ``Photo`` gets a different file in ``image`` (or a new upload,
which an overwriting storage such as S3 may store under the same name), or
when it is deleted, every cached thumbnail of the old file and the template
tag's cached size and version of it are removed, once the transaction
commits. The file itself is left alone: deleting files is the application's
business (or django-cleanup's).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import transaction
from django.db.models import FileField, Model
from django.db.models.fields.files import FieldFile
from django.db.models.signals import post_delete, post_save, pre_save

from django_oximg import conf, runtime
from django_oximg.core.keys import RESULT_KEY, is_quality_key, source_directory
from django_oximg.core.logs import printable
from django_oximg.core.stores.protocols import CacheEntry, CacheStore
from django_oximg.core.stores.resolver import source_for
from django_oximg.source_metadata import forget_source_metadata, storage_alias

logger = logging.getLogger("django_oximg")


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


def cache_entries(store: CacheStore) -> Iterator[CacheEntry]:
    """The store's results and their quality sidecars (:func:`~django_oximg.core.keys.quality_key`).

    One listing for both: a clean removes a result's sidecar with it.
    """
    return (
        entry
        for entry in store.iter_entries()
        if RESULT_KEY.fullmatch(entry.key) or is_quality_key(entry.key)
    )


def sidecars_to_clean(
    victims: Iterable[CacheEntry],
    results: Iterable[CacheEntry],
    sidecars: Mapping[str, CacheEntry],
    cutoff: float,
) -> list[CacheEntry]:
    """The quality sidecars a clean removes: its ``victims``' own, and the orphans.

    ``sidecars`` maps a result's key to its sidecar's entry. An orphan (a
    sidecar whose result is not stored: its write failed after the
    sidecar's) goes once last modified before ``cutoff``; a younger one may
    belong to a write in progress.
    """
    chosen = [sidecars[entry.key] for entry in victims if entry.key in sidecars]
    stored = {entry.key for entry in results}
    chosen.extend(
        entry for key, entry in sidecars.items() if key not in stored and entry.modified < cutoff
    )
    return chosen


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


# -- when a model's file changes ----------------------------------------------------


#: Instance attribute holding, between pre_save and post_save, the sources a
#: save replaces.
REPLACED_ATTRIBUTE = "_oximg_replaced_sources"


def purge_on_change(model: type[Model], *field_names: str) -> None:
    """Purge the thumbnails of ``model``'s file fields ``field_names`` when they change.

    Safe to call more than once with the same arguments (connected once).
    Raises ImproperlyConfigured for a name that is not a FileField of ``model``.
    """
    if not field_names:
        raise ImproperlyConfigured("purge_on_change needs at least one field name")
    for name in field_names:
        check_file_field(model, name)
    hooks = PurgeHooks(field_names)
    uid = f"django_oximg.purge_on_change:{model._meta.label}:{','.join(field_names)}"
    pre_save.connect(hooks.remember_replaced, sender=model, weak=False, dispatch_uid=uid)
    post_save.connect(hooks.purge_replaced, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(hooks.purge_deleted, sender=model, weak=False, dispatch_uid=uid)


def check_file_field(model: type[Model], name: str) -> None:
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist as exc:
        raise ImproperlyConfigured(f"{model._meta.label} has no field {name!r}") from exc
    if not isinstance(field, FileField):
        raise ImproperlyConfigured(f"{model._meta.label}.{name} is not a FileField")


class PurgeHooks:
    """The three signal receivers for one model's file fields."""

    def __init__(self, field_names: tuple[str, ...]) -> None:
        self.field_names = field_names

    def remember_replaced(
        self,
        sender: type[Model],
        instance: Model,
        raw: bool = False,
        using: str = "default",
        update_fields: frozenset[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Before a save: note the stored files this save replaces (one query).

        Fixture loading (``raw``) and new rows replace nothing.
        """
        if raw:
            return
        stored = stored_files(
            sender, instance, saved_fields(self.field_names, update_fields), using
        )
        replaced = replaced_sources(sender, instance, stored)
        if replaced:
            setattr(instance, REPLACED_ATTRIBUTE, replaced)

    def purge_replaced(
        self, sender: type[Model], instance: Model, using: str = "default", **kwargs: Any
    ) -> None:
        """After a save: purge what it replaced, once the transaction commits."""
        for source in instance.__dict__.pop(REPLACED_ATTRIBUTE, []):
            purge_after_commit(source, using)

    def purge_deleted(
        self, sender: type[Model], instance: Model, using: str = "default", **kwargs: Any
    ) -> None:
        """After a delete: purge every file the row held, once the transaction commits."""
        for name in self.field_names:
            stored = getattr(instance, name).name
            if stored:
                purge_after_commit(source_of(sender, name, stored), using)


def saved_fields(names: Sequence[str], update_fields: frozenset[str] | None) -> list[str]:
    """Those of ``names`` that a save with ``update_fields`` writes."""
    return [name for name in names if update_fields is None or name in update_fields]


def stored_files(
    model: type[Model], instance: Model, names: Sequence[str], using: str
) -> dict[str, str]:
    """The file names the saved row holds in ``names`` (one query; none for a new row)."""
    if instance.pk is None or not names:
        return {}
    row = model._default_manager.using(using).filter(pk=instance.pk).values(*names).first()
    return {name: stored for name, stored in (row or {}).items() if stored}


def replaced_sources(model: type[Model], instance: Model, stored: Mapping[str, str]) -> list[str]:
    """The sources of the ``stored`` files the instance no longer holds, about to go."""
    return [
        source_of(model, name, old)
        for name, old in stored.items()
        if file_is_replaced(getattr(instance, name), old)
    ]


def file_is_replaced(current: FieldFile, stored: str) -> bool:
    """Whether the field no longer holds the stored file.

    A new upload not yet saved (``_committed`` False, as Django's FileField
    itself checks) counts even if it will get the same name: a storage that
    overwrites (S3 with ``file_overwrite``) would put new content there.
    """
    return current.name != stored or not getattr(current, "_committed", True)


def source_of(model: type[Model], field_name: str, name: str) -> str:
    """The source string thumbnails of this file were made for (``alias:name`` or name)."""
    field = model._meta.get_field(field_name)
    assert isinstance(field, FileField)
    return source_for(storage_alias(field.storage), name)


def purge_after_commit(source: str, using: str) -> None:
    """Purge ``source`` when the transaction commits (at once outside one).

    ``robust``: the row is already saved when this runs, so a failing purge
    (storage down) is logged by Django rather than turned into an error for
    a request whose change has happened.
    """
    transaction.on_commit(partial(purge_and_log, source), using=using, robust=True)


def purge_and_log(source: str) -> None:
    purged = purge_source(source)
    logger.info(
        "purged %d cached result(s) of %s%s",
        purged.results,
        printable(source),
        " and its metadata" if purged.metadata else "",
    )
