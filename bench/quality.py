"""Quality: SSIMULACRA2 of each contender's thumbnail against a high-quality reference.

    .venv/bin/python bench/quality.py [--cases medium-jpeg,large-jpeg] [--json FILE]

Reference: the source decoded at full size by pyvips (no shrink-on-load),
resized with Lanczos3 to the contender's exact output size, kept lossless
(PNG). Every output is decoded by pyvips to PNG too, so only the
contenders' resizing and encoding differ, not the decoders used to score.

Contenders: django-oximg's ``core.pipeline.render`` at each
``JPEG_SHRINK_MARGIN`` in ``--margins`` (2 = libvips' own rule, the same
bytes as bare pyvips ``thumbnail_buffer``), thumbor 7.8 (its own venv, file
loader, over HTTP on 127.0.0.1), sorl-thumbnail and easy-thumbnails (their
own venv). Each makes the case's box (500x500 fit) at JPEG qualities
``--qualities``; reported: the score and bytes at q80 ("defaults", as the
load benchmark configures every contender), and the score interpolated at
the bytes of django-oximg's default q80 output ("matched bytes": quality
per byte, which is what a quality setting trades).

SSIMULACRA2 comes from PyPI's ``ssimulacra2`` 0.3.0 (a NumPy port of the
reference metric), run in bench/peers/.venv-tools (bench/peers/setup_tools.sh)
because it needs Pillow, which the project's venv must not have.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench import servers  # noqa: E402
from bench.cases import CASES, Case, thumbor_path  # noqa: E402
from bench.images import write_set  # noqa: E402

TOOLS_PYTHON = ROOT / "bench" / "peers" / ".venv-tools" / "bin" / "python"
PEERS_PYTHON = ROOT / "bench" / "peers" / ".venv-django-peers" / "bin" / "python"


def oximg_outputs(
    case: Case, source: bytes, margins: list[float], qualities: list[int], out: Path
) -> dict[str, dict[int, Path]]:
    from django_oximg.core import pipeline
    from django_oximg.core.options import Options

    found: dict[str, dict[int, Path]] = {}
    for margin in margins:
        name = f"oximg margin {margin:g}"
        settings = pipeline.RenderSettings(jpeg_shrink_margin=margin)
        for quality in qualities:
            options = Options(width=case.width, height=case.height, quality=quality)
            data = pipeline.render(source, options, case.format, settings).data
            path = out / f"oximg-m{margin:g}-{case.name}-q{quality}.{case.format}"
            path.write_bytes(data)
            found.setdefault(name, {})[quality] = path
    return found


def thumbor_outputs(
    case: Case, media: Path, qualities: list[int], out: Path, logs: Path
) -> dict[str, dict[int, Path]]:
    if not servers.thumbor_available():
        return {}
    found: dict[int, Path] = {}
    first = thumbor_path(case, case.width, "cold")
    with servers.thumbor(media, first, processes=1, log_dir=logs) as thumbor:
        for quality in qualities:
            path_q = thumbor_path(replace(case, quality=quality), case.width, "")
            with urllib.request.urlopen(f"http://127.0.0.1:{thumbor.port}{path_q}") as answer:
                path = out / f"thumbor-{case.name}-q{quality}.{case.format}"
                path.write_bytes(answer.read())
                found[quality] = path
    return {"thumbor 7.8": found}


def peer_outputs(
    case: Case, media: Path, qualities: list[int], out: Path
) -> dict[str, dict[int, Path]]:
    if not PEERS_PYTHON.exists():
        return {}
    found: dict[str, dict[int, Path]] = {}
    for contender, label in (("sorl", "sorl-thumbnail"), ("easy", "easy-thumbnails")):
        command = [
            str(PEERS_PYTHON),
            str(ROOT / "bench" / "peers" / "django_peers.py"),
            "--contender",
            contender,
            "--case",
            case.name,
            "--images",
            str(media),
            "--emit",
            str(out),
            "--qualities",
            ",".join(map(str, qualities)),
        ]
        subprocess.run(command, check=True, capture_output=True)
        found[label] = {q: out / f"{contender}-{case.name}-q{q}.{case.format}" for q in qualities}
    return found


def reference_png(
    source: bytes, width: int, height: int, out: Path, cache: dict[tuple[int, int], Path]
) -> Path:
    """Full decode, Lanczos3 to exactly width x height, lossless PNG."""
    if (width, height) in cache:
        return cache[(width, height)]
    full = pyvips.Image.new_from_buffer(source, "", access="sequential")
    resized = full.resize(width / full.width, vscale=height / full.height, kernel="lanczos3")
    path = out / f"reference-{width}x{height}.png"
    resized.cast("uchar").pngsave(str(path), compression=1)
    cache[(width, height)] = path
    return path


def decoded_png(path: Path) -> Path:
    png = path.with_suffix(path.suffix + ".png")
    pyvips.Image.new_from_file(str(path)).pngsave(str(png), compression=1)
    return png


def scores(pairs: list[tuple[Path, Path]], work: Path) -> list[float]:
    listing = work / "pairs.json"
    listing.write_text(json.dumps([[str(a), str(b)] for a, b in pairs]))
    done = subprocess.run(
        [str(TOOLS_PYTHON), str(ROOT / "bench" / "peers" / "score.py"), str(listing)],
        check=True,
        capture_output=True,
        text=True,
    )
    return [float(v) for v in json.loads(done.stdout.strip().splitlines()[-1])]


def at_bytes(points: list[tuple[int, float]], target: float) -> float:
    """Score at ``target`` bytes, linear in log(bytes) between the two nearest qualities."""
    points = sorted(points)
    for (b0, s0), (b1, s1) in itertools.pairwise(points):
        if b0 <= target <= b1:
            if b1 == b0:
                return s0
            t = (math.log(target) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return s0 + t * (s1 - s0)
    return math.nan


def evaluate(
    case: Case, media: Path, work: Path, margins: list[float], qualities: list[int]
) -> dict[str, Any]:
    source = (media / case.source).read_bytes()
    outputs = oximg_outputs(case, source, margins, qualities, work)
    outputs.update(thumbor_outputs(case, media, qualities, work, work))
    outputs.update(peer_outputs(case, media, qualities, work))
    references: dict[tuple[int, int], Path] = {}
    pairs, index = [], []
    for name, by_quality in outputs.items():
        for quality, path in by_quality.items():
            image = pyvips.Image.new_from_file(str(path))
            ref = reference_png(source, image.width, image.height, work, references)
            pairs.append((ref, decoded_png(path)))
            index.append((name, quality, path.stat().st_size, f"{image.width}x{image.height}"))
    values = scores(pairs, work)
    table: dict[str, dict[str, Any]] = {}
    for (name, quality, size, dims), score in zip(index, values, strict=True):
        table.setdefault(name, {"dims": dims, "by_quality": {}})["by_quality"][quality] = {
            "bytes": size,
            "ssimulacra2": score,
        }
    baseline = f"oximg margin {margins[0]:g}"
    target = table[baseline]["by_quality"][80]["bytes"]
    for entry in table.values():
        curve = [(v["bytes"], v["ssimulacra2"]) for v in entry["by_quality"].values()]
        entry["at_matched_bytes"] = at_bytes(curve, target)
    return {"case": case.name, "matched_bytes": target, "contenders": table}


def print_report(results: list[dict[str, Any]]) -> None:
    for result in results:
        print(f"\n{result['case']} (matched bytes = {result['matched_bytes']})")
        print("| contender | size | q80 bytes | q80 SSIMULACRA2 | SSIMULACRA2 at matched bytes |")
        print("|---|---|---|---|---|")
        for name, entry in result["contenders"].items():
            q80 = entry["by_quality"].get(80, {})
            print(
                f"| {name} | {entry['dims']} | {q80.get('bytes', '-')} | "
                f"{q80.get('ssimulacra2', math.nan):.2f} | {entry['at_matched_bytes']:.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="medium-jpeg,large-jpeg")
    parser.add_argument("--margins", default="2,1.5,1")
    parser.add_argument("--qualities", default="50,60,70,80,90")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not TOOLS_PYTHON.exists():
        sys.exit("needs bench/peers/.venv-tools: bash bench/peers/setup_tools.sh")
    from django_oximg.core import pipeline

    pipeline.configure(concurrency=1)
    work = Path(tempfile.mkdtemp(prefix="oximg-quality-"))
    media = work / "media"
    write_set(media)
    margins = [float(m) for m in args.margins.split(",")]
    qualities = [int(q) for q in args.qualities.split(",")]
    results = [
        evaluate(CASES[name], media, work, margins, qualities) for name in args.cases.split(",")
    ]
    print_report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
