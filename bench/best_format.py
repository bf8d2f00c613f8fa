"""``format:best`` against the fixed formats: bytes per image, the format that won, miss CPU.

    .venv/bin/python bench/best_format.py [--photos bench/photos] [--width 500] [--repeats 3]

For each image, a thumbnail ``--width`` px wide is rendered in this process
(libvips on one thread) from the image's bytes, as a miss renders it: the
default a browser gets at ``format: auto`` (AVIF), the tag's default (JPEG),
and ``f:best`` for a browser that sends ``image/avif,image/webp``; each
``--repeats`` times, the three interleaved, the process CPU time of each
kept and its median reported. The images: the 14 real photos of
bench/fetch_photos.sh when ``--photos`` holds them, and six drawn ones
(tests/images.py): a logo with alpha, a screenshot, text, a flat
illustration, a gradient and noise. Drawn images are thumbnailed to 3/4 of
their width, where their text stays legible.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_oximg.core import pipeline  # noqa: E402
from django_oximg.core.options import Options  # noqa: E402
from tests import images  # noqa: E402

SETTINGS = pipeline.RenderSettings()
ACCEPTED = ("avif", "webp")

DRAWN: dict[str, Callable[[], bytes]] = {
    "logo (alpha)": lambda: bytes(images.logo().pngsave_buffer()),
    "screenshot": lambda: bytes(images.screenshot().pngsave_buffer()),
    "text": lambda: bytes(images.text().pngsave_buffer()),
    "illustration": lambda: bytes(images.illustration().pngsave_buffer()),
    "gradient": lambda: bytes(images.gradient().pngsave_buffer()),
    "noise": lambda: bytes(images.noise(500, 400).pngsave_buffer()),
}


def plans(data: bytes, width: int) -> dict[str, pipeline.Plan]:
    info = pipeline.probe(data)
    options = Options(width=width)
    return {
        "avif": pipeline.plan_render(info, options, "avif", SETTINGS),
        "jpeg": pipeline.plan_render(info, options, "jpeg", SETTINGS),
        "best": pipeline.plan_best(info, options, ACCEPTED, SETTINGS),
    }


def timed(data: bytes, plan: pipeline.Plan) -> tuple[float, pipeline.Rendered]:
    started = time.process_time()
    rendered = pipeline.render(data, plan.options, plan.format, SETTINGS, plan=plan)
    return 1000 * (time.process_time() - started), rendered


def kind(data: bytes, fmt: str) -> str:
    """The winner's format, and "lossless" for a PNG or a lossless (VP8L) WebP."""
    lossless = fmt == "png" or (fmt == "webp" and data[12:16] == b"VP8L")
    return f"{fmt} lossless" if lossless else fmt


class Row(NamedTuple):
    name: str
    #: Bytes and median CPU ms, by "avif", "jpeg" and "best".
    bytes: dict[str, int]
    cpu: dict[str, float]
    #: The format f:best chose ("lossless" for PNG and lossless WebP).
    won: str


def measure(name: str, data: bytes, width: int, repeats: int) -> Row:
    planned = plans(data, width)
    for plan in planned.values():  # warm-up
        timed(data, plan)
    samples: dict[str, list[float]] = {key: [] for key in planned}
    made: dict[str, pipeline.Rendered] = {}
    for _ in range(repeats):
        for key, plan in planned.items():
            took, made[key] = timed(data, plan)
            samples[key].append(took)
    cpu = {key: statistics.median(values) for key, values in samples.items()}
    sizes = {key: len(rendered.data) for key, rendered in made.items()}
    return Row(name, sizes, cpu, kind(made["best"].data, made["best"].format))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    pipeline.configure(concurrency=1)
    rows = []
    photos = sorted(args.photos.glob("*.jpg")) if args.photos.is_dir() else []
    for path in photos:
        rows.append(measure(path.stem, path.read_bytes(), args.width, args.repeats))
    for name, make in DRAWN.items():
        data = make()
        drawn_width = pipeline.probe(data).width * 3 // 4
        rows.append(measure(name, data, drawn_width, args.repeats))
    print("| image | AVIF bytes | JPEG bytes | best bytes | best won | CPU ms AVIF, JPEG, best |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        size, cpu = row.bytes, row.cpu
        print(
            f"| {row.name} | {size['avif']} | {size['jpeg']} | {size['best']} | {row.won} "
            f"| {cpu['avif']:.0f}, {cpu['jpeg']:.0f}, {cpu['best']:.0f} |"
        )
    for label, chosen in (("photos", rows[: len(photos)]), ("drawn", rows[len(photos) :])):
        if chosen:
            summarise(label, chosen)


def summarise(label: str, rows: list[Row]) -> None:
    """Total bytes of each, and f:best's miss CPU as a median ratio per image."""
    total = {key: sum(row.bytes[key] for row in rows) for key in ("avif", "jpeg", "best")}
    per_avif = statistics.median(row.cpu["best"] / row.cpu["avif"] for row in rows)
    per_jpeg = statistics.median(row.cpu["best"] / row.cpu["jpeg"] for row in rows)
    print(
        f"{label}: total bytes AVIF {total['avif']}, JPEG {total['jpeg']}, "
        f"best {total['best']} ({total['best'] / total['avif']:.2f} x AVIF, "
        f"{total['best'] / total['jpeg']:.2f} x JPEG); miss CPU, median per image: "
        f"best {per_avif:.2f} x AVIF, {per_jpeg:.2f} x JPEG"
    )


if __name__ == "__main__":
    main()
