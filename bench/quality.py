"""Quality per byte: SSIMULACRA2 of each contender's thumbnails at django-oximg's byte sizes.

    bash bench/peers/setup_tools.sh          # ssimulacra2 (needed)
    bash bench/peers/setup_thumbor.sh        # thumbor 7.8 (optional)
    bash bench/peers/setup_django_peers.sh   # sorl-thumbnail, easy-thumbnails (optional)
    bash bench/fetch_photos.sh               # 14 photos into bench/photos (git-ignored)
    .venv/bin/python bench/quality.py --json bench/results/quality.json
    .venv/bin/python bench/quality.py --report bench/results/quality.json   # tables only

For each photo and case (500x500 fit JPEG, 320x320 fill WebP) every contender
(bench/quality_contenders.py) makes the thumbnail at each quality of
``--qualities``, and once losslessly (PNG). Each output is decoded by libvips
and scored with SSIMULACRA2 against a reference made from the full decode of
the photo, resized to that output's exact size with Lanczos3 in linear light
(sRGB -> scRGB, no reducing gap, back to sRGB), kept lossless.

Scores are then read at django-oximg's own sizes: its bytes at its default
quality (q80 JPEG, q75 WebP) and at q60 and q90. Each contender's score is
interpolated at those bytes on its quality sweep ("matched bytes"), and so
are the bytes it needs for django-oximg's score there ("matched look");
bench/matched.py does the arithmetic. A difference in score at equal bytes
is what a site sees: the same page weight, a better or worse picture.

SSIMULACRA2 comes from PyPI's ``ssimulacra2`` 0.3.0 (a NumPy port of the
reference metric) in bench/peers/.venv-tools: 100 is identical, 90 visually
lossless, 70 high quality. A linear-light reference favours linear-light
resizing by construction, so lossless outputs are also scored against an
sRGB-space one. docs/quality.md has the results.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyvips  # noqa: E402

from bench import matched  # noqa: E402
from bench import quality_contenders as contenders  # noqa: E402
from bench.quality_contenders import CASES, Case, Photo  # noqa: E402

TOOLS_PYTHON = ROOT / "bench" / "peers" / ".venv-tools" / "bin" / "python"
SCORER = ROOT / "bench" / "peers" / "score.py"

#: Labels of the contenders from other processes.
PEER_LABELS = {
    "thumbor": "thumbor 7.8",
    "sorl": "sorl-thumbnail 13.4",
    "easy": "easy-thumbnails 2.10",
}

#: Qualities besides the default at whose django-oximg bytes scores are read.
SECONDARY_QUALITIES = (60, 90)

#: Key of a lossless output in a contender's outputs.
LOSSLESS = "lossless"


# --- making and scoring ------------------------------------------------------------


def make_outputs(
    photo: Photo,
    path: Path,
    case: Case,
    qualities: list[int],
    only: set[str],
    thumbor_get: Any,
) -> dict[str, dict[str, Any]]:
    """Every contender's outputs: ``{key: {"label", "outputs": {quality: bytes}}}``.

    The qualities are strings; ``"lossless"`` is the PNG output.
    """
    found: dict[str, dict[str, Any]] = {}
    for contender in contenders.CONTENDERS:
        if (contender.cases and case.name not in contender.cases) or (
            only and contender.key not in only and contender.key != "oximg"
        ):
            continue
        outputs: dict[str, bytes] = {
            str(q): contender.make(photo, case, q, case.format) for q in qualities
        }
        if contender.lossless:
            outputs[LOSSLESS] = contender.make(photo, case, 0, "png")
        found[contender.key] = {
            "label": contender.label,
            "outputs": outputs,
            "grid": contender.grid,
        }
    if thumbor_get is not None and (not only or "thumbor" in only):
        outputs = {
            str(q): thumbor_get(contenders.thumbor_path(path.name, case, q, case.format))
            for q in qualities
        }
        outputs[LOSSLESS] = thumbor_get(contenders.thumbor_path(path.name, case, 0, "png"))
        found["thumbor"] = {"label": PEER_LABELS["thumbor"], "outputs": outputs}
    if contenders.peers_available():
        for peer in ("sorl", "easy"):
            if only and peer not in only:
                continue
            lossy = contenders.peer_outputs(peer, path, case, qualities, case.format)
            outputs = {str(q): data for q, data in lossy.items()}
            outputs[LOSSLESS] = contenders.peer_outputs(peer, path, case, [90], "png")[90]
            found[peer] = {"label": PEER_LABELS[peer], "outputs": outputs}
    return found


def decoded_rgb(data: bytes) -> Any:
    """An output as the scorer sees it: decoded by libvips, 8-bit sRGB, no alpha."""
    image = pyvips.Image.new_from_buffer(data, "")
    if image.hasalpha():
        image = image.flatten(background=[255, 255, 255])
    if image.interpretation != "srgb":
        image = image.colourspace("srgb")
    return image.cast("uchar").copy_memory()


def score_outputs(
    photo: Photo, case: Case, made: dict[str, dict[str, Any]], work: Path
) -> dict[str, dict[str, Any]]:
    """Score every output once (identical pixels share a score) and return the curves.

    Lossless outputs are also scored against an sRGB-space reference
    (``"lossless_srgb_reference"``), a check on the linear-light one.
    """
    references: dict[str, Path] = {}
    pairs: dict[str, tuple[Path, Path]] = {}
    keyed: dict[tuple[str, str], tuple[str, int, str]] = {}

    def pair(image: Any, png: Path, digest: str, linear: bool, grid: str) -> str:
        size = (int(image.width), int(image.height))
        name = f"ref-{size[0]}x{size[1]}-{grid}-{'linear' if linear else 'srgb'}"
        if name not in references:
            ref = contenders.reference(photo, case, *size, linear=linear, grid=grid)
            references[name] = work / f"{name}.png"
            ref.pngsave(str(references[name]), compression=1)
        key = f"{digest}-{name}"
        pairs.setdefault(key, (references[name], png))
        return key

    for name, entry in made.items():
        grid = entry.get("grid", "stretch")
        for quality, data in entry["outputs"].items():
            image = decoded_rgb(data)
            dims = f"{image.width}x{image.height}"
            digest = hashlib.sha1(bytes(image.write_to_memory()) + dims.encode()).hexdigest()
            png = work / f"{digest}.png"
            if not png.exists():
                image.pngsave(str(png), compression=1)
            keyed[(name, quality)] = (pair(image, png, digest, True, grid), len(data), dims)
            if quality == LOSSLESS:
                keyed[(name, "srgb")] = (pair(image, png, digest, False, grid), len(data), dims)
    order = list(pairs)
    scores = dict(zip(order, run_scorer([pairs[k] for k in order], work), strict=True))
    curves: dict[str, dict[str, Any]] = {}
    for (name, quality), (key, size, dims) in keyed.items():
        entry = curves.setdefault(name, {"label": made[name]["label"], "dims": dims, "curve": {}})
        point = {"bytes": size, "score": scores[key]}
        if quality == LOSSLESS:
            entry["lossless"] = point
        elif quality == "srgb":
            entry["lossless_srgb_reference"] = point
        else:
            entry["curve"][quality] = point
    return curves


def run_scorer(pairs: list[tuple[Path, Path]], work: Path) -> list[float]:
    """SSIMULACRA2 of (reference, distorted) PNG pairs, in bench/peers/.venv-tools."""
    listing = work / "pairs.json"
    listing.write_text(json.dumps([[str(a), str(b)] for a, b in pairs]))
    done = subprocess.run(
        [str(TOOLS_PYTHON), str(SCORER), str(listing)], check=True, capture_output=True, text=True
    )
    return [float(v) for v in json.loads(done.stdout.strip().splitlines()[-1])]


# --- reading the curves ---------------------------------------------------------------


def points(entry: dict[str, Any]) -> list[tuple[float, float]]:
    return [(float(p["bytes"]), float(p["score"])) for p in entry["curve"].values()]


def matched_points(result: dict[str, Any], case: Case) -> dict[str, dict[str, dict[str, float]]]:
    """Per quality target (q60, default, q90): each contender's score at django-oximg's bytes.

    ``{"q80": {key: {"score", "delta", "bytes_pct"}}}``: ``delta`` is the score
    minus django-oximg's own, ``bytes_pct`` the bytes the contender needs for
    django-oximg's score, against django-oximg's bytes, in per cent.
    """
    baseline = result["contenders"]["oximg"]["curve"]
    read: dict[str, dict[str, dict[str, float]]] = {}
    for quality in target_qualities(case):
        target = baseline.get(str(quality))
        if target is None:
            continue
        row = read.setdefault(f"q{quality}", {})
        for key, entry in result["contenders"].items():
            curve = points(entry)
            score = matched.score_at_bytes(curve, target["bytes"])
            row[key] = {
                "score": score,
                "delta": score - target["score"],
                "bytes_pct": matched.percent_change(
                    matched.bytes_at_score(curve, target["score"]), target["bytes"]
                ),
            }
    return read


def target_qualities(case: Case) -> list[int]:
    return sorted({case.default_quality, *SECONDARY_QUALITIES})


# --- tables -----------------------------------------------------------------------------


def summary_table(results: dict[str, Any], case: Case, keys: list[str] | None = None) -> str:
    """Median and worst photo per contender (``keys``, default all), at django-oximg's bytes."""
    per_photo = results[case.name]
    first = next(iter(per_photo.values()))
    keys = [key for key in keys or first["contenders"] if key in first["contenders"]]
    default = f"q{case.default_quality}"
    header = [
        "contender",
        f"score at oximg {default} bytes",
        *(f"Δ at q{q} bytes" for q in target_qualities(case)),
        f"worst Δ at {default} bytes (photo)",
        f"bytes for oximg's {default} look",
        "lossless",
        "lossless, sRGB-space reference",
    ]
    rows = []
    for key in keys:
        at = {photo: r["matched"] for photo, r in per_photo.items()}

        def pick(quality: str, field: str, key: str = key, at: Any = at) -> dict[str, float]:
            return {
                photo: m[quality][key][field]
                for photo, m in at.items()
                if quality in m and key in m[quality]
            }

        deltas = pick(default, "delta")
        name, low = matched.worst(deltas)
        lossless = lossless_scores(per_photo, key, "lossless")
        lossless_srgb = lossless_scores(per_photo, key, "lossless_srgb_reference")
        rows.append(
            [
                f"`{key}` {first['contenders'][key]['label']}",
                matched.number(matched.median(pick(default, "score").values())),
                *(
                    matched.number(matched.median(pick(f"q{q}", "delta").values()), signed=True)
                    for q in target_qualities(case)
                ),
                f"{matched.number(low, signed=True)} ({name.removesuffix('.jpg')})"
                if name
                else "-",
                percent(matched.median(pick(default, "bytes_pct").values())),
                matched.number(matched.median(lossless)) if lossless else "-",
                matched.number(matched.median(lossless_srgb)) if lossless_srgb else "-",
            ]
        )
    return matched.markdown_table(header, rows)


def lossless_scores(per_photo: dict[str, Any], key: str, field: str) -> list[float]:
    found = (r["contenders"].get(key, {}) for r in per_photo.values())
    return [entry[field]["score"] for entry in found if field in entry]


def percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{matched.number(value, 0, signed=True)}%"


def photo_table(results: dict[str, Any], case: Case, keys: list[str]) -> str:
    """Per photo: django-oximg's score and bytes at its default, each contender's Δ."""
    default = f"q{case.default_quality}"
    per_photo = results[case.name]
    header = ["photo", f"oximg {default} bytes", "score", *(f"`{k}` Δ" for k in keys)]
    rows = []
    for photo, result in per_photo.items():
        base = result["contenders"]["oximg"]["curve"][str(case.default_quality)]
        row = result["matched"].get(default, {})
        rows.append(
            [
                photo.removesuffix(".jpg"),
                str(base["bytes"]),
                matched.number(base["score"]),
                *(matched.number(row[k]["delta"], signed=True) if k in row else "-" for k in keys),
            ]
        )
    medians = [
        matched.number(
            matched.median(
                r["matched"][default][k]["delta"]
                for r in per_photo.values()
                if k in r["matched"].get(default, {})
            ),
            signed=True,
        )
        for k in keys
    ]
    rows.append(["**median**", "", "", *medians])
    return matched.markdown_table(header, rows)


def metadata_table(results: dict[str, Any]) -> str:
    """The bytes keep_copyright costs per photo (default against keep_copyright off)."""
    header = ["photo"]
    columns = []
    for name in results:
        case = CASES[name]
        header += [f"{name} q{case.default_quality} bytes", "keep_copyright off", "metadata"]
        columns.append((name, case))
    rows = []
    photos = next(iter(results.values())).keys()
    for photo in photos:
        row = [photo.removesuffix(".jpg")]
        for name, case in columns:
            found = results[name][photo]["contenders"]
            quality = str(case.default_quality)
            if "oximg-kcr0" not in found:
                row += ["-", "-", "-"]
                continue
            kept = found["oximg"]["curve"][quality]["bytes"]
            stripped = found["oximg-kcr0"]["curve"][quality]["bytes"]
            share = matched.number(100 * (kept - stripped) / kept, 0)
            row += [str(kept), str(stripped), f"{kept - stripped} ({share}%)"]
        rows.append(row)
    return matched.markdown_table(header, rows)


#: The contenders of each summary table, django-oximg's defaults first.
GROUPS = {
    "against other servers": ["oximg", "oximg-hq", "libvips", "thumbor", "sorl", "easy"],
    "pipeline variants": [
        "oximg",
        "oximg-kcr0",
        "oximg-m1",
        "oximg-m2",
        "oximg-crop",
        "resize-crop",
        "crop-resize",
    ],
    "encoders on django-oximg's pixels": [
        "oximg",
        "enc-turbo-420",
        "enc-turbo-444",
        "enc-turbo-prog",
        "enc-mozjpeg",
        "enc-mozjpeg-trellis",
        "enc-webp-e2",
        "enc-webp-e4",
        "enc-webp-e6",
        "enc-webp-smart",
    ],
    "quantisation tables": [
        "oximg",
        "enc-annex-k",
        *(f"enc-table-{index}" for index in range(1, 9)),
        "enc-luma2-chroma0",
    ],
    "linear-light resizing": ["oximg", "libvips", "oximg-hq", "hq-2x", "hq-4x"],
}

#: Columns of the per-photo tables: the peers first, then the variants that matter.
PHOTO_COLUMNS = {
    "fit-jpeg": ["libvips", "oximg-hq", "thumbor", "sorl", "easy", "oximg-m1", "oximg-m2"],
    "fill-webp": ["libvips", "oximg-hq", "thumbor", "sorl", "easy", "oximg-m1", "crop-resize"],
}


def versus_table(results: dict[str, Any], case: Case, base: str, keys: list[str]) -> str:
    """Per photo, at django-oximg's default bytes: ``base``'s score and each key's gain on it."""
    default = f"q{case.default_quality}"
    header = ["photo", f"`{base}` score", *(f"`{k}` - `{base}`" for k in keys)]
    gains: dict[str, dict[str, float]] = {key: {} for key in keys}
    rows = []
    for photo, result in results[case.name].items():
        row = result["matched"].get(default, {})
        if base not in row:
            continue
        name = photo.removesuffix(".jpg")
        cells = [name, matched.number(row[base]["score"])]
        for key in keys:
            gain = row[key]["score"] - row[base]["score"] if key in row else math.nan
            gains[key][name] = gain
            cells.append(matched.number(gain, signed=True))
        rows.append(cells)
    medians = [matched.number(matched.median(gains[key].values()), signed=True) for key in keys]
    rows.append(["**median**", "", *medians])
    worst = []
    for key in keys:
        name, low = matched.worst(gains[key])
        worst.append(f"{matched.number(low, signed=True)} ({name})")
    rows.append(["**worst**", "", *worst])
    return matched.markdown_table(header, rows)


def report(results: dict[str, Any]) -> str:
    parts = []
    for name in results:
        if name == "meta":
            continue
        case = CASES[name]
        title = f"{name}: {case.width}x{case.height} {case.mode} {case.format}"
        for group, keys in GROUPS.items():
            parts.append(f"### {title}, {group}\n")
            parts.append(summary_table(results, case, keys) + "\n")
        parts.append(f"### {title}, per photo (Δ at oximg q{case.default_quality} bytes)\n")
        present = {k for r in results[name].values() for k in r["contenders"]}
        parts.append(photo_table(results, case, [k for k in PHOTO_COLUMNS[name] if k in present]))
        parts.append(f"\n### {title}, linear-light resizing against bare libvips\n")
        parts.append(
            versus_table(results, case, "libvips", ["oximg", "oximg-hq", "hq-2x", "hq-4x"])
        )
        parts.append("")
    cases = {k: v for k, v in results.items() if k != "meta"}
    parts.append("### metadata\n")
    parts.append(metadata_table(cases) + "\n")
    return "\n".join(parts)


# --- main -------------------------------------------------------------------------------


def evaluate(
    path: Path, case: Case, qualities: list[int], only: set[str], thumbor_get: Any
) -> dict[str, Any]:
    photo = Photo(path.name, path.read_bytes())
    with tempfile.TemporaryDirectory(prefix="oximg-quality-") as work:
        made = make_outputs(photo, path, case, qualities, only, thumbor_get)
        curves = score_outputs(photo, case, made, Path(work))
    result: dict[str, Any] = {"contenders": curves}
    result["matched"] = matched_points(result, case)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--only-photos", default="", help="comma-separated file names")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--qualities", default="30..95:5", help='"40,60,80" or "30..95:5"')
    parser.add_argument("--contenders", default="", help="keys to run (default: all)")
    parser.add_argument("--json", type=Path, help="write the results here (as they come)")
    parser.add_argument("--report", type=Path, help="print the tables of a results file, no run")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return
    if not TOOLS_PYTHON.exists():
        sys.exit("needs bench/peers/.venv-tools: bash bench/peers/setup_tools.sh")
    paths = contenders.photo_paths(args.photos, args.only_photos)
    from django_oximg.core import pipeline

    pipeline.configure(concurrency=1)
    qualities = matched.parse_qualities(args.qualities)
    only = {key for key in args.contenders.split(",") if key}
    cases = [CASES[name] for name in args.cases.split(",")]
    results: dict[str, Any] = {
        "meta": {
            "libvips": pipeline.libvips_version(),
            "qualities": qualities,
            "photos": [p.name for p in paths],
            "date": time.strftime("%Y-%m-%d"),
        }
    }
    with tempfile.TemporaryDirectory(prefix="oximg-quality-logs-") as logs:
        thumbor_run = None
        if contenders.servers.thumbor_available() and (not only or "thumbor" in only):
            first = contenders.thumbor_path(paths[0].name, cases[0], 80, cases[0].format)
            thumbor_run = contenders.thumbor(args.photos, first, Path(logs))
        with thumbor_run if thumbor_run is not None else contextlib.nullcontext() as thumbor_get:
            for case in cases:
                for path in paths:
                    started = time.perf_counter()
                    result = evaluate(path, case, qualities, only, thumbor_get)
                    results.setdefault(case.name, {})[path.name] = result
                    took = time.perf_counter() - started
                    print(f"{case.name} {path.name}: {took:.0f} s", file=sys.stderr)
                    if args.json:
                        args.json.parent.mkdir(parents=True, exist_ok=True)
                        args.json.write_text(json.dumps(results, indent=1))
    print(report(results))


if __name__ == "__main__":
    main()
