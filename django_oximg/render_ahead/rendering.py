"""Render the results of several URLs of one source now, for the requests to come.

A background task (``django_oximg.render_ahead.tasks``) hands this the signed paths the
template tags write for a source's declared sizes. Each path is parsed and
checked exactly as a request for it would be (:meth:`Thumbnailer.job_for`),
so the result is stored under the key that request will look up, and its
first request is a hit. The source is read and probed once for all of them,
every check a request's render passes applies (file size, resolution, the
encoder's predicted time), and the sizes are rendered from one decode per
DCT scale (:mod:`~django_oximg.core.pipeline.batch`), byte for byte what a
request's render would store. Each result is written atomically
(:meth:`CacheStore.put`), so a failure leaves nothing partial behind.

Within the memory budget, as requests are: each size is staged as its
request's render is (:meth:`RenderWork.stage`: the limits, the plan, its
estimated peak), and every render runs on the process's executor
(:meth:`Executor.run`), which first reserves its cost from ``MEMORY_BUDGET``,
waiting behind the renders already running. The sizes one decode serves
are reserved together, at their combined estimate
(:func:`~django_oximg.core.pipeline.budget.estimate_shared_decode_peak_bytes`, more
than any one of them); when that does not fit the budget, the decode is
shared by as many as fit and the others get decodes of their own. A size
whose own estimate is above the whole budget is refused by the executor as
its request is (``SourceTooLarge``, a 422): it is not rendered and nothing
is stored under its key, so its request is refused too, not served from the
cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from django_oximg.core import errors, pipeline
from django_oximg.core.pipeline.batch import BatchStats, render_batch, shared_decodes
from django_oximg.core.pipeline.budget import estimate_shared_decode_peak_bytes
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.jobs import Job
from django_oximg.core.serving.making import store_result
from django_oximg.core.serving.staging import RenderWork, SourceRead, StagedRender
from django_oximg.core.stores.protocols import CacheStore

#: What a request is refused with (422) for a limit: the source's bytes,
#: pixels or frames, the memory budget, the result's ``max_bytes`` or its
#: encoder's predicted time. With the same settings a size is refused every
#: time, so rendering ahead does not try it again.
REFUSALS = (errors.SourceTooLarge, errors.ResultTooLarge)


@dataclass(frozen=True)
class AheadRequest:
    """One answer to make: a signed path (after the mount point) and an ``Accept`` header."""

    path: str
    accept: str = ""


@dataclass
class AheadOutcome:
    """What rendering ahead did for one source."""

    #: Results rendered and stored now.
    rendered: int = 0
    #: Results already in the cache (a retry, or requests were first).
    cached: int = 0
    #: The key of each result its request would be refused (:data:`REFUSALS`:
    #: a 422 for a limit, the memory budget's included), and why. Not
    #: rendered, not stored, and not worth trying again.
    refused: list[tuple[str, errors.OximgError]] = field(default_factory=list)
    #: The key of each other result that could not be made, and why.
    failures: list[tuple[str, errors.OximgError]] = field(default_factory=list)
    stats: BatchStats = field(default_factory=lambda: BatchStats(0, 0, 0))

    def record(self, key: str, error: errors.OximgError) -> None:
        """The result of ``key`` not made because of ``error``: refused, or failed."""
        (self.refused if isinstance(error, REFUSALS) else self.failures).append((key, error))


class Batch(NamedTuple):
    """Sizes rendered by one executor job (one decode, when they share it), and its cost."""

    #: The cache keys of the sizes: their results are paired with them by key.
    keys: tuple[str, ...]
    #: The estimated peak bytes the job reserves from the memory budget.
    cost: int


def is_cached(cache: CacheStore, key: str) -> bool:
    """Whether ``key`` is in the cache (a remote store's open stream is closed unread)."""
    found = cache.get(key)
    if found is not None and found.stream is not None:
        found.stream.close()
    return found is not None


def render_ahead(thumbnailer: Thumbnailer, requests: Sequence[AheadRequest]) -> AheadOutcome:
    """Make and store the results of ``requests`` (all of one source) not yet cached.

    A request the thumbnailer refuses (a bad signature, an option not
    allowed, a source outside the jail) raises its error: the paths come
    from the tags, so that is a configuration error, not a bad source. What
    the source itself causes is each result's refusal (too large, for its
    limits or the memory budget: :attr:`AheadOutcome.refused`) or failure
    (missing, not an image, the executor's queue full:
    :attr:`AheadOutcome.failures`); a failing cache write raises ``OSError``.
    """
    outcome = AheadOutcome()
    jobs: dict[str, Job] = {}
    for request in requests:
        job = thumbnailer.job_for(request.path, request.accept)
        if not isinstance(job.work, RenderWork):
            raise errors.InvalidOptions(f"not a thumbnail path: {request.path}")
        jobs.setdefault(job.key, job)  # without AUTO_FORMAT, every Accept gives one key
    sources = {job.source.source for job in jobs.values()}
    if len(sources) > 1:
        raise ValueError(f"paths of one source expected, got {sorted(sources)}")
    missing: dict[str, Job] = {}
    for key, job in jobs.items():
        if is_cached(thumbnailer.cache, key):
            outcome.cached += 1
        else:
            missing[key] = job
    if not missing:
        return outcome
    first = next(iter(missing.values())).source
    limits = thumbnailer.maker.limits
    try:
        data = first.store.read(first.name, limits.max_src_file_size)
        source = SourceRead(data, pipeline.probe(data))
    except errors.OximgError as error:
        for key in missing:
            outcome.record(key, error)
        return outcome
    staged: dict[str, StagedRender] = {}
    for key, job in missing.items():
        try:
            staged[key] = stage(thumbnailer, job, source)
        except errors.OximgError as error:
            outcome.record(key, error)
    executor = thumbnailer.executor
    for batch in batches(staged, data, limits.render, executor.memory_budget):
        plans = {key: staged[key].plan for key in batch.keys}
        render = partial(render_batch, data, plans, limits.render, timeout=limits.render_timeout)
        try:
            made, stats = executor.run(render, cost=batch.cost)
        except errors.OximgError as error:  # above the whole budget; the queue full or late
            for key in batch.keys:
                outcome.record(key, error)
            continue
        outcome.stats += stats
        for key, result in made.items():
            if isinstance(result, errors.OximgError):
                outcome.record(key, result)
                continue
            store_result(thumbnailer.cache, key, result.data, result.quality)
            outcome.rendered += 1
    return outcome


def batches(
    staged: Mapping[str, StagedRender], data: bytes, settings: pipeline.RenderSettings, budget: int
) -> list[Batch]:
    """The executor jobs that render ``staged`` within ``budget`` bytes, and their costs.

    The sizes one decode would serve (:func:`shared_decodes`) go together
    while their combined estimate fits the budget; once the next would not
    fit, it starts another batch, with a decode of its own. Every other size
    is a batch alone at its request's cost, and so is a size whose own cost
    is above the whole budget: the executor refuses that batch, as it
    refuses the size's request.
    """
    plans = {key: render.plan for key, render in staged.items()}
    groups, alone = shared_decodes(plans, settings)
    found: list[Batch] = []
    for keys in groups.values():
        together: list[str] = []
        cost = 0
        for key in keys:
            own = staged[key].cost
            if own > budget:
                found.append(Batch((key,), own))
                continue
            joined = estimate_shared_decode_peak_bytes([plans[k] for k in (*together, key)], data)
            if together and joined > budget:
                found.append(Batch(tuple(together), cost))
                together, joined = [], own
            together.append(key)
            cost = joined
        if together:
            found.append(Batch(tuple(together), cost))
    found.extend(Batch((key,), staged[key].cost) for key in alone)
    return found


def stage(thumbnailer: Thumbnailer, job: Job, source: SourceRead) -> StagedRender:
    """The render a request for ``job`` would run, after the same checks, with the
    peak memory it would reserve: the request's own staging (:meth:`RenderWork.stage`).

    ``raw``, ``skip_processing`` and ``enforce_thumbnail`` are not rendered
    ahead: the tags never write them (their size is not known in advance).
    """
    assert isinstance(job.work, RenderWork)
    options = job.work.options
    if options.raw or options.skip_processing or options.enforce_thumbnail:
        raise errors.InvalidOptions("raw, skip_processing and enforce_thumbnail are not rendered")
    staged = job.work.stage(source, thumbnailer.maker.limits, ignore_duration)
    assert isinstance(staged, StagedRender)  # neither raw nor skipped, refused above
    return staged


def ignore_duration(seconds: float) -> None:
    """Rendering ahead times no render for the request metrics."""
