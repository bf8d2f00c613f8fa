"""In-process render throughput: bare pyvips (the ceiling) and our own layers, no HTTP.

    .venv/bin/python bench/inprocess.py --contender pyvips --case medium-jpeg \
        --images DIR [--threads 2] [--seconds 5] [--kind diverse]

Prints one JSON line. Contenders, each doing the case's operation on the
same bytes with ``--threads`` Python threads pulling from one counter
(libvips releases the GIL, so 2 threads use 2 cores), one libvips thread
per render (the server's default ``LIBVIPS_CONCURRENCY``):

- ``pyvips``: ``Image.thumbnail_buffer`` + the saver with the pipeline's
  encoder options: what a hand-written libvips program does;
- ``pyvips-shrink``: ``new_from_buffer(shrink=N)`` (JPEG DCT scaling at the
  largest N that stays >= the target) then ``resize``: decode without
  libvips' 2x margin;
- ``pipeline``: ``core.pipeline.render`` (probe, plan, load, steps, encode);
  with ``--read-each-time`` each render first reads and probes the file;
- ``thumbnailer``: ``core.thumbnailer.Thumbnailer.reply`` on a raw signed path
  with file stores and the executor, without Django or HTTP: the whole served
  path minus the server.

Run in a fresh process per measurement so that peak RSS is the contender's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench.cases import CASES, KEY, SALT, Case, oximg_path  # noqa: E402
from django_oximg.benchmarking.measure import process_cpu, timed_loop  # noqa: E402

#: Renders before timing starts (loads code, warms the allocator).
WARM_UP = 4

#: The render deadline both in-process contenders run with (the setting's default).
RENDER_TIMEOUT = 10.0


def save(image: pyvips.Image, case: Case) -> bytes:
    """The pipeline's own libvips saver, metadata dropped."""
    from django_oximg.core.pipeline.encode import save as pipeline_save

    return pipeline_save(image, case.format, case.quality, keep=0)


def bare_pyvips(case: Case, data: bytes) -> Callable[[int], bytes]:
    animated = case.source.endswith(".gif")

    def run(width: int) -> bytes:
        kwargs: dict[str, object] = {"height": case.height}
        if case.mode == "fill":
            kwargs["crop"] = "centre"
        image = pyvips.Image.thumbnail_buffer(
            data, width, option_string="n=-1" if animated else "", **kwargs
        )
        if case.format == "jpeg" and image.hasalpha():
            image = image.flatten(background=[255, 255, 255])
        return save(image, case)

    return run


def jpeg_shrink_for(src_w: int, src_h: int, width: int, height: int, margin: float) -> int:
    """Largest JPEG DCT shrink (1, 2, 4, 8) leaving >= ``margin`` x the target on both axes."""
    shrink = 1
    for candidate in (2, 4, 8):
        if src_w / candidate >= width * margin and src_h / candidate >= height * margin:
            shrink = candidate
    return shrink


def shrink_pyvips(case: Case, data: bytes) -> Callable[[int], bytes]:
    header = pyvips.Image.new_from_buffer(data, "")
    src_w, src_h = header.width, header.height

    def run(width: int) -> bytes:
        scale = min(width / src_w, case.height / src_h)
        target_w, target_h = max(1, round(src_w * scale)), max(1, round(src_h * scale))
        shrink = jpeg_shrink_for(src_w, src_h, target_w, target_h, 1.0)
        image = pyvips.Image.new_from_buffer(data, "", shrink=shrink, access="sequential")
        image = image.resize(target_w / image.width, vscale=target_h / image.height)
        return save(image, case)

    return run


def pipeline_render(
    case: Case, data: bytes, settings: Any, read_from: Path | None = None
) -> Callable[[int], bytes]:
    """``core.pipeline.render`` with a render deadline, as the thumbnailer calls it.

    With ``read_from`` (a file) every render reads and probes the source
    first, as a served miss does: through the local source store's bounded
    read (``MAX_SRC_FILE_SIZE``), the one the thumbnailer calls. Otherwise all
    renders share ``data`` and one probe, and the source stays in the CPU's
    cache between renders.
    """
    from django_oximg.core import defaults, pipeline
    from django_oximg.core.options import parse_path
    from django_oximg.core.stores.disk import FileSystemSourceStore

    shared = (data, pipeline.probe(data))
    store = FileSystemSourceStore(read_from.parent if read_from else Path("."))

    def source() -> tuple[bytes, pipeline.SourceInfo]:
        if read_from is None:
            return shared
        fresh = store.read(read_from.name, defaults.MAX_SRC_FILE_SIZE)
        return fresh, pipeline.probe(fresh)

    def run(width: int) -> bytes:
        options = parse_path(oximg_path(case, width, "")[1:]).options
        deadline = time.monotonic() + RENDER_TIMEOUT
        source_data, info = source()
        plan = pipeline.plan_render(info, options, case.format, settings)
        return pipeline.render(
            source_data, options, case.format, settings, deadline=deadline, plan=plan
        ).data

    return run


def thumbnailer_reply(
    case: Case, images: Path, settings: Any, fsync: bool
) -> Callable[[int], bytes]:
    from django_oximg.core.limits.executor import Executor
    from django_oximg.core.options.signing import URLSigner, pairs_from_hex
    from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
    from django_oximg.core.serving.staging import Limits
    from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore

    signer = URLSigner(pairs_from_hex((KEY,), (SALT,)))
    cache = Path(tempfile.mkdtemp(prefix="oximg-inprocess-"))
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(),
        signer,
        {"": FileSystemSourceStore(images)},
        FileSystemCacheStore(cache, fsync=fsync),
        Executor(workers=2, queue_size=64, queue_timeout=30.0, memory_budget=512 * 1024**2),
        limits=Limits(render=settings, render_timeout=RENDER_TIMEOUT),
    )
    counter = iter(range(10**9))
    lock = threading.Lock()

    def run(width: int) -> bytes:
        with lock:
            tag = f"t{next(counter)}"
        path = signer.signed_path(oximg_path(case, width, tag))
        reply = thumbnailer.reply(path, "GET", {})
        if reply.status != 200:
            raise RuntimeError(f"status {reply.status}")
        return bytes(reply.body) if reply.body else b""

    return run


def measure(
    run: Callable[[int], bytes], case: Case, threads: int, seconds: float, kind: str
) -> dict[str, object]:
    """``threads`` threads run the case for ``seconds`` (oximg_bench's loop); one JSON line."""
    for index in range(WARM_UP):
        run(case.widths(1, index)[0])

    def one(index: int) -> int:
        return len(run(case.width if kind == "same" else case.widths(1, index)[0]))

    measured = timed_loop(one, threads, seconds, process_cpu)
    figures = measured.figures()
    return {
        "requests": measured.images,
        "seconds": measured.seconds,
        "rps": measured.rps,
        "p50_ms": figures["p50_ms"],
        "p95_ms": figures["p95_ms"],
        "p99_ms": figures["p99_ms"],
        "cpu_ms_per_request": figures["cpu_ms_per_image"],
        "cores_used": measured.cpu_seconds / measured.seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "bytes_per_response": figures["bytes_per_image"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--contender",
        choices=("pyvips", "pyvips-shrink", "pipeline", "thumbnailer"),
        required=True,
    )
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--kind", choices=("diverse", "same"), default="diverse")
    parser.add_argument(
        "--margin", type=float, default=None, help="JPEG_SHRINK_MARGIN (default: the setting's)"
    )
    parser.add_argument("--decoder", default=None, help="JPEG_DECODER (default: the setting's)")
    parser.add_argument(
        "--no-fsync", action="store_true", help="thumbnailer: CACHE_FSYNC off (no fsync)"
    )
    parser.add_argument(
        "--read-each-time",
        action="store_true",
        help="pipeline: read and probe the source file before every render, as a miss does",
    )
    args = parser.parse_args()

    from django_oximg.core import pipeline

    pipeline.configure(concurrency=1)
    defaults = pipeline.RenderSettings()
    settings = pipeline.RenderSettings(
        jpeg_shrink_margin=defaults.jpeg_shrink_margin if args.margin is None else args.margin,
        jpeg_decoder=args.decoder or defaults.jpeg_decoder,
    )
    case = CASES[args.case]
    data = (args.images / case.source).read_bytes()
    builders = {
        "pyvips": lambda: bare_pyvips(case, data),
        "pyvips-shrink": lambda: shrink_pyvips(case, data),
        "pipeline": lambda: pipeline_render(
            case, data, settings, args.images / case.source if args.read_each_time else None
        ),
        "thumbnailer": lambda: thumbnailer_reply(case, args.images, settings, not args.no_fsync),
    }
    result = measure(builders[args.contender](), case, args.threads, args.seconds, args.kind)
    result["pid"] = os.getpid()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
