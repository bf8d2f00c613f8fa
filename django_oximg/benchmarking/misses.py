"""Misses in-process: the thumbnailer against ``pipeline.render`` and bare libvips.

Every contender makes the same fit of the same bytes with the same number
of threads: ``thumbnailer`` is ``runtime.get_thumbnailer().reply`` on a
signed path (signature, parsing, the source read, the executor, the cache
write), ``pipeline.render`` the render alone, ``bare libvips`` the ceiling
(:mod:`.bare_libvips`). Every request is a miss: a width of 485-500 and a
cachebuster of its own. With ``compare``, sorl-thumbnail and
easy-thumbnails' public ``get_thumbnail`` calls join on one thread each.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import platform
import resource
import secrets
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings as django_settings
from django.core.files.storage import storages
from django.core.management.base import CommandError

from django_oximg import conf, runtime
from django_oximg.benchmarking.bare_libvips import bare_thumbnail
from django_oximg.benchmarking.measure import (
    WARM_UP,
    process_cpu,
    ratios,
    summary,
    timed_loop,
    width_for,
)
from django_oximg.benchmarking.sources import Source
from django_oximg.core import pipeline
from django_oximg.core.options import Options, build_path
from django_oximg.progress import Progress

#: Contenders that run on one thread (their own storage and locks, as on a site).
PEER_NAMES = ("sorl-thumbnail", "easy-thumbnails")

#: What makes a thumbnail: called with a fresh index, returns its size in bytes.
Render = Callable[[int], int]


def parse_box(text: str) -> tuple[int, int]:
    """``--size``: the box ``WxH`` every contender fits into."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError as exc:
        raise CommandError(f"--size must be WxH, e.g. 500x500, not {text!r}") from exc
    if width < 16 or height < 1:
        raise CommandError("--size must be at least 16x1")
    return width, height


def contenders(
    source: Source, box: tuple[int, int], fmt: str, compare: bool, notes: list[str]
) -> dict[str, Render]:
    """The miss contenders for ``source``, by name."""
    thumbnailer = runtime.get_thumbnailer()
    signer = runtime.get_signer()
    render_settings = thumbnailer.limits.render
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
        reply = thumbnailer.reply(signer.signed_path(build_path(options, source.name)), "GET", {})
        if reply.status != 200:
            raise CommandError(f"the thumbnailer answered {reply.status} for {source.name}")
        if reply.file is not None:
            reply.file.close()
        return len(reply.body)

    found: dict[str, Render] = {
        "bare libvips": bare,
        "pipeline.render": render,
        "thumbnailer": served,
    }
    if compare:
        found.update(peer_contenders(source, box, quality, notes))
    return found


def peer_contenders(
    source: Source, box: tuple[int, int], quality: int, notes: list[str]
) -> dict[str, Render]:
    """sorl-thumbnail and easy-thumbnails' public calls, when installed and configured."""
    found: dict[str, Render] = {}
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


def run(
    sources: list[Source],
    box: tuple[int, int],
    options: dict[str, Any],
    threads: int,
    notes: list[str],
    progress: Callable[[int], Progress],
) -> list[dict[str, Any]]:
    """Every contender on every source, warmed up, then in interleaved rounds.

    ``progress(total)`` gives the indicator to advance once per loop.
    Returns one summary row per source and contender.
    """
    plans = {
        source.label: contenders(source, box, options["format"], options["compare"], notes)
        for source in sources
    }
    total = options["rounds"] * sum(len(p) for p in plans.values())
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    with progress(total) as bar:
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
                    bar.advance()
    return [
        summary(label, name, "in-process", threads, values)
        for (label, name), values in runs.items()
    ]


def report(results: list[dict[str, Any]], threads: int, options: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: rows, their ratios to bare libvips, and the run's set-up."""
    return {"results": results, "ratios": ratios(results), "meta": metadata(threads, options)}


def metadata(threads: int, options: dict[str, Any]) -> dict[str, Any]:
    """What the figures depend on: versions, CPUs, threads, the margin and the run's options."""
    settings = conf.get_settings()
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
