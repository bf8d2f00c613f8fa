"""One request, start to finish: where a request goes, and where a miss goes.

This docstring is the map; each module it names says which step it is and
links back here. A request for a thumbnail walks these steps, and stops at
the first that answers it:

1. **In.** The WSGI middleware (:mod:`~django_oximg.core.serving.middleware`)
   or the Django view takes the path under its prefix and calls
   :meth:`~django_oximg.core.serving.handler.Thumbnailer.reply`
   (:mod:`~django_oximg.core.serving.handler`), which answers ``/health``
   and ``/metrics`` itself.
2. **A remembered hit.** A path answered from local disk before is answered
   again from memory, without parsing it
   (:mod:`~django_oximg.core.serving.hits`).
3. **The job.** The path is verified (:mod:`django_oximg.core.options.signing`),
   parsed (:mod:`django_oximg.core.options`), its format chosen from
   ``Accept`` and client hints (:mod:`~django_oximg.core.serving.negotiation`,
   :mod:`~django_oximg.core.serving.client_hints`), its source resolved to a
   store (:mod:`django_oximg.core.stores.resolver`) and its cache key made
   (:mod:`django_oximg.core.keys`): :mod:`~django_oximg.core.serving.jobs`.
   No storage is touched yet.
4. **The lookup.** The result cache; else the same key already being made
   in this process (:mod:`~django_oximg.core.serving.singleflight`); else a
   place in the executor (:mod:`django_oximg.core.limits.executor`), a lease
   against other processes (:mod:`~django_oximg.core.serving.coordination`)
   and, when a peer holds the lease, a wait for its result:
   :mod:`~django_oximg.core.serving.lookup`.

A **miss** goes on:

5. **The read.** The source's bytes are read once for every job in flight
   on it, remote reads bounded in number and time
   (:mod:`django_oximg.core.stores.reads`; URLs through
   :mod:`django_oximg.core.stores.http`), and its header probed:
   :mod:`~django_oximg.core.serving.making`.
6. **The stage.** The source is checked against the limits, the render
   planned and its peak memory estimated from that plan
   (:mod:`~django_oximg.core.serving.staging`,
   :mod:`django_oximg.core.pipeline.budget`).
7. **The render.** A worker reserves that memory from the budget
   (:mod:`django_oximg.core.limits.memory`, which downloads in step 5
   reserve from too) and runs
   the plan: load, the steps, encode (:mod:`django_oximg.core.pipeline.render`),
   within the render deadline (:mod:`django_oximg.core.limits.deadlines`).
8. **The store.** The result is written to the cache whole or not at all
   (:mod:`django_oximg.core.stores.disk`, or a Django storage through the
   adapters), each call's outcome recorded for ``/health``
   (:mod:`~django_oximg.core.serving.faults`): back in
   :mod:`~django_oximg.core.serving.making`.
9. **The answer.** The result, from the cached file or from memory, or the
   project error that stopped any step, becomes status, headers and body
   (:mod:`~django_oximg.core.serving.replies`), counted by
   :mod:`~django_oximg.core.serving.metrics`.

Every wait on the way has its own bound, and their sum is the longest a
request may take (:mod:`django_oximg.core.limits.timeouts`).
"""
