"""Profile the served path: py-spy samples the gunicorn worker under diverse-URL load.

    .venv/bin/python bench/profile_served.py [--case medium-jpeg] [--seconds 15] [--way middleware]
        [--connections 2] [--gil]

Starts django-oximg under gunicorn (bench/servers.py), drives it with
2 keep-alive connections of cache-missing URLs, and has py-spy (``pip install
py-spy``; a tool, not a dependency) record the worker process for
``--seconds`` (all threads, idle samples dropped). Prints the share of
samples per function of ours or of pyvips, summed over the collapsed
stacks: where a request's wall time goes, rendering included. ``--gil``
samples only the thread holding the GIL: what the other threads of the
process queue behind.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, oximg_url, url_list  # noqa: E402
from bench.driver import closed_loop, per_connection, process_tree  # noqa: E402
from bench.images import write_set  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="medium-jpeg")
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--way", default="middleware", choices=("middleware", "view"))
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--gil", action="store_true", help="only the thread holding the GIL")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    work = Path(tempfile.mkdtemp(prefix="oximg-profile-"))
    media = work / "media"
    write_set(media)
    case = CASES[args.case]
    first = oximg_url(case, 500, "cold")
    out = work / "profile.txt"
    with servers.oximg(media, args.way, first, log_dir=work) as server:
        worker = next(p for p in process_tree(server.pid) if p != server.pid)
        urls = url_list(case, 20000, "diverse", "p", oximg_url)
        load = threading.Thread(
            target=closed_loop,
            args=(server.port, per_connection(urls, args.connections), args.seconds + 3),
        )
        load.start()
        subprocess.run(
            [
                spy,
                "record",
                "-p",
                str(worker),
                "-d",
                str(args.seconds),
                "-r",
                "200",
                "-f",
                "raw",
                "-o",
                str(out),
                "--nonblocking",
                *(["--gil"] if args.gil else []),
            ],
            check=True,
            capture_output=True,
        )
        load.join()
    summarise(out, args.top, "GIL holder only" if args.gil else "all threads")


def summarise(path: Path, top: int, sampled: str = "all threads") -> None:
    """Inclusive share of samples per function (each stack counts a function once)."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        total += samples
        frames = stack.split(";")
        seen = set()
        for frame in frames:
            name = frame.split(" (")[0]
            where = frame.split(" (")[1].split(":")[0] if " (" in frame else ""
            label = f"{name} ({Path(where).name})"
            if label not in seen:
                seen.add(label)
                inclusive[label] += samples
    print(f"{total} samples ({sampled}, idle dropped)")
    for label, samples in inclusive.most_common(top):
        print(f"{100 * samples / total:6.1f} %  {label}")


if __name__ == "__main__":
    main()
