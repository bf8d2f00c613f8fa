"""The background task that renders a file's declared sizes, on Django's Tasks framework.

The one place the framework is imported: ``django.tasks`` on Django 6, the
``django-tasks`` package (its backport) on Django 5.2. Imported only when a
render-ahead task is enqueued or run (by a worker, which finds the task by
this module's path), so a site that declares no sizes needs neither.
"""

from __future__ import annotations

from typing import Any

try:
    from django.tasks import task, task_backends  # Django 6
except ImportError:  # Django 5.2: the backport
    from django_tasks import task, task_backends  # type: ignore[no-redef,assignment,unused-ignore]

__all__ = ["render_declared", "task_backends"]


@task()
def render_declared(model: str, pk: Any, field: str, name: str, attempt: int = 1) -> dict[str, int]:
    """Render the sizes declared for ``model``'s ``field`` of row ``pk``, holding file ``name``.

    ``attempt`` counts from 1; a failure enqueues the next one, up to
    ``RENDER_AHEAD_RETRIES`` more (:func:`django_oximg.render_ahead.run`).
    """
    from django_oximg import render_ahead

    return render_ahead.run(model, pk, field, name, attempt)
