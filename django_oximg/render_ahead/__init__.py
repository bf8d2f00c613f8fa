"""Rendering ahead: a model's declared sizes rendered in a background task when a file is saved.

Everything of it is here, one module per job, beside what it renders: the
sizes a model declares for a file field (:mod:`django_oximg.declared_sizes`,
outside this package because the tags render them by name too, and render
ahead builds on the tags):

* :mod:`~django_oximg.render_ahead.hooks`: the model hooks that purge a
  replaced file and enqueue the task once the transaction commits;
* :mod:`~django_oximg.render_ahead.tasks`: the task, its retries, and the
  one import of Django's Tasks framework;
* :mod:`~django_oximg.render_ahead.rendering`: the results of several URLs
  of one source made now, checked, keyed and reserved from the memory
  budget as their requests would be (no Django: the core's thumbnailer
  alone).

See docs/render-ahead.md.
"""
