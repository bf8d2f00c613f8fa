"""Chart of a bench/load.py JSON report: req/s per contender, case and concurrency.

    bench/peers/.venv-tools/bin/python bench/plot.py REPORT.json CHART.png [LEFT,OUT]

Runs where matplotlib is (bench/peers/setup_tools.sh, or the project's
``bench`` extra). Bars are medians over runs, whiskers min-max; in-process
contenders (no HTTP) are drawn once per case beside the served ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ORDER = (
    "oximg-wsgi",
    "oximg-wsgi-alt",
    "oximg-wsgi-before",
    "oximg-view",
    "thumbor",
    "thumbor-close",
    "pyvips",
    "pipeline",
    "thumbnailer",
    "sorl",
    "easy",
)
#: In-process contenders are recorded at c=2 (2 threads) and sorl/easy at c=1.
GROUP_LABELS = {1: "c=1\n(sorl, easy: 1 thread)", 2: "in-process\n2 threads"}

COLOURS = {
    "oximg-wsgi": "#1f5fa8",
    "oximg-wsgi-alt": "#0b3d75",
    "oximg-wsgi-before": "#8fb3de",
    "oximg-view": "#4a90d9",
    "thumbor": "#d9822b",
    "thumbor-close": "#f0b27a",
    "pyvips": "#555555",
    "pipeline": "#888888",
    "thumbnailer": "#aaaaaa",
    "sorl": "#7a9a3a",
    "easy": "#a8c66c",
}


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    left_out = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()
    points = [
        p for p in report["points"] if p["kind"] == "diverse" and p["contender"] not in left_out
    ]
    cases = sorted({p["case"] for p in points}, key=lambda c: ("large" in c, c))
    figure, axes = plt.subplots(1, len(cases), figsize=(6.5 * len(cases), 4.2), squeeze=False)
    for axis, case in zip(axes[0], cases, strict=True):
        mine = [p for p in points if p["case"] == case]
        groups = sorted({p["concurrency"] for p in mine if p["contender"] in COLOURS})
        present = [c for c in ORDER if any(p["contender"] == c for p in mine)]
        width = 0.8 / max(1, len(present))
        for index, contender in enumerate(present):
            xs, ys, lows, highs = [], [], [], []
            for g, concurrency in enumerate(groups):
                found = [
                    p
                    for p in mine
                    if p["contender"] == contender and p["concurrency"] == concurrency
                ]
                if not found:
                    continue
                rps = found[0]["rps"]
                xs.append(g + index * width)
                ys.append(rps["median"])
                lows.append(rps["median"] - rps["low"])
                highs.append(rps["high"] - rps["median"])
            axis.bar(
                xs,
                ys,
                width,
                yerr=[lows, highs],
                capsize=2,
                label=contender,
                color=COLOURS.get(contender, "#cccccc"),
            )
        axis.set_xticks(
            [g + 0.4 - width / 2 for g in range(len(groups))],
            [GROUP_LABELS.get(c, f"c={c}") for c in groups],
            fontsize=8,
        )
        axis.set_title(f"{case}: fit 500x500, diverse URLs")
        axis.set_ylabel("thumbnails/s (median, min-max of runs)")
        axis.legend(fontsize=7, ncol=2)
    meta = report.get("meta", {})
    figure.suptitle(
        f"{meta.get('cpus')} vCPU {meta.get('cpu', '')}, {meta.get('date', '')}", fontsize=9
    )
    figure.tight_layout()
    figure.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
