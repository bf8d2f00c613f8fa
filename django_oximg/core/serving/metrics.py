"""Operational endpoints: Prometheus metrics and a health check, one set per thumbnailer.

Part of step 9 of a request (the map: :mod:`django_oximg.core.serving`).

``/health`` and ``/metrics`` (exactly those paths after the mount prefix) are
answered by :meth:`Thumbnailer.reply <django_oximg.core.serving.handler.Thumbnailer.reply>`,
so the Django view and the WSGI middleware both serve them. Neither path can be
a thumbnail request: those need at least a signature, options and a source.

``/metrics`` tells anyone who can read it the site's traffic, error rates and
memory, so it is off unless ``METRICS`` turns it on, and then answers only
requests that carry its bearer token when ``METRICS_TOKEN`` is set
(:func:`token_matches`; a 401 otherwise). A deployment that prefers to keep
it off the public address altogether mounts it apart (docs/operations.md).

Metrics come from the optional ``prometheus-client`` library (the
``django-oximg[metrics]`` extra), which is imported here and nowhere else. Each
thumbnailer has its own :class:`~prometheus_client.CollectorRegistry`, never the
global one: the runtime rebuilds the thumbnailer when settings change, and a
rebuilt one must not collide with (or keep alive) the old one's series.

Two kinds of series:

* counted as requests happen: requests by status, cache hits and misses,
  render seconds (a histogram of the time inside the executor job),
  ``autoquality`` searches and their encodes by method;
* read when scraped, from counters the thumbnailer and executor keep anyway:
  renders, source loads, coalesced requests, queue depth, jobs running,
  memory reserved / peak / budget, workers, rejections, failed calls to
  each dependency and which are failing now; plus the process collector
  (RSS, open fds, CPU seconds).
"""

from __future__ import annotations

import bisect
import hmac
import importlib.util
import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, Protocol

from django_oximg.core import pipeline
from django_oximg.core.limits.executor import Executor
from django_oximg.core.serving.replies import METHODS, NO_STORE, Reply, method_not_allowed
from django_oximg.core.stores.protocols import CacheStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

#: Whether the optional extra is installed (else /metrics answers 404). The
#: library itself is imported at the first scrape: a new process's first
#: answers do not wait for it.
PROMETHEUS_INSTALLED = importlib.util.find_spec("prometheus_client") is not None

logger = logging.getLogger("django_oximg")

HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"

#: Paths answered here rather than as thumbnails.
ENDPOINTS = frozenset({HEALTH_PATH, METRICS_PATH})

#: The 404 body when the library is missing, saying how to get it.
NOT_INSTALLED = "Metrics need prometheus-client (pip install django-oximg[metrics])"

#: The 404 body when ``OXIMG["METRICS"]`` is False: the same as any unknown path.
DISABLED = "Not found"

#: Render time buckets in seconds: a thumbnail takes milliseconds, a large or
#: AVIF source up to seconds, and the render timeout defaults to 10 s.
RENDER_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

TEXT_PLAIN = "text/plain; charset=utf-8"

#: What a request for ``/metrics`` without the right bearer token gets.
UNAUTHORIZED = "Unauthorized"
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="metrics"')


class Counts(NamedTuple):
    """The thumbnailer's own counters, read at scrape time."""

    renders: int
    source_loads: int
    #: Requests that shared another thread's render in this process.
    coalesced: int
    #: Requests answered by another process's render (through the shared cache).
    peer_results: int
    #: Failed calls by dependency (:mod:`~django_oximg.core.serving.faults`), and the
    #: dependencies failing now.
    dependency_failures: Mapping[str, int] = MappingProxyType({})
    failing: frozenset[str] = frozenset()


class Recorder(Protocol):
    """What the thumbnailer reports to, whether or not metrics are on."""

    def count_request(self, status: int) -> None:
        """Count one answered thumbnail request with its HTTP status."""
        ...

    def count_cache_lookup(self, hit: bool) -> None:
        """Count a request's first result-cache lookup as a hit or a miss."""
        ...

    def observe_render(self, seconds: float) -> None:
        """Record the time one render job spent inside the executor."""
        ...

    def observe_quality_search(self, method: str, encodes: int) -> None:
        """Record one ``autoquality`` search by ``method`` and the encodes it made."""
        ...

    def reply(self, method: str, accept: str) -> Reply:
        """The answer to a GET or HEAD of ``/metrics``."""
        ...

    def authorised(self, request_headers: Mapping[str, str]) -> bool:
        """Whether a request with these (WSGI) headers may read ``/metrics``."""
        ...


class NoMetrics:
    """Metrics switched off or not installed: counting costs nothing, ``/metrics`` is 404."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def count_request(self, status: int) -> None:
        pass

    def count_cache_lookup(self, hit: bool) -> None:
        pass

    def observe_render(self, seconds: float) -> None:
        pass

    def observe_quality_search(self, method: str, encodes: int) -> None:
        pass

    def reply(self, method: str, accept: str) -> Reply:
        return text_reply(404, self.reason, method)

    def authorised(self, request_headers: Mapping[str, str]) -> bool:
        return True  # it answers 404 whoever asks


class PrometheusMetrics:
    """Counts kept in plain counters, exposed by collectors in a registry of their own.

    Counting is a lock and an addition (a cache hit does it twice); the
    registry, and prometheus-client with it, is made at the first scrape.
    """

    def __init__(self, counts: Callable[[], Counts], executor: Executor, token: str = "") -> None:
        #: The bearer token ``/metrics`` requires ("" for none).
        self.token = token
        self.counts = counts
        self.executor = executor
        self._lock = threading.Lock()
        self._requests: Counter[int] = Counter()
        self._lookups = {True: 0, False: 0}
        #: Renders per bucket of :data:`RENDER_SECONDS_BUCKETS` (the last: above them all).
        self._render_buckets = [0] * (len(RENDER_SECONDS_BUCKETS) + 1)
        self._render_seconds = 0.0
        #: ``autoquality`` searches and their encodes, by method.
        self._searches: Counter[str] = Counter()
        self._search_encodes: Counter[str] = Counter()
        self._registry: CollectorRegistry | None = None

    def count_request(self, status: int) -> None:
        with self._lock:
            self._requests[status] += 1

    def count_cache_lookup(self, hit: bool) -> None:
        with self._lock:
            self._lookups[hit] += 1

    def observe_render(self, seconds: float) -> None:
        bucket = bisect.bisect_left(RENDER_SECONDS_BUCKETS, seconds)
        with self._lock:
            self._render_buckets[bucket] += 1
            self._render_seconds += seconds

    def observe_quality_search(self, method: str, encodes: int) -> None:
        with self._lock:
            self._searches[method] += 1
            self._search_encodes[method] += encodes

    def quality_searches(self) -> tuple[dict[str, int], dict[str, int]]:
        """The ``autoquality`` searches so far and their encodes, by method."""
        with self._lock:
            return dict(self._searches), dict(self._search_encodes)

    @property
    def registry(self) -> CollectorRegistry:
        """This recorder's registry, made (with prometheus-client) at first use."""
        with self._lock:
            if self._registry is None:
                from prometheus_client import CollectorRegistry, ProcessCollector

                registry = CollectorRegistry()
                ProcessCollector(registry=registry)
                registry.register(RequestCollector(self))
                registry.register(ThumbnailerCollector(self.counts, self.executor))
                self._registry = registry
            return self._registry

    def snapshot(self) -> tuple[dict[int, int], dict[bool, int], list[int], float]:
        """The counts so far: requests by status, lookups, render buckets, render seconds."""
        with self._lock:
            return (
                dict(self._requests),
                dict(self._lookups),
                list(self._render_buckets),
                self._render_seconds,
            )

    def reply(self, method: str, accept: str) -> Reply:
        """The exposition in the format the scraper asked for (text by default)."""
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(accept)
        body = encode(self.registry)
        headers = [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            NO_STORE,
        ]
        return Reply(200, headers, body if method != "HEAD" else b"")

    def authorised(self, request_headers: Mapping[str, str]) -> bool:
        if not self.token:
            return True
        return token_matches(request_headers.get("HTTP_AUTHORIZATION", ""), self.token)


class RequestCollector:
    """The series counted as requests happen, read from a :class:`PrometheusMetrics`."""

    def __init__(self, recorder: PrometheusMetrics) -> None:
        self.recorder = recorder

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily

        requests, lookups, buckets, render_seconds = self.recorder.snapshot()
        by_status = CounterMetricFamily(
            "oximg_requests",
            "Thumbnail requests answered, by HTTP status (health and metrics not counted).",
            labels=["status"],
        )
        for status, count in sorted(requests.items()):
            by_status.add_metric([str(status)], count)
        yield by_status
        yield CounterMetricFamily(
            "oximg_cache_hits",
            "Requests found in the result cache at their first lookup.",
            value=lookups[True],
        )
        yield CounterMetricFamily(
            "oximg_cache_misses",
            "Requests not in the result cache at their first lookup (rendered or shared).",
            value=lookups[False],
        )
        cumulative, running = [], 0
        for bound, count in zip((*RENDER_SECONDS_BUCKETS, float("inf")), buckets, strict=True):
            running += count
            cumulative.append((bucket_bound(bound), running))
        yield HistogramMetricFamily(
            "oximg_render_seconds",
            "Time of each render job inside the executor (decode, resize, encode).",
            buckets=cumulative,
            sum_value=render_seconds,
        )
        searches, encodes = self.recorder.quality_searches()
        by_method = CounterMetricFamily(
            "oximg_autoquality_searches",
            "Renders whose quality autoquality searched, by method (size, dssim).",
            labels=["method"],
        )
        encodes_by_method = CounterMetricFamily(
            "oximg_autoquality_encodes",
            "Encodes those searches made (at most 7 each; the result is one of them).",
            labels=["method"],
        )
        for method in sorted(searches):
            by_method.add_metric([method], searches[method])
            encodes_by_method.add_metric([method], encodes[method])
        yield by_method
        yield encodes_by_method


def bucket_bound(value: float) -> str:
    """A histogram bucket's bound as Prometheus writes it ("0.005", "10.0", "+Inf")."""
    return "+Inf" if math.isinf(value) else repr(float(value))


class ThumbnailerCollector:
    """Series read when scraped, so the hot path keeps only the counters it had."""

    def __init__(self, counts: Callable[[], Counts], executor: Executor) -> None:
        self.counts = counts
        self.executor = executor

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

        counts = self.counts()
        stats = self.executor.stats()
        yield CounterMetricFamily(
            "oximg_renders", "Renders completed and stored.", value=counts.renders
        )
        yield CounterMetricFamily(
            "oximg_source_loads",
            "Sources read and probed (concurrent sizes of one source share a load).",
            value=counts.source_loads,
        )
        coalesced = CounterMetricFamily(
            "oximg_coalesced_requests",
            "Requests served by another request's render: in this process, or a peer's.",
            labels=["scope"],
        )
        coalesced.add_metric(["process"], counts.coalesced)
        coalesced.add_metric(["peers"], counts.peer_results)
        yield coalesced
        failures = CounterMetricFamily(
            "oximg_dependency_failures",
            "Failed calls to a dependency: result cache writes and lookups, the "
            "coordination cache, each source storage.",
            labels=["dependency"],
        )
        failing = GaugeMetricFamily(
            "oximg_dependency_failing",
            "1 while a dependency's latest call failed (what /health reports), else 0.",
            labels=["dependency"],
        )
        for dependency, count in counts.dependency_failures.items():
            failures.add_metric([dependency], count)
            failing.add_metric([dependency], int(dependency in counts.failing))
        yield failures
        yield failing
        rejected = CounterMetricFamily(
            "oximg_rejected",
            "Render jobs refused: queue full (429) or not started by the queue timeout (503).",
            labels=["reason"],
        )
        rejected.add_metric(["queue_full"], stats.rejected_full)
        rejected.add_metric(["queue_timeout"], stats.rejected_timeout)
        yield rejected
        yield from (
            GaugeMetricFamily(name, documentation, value=value)
            for name, documentation, value in (
                ("oximg_queue_depth", "Render jobs waiting for a worker.", stats.queued),
                ("oximg_jobs_running", "Render jobs running now.", stats.running),
                ("oximg_workers", "Render worker threads.", stats.workers),
                (
                    "oximg_memory_reserved_bytes",
                    "Estimated peak memory reserved by running jobs.",
                    stats.reserved_bytes,
                ),
                (
                    "oximg_memory_peak_reserved_bytes",
                    "Most memory ever reserved at once.",
                    stats.peak_reserved_bytes,
                ),
                (
                    "oximg_memory_budget_bytes",
                    "Memory the executor may reserve.",
                    self.executor.memory_budget,
                ),
            )
        )


def recorder_for(
    enabled: bool, counts: Callable[[], Counts], executor: Executor, token: str = ""
) -> Recorder:
    """Prometheus metrics when enabled and installed; otherwise a no-op that answers 404.

    With a ``token``, ``/metrics`` answers only requests bearing it.
    """
    if not enabled:
        return NoMetrics(DISABLED)
    if not PROMETHEUS_INSTALLED:
        return NoMetrics(NOT_INSTALLED)
    return PrometheusMetrics(counts, executor, token)


def token_matches(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` header is ``Bearer <token>`` (compared in constant time)."""
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


# -- health -------------------------------------------------------------------------


def health_problems(executor: Executor, cache: CacheStore) -> list[str]:
    """What keeps this process from serving thumbnails; empty when healthy."""
    problems = []
    if not libvips_loaded():
        problems.append("libvips not loaded")
    if not executor.is_alive():
        problems.append("executor shut down")
    if not cache_writable(cache):
        problems.append("result cache not writable")
    return problems


def libvips_loaded() -> bool:
    """Whether libvips answers a version query."""
    try:
        pipeline.libvips_version()
    except Exception:  # a health check reports any failure (logged) instead of raising
        logger.exception("libvips health check failed")
        return False
    return True


def cache_writable(cache: CacheStore) -> bool:
    """Whether the result cache says it can take writes.

    A store written against the protocol before ``writable`` existed is
    assumed writable rather than reported as broken.
    """
    writable: Callable[[], bool] | None = getattr(cache, "writable", None)
    return True if writable is None else writable()


def health_reply(problems: list[str], method: str) -> Reply:
    """200 "ok", or 503 naming what failed; never cached."""
    if problems:
        return text_reply(503, "unhealthy: " + ", ".join(problems), method)
    return text_reply(200, "ok", method)


def endpoint_reply(
    path: str,
    method: str,
    request_headers: Mapping[str, str],
    recorder: Recorder,
    problems: Callable[[], list[str]],
) -> Reply:
    """Answer ``/health`` or ``/metrics`` (``path`` is one of :data:`ENDPOINTS`)."""
    if method not in METHODS:
        return method_not_allowed()
    if path == HEALTH_PATH:
        return health_reply(problems(), method)
    if not recorder.authorised(request_headers):
        reply = text_reply(401, UNAUTHORIZED, method)
        reply.headers.append(CHALLENGE)
        return reply
    return recorder.reply(method, request_headers.get("HTTP_ACCEPT", ""))


def text_reply(status: int, text: str, method: str) -> Reply:
    body = text.encode() + b"\n"
    headers = [("Content-Type", TEXT_PLAIN), ("Content-Length", str(len(body))), NO_STORE]
    return Reply(status, headers, body if method != "HEAD" else b"")
