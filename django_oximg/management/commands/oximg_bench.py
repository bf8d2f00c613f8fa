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
(``--template``); see :mod:`django_oximg.benchmarking.pages`.

With ``--gunicorn`` the site's WSGI application is also started under
gunicorn on 127.0.0.1 and driven over HTTP; ``--compare`` adds
sorl-thumbnail and easy-thumbnails when they are installed and in
``INSTALLED_APPS`` (their public ``get_thumbnail`` calls, their own storage).

With ``--hits``, it measures cache hits instead: one cached thumbnail asked
for again and again through ``OximgMiddleware`` and through the view (when
the URLconf mounts it), against whitenoise serving the same bytes from a
file, all as in-process WSGI calls on this site's settings (see
:mod:`django_oximg.benchmarking.cache_hits`).

Without ``--source``, a photo-like JPEG is drawn and saved in the source
storage under ``oximg-bench/`` for the run; it, and every result the run
cached, are deleted at the end. The full comparison with thumbor and the
method notes are in the repository's ``bench/`` and docs/BENCHMARKS.md.

This module only parses the options and prints; the measuring is in
:mod:`django_oximg.benchmarking`, which nothing on a request path imports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_oximg import runtime
from django_oximg.benchmarking import cache_hits, misses, page_runs, report, served
from django_oximg.benchmarking.sources import clean_up, run_sources
from django_oximg.progress import Progress, add_progress_argument, progress_for


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
        add_progress_argument(parser)
        parser.add_argument(
            "--pages", action="store_true", help="measure page renders of {%% thumbnail %%} tags"
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
            self.handle_hits(options)
            return
        box = misses.parse_box(options["size"])
        threads = options["threads"] or runtime.get_thumbnailer().executor.workers
        notes: list[str] = []

        def progress(total: int) -> Progress:
            return progress_for(self, "oximg_bench", total, options)

        sources = run_sources(options["source"], quick)
        try:
            results = misses.run(sources, box, options, threads, notes, progress)
            if options["gunicorn"]:
                concurrency = [int(c) for c in options["concurrency"].split(",")]
                results.extend(served.over_http(sources, box, options, concurrency, notes))
        finally:
            clean_up(sources)
        found = {**misses.report(results, threads, options), "notes": notes}
        report.print_misses(found, self.stdout.write)
        self.write_json(options, found)
        if options["plot"]:
            report.plot(found, options["plot"], self.stdout.write)

    def handle_pages(self, options: dict[str, Any]) -> None:
        run = page_runs.run(
            options["source"], options["template"], options["renders"], options["compare"]
        )
        report.print_pages(run, options, self.stdout.write)
        self.write_json(options, run.to_json())

    def handle_hits(self, options: dict[str, Any]) -> None:
        box = misses.parse_box(options["size"])
        rows, notes = cache_hits.run(
            options["source"], box, options["format"], options["rounds"], options["seconds"]
        )
        report.print_hits(rows, notes, options, self.stdout.write)
        self.write_json(options, {"hits": rows, "notes": notes})

    def write_json(self, options: dict[str, Any], found: dict[str, Any]) -> None:
        if options["json"]:
            options["json"].write_text(json.dumps(found, indent=1, default=str))
            self.stdout.write(f"JSON written to {options['json']}")
