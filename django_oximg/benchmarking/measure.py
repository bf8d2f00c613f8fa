"""Timed loops on threads, and the figures every contender is reported with.

A loop calls a contender with fresh indexes from several threads for a
fixed time, so each call can make a distinct request (a width and a
cachebuster of its own: a miss every time). Figures are nearest-rank
percentiles and medians with min-max over rounds, as ``bench/driver.py``
computes them for its HTTP runs.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Widths of "diverse" requests: no two neighbours share a cache entry.
WIDTHS = range(485, 501)

#: Renders before timing, per contender and source (code paths, allocator).
WARM_UP = 2

#: The figures of every loop, each summarised over rounds by :func:`summary`.
FIGURES = ("rps", "p50_ms", "p95_ms", "p99_ms", "cpu_ms_per_image", "bytes_per_image")


@dataclass
class Measurement:
    """One timed loop of one contender on one source."""

    images: int
    seconds: float
    cpu_seconds: float
    durations_ms: list[float] = field(repr=False)
    bytes_total: int

    @property
    def rps(self) -> float:
        return self.images / self.seconds if self.seconds else 0.0

    def figures(self) -> dict[str, float]:
        ordered = sorted(self.durations_ms)
        return {
            "rps": self.rps,
            "p50_ms": percentile(ordered, 0.50),
            "p95_ms": percentile(ordered, 0.95),
            "p99_ms": percentile(ordered, 0.99),
            "cpu_ms_per_image": 1000 * self.cpu_seconds / self.images if self.images else math.nan,
            "bytes_per_image": self.bytes_total / self.images if self.images else math.nan,
        }


def percentile(ordered: list[float], share: float) -> float:
    """Nearest-rank percentile of sorted values (nan when empty)."""
    if not ordered:
        return math.nan
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of the finite values."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return {"median": math.nan, "low": math.nan, "high": math.nan}
    return {"median": statistics.median(finite), "low": min(finite), "high": max(finite)}


def timed_loop(
    render: Callable[[int], int], threads: int, seconds: float, cpu: Callable[[], float]
) -> Measurement:
    """``threads`` threads call ``render(index)`` with fresh indexes for ``seconds``.

    ``render`` returns the bytes it made; ``cpu`` reads the CPU seconds of
    whatever does the work (this process, or a server's process tree).
    """
    counter = iter(range(10**9))
    lock = threading.Lock()
    durations: list[float] = []
    sizes: list[int] = []
    stop_at = time.perf_counter() + seconds
    failures: list[BaseException] = []

    def work() -> None:
        try:
            while time.perf_counter() < stop_at:
                with lock:
                    index = next(counter)
                start = time.perf_counter()
                size = render(index)
                with lock:
                    durations.append(1000 * (time.perf_counter() - start))
                    sizes.append(size)
        except BaseException as error:  # re-raised in the calling thread below
            failures.append(error)

    cpu_before, wall = cpu(), time.perf_counter()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if failures:
        raise failures[0]
    return Measurement(
        len(durations), time.perf_counter() - wall, cpu() - cpu_before, durations, sum(sizes)
    )


def process_cpu() -> float:
    """CPU seconds of this process, all threads."""
    return time.process_time()


def width_for(index: int) -> int:
    """The width of the ``index``-th diverse request."""
    return WIDTHS.start + index % len(WIDTHS)


def summary(
    source: str, contender: str, kind: str, concurrency: int, runs: list[dict[str, float]]
) -> dict[str, Any]:
    """One row of the report: a contender's rounds on one source, each figure's spread."""
    return {
        "source": source,
        "contender": contender,
        "kind": kind,
        "concurrency": concurrency,
        "runs": runs,
        **{name: spread([run[name] for run in runs]) for name in FIGURES},
    }


def ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """Throughput of each contender over bare libvips, per source (in-process)."""
    found: dict[str, float] = {}
    by = {(r["source"], r["contender"]): r for r in results if r["kind"] == "in-process"}
    for (source, contender), row in by.items():
        ceiling = by.get((source, "bare libvips"))
        if ceiling and contender != "bare libvips" and ceiling["rps"]["median"] > 0:
            found[f"{source} {contender} / bare libvips"] = (
                row["rps"]["median"] / ceiling["rps"]["median"]
            )
    return found
