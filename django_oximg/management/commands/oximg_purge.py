"""``manage.py oximg_purge SOURCE...``: delete every cached variant of some sources."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_oximg.progress import add_progress_argument, progress_for
from django_oximg.purge import Purged, purge_source, result_cache


class Command(BaseCommand):
    help = (
        "Delete every cached thumbnail of each SOURCE (all sizes, formats and versions), "
        "and the template tag's cached size and version of it, so the next request "
        "renders from the source as it is now. Use it after replacing a file in place "
        "on a storage where the tag cannot notice (S3 and other remote storages)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "sources",
            nargs="+",
            metavar="SOURCE",
            help="Source as written in thumbnail URLs: a storage name (photos/x.jpg), "
            "alias:name for a source in OXIMG['SOURCES'], or an http(s) URL.",
        )
        add_progress_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        store = result_cache()
        sources: list[str] = options["sources"]
        purged: list[Purged] = []
        failed: list[str] = []
        with progress_for(self, "purging", len(sources), options) as progress:
            for source in sources:
                try:
                    purged.append(purge_source(source, store))
                except OSError as exc:
                    failed.append(f"{source}: {exc}")
                progress.advance()
        if options["verbosity"] >= 1:
            for done in purged:
                metadata = "metadata deleted" if done.metadata else "no cached metadata"
                self.stdout.write(f"{done.source}: {done.results} cached result(s), {metadata}")
        for failure in failed:
            self.stderr.write(f"failed: {failure}")
        total = sum(done.results for done in purged)
        self.stdout.write(f"Purged {total} cached result(s) of {len(purged)} source(s).")
        if failed:
            raise CommandError(f"{len(failed)} source(s) could not be purged")
