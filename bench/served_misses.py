"""``format:best`` and ``autoquality`` misses through a real server: CPU per miss and bytes.

    bash bench/fetch_photos.sh
    .venv/bin/python bench/served_misses.py [--rounds 3] [--json served.json]

The in-process figures of bench/best_format.py and bench/autoquality.py
time ``pipeline.render`` alone; this one serves the same images (the 14
photos and bench/autoquality.py's six drawn sources, fitted into
500x500) from django-oximg under gunicorn (bench/servers.py, one process on
127.0.0.1), so that each miss also pays for the URL, the source read, the
staging, the cache write and the answer. Every request is a miss (a
cache buster per round and variant). The variants, interleaved in each
round: the tags' default (JPEG at ``QUALITY``'s q80), ``format: auto`` for
a browser that sends ``image/avif,image/webp`` (AVIF), ``aq:dssim`` at its
default target and bounds (JPEG), ``f:best`` for that browser, and both
together. The server's CPU (its process tree's, from /proc, in clock ticks)
is read before and after each variant's batch of one miss per image, so a
batch's CPU divided by its misses is the CPU per miss; the median over
``--rounds`` is reported, with the total bytes, each as a ratio to the
default's. The machine's load average is printed before and after: the
server's CPU time, not its wall time, is measured, but a busy machine still
costs each miss some cache misses.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.autoquality import BOX, sources  # noqa: E402
from bench.best_format import ACCEPTED  # noqa: E402
from bench.cases import signed  # noqa: E402
from bench.driver import tree_cpu_seconds  # noqa: E402

#: What a browser that takes both modern formats sends (bench/best_format.py's ``ACCEPTED``).
ACCEPT = ",".join(f"image/{fmt}" for fmt in ACCEPTED) + ",*/*;q=0.8"


class Variant(NamedTuple):
    #: Options before the box, and the extension (empty: negotiated).
    options: str
    extension: str
    accept: str


VARIANTS = {
    "default (JPEG q80)": Variant("", "@jpeg", ""),
    "format: auto (AVIF)": Variant("", "", ACCEPT),
    "aq:dssim (JPEG)": Variant("aq:dssim/", "@jpeg", ""),
    "f:best": Variant("", "@best", ACCEPT),
    "f:best + aq:dssim": Variant("aq:dssim/", "@best", ACCEPT),
}
DEFAULT = "default (JPEG q80)"


def path_for(variant: Variant, name: str, tag: str) -> str:
    return signed(f"/{variant.options}{BOX}/cb:{tag}/plain/{name}{variant.extension}")


def fetch(connection: http.client.HTTPConnection, path: str, accept: str) -> tuple[bytes, str]:
    """One GET on the kept-alive ``connection``: the body and its content type."""
    headers = {"Accept": accept} if accept else {}
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status} {body[:200]!r}")
    return body, response.getheader("Content-Type", "")


def batch(
    connection: http.client.HTTPConnection,
    pid: int,
    variant: Variant,
    names: list[str],
    tag: str,
) -> tuple[float, dict[str, tuple[int, str]]]:
    """One miss per image: the server's CPU seconds for them all, each answer's size and type."""
    answers = {}
    before = tree_cpu_seconds(pid)
    for name in names:
        body, content_type = fetch(connection, path_for(variant, name, tag), variant.accept)
        answers[name] = (len(body), content_type)
    return tree_cpu_seconds(pid) - before, answers


def write_media(media: Path) -> dict[str, list[str]]:
    """The images under ``media``; their names by group ("photos", "drawn")."""
    groups: dict[str, list[str]] = {"photos": [], "drawn": []}
    for stem, data in sources().items():
        drawn = stem.startswith("g-")
        name = f"{stem}.png" if drawn else f"{stem}.jpg"
        (media / name).write_bytes(data)
        groups["drawn" if drawn else "photos"].append(name)
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="oximg-served-misses-"))
    media = work / "media"
    media.mkdir()
    groups = write_media(media)
    first = path_for(VARIANTS[DEFAULT], groups["photos"][0], "start")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    per_miss: dict[str, dict[str, list[float]]] = {g: {k: [] for k in VARIANTS} for g in groups}
    answers: dict[str, dict[str, dict[str, tuple[int, str]]]] = {g: {} for g in groups}
    started = time.perf_counter()
    with servers.oximg(media, "view", first, log_dir=work) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        for round_ in range(args.rounds + 1):  # round 0 warms the server up
            for group, names in groups.items():
                for index, (key, variant) in enumerate(VARIANTS.items()):
                    tag = f"r{round_}v{index}"
                    seconds, made = batch(connection, server.pid, variant, names, tag)
                    if round_:
                        per_miss[group][key].append(seconds / len(names))
                        answers[group][key] = made
        connection.close()
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{args.rounds} rounds in {time.perf_counter() - started:.0f} s")
    report: dict[str, Any] = {"per_miss": per_miss, "answers": answers}
    for group in groups:
        print_group(group, len(groups[group]), per_miss[group], answers[group])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


def print_group(
    group: str,
    count: int,
    per_miss: dict[str, list[float]],
    answers: dict[str, dict[str, tuple[int, str]]],
) -> None:
    cpu = {key: statistics.median(values) * 1000 for key, values in per_miss.items()}
    size = {key: sum(length for length, _ in made.values()) for key, made in answers.items()}
    print(f"\n{group} ({count} images, {BOX})")
    print("| variant | CPU ms per miss | x default | total bytes | x default | formats served |")
    print("|---|---:|---:|---:|---:|---|")
    for key in VARIANTS:
        types: dict[str, int] = {}
        for _, content_type in answers[key].values():
            fmt = content_type.removeprefix("image/")
            types[fmt] = types.get(fmt, 0) + 1
        served = ", ".join(f"{fmt} {n}" for fmt, n in sorted(types.items()))
        print(
            f"| {key} | {cpu[key]:.0f} | {cpu[key] / cpu[DEFAULT]:.2f} | {size[key]} "
            f"| {size[key] / size[DEFAULT]:.2f} | {served} |"
        )


if __name__ == "__main__":
    main()
