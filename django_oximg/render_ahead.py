"""Declared sizes rendered ahead, in a background task, when a file field gets a new file.

For every field with declared sizes (:mod:`django_oximg.declared`), a save
that gives it a new file (a new row, a new upload, another name) enqueues
:func:`django_oximg.tasks.render_declared` once the transaction commits;
nothing is rendered in the request that saved. Before it, the file it
replaced is purged, as :func:`django_oximg.signals.purge_on_change` does
(that hook is connected for these fields here: no need to connect it too),
and a deleted row's files are purged.

The task renders every declared size of the file from one source read and
one decode per DCT scale (:mod:`django_oximg.core.render_ahead`), under the
keys the tags' URLs look up, so the first request for each is a hit. A
task that fails logs why and enqueues itself again, up to
``RENDER_AHEAD_RETRIES`` times with a growing delay; the sizes it stored
are not rendered again. The upload itself never fails because of it: a
failing enqueue is logged, and what was not rendered ahead is rendered by
its first request, as without rendering ahead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db import transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save, pre_save
from django.utils import timezone

from django_oximg import conf, declared, runtime
from django_oximg.core.errors import OximgError
from django_oximg.core.logs import printable
from django_oximg.signals import file_is_replaced, purge_after_commit, purge_and_log, source_of
from django_oximg.thumbnails import (
    resolve_arguments,
    source_name,
    thumbnail_for,
    thumbnail_path,
)

if TYPE_CHECKING:
    from django_oximg.core.render_ahead import AheadOutcome, AheadRequest

logger = logging.getLogger("django_oximg")

#: Instance attribute holding, between pre_save and post_save, the sources a
#: save replaces and the declared fields it gives a new file.
CHANGES_ATTRIBUTE = "_oximg_render_ahead_changes"

#: Accept headers whose answers a negotiated (format "auto") size is rendered
#: for: AVIF, WebP and the fallback, as ``oximg_warm`` does.
NEGOTIATED_ACCEPTS = ("image/avif", "image/webp", "")


class RenderAheadFailed(Exception):
    """A render-ahead task that did not store every size (the worker records it as failed)."""


def connect() -> None:
    """Connect the receivers (from the app's ``ready``): for every model, cheap for those
    without declarations (a dict lookup), so declarations added later are seen too."""
    uid = "django_oximg.render_ahead"
    pre_save.connect(remember_changes, dispatch_uid=uid)
    post_save.connect(enqueue_changes, dispatch_uid=uid)
    post_delete.connect(purge_deleted, dispatch_uid=uid)


def target_of(model: type[Model], field: str) -> str:
    meta = model._meta
    return f"{meta.app_label}.{meta.object_name}.{field}"


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
    names = [
        name for name in declared_fields(sender) if update_fields is None or name in update_fields
    ]
    if raw or not names:
        return
    stored: dict[str, Any] = {}
    if instance.pk is not None:
        row = sender._default_manager.using(using).filter(pk=instance.pk).values(*names).first()
        stored = row or {}
    replaced, changed = [], []
    for name in names:
        current, old = getattr(instance, name), stored.get(name) or ""
        if old and file_is_replaced(current, old):
            replaced.append(source_of(sender, name, old))
        if current and (not old or file_is_replaced(current, old)):
            changed.append(name)
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


def enqueue(model: str, pk: Any, field: str, name: str, attempt: int = 1) -> None:
    """Enqueue the render of ``field``'s declared sizes on the configured backend and queue.

    Attempts after the first wait ``RENDER_AHEAD_RETRY_DELAY`` doubled per
    attempt, on backends that can run a task later.
    """
    from django_oximg.tasks import render_declared

    settings = conf.get_settings()
    task = render_declared.using(
        backend=settings.RENDER_AHEAD_BACKEND, queue_name=settings.RENDER_AHEAD_QUEUE
    )
    delay = retry_delay(attempt)
    if delay and task.get_backend().supports_defer:
        task = task.using(run_after=timezone.now() + timedelta(seconds=delay))
    task.enqueue(model, pk, field, name, attempt)


def retry_delay(attempt: int) -> float:
    """Seconds before ``attempt`` (0 for the first)."""
    if attempt <= 1:
        return 0.0
    return float(conf.get_settings().RENDER_AHEAD_RETRY_DELAY * 2 ** (attempt - 2))


def run(model: str, pk: Any, field: str, name: str, attempt: int) -> dict[str, int]:
    """The task's body: render, and on a failure log it, enqueue a retry and raise."""
    described = f"{printable(name)} ({model}.{field}, pk {pk})"
    try:
        outcome = render_file(model, pk, field, name)
    except (OximgError, OSError) as exc:
        problem = f"{type(exc).__name__}: {getattr(exc, 'detail', '') or exc}"
    except Exception as exc:  # a bug or a broken configuration: with its traceback
        logger.warning("render ahead of %s raised", described, exc_info=True)
        problem = f"{type(exc).__name__}: {exc}"
    else:
        if outcome is None:
            return {"rendered": 0, "cached": 0}
        counts = {
            "rendered": outcome.rendered,
            "cached": outcome.cached,
            "decodes": outcome.stats.shared_decodes,
        }
        if not outcome.failures:
            logger.info(
                "rendered ahead %d size(s) of %s (%d already cached) from %d decode(s)",
                outcome.rendered,
                described,
                outcome.cached,
                outcome.stats.shared_decodes + outcome.stats.separate,
            )
            return counts
        problem = "; ".join(
            f"{type(error).__name__}: {error.detail or error}" for _, error in outcome.failures
        )
    retries = conf.get_settings().RENDER_AHEAD_RETRIES
    if attempt <= retries:
        logger.warning(
            "render ahead of %s failed (attempt %d of %d): %s; trying again in %g s",
            described,
            attempt,
            retries + 1,
            printable(problem, 500),
            retry_delay(attempt + 1),
        )
        try:
            enqueue(model, pk, field, name, attempt + 1)
        except Exception:
            logger.exception("could not enqueue the retry of the render ahead of %s", described)
    else:
        logger.error(
            "render ahead of %s failed (attempt %d of %d): %s; giving up, its sizes will be "
            "rendered by their first requests",
            described,
            attempt,
            retries + 1,
            printable(problem, 500),
        )
    raise RenderAheadFailed(problem)


def render_file(model: str, pk: Any, field: str, name: str) -> AheadOutcome | None:
    """Render the declared sizes of the row's file; None when there is nothing to do.

    Nothing to do when the row is gone or its field no longer holds
    ``name``: the file was replaced again, and the task enqueued for the
    new one renders that.
    """
    # The pipeline (libvips) only here, in the worker: the app's ready()
    # imports this module in every process, and page renders load no image library.
    from django_oximg.core.render_ahead import render_ahead as render_requests

    model_class = apps.get_model(model)
    instance = model_class._default_manager.filter(pk=pk).first()
    if instance is None or getattr(instance, field).name != name:
        logger.info("render ahead of %s skipped: the row no longer holds it", printable(name))
        return None
    return render_requests(runtime.get_thumbnailer(), requests_for(instance, field))


def requests_for(instance: Model, field: str) -> list[AheadRequest]:
    """The signed paths the tags write for each of ``field``'s declared sizes."""
    from django_oximg.core.render_ahead import AheadRequest

    file = getattr(instance, field)
    source = source_name(file)
    requests = []
    for size in declared.sizes_of(target_of(type(instance), field)):
        geometry, kwargs = resolve_arguments(file, size.geometry, size.kwargs)
        thumbnail = thumbnail_for(source, geometry, kwargs)
        path = thumbnail_path(thumbnail)
        accepts = NEGOTIATED_ACCEPTS if thumbnail.format == "auto" else ("",)
        requests += [AheadRequest(path, accept) for accept in accepts]
    return requests
