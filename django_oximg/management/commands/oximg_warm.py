"""``manage.py oximg_warm``: render thumbnails ahead of the first visitor."""

from __future__ import annotations

import os
import posixpath
import re
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

from django.core.files.storage import FileSystemStorage, Storage
from django.core.management.base import BaseCommand, CommandError

from django_oximg import conf, runtime
from django_oximg.core.errors import OximgError
from django_oximg.core.limits.cgroups import usable_cpus
from django_oximg.core.serving.handler import Thumbnailer
from django_oximg.core.serving.replies import status_for
from django_oximg.core.stores.resolver import source_for
from django_oximg.progress import add_progress_argument, progress_for
from django_oximg.thumbnails import (
    ThumbnailError,
    accepts_to_render,
    get_thumbnail,
    tag_options,
    url_prefix,
)

#: Status counted for a thumbnail whose arguments the tag refused.
BAD_ARGUMENTS_STATUS = 400

GLOB_MAGIC = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Variant:
    """One thumbnail to make of every source: the tag's geometry and keywords."""

    geometry: str
    keywords: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        words = " ".join(f"{name}={value}" for name, value in self.keywords)
        return " ".join(part for part in (self.geometry, words) if part)


@dataclass(frozen=True)
class Outcome:
    """What warming one URL did: "rendered", "cached" or "failed" (with a status)."""

    kind: str
    status: int = 200
    detail: str = ""


@dataclass
class Tally:
    rendered: int = 0
    cached: int = 0
    failures: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        if outcome.kind == "rendered":
            self.rendered += 1
        elif outcome.kind == "cached":
            self.cached += 1
        else:
            self.failures.append(outcome)

    def summary(self) -> str:
        statuses = Counter(failure.status for failure in self.failures)
        by_status = ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items()))
        failed = f"failed {len(self.failures)}" + (f" ({by_status})" if by_status else "")
        return f"Rendered {self.rendered}, already cached {self.cached}, {failed}"


class Command(BaseCommand):
    help = (
        "Render thumbnails of the sources matching --source, for each --preset and/or "
        "--geometry, exactly as the {% thumbnail %} tag would ask for them (same URLs, "
        "same version token), through this process's thumbnailer, so every limit applies. "
        "Resumable: a thumbnail already in the result cache costs one cache lookup and is "
        "not rendered again, so an interrupted run is simply started again (no state file "
        "is needed). With both --preset and --geometry, each preset is combined with each "
        'geometry, as in {% thumbnail image "400x300" preset="card" %}. Exits non-zero '
        "if any thumbnail failed."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--source",
            action="append",
            required=True,
            metavar="PATTERN",
            help="Source names to warm, as a glob over the source storage: * and ? within "
            "a directory, ** across directories (photos/**/*.jpg). alias:PATTERN for a "
            "source in OXIMG['SOURCES']. Repeatable.",
        )
        parser.add_argument(
            "--preset",
            action="append",
            default=[],
            metavar="NAME",
            help="A preset from OXIMG['PRESETS'] (it gives the size). Repeatable.",
        )
        parser.add_argument(
            "--geometry",
            action="append",
            default=[],
            metavar="WxH",
            help='A size as the tag takes it: "400x300", "400" or "x300". Repeatable.',
        )
        parser.add_argument(
            "--crop", help='As the tag: center, top, "top left", smart, "50%% 30%%".'
        )
        parser.add_argument(
            "--format",
            help="As the tag: jpeg, png, webp, avif, gif, or auto (warms the AVIF, WebP and "
            "fallback results a browser may negotiate).",
        )
        parser.add_argument("--quality", type=int, help="As the tag: 1..100.")
        parser.add_argument(
            "--autoquality",
            help='As the tag: the URL\'s aq arguments, e.g. "dssim" or "size:20480:40:80".',
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=0,
            metavar="N",
            help="Thumbnails requested at once (default: OXIMG WORKERS, else the usable CPUs).",
        )
        add_progress_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        variants = variants_from(options)
        sources = matching_sources(options["source"])
        if not sources:
            raise CommandError("no source matched " + ", ".join(options["source"]))
        jobs = options["jobs"] or conf.get_settings().WORKERS or usable_cpus()
        if jobs < 1:
            raise CommandError("--jobs must be at least 1")
        tally = self.warm(sources, variants, jobs, options)
        if options["verbosity"] >= 1:
            for failure in tally.failures:
                self.stderr.write(f"failed {failure.status}: {failure.detail}")
        summary = f"{tally.summary()}; {len(sources)} source(s) x {len(variants)} variant(s)."
        if tally.failures:
            raise CommandError(summary)
        self.stdout.write(summary)

    def warm(
        self, sources: list[str], variants: list[Variant], jobs: int, options: dict[str, Any]
    ) -> Tally:
        thumbnailer = runtime.get_thumbnailer()
        tally = Tally()
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="oximg-warm")
        try:
            futures = [
                pool.submit(warm_one, thumbnailer, source, variant)
                for source in sources
                for variant in variants
            ]
            with progress_for(self, "warming", len(futures), options) as progress:
                for future in as_completed(futures):
                    for outcome in future.result():
                        tally.add(outcome)
                    progress.advance()
        finally:
            # On an unexpected error, do not start what is still queued.
            pool.shutdown(wait=True, cancel_futures=True)
        return tally


def variants_from(options: dict[str, Any]) -> list[Variant]:
    """Every (geometry, preset) combination with the shared tag keywords, checked now.

    A typo is a CommandError before any source is read, not one failure per source.
    """
    presets: list[str] = options["preset"]
    geometries: list[str] = options["geometry"]
    if not presets and not geometries:
        raise CommandError("give at least one --preset or --geometry")
    known = conf.get_settings().PRESETS
    for preset in presets:
        if preset not in known:
            raise CommandError(
                f"unknown preset {preset!r}; OXIMG['PRESETS'] has: "
                + (", ".join(sorted(known)) or "none")
            )
    shared = [
        (name, str(options[name]))
        for name in ("crop", "format", "quality", "autoquality")
        if options.get(name) is not None
    ]
    variants = []
    for geometry in geometries or [""]:
        for preset in presets or [""]:
            keywords = ([("preset", preset)] if preset else []) + shared
            try:
                tag_options(geometry, dict(keywords))
            except ThumbnailError as exc:
                raise CommandError(str(exc)) from exc
            variants.append(Variant(geometry, tuple(keywords)))
    return variants


def warm_one(thumbnailer: Thumbnailer, source: str, variant: Variant) -> list[Outcome]:
    """Warm one thumbnail of one source: every format it may be served in."""
    described = f"{source} {variant}"
    try:
        thumbnail = get_thumbnail(source, variant.geometry, **dict(variant.keywords))
    except OximgError as exc:
        return [Outcome("failed", status_for(exc), f"{described}: {exc.public}")]
    except ThumbnailError as exc:
        return [Outcome("failed", BAD_ARGUMENTS_STATUS, f"{described}: {exc}")]
    path = "/" + thumbnail.url.removeprefix(url_prefix())
    accepts = accepts_to_render(thumbnail)
    outcomes = []
    seen: set[str] = set()
    for accept in accepts:
        try:
            key = thumbnailer.job_for(path, accept).key
        except OximgError as exc:
            outcomes.append(Outcome("failed", status_for(exc), f"{described}: {exc.public}"))
            continue
        if key not in seen:  # without AUTO_FORMAT, every Accept gives the same result
            seen.add(key)
            outcomes.append(warm_url(thumbnailer, path, accept, key, described))
    return outcomes


def warm_url(thumbnailer: Thumbnailer, path: str, accept: str, key: str, described: str) -> Outcome:
    """Render ``path`` unless its result (under ``key``) is already cached."""
    if thumbnailer.cache.get(key) is not None:
        return Outcome("cached")
    reply = thumbnailer.reply(path, "GET", {"HTTP_ACCEPT": accept} if accept else {})
    if reply.file is not None:  # a hit on local disk, if a peer rendered it meanwhile
        reply.file.close()
    if reply.status == 200:
        return Outcome("rendered")
    message = reply.body.decode("utf-8", "replace").strip()
    return Outcome("failed", reply.status, f"{described}: {message}")


def matching_sources(patterns: list[str]) -> list[str]:
    """Source strings (with their alias) matching any of ``patterns``, sorted."""
    settings = conf.get_settings()
    storages = runtime.source_storages(settings)
    found: set[str] = set()
    for pattern in patterns:
        alias, sep, name_pattern = pattern.partition(":")
        if not (sep and (alias == "" or alias in settings.SOURCES)):
            alias, name_pattern = "", pattern
        if not GLOB_MAGIC.search(name_pattern):
            found.add(pattern)  # one name: no listing (a missing one fails as 404)
            continue
        regex = glob_regex(name_pattern)
        storage = storages[alias]
        skipped = cache_directory_inside(storage)
        for name in storage_files(storage, fixed_directory(name_pattern), skipped):
            if regex.fullmatch(name):
                found.add(source_for(alias, name))
    return sorted(found)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob: ``*`` and ``?`` stay within a directory, ``**`` crosses them."""
    parts = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            parts.append("(?:[^/]*/)*")
            index += 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            parts.append("[^/]")
            index += 1
        elif pattern[index] == "[" and (end := pattern.find("]", index + 2)) != -1:
            parts.append(character_class(pattern[index + 1 : end]))
            index = end + 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(parts), re.DOTALL)


def character_class(body: str) -> str:
    """A glob's ``[...]`` as a regex class: ranges kept, ``!`` negates, never "/"."""
    negated = body.startswith("!")
    body = body[negated:].replace("\\", "\\\\").replace("[", "\\[")
    if body.startswith("^"):
        body = "\\" + body
    return "[^/" + body + "]" if negated else "[" + body + "]"


def fixed_directory(pattern: str) -> str:
    """The leading directories of ``pattern`` without wildcards: listing starts there."""
    directories = pattern.split("/")[:-1]
    return "/".join(takewhile(lambda part: not GLOB_MAGIC.search(part), directories))


def cache_directory_inside(source: Storage) -> str | None:
    """The result cache's directory relative to a local source storage, if inside it.

    The default cache lives in ``MEDIA_ROOT/oximg``, inside the default
    source storage: a broad pattern must not warm thumbnails of thumbnails.
    """
    cache = runtime.cache_storage(conf.get_settings())
    if not (isinstance(source, FileSystemStorage) and isinstance(cache, FileSystemStorage)):
        return None
    relative = os.path.relpath(os.path.realpath(cache.location), os.path.realpath(source.location))
    if relative == os.curdir or relative.startswith(os.pardir):
        return None
    return relative.replace(os.sep, "/")


def storage_files(storage: Storage, directory: str, skipped: str | None) -> Iterator[str]:
    """Names of the files under ``directory`` of ``storage``, by ``listdir`` recursion."""
    if directory == skipped:
        return
    try:
        dirnames, filenames = storage.listdir(directory)
    except FileNotFoundError:
        return
    for filename in filenames:
        yield posixpath.join(directory, filename)
    for dirname in dirnames:
        yield from storage_files(storage, posixpath.join(directory, dirname), skipped)
