"""``manage.py oximg_clean``: keep the result cache within an age and a size."""

from __future__ import annotations

import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_oximg.core.keys import QUALITY_SUFFIX, is_quality_key
from django_oximg.core.stores.disk import FileSystemCacheStore
from django_oximg.core.stores.protocols import CacheEntry, CacheStore
from django_oximg.management.units import format_size, parse_duration, parse_size
from django_oximg.progress import add_progress_argument, progress_for
from django_oximg.purge import cache_entries, result_cache, select_for_clean, sidecars_to_clean

#: Temporary files of cache writes older than this (seconds) are orphans: a
#: write takes milliseconds, so its process died before renaming it.
ORPHAN_AGE = 60.0


class Command(BaseCommand):
    help = (
        "Delete cached thumbnails older than --older-than, then the least recently "
        "modified ones until the cache is no bigger than --max-size; on local disk, also "
        "temporary files that crashed writes left behind (older than a minute). A deleted "
        "thumbnail's quality sidecar goes with it (and a sidecar left without its thumbnail "
        "once older than a minute). Only names "
        "of the form the cache uses are touched. Deleted thumbnails are rendered again on "
        "the next request. Lists each deletion with --dry-run, or with -v 2."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--older-than",
            type=parse_duration,
            metavar="DURATION",
            help="Delete results last written longer ago than this: 30d, 12h, 90m, 1d12h.",
        )
        parser.add_argument(
            "--max-size",
            type=parse_size,
            metavar="SIZE",
            help="Then delete the least recently written results until the cache holds at "
            "most this: 5G, 500M (binary units: 1G = 1024^3 bytes).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only list what would be deleted.",
        )
        add_progress_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        store = result_cache()
        entries, sidecars = self.scan(store, options)
        now = time.time()
        victims = select_for_clean(entries, now, options["older_than"], options["max_size"])
        # Deleted after their results: a result never loses its quality first.
        sidecar_victims = sidecars_to_clean(victims, entries, sidecars, now - ORPHAN_AGE)
        local = store if isinstance(store, FileSystemCacheStore) else None
        orphans = local.orphans(ORPHAN_AGE) if local is not None else []
        dry_run = options["dry_run"]
        if options["verbosity"] >= (1 if dry_run else 2):
            verb = "would delete" if dry_run else "deleting"
            for entry in [*victims, *sidecar_victims, *orphans]:
                self.stdout.write(f"{verb} {entry.key} ({format_size(entry.size)})")
        if not dry_run:
            self.delete(store, [*victims, *sidecar_victims], options)
            if local is not None and orphans:
                try:
                    local.remove_orphans(ORPHAN_AGE)
                except OSError as exc:
                    raise CommandError(f"cannot remove orphan temporary files: {exc}") from exc
        freed = sum(entry.size for entry in [*victims, *sidecar_victims, *orphans])
        kept = sum(entry.size for entry in entries) - sum(entry.size for entry in victims)
        self.stdout.write(
            ("Would delete" if dry_run else "Deleted")
            + f" {len(victims)} result(s) and {len(orphans)} orphan temporary file(s), "
            + f"{format_size(freed)}; {len(entries) - len(victims)} result(s), "
            + f"{format_size(kept)} remain."
        )

    def scan(
        self, store: CacheStore, options: dict[str, Any]
    ) -> tuple[list[CacheEntry], dict[str, CacheEntry]]:
        """The results, and their quality sidecars by the result's key."""
        entries = []
        sidecars = {}
        try:
            with progress_for(self, "scanning", None, options) as progress:
                for entry in cache_entries(store):
                    if is_quality_key(entry.key):
                        sidecars[entry.key.removesuffix(QUALITY_SUFFIX)] = entry
                    else:
                        entries.append(entry)
                        progress.advance()
        except OSError as exc:
            raise CommandError(f"cannot list the result cache: {exc}") from exc
        return entries, sidecars

    def delete(self, store: CacheStore, victims: list[CacheEntry], options: dict[str, Any]) -> None:
        try:
            with progress_for(self, "deleting", len(victims), options) as progress:
                for entry in victims:
                    store.delete(entry.key)
                    progress.advance()
        except OSError as exc:
            raise CommandError(f"cannot delete from the result cache: {exc}") from exc
