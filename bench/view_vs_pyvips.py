"""One medium JPEG thumbnail, three ways, interleaved in one process.

    .venv/bin/python bench/view_vs_pyvips.py [--rounds 60] [--image bench/images/medium.jpg]

1. bare pyvips: ``Image.thumbnail_buffer`` + ``jpegsave_buffer(Q=80)`` (the ceiling);
2. our pipeline: ``core.pipeline.render`` with the same box and quality;
3. the Django view through the test client: signature check, option parsing,
   cache lookup (always a miss: every URL has its own width 485-500 and
   cachebuster), executor, render, atomic cache write, response.

Reports the median and min-max milliseconds per image for each, and the
ratios against bare pyvips. Single-threaded: this measures per-request cost,
not throughput (see docs/BENCHMARKS.md for the load benchmarks).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def configure_django(media_root: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="bench",
        ALLOWED_HOSTS=["*"],
        INSTALLED_APPS=["django_oximg"],
        ROOT_URLCONF="bench.urls_bench",
        MEDIA_ROOT=media_root,
        STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}},
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        OXIMG={"KEY": "aa" * 32, "SALT": "bb" * 32},
    )
    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--image", type=Path, default=None)
    args = parser.parse_args()

    media = tempfile.mkdtemp(prefix="oximg-bench-")
    configure_django(media)

    import images
    import pyvips
    from django.test import Client

    from django_oximg import runtime
    from django_oximg.core import pipeline
    from django_oximg.core.options import Options, build_path

    source = args.image or images.write_set(Path(media))["medium.jpg"]
    data = source.read_bytes()
    (Path(media) / "medium.jpg").write_bytes(data)
    settings = pipeline.RenderSettings()
    runtime.get_thumbnailer()  # configure libvips as the server does
    signer = runtime.get_signer()
    client = Client()

    def bare(width: int, _round: int) -> None:
        image = pyvips.Image.thumbnail_buffer(data, width, height=500)
        image.jpegsave_buffer(Q=80)

    def ours(width: int, _round: int) -> None:
        pipeline.render(data, Options(width=width, height=500), "jpeg", settings)

    def view(width: int, round_: int) -> None:
        path = build_path(Options(width=width, height=500, cachebuster=f"r{round_}"), "medium.jpg")
        response = client.get("/img" + signer.signed_path(path))
        assert response.status_code == 200, response.status_code

    contenders = {"bare pyvips": bare, "pipeline": ours, "django view": view}
    timings: dict[str, list[float]] = {name: [] for name in contenders}
    for round_ in range(args.rounds):
        width = 485 + round_ % 16
        for name, run in contenders.items():
            start = time.perf_counter()
            run(width, round_)
            timings[name].append((time.perf_counter() - start) * 1000)

    base = statistics.median(timings["bare pyvips"])
    version = pipeline.libvips_version()
    print(f"libvips {version}, {source.name}, {args.rounds} rounds, fit 500x500 q80")
    print(f"{'contender':<14} {'median ms':>10} {'min-max ms':>16} {'x bare':>8}")
    for name, values in timings.items():
        median = statistics.median(values)
        spread = f"{min(values):>7.2f}-{max(values):<8.2f}"
        print(f"{name:<14} {median:>10.2f} {spread} {median / base:>8.3f}")


if __name__ == "__main__":
    main()
