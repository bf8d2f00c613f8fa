"""Declared sizes rendered ahead, in a background task, when a file field gets a new file.

For every field with declared sizes (:mod:`django_oximg.declared_sizes`), a save
that gives it a new file (a new row, a new upload, another name) enqueues
:func:`django_oximg.render_ahead.tasks.render_declared` once the transaction commits;
nothing is rendered in the request that saved. Before it, the file it
replaced is purged, as :func:`django_oximg.purge.purge_on_change` does
(that hook is connected for these fields here: no need to connect it too),
and a deleted row's files are purged.

The task (:mod:`django_oximg.render_ahead.tasks`) renders every declared size of the file
from one source read and one decode per DCT scale
(:mod:`django_oximg.render_ahead.rendering`), under the keys the tags' URLs look
up, so the first request for each is a hit, within the worker process's
``MEMORY_BUDGET`` as requests are: a size its request would be refused (422,
over a limit or the budget) is not rendered, not stored and not tried again.
A task that fails logs why and enqueues itself again, up to
``RENDER_AHEAD_RETRIES`` times with a growing delay; the sizes it stored are
not rendered again. The upload itself never fails because of it: a failing
enqueue is logged, and what was not rendered ahead is rendered by its first
request, as without rendering ahead."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save, pre_save

from django_oximg import declared_sizes as declared
from django_oximg.core.logs import printable
from django_oximg.purge import (
    file_is_replaced,
    purge_after_commit,
    purge_and_log,
    replaced_sources,
    saved_fields,
    source_of,
    stored_files,
)

logger = logging.getLogger("django_oximg")

#: Instance attribute holding, between pre_save and post_save, the sources a
#: save replaces and the declared fields it gives a new file.
CHANGES_ATTRIBUTE = "_oximg_render_ahead_changes"


def connect() -> None:
    """Connect the receivers (from the app's ``ready``): for every model, cheap for those
    without declarations (a dict lookup), so declarations added later are seen too."""
    uid = "django_oximg.render_ahead.hooks"
    pre_save.connect(remember_changes, dispatch_uid=uid)
    post_save.connect(enqueue_changes, dispatch_uid=uid)
    post_delete.connect(purge_deleted, dispatch_uid=uid)


def declared_fields(model: type[Model]) -> list[str]:
    """``model``'s fields with declared sizes (none while the declarations are
    invalid: the system check ``oximg.E020`` says why, and saves go on)."""
    targets = declared.valid_declarations()
    meta = model._meta
    prefix = f"{meta.app_label}.{meta.object_name}."
    return [target[len(prefix) :] for target in targets if target.startswith(prefix)]


def remember_changes(
    sender: type[Model],
    instance: Model,
    raw: bool = False,
    using: str = "default",
    update_fields: frozenset[str] | None = None,
    **kwargs: Any,
) -> None:
    """Before a save: which declared fields get a new file, and which stored files go.

    One query, only for a saved row with declared fields; fixture loading
    (``raw``) renders nothing.
    """
    names = saved_fields(declared_fields(sender), update_fields)
    if raw or not names:
        return
    stored = stored_files(sender, instance, names, using)
    replaced = replaced_sources(sender, instance, stored)
    changed = [
        name
        for name in names
        if getattr(instance, name)
        and (name not in stored or file_is_replaced(getattr(instance, name), stored[name]))
    ]
    if replaced or changed:
        setattr(instance, CHANGES_ATTRIBUTE, (replaced, changed))


def enqueue_changes(
    sender: type[Model], instance: Model, using: str = "default", **kwargs: Any
) -> None:
    """After a save: once the transaction commits, purge what it replaced, then enqueue.

    The file names are read now: a new upload gets its final name while
    the row is saved. ``robust``: the row is saved whatever this does.
    """
    replaced, changed = instance.__dict__.pop(CHANGES_ATTRIBUTE, ((), ()))
    files = [(name, getattr(instance, name).name) for name in changed]
    files = [(name, stored) for name, stored in files if stored]
    if not replaced and not files:
        return
    pk = instance.pk if isinstance(instance.pk, int | str) else str(instance.pk)
    after = partial(purge_and_enqueue, sender._meta.label, pk, list(replaced), files)
    transaction.on_commit(after, using=using, robust=True)


def purge_deleted(
    sender: type[Model], instance: Model, using: str = "default", **kwargs: Any
) -> None:
    """After a delete: purge the files the row held in declared fields."""
    for name in declared_fields(sender):
        stored = getattr(instance, name).name
        if stored:
            purge_after_commit(source_of(sender, name, stored), using)


def purge_and_enqueue(
    model: str, pk: Any, replaced: Sequence[str], files: Sequence[tuple[str, str]]
) -> None:
    """Purge the replaced sources, then enqueue a task per new file; each failure logged."""
    for source in replaced:
        try:
            purge_and_log(source)
        except Exception:
            logger.exception("purging the replaced %s failed", printable(source))
    from django_oximg.render_ahead.tasks import (
        enqueue,  # the Tasks framework: only once there is work
    )

    for field, name in files:
        try:
            enqueue(model, pk, field, name)
        except Exception:
            logger.exception(
                "could not enqueue the render ahead of %s (%s.%s); its sizes will be "
                "rendered by their first requests",
                printable(name),
                model,
                field,
            )
