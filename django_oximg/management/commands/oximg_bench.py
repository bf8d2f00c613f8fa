"""``manage.py oximg_bench``: how fast thumbnails are made here, against bare libvips.

Runs on this site's own settings and storages: the thumbnails go through
``runtime.get_thumbnailer()`` (signature check, option parsing, source read
from ``SOURCE_STORAGE``, render on the executor, write to the result cache),
beside ``core.pipeline.render`` alone and libvips' bare ``thumbnail`` + saver
(the ceiling) on the same bytes with the same number of threads. Every
request is a cache miss (a width of 485-500 and a cachebuster of its own).

With ``--pages`` it measures page renders instead: a page of
``{% thumbnail %}`` tags over up to ten of the site's images (``--source``,
else the first found in the source storage), or the site's own template
(``--template``); see :mod:`django_oximg.management.pages`.

With ``--gunicorn`` the site's WSGI application is also started under
gunicorn on 127.0.0.1 and driven over HTTP; ``--compare`` adds
sorl-thumbnail and easy-thumbnails when they are installed and in
``INSTALLED_APPS`` (their public ``get_thumbnail`` calls, their own storage).

With ``--hits``, it measures cache hits instead: one cached thumbnail asked
for again and again through ``OximgMiddleware`` and through the view (when
the URLconf mounts it), against whitenoise serving the same bytes from a
file, all as in-process WSGI calls on this site's settings (see
:func:`hit_contenders`).

Without ``--source``, a photo-like JPEG is drawn and saved in the source
storage under ``oximg-bench/`` for the run; it, and every result the run
cached, are deleted at the end. The full comparison with thumbor and the
method notes are in the repository's ``bench/`` and docs/BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import math
import os
import platform
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError

from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_oximg import conf, runtime
from django_oximg.core import pipeline
from django_oximg.core.keys import RESULT_KEY, source_directory
from django_oximg.core.options import FORMAT_NAMES, Options, build_path
from django_oximg.management import pages
from django_oximg.management.bare_libvips import bare_thumbnail, sample_jpeg
from django_oximg.management.progress import Progress

#: The reference benchmarks' medium and large photo sizes.
SAMPLE_SIZES = {"medium": (2000, 1333), "large": (7360, 4912)}

#: Widths of "diverse" requests: no two neighbours share a cache entry.
WIDTHS = range(485, 501)

#: Renders before timing, per contender and source (code paths, allocator).
WARM_UP = 2

#: Seconds the gunicorn server may take to answer its first request.
STARTUP_TIMEOUT = 60.0


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
    """``threads`` threads call ``render(index)`` with fresh indexes for ``seconds``."""
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
    return time.process_time()


def width_for(index: int) -> int:
    return WIDTHS.start + index % len(WIDTHS)


@dataclass
class Source:
    """A source image the run renders: its name in the source storage and its bytes."""

    label: str
    name: str
    data: bytes
    #: Saved by this run (deleted at the end) rather than named with ``--source``.
    sample: bool


class Command(BaseCommand):
    help = (
        "Measure thumbnail throughput with this site's settings and storages against bare "
        "libvips (and gunicorn, sorl-thumbnail, easy-thumbnails when asked)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="medium source, 1 round of 1 s")
        parser.add_argument(
            "--source", action="append", default=[], help="a source name (repeatable)"
        )
        parser.add_argument(
            "--rounds", type=int, default=None, help="interleaved rounds (median); 3, --quick 1"
        )
        parser.add_argument(
            "--seconds", type=float, default=None, help="per contender and round; 3, --quick 1"
        )
        parser.add_argument("--threads", type=int, default=0, help="0: WORKERS (usable CPUs)")
        parser.add_argument("--size", default="500x500", help="box to fit into, WxH")
        parser.add_argument("--format", default="jpeg", choices=("jpeg", "webp", "avif", "png"))
        parser.add_argument("--gunicorn", action="store_true", help="also serve over HTTP")
        parser.add_argument("--concurrency", default="1,4,16", help="HTTP clients (--gunicorn)")
        parser.add_argument("--compare", action="store_true", help="add installed peers")
        parser.add_argument(
            "--hits",
            action="store_true",
            help="measure cache hits against whitenoise on the same file instead (in-process)",
        )
        parser.add_argument("--json", type=Path, help="write the results as JSON here")
        parser.add_argument("--plot", type=Path, help="write a PNG chart (needs matplotlib)")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument(
            "--pages", action="store_true", help="measure page renders of {% thumbnail %} tags"
        )
        parser.add_argument(
            "--template", help="--pages: a template of the site (gets 'sources' in its context)"
        )
        parser.add_argument(
            "--renders", type=int, default=200, help="--pages: warm renders timed (200)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["pages"]:
            self.handle_pages(options)
            return
        quick = options["quick"]
        options["rounds"] = options["rounds"] or (1 if quick else 3)
        options["seconds"] = options["seconds"] or (1.0 if quick else 3.0)
        if options["hits"]:
            self.run_hits(options)
            return
        box = parse_box(options["size"])
        settings = conf.get_settings()
        thumbnailer = runtime.get_thumbnailer()
        threads = options["threads"] or thumbnailer.executor.workers
        notes: list[str] = []
        sources = self.sources(options["source"], options["quick"])
        try:
            report = self.run(sources, box, options, threads, notes)
        finally:
            self.clean_up(sources)
        report["meta"] = metadata(settings, threads, options)
        report["notes"] = notes
        self.print_report(report)
        if options["json"]:
            options["json"].write_text(json.dumps(report, indent=1, default=str))
            self.stdout.write(f"JSON written to {options['json']}")
        if options["plot"]:
            self.plot(report, options["plot"])

    # -- page renders --------------------------------------------------------------

    def handle_pages(self, options: dict[str, Any]) -> None:
        from django_oximg.thumbnails import forget_source_metadata

        storage = storages[conf.get_settings().SOURCE_STORAGE]
        names, made = page_sources(storage, options["source"])
        found, notes = pages.contenders(options["compare"])

        def forget() -> None:
            for name in names:
                forget_source_metadata(name)

        results = []
        try:
            for contender in found:
                own = contender == "django-oximg"
                template = pages.template_for(contender, options["template"] if own else None)
                sources = pages.field_files(storage, names)
                results.append(
                    pages.measure(
                        contender, template, sources, options["renders"], forget if own else noop
                    )
                )
        finally:
            for name in made:
                storage.delete(name)
        import_ms = pages.import_time_ms()
        self.print_pages(results, names, options, import_ms, notes)
        if options["json"]:
            report = {
                "sources": names,
                "import_ms": import_ms,
                "results": [vars(result) for result in results],
                "notes": notes,
            }
            options["json"].write_text(json.dumps(report, indent=1))
            self.stdout.write(f"JSON written to {options['json']}")

    def print_pages(
        self,
        results: list[pages.PageTimes],
        names: list[str],
        options: dict[str, Any],
        import_ms: float,
        notes: list[str],
    ) -> None:
        write = self.stdout.write
        page = f"template {options['template']}" if options["template"] else "synthetic page"
        write(f"{page}, {len(names)} source(s), {options['renders']} warm renders")
        header = (
            f"{'contender':<16} {'tags':>5} {'first ms':>9} {'second ms':>10} "
            f"{'warm ms':>8} {'min-max':>13} {'us/tag':>7}"
        )
        write(header)
        write("-" * len(header))
        for row in results:
            write(
                f"{row.contender:<16} {row.tags:>5} {row.first_ms:>9.2f} {row.second_ms:>10.2f} "
                f"{row.warm_median_ms:>8.2f} {min(row.warm_ms):>6.2f}-{max(row.warm_ms):<6.2f} "
                f"{row.per_tag_us:>7.1f}"
            )
        write(
            "first: django-oximg with the sources' metadata dropped (headers read); "
            "the peers make their thumbnails"
        )
        write(f"django-oximg's tag library imported by a new process in {import_ms:.1f} ms")
        for note in notes:
            write(f"note: {note}")

    # -- sources -----------------------------------------------------------------

    def sources(self, names: list[str], quick: bool) -> list[Source]:
        settings = conf.get_settings()
        storage = storages[settings.SOURCE_STORAGE]
        if names:
            return [Source(name, name, read_all(storage, name), sample=False) for name in names]
        made = []
        token = secrets.token_hex(4)
        for label, (width, height) in SAMPLE_SIZES.items():
            if quick and label != "medium":
                continue
            data = sample_jpeg(width, height)
            name = storage.save(f"oximg-bench/{label}-{token}.jpg", ContentFile(data))
            made.append(Source(label, name, data, sample=True))
        return made

    def clean_up(self, sources: list[Source]) -> None:
        """Delete what the run cached for each source, and the sample sources."""
        thumbnailer = runtime.get_thumbnailer()
        storage = storages[conf.get_settings().SOURCE_STORAGE]
        for source in sources:
            with contextlib.suppress(OSError, NotImplementedError):
                thumbnailer.cache.delete_prefix(source_directory(source.name) + "/")
            if source.sample:
                storage.delete(source.name)

    # -- contenders --------------------------------------------------------------

    def contenders(
        self, source: Source, box: tuple[int, int], fmt: str, compare: bool, notes: list[str]
    ) -> dict[str, Callable[[int], int]]:
        thumbnailer = runtime.get_thumbnailer()
        signer = runtime.get_signer()
        render_settings = thumbnailer.config.render
        quality = render_settings.quality.get(fmt) or pipeline.FALLBACK_QUALITY
        width, height = box
        run_id = secrets.token_hex(3)
        # A fresh cachebuster per call: loop indexes restart every round.
        unique = itertools.count()

        def bare(index: int) -> int:
            w = width_for(index) * width // 500
            return len(bare_thumbnail(source.data, w, height, fmt, quality))

        def render(index: int) -> int:
            options = Options(width=width_for(index) * width // 500, height=height)
            return len(pipeline.render(source.data, options, fmt, render_settings).data)

        def served(index: int) -> int:
            options = Options(
                width=width_for(index) * width // 500,
                height=height,
                format=fmt,
                cachebuster=f"b{run_id}-{next(unique)}",
            )
            reply = thumbnailer.reply(
                signer.signed_path(build_path(options, source.name)), "GET", {}
            )
            if reply.status != 200:
                raise CommandError(f"the thumbnailer answered {reply.status} for {source.name}")
            if reply.file is not None:
                reply.file.close()
            return len(reply.body)

        found: dict[str, Callable[[int], int]] = {
            "bare libvips": bare,
            "pipeline.render": render,
            "thumbnailer": served,
        }
        if compare:
            found.update(peer_contenders(source, box, quality, notes))
        return found

    # -- the run -----------------------------------------------------------------

    def run(
        self,
        sources: list[Source],
        box: tuple[int, int],
        options: dict[str, Any],
        threads: int,
        notes: list[str],
    ) -> dict[str, Any]:
        plans = {
            source.label: self.contenders(source, box, options["format"], options["compare"], notes)
            for source in sources
        }
        total = options["rounds"] * sum(len(p) for p in plans.values())
        runs: dict[tuple[str, str], list[dict[str, float]]] = {}
        enabled = not options["no_progress"] and self.stderr.isatty()
        with Progress("oximg_bench", total, self.stderr.write, enabled) as progress:
            for plan in plans.values():
                for render in plan.values():
                    for index in range(WARM_UP):
                        render(10**6 + index)
            for _ in range(options["rounds"]):
                for label, plan in plans.items():
                    for name, render in plan.items():
                        peer_threads = 1 if name in PEER_NAMES else threads
                        measured = timed_loop(render, peer_threads, options["seconds"], process_cpu)
                        runs.setdefault((label, name), []).append(measured.figures())
                        progress.advance()
        results = [
            summary(label, name, "in-process", threads, values)
            for (label, name), values in runs.items()
        ]
        if options["gunicorn"]:
            concurrency = [int(c) for c in options["concurrency"].split(",")]
            results.extend(self.served_over_http(sources, box, options, concurrency, notes))
        return {"results": results, "ratios": ratios(results)}

    def served_over_http(
        self,
        sources: list[Source],
        box: tuple[int, int],
        options: dict[str, Any],
        concurrency: list[int],
        notes: list[str],
    ) -> list[dict[str, Any]]:
        settings = conf.get_settings()
        workers = runtime.get_thumbnailer().executor.workers
        queue = settings.QUEUE_SIZE or workers * 16
        with gunicorn_server(workers + queue + 16) as (port, pid):
            results = []
            for source in sources:
                for clients in concurrency:
                    values = []
                    for round_ in range(options["rounds"]):
                        paths = http_paths(source, box, options["format"], f"h{round_}c{clients}")
                        values.append(http_loop(port, pid, paths, clients, options["seconds"]))
                    results.append(summary(source.label, "gunicorn", "http", clients, values))
            notes.append(f"gunicorn gthread, 1 process, {workers + queue + 16} threads")
            return results

    # -- cache hits --------------------------------------------------------------

    def run_hits(self, options: dict[str, Any]) -> None:
        """``--hits``: one cached thumbnail per source, through each way in, against whitenoise."""
        box = parse_box(options["size"])
        notes: list[str] = []
        sources = self.sources(options["source"], quick=True)
        try:
            rows: list[dict[str, Any]] = []
            for source in sources:
                found = hit_contenders(source, box, options["format"], notes)
                runs: dict[str, list[dict[str, float]]] = {}
                for _ in range(options["rounds"]):
                    for name, ask in found.items():
                        measured = timed_loop(ask, 1, options["seconds"], process_cpu)
                        runs.setdefault(name, []).append(measured.figures())
                rows.extend(summary(source.label, name, "hit", 1, v) for name, v in runs.items())
        finally:
            self.clean_up(sources)
        self.print_hits(rows, notes, options)
        if options["json"]:
            options["json"].write_text(json.dumps({"hits": rows, "notes": notes}, indent=1))
            self.stdout.write(f"JSON written to {options['json']}")

    def print_hits(
        self, rows: list[dict[str, Any]], notes: list[str], options: dict[str, Any]
    ) -> None:
        write = self.stdout.write
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

    # -- output ------------------------------------------------------------------

    def print_report(self, report: dict[str, Any]) -> None:
        write = self.stdout.write
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

    def plot(self, report: dict[str, Any], path: Path) -> None:
        try:
            importlib.import_module("matplotlib").use("Agg")
            plt = importlib.import_module("matplotlib.pyplot")
        except ImportError as exc:
            raise CommandError(
                "--plot needs matplotlib: pip install 'django-oximg[bench]'"
            ) from exc
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
        self.stdout.write(f"chart written to {path}")


# --- helpers ------------------------------------------------------------------

#: Sources a page of ``--pages`` shows at most (each at five sizes).
PAGE_SOURCES = 10

#: Directories listed at most while looking for a page's sources.
PAGE_SEARCH_DIRECTORIES = 200


def noop() -> None:
    """Nothing to do before a peer's first render (its own caches are its business)."""


def page_sources(storage: Any, names: list[str]) -> tuple[list[str], list[str]]:
    """The page's source names, and those this run saved (to delete after).

    ``--source`` names, else the first images found in the source storage
    (results of a result cache sharing it are skipped), else sample photos
    saved under ``oximg-bench/``.
    """
    if names:
        return names, []
    found = find_images(storage)
    if found:
        return found, []
    token = secrets.token_hex(4)
    data = sample_jpeg(*SAMPLE_SIZES["medium"])
    made = [
        storage.save(f"oximg-bench/page-{token}-{index}.jpg", ContentFile(data))
        for index in range(PAGE_SOURCES)
    ]
    return made, made


def find_images(storage: Any) -> list[str]:
    """Up to :data:`PAGE_SOURCES` image names in ``storage``, breadth first."""
    found: list[str] = []
    directories = [""]
    for _ in range(PAGE_SEARCH_DIRECTORIES):
        if not directories or len(found) >= PAGE_SOURCES:
            break
        directory = directories.pop(0)
        try:
            subdirectories, files = storage.listdir(directory)
        except (OSError, NotImplementedError):
            continue
        for filename in sorted(files):
            name = f"{directory}/{filename}" if directory else filename
            extension = filename.rpartition(".")[2].lower()
            if extension in FORMAT_NAMES and not RESULT_KEY.search(name):
                found.append(name)
        directories += [f"{directory}/{d}" if directory else d for d in sorted(subdirectories)]
    return found[:PAGE_SOURCES]


PEER_NAMES = ("sorl-thumbnail", "easy-thumbnails")


def parse_box(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError as exc:
        raise CommandError(f"--size must be WxH, e.g. 500x500, not {text!r}") from exc
    if width < 16 or height < 1:
        raise CommandError("--size must be at least 16x1")
    return width, height


def read_all(storage: Any, name: str) -> bytes:
    if not storage.exists(name):
        raise CommandError(f"source {name!r} is not in the source storage")
    with storage.open(name, "rb") as handle:
        return bytes(handle.read())


def summary(
    source: str, contender: str, kind: str, concurrency: int, runs: list[dict[str, float]]
) -> dict[str, Any]:
    names = ("rps", "p50_ms", "p95_ms", "p99_ms", "cpu_ms_per_image", "bytes_per_image")
    return {
        "source": source,
        "contender": contender,
        "kind": kind,
        "concurrency": concurrency,
        "runs": runs,
        **{name: spread([run[name] for run in runs]) for name in names},
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


def metadata(settings: conf.OximgSettings, threads: int, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "python": platform.python_version(),
        "libvips": pipeline.libvips_version(),
        "cpus": os.cpu_count(),
        "threads": threads,
        "workers": runtime.get_thumbnailer().executor.workers,
        "jpeg_shrink_margin": settings.JPEG_SHRINK_MARGIN,
        "rounds": options["rounds"],
        "seconds": options["seconds"],
        "box": options["size"],
        "format": options["format"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def peer_contenders(
    source: Source, box: tuple[int, int], quality: int, notes: list[str]
) -> dict[str, Callable[[int], int]]:
    """sorl-thumbnail and easy-thumbnails' public calls, when installed and configured."""
    found: dict[str, Callable[[int], int]] = {}
    installed = django_settings.INSTALLED_APPS
    width, height = box
    if importlib.util.find_spec("sorl") and "sorl.thumbnail" in installed:
        get_thumbnail = importlib.import_module("sorl.thumbnail").get_thumbnail

        def sorl(index: int) -> int:
            geometry = f"{width_for(index) * width // 500}x{height}"
            thumb = get_thumbnail(source.name, geometry, quality=quality, cachebuster=str(index))
            return int(thumb.storage.size(thumb.name))

        found["sorl-thumbnail"] = sorl
    else:
        notes.append("sorl-thumbnail not installed or not in INSTALLED_APPS: skipped")
    if importlib.util.find_spec("easy_thumbnails") and "easy_thumbnails" in installed:
        get_thumbnailer = importlib.import_module("easy_thumbnails.files").get_thumbnailer

        storage = storages[conf.get_settings().SOURCE_STORAGE]

        def easy(index: int) -> int:
            options = {
                "size": (width_for(index) * width // 500, height),
                "quality": quality,
                "cachebuster": str(index),
            }
            thumb = get_thumbnailer(storage, source.name).get_thumbnail(options)
            return int(thumb.size)

        found["easy-thumbnails"] = easy
    else:
        notes.append("easy-thumbnails not installed or not in INSTALLED_APPS: skipped")
    if importlib.util.find_spec("thumbor"):
        notes.append("thumbor is a separate server: compare with bench/load.py from the repository")
    return found


# --- over HTTP ----------------------------------------------------------------


def http_paths(source: Source, box: tuple[int, int], fmt: str, tag: str) -> list[str]:
    from django_oximg.thumbnails import url_prefix

    signer = runtime.get_signer()
    prefix = url_prefix().rstrip("/")
    width, height = box
    paths = []
    for index in range(4000):
        options = Options(
            width=width_for(index) * width // 500,
            height=height,
            format=fmt,
            cachebuster=f"{tag}-{index}",
        )
        paths.append(prefix + signer.signed_path(build_path(options, source.name)))
    return paths


def wsgi_target() -> str:
    """``module:attribute`` of the site's WSGI application for gunicorn."""
    dotted = str(getattr(django_settings, "WSGI_APPLICATION", "") or "")
    module, _, attribute = dotted.rpartition(".")
    if not module:
        raise CommandError("--gunicorn needs settings.WSGI_APPLICATION")
    return f"{module}:{attribute}"


@contextlib.contextmanager
def gunicorn_server(threads: int) -> Iterator[tuple[int, int]]:
    """gunicorn (gthread, 1 process) with the site's WSGI app on 127.0.0.1; stopped after."""
    if not importlib.util.find_spec("gunicorn"):
        raise CommandError("--gunicorn needs gunicorn: pip install 'django-oximg[server]'")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"127.0.0.1:{port}",
        "--worker-class",
        "gthread",
        "--workers",
        "1",
        "--threads",
        str(threads),
        "--log-level",
        "warning",
        wsgi_target(),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                raise CommandError("gunicorn exited at start-up")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
                break
            except HTTPError:
                break
            except (URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise CommandError("gunicorn did not answer in time") from None
                time.sleep(0.1)
        yield port, process.pid
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (gunicorn master and worker), Linux only."""
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for one in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def http_loop(
    port: int, pid: int, paths: list[str], clients: int, seconds: float
) -> dict[str, float]:
    """``clients`` keep-alive connections, each walking its own share of ``paths``."""
    import http.client

    shares = [paths[i::clients] for i in range(clients)]

    def client_for(index: int) -> Callable[[int], int]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connections.append(connection)
        share = shares[index]
        position = iter(range(10**9))

        def one(_: int) -> int:
            connection.request("GET", share[next(position) % len(share)])
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise CommandError(
                    f"gunicorn answered {response.status}; is the thumbnail URLconf "
                    "or OximgMiddleware in the WSGI app?"
                )
            return len(body)

        return one

    connections: list[Any] = []
    renders = [client_for(i) for i in range(clients)]
    lock = threading.Lock()
    assigned: dict[int, Callable[[int], int]] = {}

    def render(index: int) -> int:
        ident = threading.get_ident()
        with lock:
            if ident not in assigned:
                assigned[ident] = renders[len(assigned)]
        return assigned[ident](index)

    try:
        measured = timed_loop(render, clients, seconds, lambda: tree_cpu(pid))
    finally:
        for connection in connections:
            connection.close()
    return measured.figures()


# --- cache hits ---------------------------------------------------------------


def hit_contenders(
    source: Source, box: tuple[int, int], fmt: str, notes: list[str]
) -> dict[str, Callable[[int], int]]:
    """Callables that each answer one hit of the same cached thumbnail of ``source``.

    ``middleware``: ``OximgMiddleware`` around this site's Django application;
    ``view``: this site's Django application, when its URLconf mounts
    ``django_oximg.urls``; ``whitenoise``: whitenoise alone, serving the
    thumbnail's bytes from a file in a temporary directory. All are WSGI
    calls in this process, so the figures are what the application costs
    per hit: a server adds the same cost to each (repository: bench/load.py
    --cache-hits runs them under gunicorn).
    """
    import tempfile

    from django.core.wsgi import get_wsgi_application
    from django.urls import NoReverseMatch, reverse
    from whitenoise import WhiteNoise

    from django_oximg.wsgi import OximgMiddleware

    width, height = box
    options = Options(width=width, height=height, format=fmt)
    signed = runtime.get_signer().signed_path(build_path(options, source.name))
    django_app = get_wsgi_application()
    middleware = OximgMiddleware(django_app)
    prefix = conf.get_settings().URL_PREFIX.rstrip("/")
    body = wsgi_get(middleware, prefix + signed)  # the miss: rendered and cached
    static = Path(tempfile.mkdtemp(prefix="oximg-bench-hits-"))
    (static / "thumbnail").write_bytes(body)
    whitenoise = WhiteNoise(django_app, root=str(static), prefix="oximg-bench-static/")
    found = {
        "middleware": (middleware, prefix + signed),
        "whitenoise": (whitenoise, "/oximg-bench-static/thumbnail"),
    }
    try:
        mount = reverse("oximg:serve", kwargs={"path": "x"})[:-1].rstrip("/")
    except NoReverseMatch:
        notes.append("the view is not in the URLconf (django_oximg.urls): not measured")
    else:
        found["view"] = (django_app, mount + signed)
    for app, path in found.values():  # each answers it once before timing (the map is filled)
        if wsgi_get(app, path) != body:
            raise CommandError(f"{path} did not answer the thumbnail's bytes")
    return {name: hit_caller(app, path) for name, (app, path) in found.items()}


def hit_caller(app: Any, path: str) -> Callable[[int], int]:
    return lambda _index: len(wsgi_get(app, path))


def wsgi_get(app: Any, path: str) -> bytes:
    """One GET of ``path`` through the WSGI application ``app``: the body, which must be a 200."""
    import io

    environ = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "RAW_URI": path,
        "QUERY_STRING": "",
        "SERVER_NAME": allowed_host(),
        "SERVER_PORT": "80",
        "HTTP_HOST": allowed_host(),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
    }
    statuses: list[str] = []
    answer = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        body = b"".join(answer)
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()
    if not statuses or not statuses[0].startswith("200"):
        raise CommandError(f"{path} answered {statuses[:1]} (is ALLOWED_HOSTS set?)")
    return body


def allowed_host() -> str:
    """A host name this site's ALLOWED_HOSTS accepts, for the in-process requests."""
    for host in django_settings.ALLOWED_HOSTS:
        if host != "*":
            return str(host).lstrip(".")
    return "localhost"
