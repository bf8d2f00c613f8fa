"""easy-thumbnails and sorl-thumbnail generating thumbnails in-process, for comparison.

Runs in bench/peers/.venv-django-peers (Pillow lives only there):

    bench/peers/.venv-django-peers/bin/python bench/peers/django_peers.py \
        --contender sorl --case medium-jpeg --images DIR [--seconds 5] [--threads 1]
    # bench/quality.py: one thumbnail per quality of any photo, no timing
    ... --contender easy --source PHOTO --box 320x320 --mode fill --format webp \
        --emit DIR --qualities 40,50,60

Each call is the library's public "give me this thumbnail" call with its
defaults (Pillow engine, JPEG quality 80, no upscaling) for a thumbnail that
does not exist yet: a distinct width (485-500) plus an extra option the
library folds into the thumbnail's name, so every call reads the source,
decodes, resizes, encodes and saves to a FileSystemStorage, like a
django-oximg cache miss. Prints one JSON line with the same fields as
bench/inprocess.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import CASES, Case  # noqa: E402  (stdlib only)


def configure(media: Path, apps: list[str], **extra: object) -> None:
    """Django with ``apps`` over ``media`` (files and a SQLite database), migrated.

    Shared with bench/peers/peer_sizes.py; ``extra`` are further settings.
    """
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="bench",
        INSTALLED_APPS=["django.contrib.contenttypes", *apps],
        MEDIA_ROOT=str(media),
        MEDIA_URL="/media/",
        DATABASES={
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(media / "db.sqlite3")}
        },
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}},
        THUMBNAIL_KVSTORE="sorl.thumbnail.kvstores.cached_db_kvstore.KVStore",
        USE_TZ=True,
        **extra,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, run_syncdb=True)


def sorl_maker(case: Case) -> Callable[[int, int], int]:
    from sorl.thumbnail import get_thumbnail

    def make(width: int, index: int) -> int:
        crop = "center" if case.mode == "fill" else None
        extra = {"crop": crop} if crop else {}
        thumb = get_thumbnail(
            case.source,
            f"{width}x{case.height}",
            quality=case.quality,
            format=case.format.upper(),
            cachebuster=str(index),
            **extra,
        )
        return int(thumb.size[0]) and os.path.getsize(thumb.storage.path(thumb.name))

    return make


def easy_maker(case: Case) -> Callable[[int, int], int]:
    from django.core.files.storage import default_storage
    from easy_thumbnails.files import get_thumbnailer

    def make(width: int, index: int) -> int:
        thumbnailer = get_thumbnailer(default_storage, case.source)
        # Its format comes from the thumbnailer's extension (THUMBNAIL_EXTENSION).
        thumbnailer.thumbnail_extension = "jpg" if case.format == "jpeg" else case.format
        options: dict[str, object] = {
            "size": (width, case.height),
            "quality": case.quality,
            "cachebuster": str(index),
        }
        if case.mode == "fill":
            options["crop"] = True
        thumb = thumbnailer.get_thumbnail(options)
        return int(os.path.getsize(thumb.path))

    return make


def emit(contender: str, case: Case, out: Path, qualities: list[int]) -> None:
    """Thumbnails at the box width for each quality, copied to ``out`` for bench/quality.py."""
    from dataclasses import replace

    out.mkdir(parents=True, exist_ok=True)
    for index, quality in enumerate(qualities):
        at_quality = replace(case, quality=quality)
        maker = sorl_maker if contender == "sorl" else easy_maker
        make = maker(at_quality)
        path = last_path(make, at_quality.width, 100_000 + index, case.source)
        shutil.copy(path, out / f"{contender}-{case.name}-q{quality}.{case.format}")


def last_path(make: Callable[[int, int], int], width: int, index: int, source: str) -> str:
    """Run ``make`` and find the file it just wrote (the newest under MEDIA_ROOT)."""
    from django.conf import settings

    make(width, index)
    files = [
        p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file() and p.suffix != ".sqlite3"
    ]
    files = [p for p in files if p.name != source]
    return str(max(files, key=lambda p: p.stat().st_mtime_ns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contender", choices=("sorl", "easy"), required=True)
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--images", type=Path)
    parser.add_argument("--source", type=Path, help="with --emit: this photo instead of a case")
    parser.add_argument("--box", default="500x500", help="with --source: WIDTHxHEIGHT")
    parser.add_argument("--mode", choices=("fit", "fill"), default="fit")
    parser.add_argument("--format", choices=("jpeg", "webp", "png"), default="jpeg")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--emit",
        type=Path,
        help="write one box-width thumbnail per --qualities value here, no timing",
    )
    parser.add_argument("--qualities", default="80")
    args = parser.parse_args()

    if args.source:
        width, height = (int(side) for side in args.box.split("x"))
        name = args.source.stem
        case = Case(name, args.source.name, args.mode, width, height, args.format, 80)
        source = args.source
    elif args.case and args.images:
        case = CASES[args.case]
        source = args.images / case.source
    else:
        parser.error("give --case and --images, or --source")
    media = Path(tempfile.mkdtemp(prefix=f"{args.contender}-media-"))
    shutil.copy(source, media / case.source)
    configure(
        media,
        ["sorl.thumbnail" if args.contender == "sorl" else "easy_thumbnails"],
        THUMBNAIL_QUALITY=80,
        THUMBNAIL_DEFAULT_OPTIONS={"quality": 80},
    )
    import PIL

    if args.emit:
        emit(args.contender, case, args.emit, [int(q) for q in args.qualities.split(",")])
        shutil.rmtree(media, ignore_errors=True)
        return
    make = (sorl_maker if args.contender == "sorl" else easy_maker)(case)
    for index in range(2):  # warm-up
        make(case.widths(1, index)[0], -1 - index)
    counter = iter(range(10**9))
    lock = threading.Lock()
    durations: list[float] = []
    sizes: list[int] = []
    stop_at = time.perf_counter() + args.seconds

    def worker() -> None:
        while time.perf_counter() < stop_at:
            with lock:
                index = next(counter)
            start = time.perf_counter()
            size = make(case.widths(1, index)[0], index)
            with lock:
                durations.append(time.perf_counter() - start)
                sizes.append(size)

    cpu, wall = time.process_time(), time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(args.threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    durations.sort()
    count = len(durations)
    print(
        json.dumps(
            {
                "requests": count,
                "seconds": wall,
                "rps": count / wall,
                "p50_ms": 1000 * durations[count // 2],
                "p95_ms": 1000 * durations[min(count - 1, int(count * 0.95))],
                "p99_ms": 1000 * durations[min(count - 1, int(count * 0.99))],
                "cpu_ms_per_request": 1000 * cpu / count,
                "cores_used": cpu / wall,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "bytes_per_response": statistics.fmean(sizes),
                "pillow": PIL.__version__,
            }
        )
    )
    shutil.rmtree(media, ignore_errors=True)


if __name__ == "__main__":
    main()
