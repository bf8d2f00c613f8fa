"""The background task that renders a file's declared sizes, on Django's Tasks framework.

The one place the framework is imported: ``django.tasks`` on Django 6, the
``django-tasks`` package (its backport) on Django 5.2. Imported only when a
render-ahead task is enqueued or run (by a worker, which finds the task by
this module's path), so a site that declares no sizes needs neither. The
model hooks that call :func:`enqueue` are in :mod:`django_oximg.render_ahead.hooks`;
everything the task runs is here.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db.models import Model
from django.utils import timezone

from django_oximg import conf, runtime
from django_oximg import declared_sizes as declared
from django_oximg.core.errors import OximgError
from django_oximg.core.logs import printable
from django_oximg.source_metadata import source_name
from django_oximg.thumbnails import (
    accepts_to_render,
    resolve_arguments,
    thumbnail_for,
    thumbnail_path,
)

try:
    from django.tasks import task, task_backends  # Django 6
except ImportError:  # Django 5.2: the backport
    from django_tasks import task, task_backends  # type: ignore[no-redef,assignment,unused-ignore]

if TYPE_CHECKING:
    from django_oximg.render_ahead.rendering import AheadOutcome, AheadRequest

__all__ = ["RenderAheadFailed", "enqueue", "render_declared", "run", "task_backends"]

logger = logging.getLogger("django_oximg")


class RenderAheadFailed(Exception):
    """A render-ahead task that did not store every size (the worker records it as failed)."""


@task()
def render_declared(model: str, pk: Any, field: str, name: str, attempt: int = 1) -> dict[str, int]:
    """Render the sizes declared for ``model``'s ``field`` of row ``pk``, holding file ``name``.

    ``attempt`` counts from 1; a failure enqueues the next one, up to
    ``RENDER_AHEAD_RETRIES`` more (:func:`run`).
    """
    return run(model, pk, field, name, attempt)


def enqueue(model: str, pk: Any, field: str, name: str, attempt: int = 1) -> None:
    """Enqueue the render of ``field``'s declared sizes on the configured backend and queue.

    Attempts after the first wait ``RENDER_AHEAD_RETRY_DELAY`` doubled per
    attempt, on backends that can run a task later.
    """
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
    """The task's body: render, and on a failure log it, enqueue a retry and raise.

    A size its request would be refused (422, for a limit or ``MEMORY_BUDGET``)
    is no failure: it is logged, counted under ``refused`` and not retried,
    since a retry would be refused again.
    """
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
            "refused": len(outcome.refused),
            "decodes": outcome.stats.shared_decodes,
        }
        if outcome.refused:
            log_refused(described, outcome)
        if not outcome.failures:
            logger.info(
                "rendered ahead %d size(s) of %s (%d already cached, %d refused) from %d decode(s)",
                outcome.rendered,
                described,
                outcome.cached,
                len(outcome.refused),
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


def log_refused(described: str, outcome: AheadOutcome) -> None:
    """One WARNING line for the sizes their requests would be refused (422): too large for
    a limit or for ``MEMORY_BUDGET``. Nothing is stored for them and they are not tried
    again; raising the limit, or the budget, is what would make them."""
    reasons = "; ".join(
        f"{type(error).__name__}: {error.detail or error}" for _, error in outcome.refused
    )
    logger.warning(
        "render ahead of %s refused %d size(s), as their requests are refused (422); "
        "nothing is stored for them and they are not tried again: %s",
        described,
        len(outcome.refused),
        printable(reasons, 500),
    )


def render_file(model: str, pk: Any, field: str, name: str) -> AheadOutcome | None:
    """Render the declared sizes of the row's file; None when there is nothing to do.

    Nothing to do when the row is gone or its field no longer holds
    ``name``: the file was replaced again, and the task enqueued for the
    new one renders that.
    """
    # The pipeline (libvips) only here, in the worker: the app's ready()
    # imports this module in every process, and page renders load no image library.
    from django_oximg.render_ahead.rendering import render_ahead as render_requests

    model_class = apps.get_model(model)
    instance = model_class._default_manager.filter(pk=pk).first()
    if instance is None or getattr(instance, field).name != name:
        logger.info("render ahead of %s skipped: the row no longer holds it", printable(name))
        return None
    return render_requests(runtime.get_thumbnailer(), requests_for(instance, field))


def requests_for(instance: Model, field: str) -> list[AheadRequest]:
    """The signed paths the tags write for each of ``field``'s declared sizes."""
    from django_oximg.render_ahead.rendering import AheadRequest

    file = getattr(instance, field)
    source = source_name(file)
    requests = []
    for size in declared.sizes_of(declared.target_of(type(instance), field)):
        geometry, kwargs = resolve_arguments(file, size.geometry, size.kwargs)
        thumbnail = thumbnail_for(source, geometry, kwargs)
        path = thumbnail_path(thumbnail)
        requests += [AheadRequest(path, accept) for accept in accepts_to_render(thumbnail)]
    return requests
