"""``autoquality`` against the fixed default quality: bytes, SSIMULACRA2, miss CPU.

    bash bench/fetch_photos.sh              # 14 photos into bench/photos (git-ignored)
    bash bench/peers/setup_tools.sh         # ssimulacra2 in bench/peers/.venv-tools
    VIPS_CONCURRENCY=1 .venv/bin/python bench/autoquality.py
    .venv/bin/python bench/autoquality.py metric   # the DSSIM's cost per call

Every image (the 14 photos and six drawn graphics: a logo with alpha, a
screenshot, text, a flat illustration, a gradient, noise) is rendered by
``pipeline.render`` as a 500x500 fit JPEG, at fixed qualities 50..95 and with
``aq:dssim`` at several targets (qualities 50..89). Each output is scored with
SSIMULACRA2 against the same render kept lossless (PNG): the same pixels, so
only the encoder's loss is scored. For each set of outputs: the total bytes,
the median and the worst score. The fixed sweep is then read (linear in the
score) at the median of each ``aq`` target, and at its worst score: the
total bytes fixed qualities need for the same median, and for the same
worst. CPU: each image is rendered by the default (q80) and by each ``aq``
target, interleaved, ``--rounds`` times; the median process CPU time of
each, and the ratio per image, whose median and worst are given.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench.quality import decoded_rgb, run_scorer  # noqa: E402
from django_oximg.core import pipeline  # noqa: E402
from django_oximg.core.options import parse_path  # noqa: E402
from django_oximg.core.pipeline.autoquality import Reference  # noqa: E402

PHOTOS = ROOT / "bench" / "photos"
FIXED = list(range(50, 100, 5))
TARGETS = [0.006, 0.008, 0.01, 0.012, 0.015, 0.02]
DEFAULT_QUALITY = 80
#: The search's bounds: from 90 up a JPEG keeps its whole chroma (about 1.7x the bytes).
LOW, HIGH = 50, 89
BOX = "rs:fit:500:500"


def graphics() -> dict[str, bytes]:
    """Six drawn sources, 1280x960 (the logo 1200x600 with alpha)."""
    width, height = 1280, 960
    xyz = pyvips.Image.xyz(width, height)
    gradient = (xyz[0] * (255 / width)).bandjoin([xyz[1] * (255 / height), xyz[0] * 0 + 128])
    noise = pyvips.Image.gaussnoise(width, height, sigma=60, mean=128)
    noise = noise.bandjoin([noise.rot180(), noise.fliphor()])
    flat = pyvips.Image.black(width, height).new_from_image([240, 230, 210])
    for index, colour in enumerate(([200, 60, 40], [40, 120, 200], [60, 160, 80])):
        flat = flat.draw_circle(colour, 300 + index * 340, 480, 200, fill=True)
    text = pyvips.Image.text(
        "<b>Quality per byte</b>\n" + "The quick brown fox jumps over the lazy dog. " * 12,
        width=1200,
        dpi=150,
        rgba=False,
    )
    page = (pyvips.Image.black(width, height) + 255).insert(255 - text, 40, 40)
    page = page.bandjoin([page, page])
    screen = pyvips.Image.black(width, height).new_from_image([245, 245, 245])
    screen = screen.draw_rect([50, 60, 90], 0, 0, width, 60, fill=True)
    for row in range(8):
        screen = screen.draw_rect([220, 225, 235], 40, 100 + row * 100, 1200, 80, fill=True)
    strip = text.crop(0, 0, min(text.width, 900), min(text.height, 200))
    screen = screen.insert(255 - strip.bandjoin([strip, strip]), 60, 120)
    logo = pyvips.Image.black(1200, 600).new_from_image([30, 90, 180])
    alpha = pyvips.Image.black(1200, 600).draw_circle(255, 300, 300, 280, fill=True)
    alpha = alpha.draw_rect(255, 620, 180, 520, 240, fill=True)
    logo = logo.bandjoin(alpha)
    made = {
        "g-gradient": gradient,
        "g-noise": noise,
        "g-flat": flat,
        "g-text": page,
        "g-screenshot": screen,
        "g-logo": logo,
    }
    return {
        name: bytes(image.cast("uchar").copy(interpretation="srgb").pngsave_buffer())
        for name, image in made.items()
    }


def sources() -> dict[str, bytes]:
    found = {path.stem: path.read_bytes() for path in sorted(PHOTOS.glob("*.jpg"))}
    if not found:
        sys.exit("no photos: run bash bench/fetch_photos.sh")
    return {**found, **graphics()}


def render(data: bytes, path: str, fmt: str = "jpeg") -> pipeline.Rendered:
    options = parse_path(f"/{path}/plain/x").options
    return pipeline.render(data, options, fmt, pipeline.RenderSettings())


def aq_path(target: float, bounds: tuple[int, int] = (LOW, HIGH)) -> str:
    return f"aq:dssim:{target}:{bounds[0]}:{bounds[1]}:0.0005/{BOX}"


def sweep(images: dict[str, bytes], work: Path, bounds: tuple[int, int]) -> dict[str, Any]:
    """Every output's bytes and score, by contender and image."""
    contenders = {f"q{q}": f"q:{q}/{BOX}" for q in FIXED}
    contenders |= {f"aq{t}": aq_path(t, bounds) for t in TARGETS}
    pairs: list[tuple[Path, Path]] = []
    rows: list[tuple[str, str, int, int]] = []
    for name, data in images.items():
        reference = work / f"{name}-ref.png"
        decoded_rgb(render(data, BOX, "png").data).pngsave(str(reference), compression=1)
        for key, path in contenders.items():
            rendered = render(data, path)
            out = work / f"{name}-{key}.png"
            decoded_rgb(rendered.data).pngsave(str(out), compression=1)
            pairs.append((reference, out))
            rows.append((key, name, len(rendered.data), rendered.quality))
    scores = run_scorer(pairs, work)
    results: dict[str, Any] = {}
    for (key, name, size, quality), score in zip(rows, scores, strict=True):
        results.setdefault(key, {})[name] = {"bytes": size, "score": score, "quality": quality}
    return results


def summary(per_image: dict[str, Any], names: list[str]) -> dict[str, float]:
    scores = [per_image[n]["score"] for n in names]
    return {
        "bytes": sum(per_image[n]["bytes"] for n in names),
        "median": statistics.median(scores),
        "worst": min(scores),
    }


def at(curve: list[dict[str, float]], field: str, value: float, wanted: str) -> float | None:
    """``wanted`` on the fixed sweep where ``field`` equals ``value`` (linear), or None."""
    points = sorted(curve, key=lambda point: point[field])
    for low, high in itertools.pairwise(points):
        if low[field] <= value <= high[field]:
            share = (value - low[field]) / ((high[field] - low[field]) or 1)
            return low[wanted] + share * (high[wanted] - low[wanted])
    return None


#: SSIMULACRA2 scores each photo is held to by :func:`oracle`.
ORACLE_SCORES = [72.0, 75.0, 78.0, 80.0]


def oracle(results: dict[str, Any], names: list[str], score: float) -> dict[str, float]:
    """Each image at the lowest fixed quality of the sweep whose SSIMULACRA2 reaches ``score``.

    What a per-image search could do at best with the judge's own metric (in
    the sweep's steps of 5): the bound on what any cheaper metric can buy.
    An image that never reaches it keeps the highest quality.
    """
    chosen = {}
    for name in names:
        reaching = [q for q in FIXED if results[f"q{q}"][name]["score"] >= score]
        chosen[name] = results[f"q{min(reaching) if reaching else FIXED[-1]}"][name]
    return summary(chosen, names)


def cpu(
    images: dict[str, bytes], rounds: int, bounds: tuple[int, int]
) -> dict[str, dict[str, float]]:
    """Median process CPU seconds per image of the default and each target, interleaved."""
    paths = {"default": BOX} | {f"aq{t}": aq_path(t, bounds) for t in TARGETS}
    times: dict[str, dict[str, list[float]]] = {key: {} for key in paths}
    for _ in range(rounds):
        for name, data in images.items():
            for key, path in paths.items():
                started = time.process_time()
                render(data, path)
                times[key].setdefault(name, []).append(time.process_time() - started)
    return {
        key: {name: statistics.median(values) for name, values in per.items()}
        for key, per in times.items()
    }


def metric_cost(images: dict[str, bytes], rounds: int) -> None:
    """CPU per DSSIM call on each photo's 500 px thumbnail, and per JPEG encode."""
    reference_ms, dssim_ms, encode_ms = [], [], []
    for data in images.values():
        thumbnail = pyvips.Image.new_from_buffer(render(data, BOX, "png").data, "")
        thumbnail = thumbnail.copy_memory()
        encoded = bytes(thumbnail.jpegsave_buffer(Q=80))
        for _ in range(rounds):
            started = time.process_time()
            reference = Reference(thumbnail)
            reference_ms.append((time.process_time() - started) * 1000)
            started = time.process_time()
            reference.dssim(encoded)
            dssim_ms.append((time.process_time() - started) * 1000)
            started = time.process_time()
            thumbnail.jpegsave_buffer(Q=80)
            encode_ms.append((time.process_time() - started) * 1000)
    print(
        f"reference {statistics.median(reference_ms):.2f} ms, "
        f"DSSIM per call {statistics.median(dssim_ms):.2f} ms, "
        f"JPEG encode {statistics.median(encode_ms):.2f} ms (medians over {len(dssim_ms)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="all", choices=("all", "metric"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--bounds",
        default=f"{LOW}:{HIGH}",
        help="the search's qualities, MIN:MAX (imgproxy's and the setting's default: 70:80)",
    )
    args = parser.parse_args()
    low, high = (int(value) for value in args.bounds.split(":"))
    images = sources()
    if args.what == "metric":
        metric_cost(images, args.rounds)
        return
    with tempfile.TemporaryDirectory() as directory:
        results = sweep(images, Path(directory), (low, high))
    seconds = cpu(images, args.rounds, (low, high))
    photos = [name for name in images if not name.startswith("g-")]
    groups = {"photos": photos, "graphics": [n for n in images if n.startswith("g-")]}
    report: dict[str, Any] = {"results": results, "cpu": seconds}
    for group, names in groups.items():
        fixed = [{"q": q, **summary(results[f"q{q}"], names)} for q in FIXED]
        print(f"\n{group} ({len(names)}): fixed qualities")
        print("| quality | total bytes | median | worst |\n|---:|---:|---:|---:|")
        for row in fixed:
            print(f"| {row['q']} | {row['bytes']:.0f} | {row['median']:.1f} | {row['worst']:.1f} |")
        print(
            f"\n{group}: aq:dssim ({low}..{high}) | total bytes | median | worst | qualities "
            "| fixed bytes at this median | fixed worst at this median "
            "| fixed bytes at this worst | CPU x default (median, worst) |"
        )
        print("|---:|---:|---:|---:|---|---:|---:|---:|---|")
        for target in TARGETS:
            key = f"aq{target}"
            row = summary(results[key], names)
            qualities = sorted(results[key][n]["quality"] for n in names)
            same_median = at(fixed, "median", row["median"], "bytes")
            worst_there = at(fixed, "median", row["median"], "worst")
            same_worst = at(fixed, "worst", row["worst"], "bytes")
            ratios = [seconds[key][n] / seconds["default"][n] for n in names]

            def show(value: float | None, bytes_of: float = row["bytes"]) -> str:
                return "-" if value is None else f"{value:.0f} ({bytes_of / value:.2f} x)"

            print(
                f"| {target} | {row['bytes']:.0f} | {row['median']:.1f} | {row['worst']:.1f} "
                f"| {qualities[0]}-{qualities[-1]} | {show(same_median)} "
                f"| {'-' if worst_there is None else f'{worst_there:.1f}'} | {show(same_worst)} "
                f"| {statistics.median(ratios):.2f}, {max(ratios):.2f} |"
            )
        print(
            f"\n{group}: SSIMULACRA2 itself per image (qualities in 5s) | total bytes | median "
            "| worst | fixed bytes at this median | fixed worst at this median "
            "| fixed bytes at this worst |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for score in ORACLE_SCORES:
            row = oracle(results, names, score)
            same_median = at(fixed, "median", row["median"], "bytes")
            worst_there = at(fixed, "median", row["median"], "worst")
            same_worst = at(fixed, "worst", row["worst"], "bytes")
            print(
                f"| {score:g} | {row['bytes']:.0f} | {row['median']:.1f} | {row['worst']:.1f} "
                f"| {show(same_median, row['bytes'])} "
                f"| {'-' if worst_there is None else f'{worst_there:.1f}'} "
                f"| {show(same_worst, row['bytes'])} |"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
