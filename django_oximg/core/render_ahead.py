"""Render the results of several URLs of one source now, for the requests to come.

A background task (``django_oximg.tasks``) hands this the signed paths the
template tags write for a source's declared sizes. Each path is parsed and
checked exactly as a request for it would be (:meth:`Thumbnailer.job_for`),
so the result is stored under the key that request will look up, and its
first request is a hit. The source is read and probed once for all of them,
every check a request's render passes applies (file size, resolution, the
encoder's predicted time), and the sizes are rendered from one decode per
DCT scale (:mod:`~django_oximg.core.pipeline.batch`), byte for byte what a
request's render would store. Each result is written atomically
(:meth:`CacheStore.put`), so a failure leaves nothing partial behind.

Not the request path's executor: the worker process serves no requests, its
task runner bounds how many of these run at once, and each size has the
render deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django_oximg.core import errors, pipeline
from django_oximg.core.jobs import Job
from django_oximg.core.pipeline.batch import BatchStats, render_batch
from django_oximg.core.staging import RenderWork, SourceRead, StagedRender
from django_oximg.core.stores import CacheStore
from django_oximg.core.thumbnailer import Thumbnailer


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
    #: The key of each result that could not be made, and why.
    failures: list[tuple[str, errors.OximgError]] = field(default_factory=list)
    stats: BatchStats = field(default_factory=lambda: BatchStats(0, 0, 0))


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
    the source itself causes (missing, not an image, too large) is each
    result's failure in :attr:`AheadOutcome.failures`; a failing cache write
    raises ``OSError``.
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
    missing = []
    for key, job in jobs.items():
        if is_cached(thumbnailer.cache, key):
            outcome.cached += 1
        else:
            missing.append(job)
    if not missing:
        return outcome
    first = missing[0].source
    config = thumbnailer.config
    try:
        data = first.store.read(first.name, config.max_src_file_size)
        info = pipeline.probe(data)
    except errors.OximgError as error:
        outcome.failures.extend((job.key, error) for job in missing)
        return outcome
    plans: dict[str, pipeline.Plan] = {}
    for job in missing:
        try:
            plans[job.key] = plan_for(thumbnailer, job, data, info)
        except errors.OximgError as error:
            outcome.failures.append((job.key, error))
    made, outcome.stats = render_batch(data, plans, config.render, timeout=config.render_timeout)
    for key, result in made.items():  # by key: a size not planned leaves no gap to slip into
        if isinstance(result, errors.OximgError):
            outcome.failures.append((key, result))
            continue
        thumbnailer.cache.put(key, result.data)
        outcome.rendered += 1
    return outcome


def plan_for(
    thumbnailer: Thumbnailer, job: Job, data: bytes, info: pipeline.SourceInfo
) -> pipeline.Plan:
    """The plan a request's render of ``job`` would make, after the same checks:
    the request's own staging (:meth:`RenderWork.stage`), whose estimate is unused.

    ``raw``, ``skip_processing`` and ``enforce_thumbnail`` are not rendered
    ahead: the tags never write them (their size is not known in advance).
    """
    assert isinstance(job.work, RenderWork)
    options = job.work.options
    if options.raw or options.skip_processing or options.enforce_thumbnail:
        raise errors.InvalidOptions("raw, skip_processing and enforce_thumbnail are not rendered")
    staged = job.work.stage(SourceRead(data, info), thumbnailer.maker.limits, ignore_duration)
    assert isinstance(staged, StagedRender)  # neither raw nor skipped, refused above
    return staged.plan


def ignore_duration(seconds: float) -> None:
    """Rendering ahead times no render for the request metrics."""
