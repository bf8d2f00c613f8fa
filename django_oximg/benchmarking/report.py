"""What ``oximg_bench`` prints, and its chart: plain text tables, one line per row.

Each function takes ``write`` (a line at a time, the command's stdout), so
the tables are the same whether the command runs in a terminal, under
``call_command`` or in a test.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from django_oximg.benchmarking.page_runs import PagesRun

Write = Callable[[str], None]


def print_misses(report: dict[str, Any], write: Write) -> None:
    """The miss table: per source and contender, req/s with min-max, latency, CPU, bytes."""
    meta = report["meta"]
    write(
        f"libvips {meta['libvips']}, {meta['threads']} threads, "
        f"JPEG_SHRINK_MARGIN {meta['jpeg_shrink_margin']}, {meta['rounds']} round(s) "
        f"of {meta['seconds']} s, box {meta['box']} {meta['format']}"
    )
    header = (
        f"{'source':<8} {'contender':<18} {'c':>3} {'img/s':>8} {'min-max':>13} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>8} {'bytes':>8}"
    )
    write(header)
    write("-" * len(header))
    for row in report["results"]:
        rps = row["rps"]
        write(
            f"{row['source']:<8} {row['contender']:<18} {row['concurrency']:>3} "
            f"{rps['median']:>8.1f} {rps['low']:>6.1f}-{rps['high']:<6.1f} "
            f"{row['p50_ms']['median']:>8.1f} {row['p95_ms']['median']:>8.1f} "
            f"{row['cpu_ms_per_image']['median']:>8.1f} "
            f"{row['bytes_per_image']['median']:>8.0f}"
        )
    for name, value in report["ratios"].items():
        write(f"{name}: {value:.2f}")
    for note in report["notes"]:
        write(f"note: {note}")


def print_hits(
    rows: list[dict[str, Any]], notes: list[str], options: dict[str, Any], write: Write
) -> None:
    """The hit table, and each way in over whitenoise."""
    write(
        f"cache hits, in-process WSGI calls on one thread: {options['rounds']} round(s) of "
        f"{options['seconds']} s, box {options['size']} {options['format']}"
    )
    header = f"{'source':<8} {'way in':<12} {'hits/s':>9} {'min-max':>17} {'CPU us/hit':>11}"
    write(header)
    write("-" * len(header))
    by = {(row["source"], row["contender"]): row for row in rows}
    for row in rows:
        rps = row["rps"]
        write(
            f"{row['source']:<8} {row['contender']:<12} {rps['median']:>9.0f} "
            f"{rps['low']:>8.0f}-{rps['high']:<8.0f} "
            f"{1000 * row['cpu_ms_per_image']['median']:>11.1f}"
        )
    for (source, name), row in by.items():
        theirs = by.get((source, "whitenoise"))
        if theirs and name != "whitenoise":
            ratio = row["rps"]["median"] / theirs["rps"]["median"]
            write(f"{source} {name} / whitenoise: {ratio:.2f}")
    for note in notes:
        write(f"note: {note}")


def print_pages(run: PagesRun, options: dict[str, Any], write: Write) -> None:
    """The page table: first, second and warm renders per contender, and per tag."""
    page = f"template {options['template']}" if options["template"] else "synthetic page"
    write(f"{page}, {len(run.names)} source(s), {options['renders']} warm renders")
    header = (
        f"{'contender':<16} {'tags':>5} {'first ms':>9} {'second ms':>10} "
        f"{'warm ms':>8} {'min-max':>13} {'us/tag':>7}"
    )
    write(header)
    write("-" * len(header))
    for row in run.results:
        write(
            f"{row.contender:<16} {row.tags:>5} {row.first_ms:>9.2f} {row.second_ms:>10.2f} "
            f"{row.warm_median_ms:>8.2f} {min(row.warm_ms):>6.2f}-{max(row.warm_ms):<6.2f} "
            f"{row.per_tag_us:>7.1f}"
        )
    write(
        "first: django-oximg with the sources' metadata dropped (headers read); "
        "the peers make their thumbnails"
    )
    write(f"django-oximg's tag library imported by a new process in {run.import_ms:.1f} ms")
    for note in run.notes:
        write(f"note: {note}")


def plot(report: dict[str, Any], path: Path, write: Write) -> None:
    """A bar chart of the miss report's req/s (medians, min-max whiskers), as a PNG."""
    try:
        importlib.import_module("matplotlib").use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError as exc:
        raise CommandError("--plot needs matplotlib: pip install 'django-oximg[bench]'") from exc
    rows = report["results"]
    labels = [
        f"{r['source']}\n{r['contender']}"
        + (f" c={r['concurrency']}" if r["kind"] == "http" else "")
        for r in rows
    ]
    values = [r["rps"]["median"] for r in rows]
    errors = [
        [r["rps"]["median"] - r["rps"]["low"] for r in rows],
        [r["rps"]["high"] - r["rps"]["median"] for r in rows],
    ]
    figure, axes = plt.subplots(figsize=(max(6, len(rows) * 1.1), 4))
    axes.bar(range(len(rows)), values, yerr=errors, capsize=3, color="#4a7fb5")
    axes.set_xticks(range(len(rows)), labels, fontsize=7)
    axes.set_ylabel("thumbnails per second (median, min-max)")
    axes.set_title("oximg_bench")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    write(f"chart written to {path}")
