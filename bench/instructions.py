"""Instructions per render, counted by valgrind: an A/B for small pipeline changes.

    .venv/bin/python bench/instructions.py [--case medium-jpeg] [--root DIR]

On this shared VM a 2-3 % change in CPU per render is inside the run-to-run
noise of any timing, and the VM exposes no hardware counters to ``perf
stat``. valgrind's cachegrind counts every user-space instruction the
process executes: four runs of the same code here were within 0.7 % of
each other, where timings move by 5-10 %. The script runs
``core.pipeline.render`` in a loop of ``--few`` and of ``--many`` renders
(one thread, diverse widths, one probe) and prints the difference divided
by the extra renders: start-up and imports cancel out.

``--root`` measures the ``django_oximg`` in another checkout (``git
worktree add /tmp/b COMMIT``), for before/after. Instructions are not time:
they miss cache misses, the kernel and other threads' waits, and valgrind
reports a CPU without AVX-512, so SIMD code may take another path than it
does natively. Use it to tell whether a change does less work, then measure
time with bench/load.py.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: cachegrind's summary line, e.g. ``==123== I refs:        1,234,567``.
I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(report: str) -> int:
    """The total instruction count from cachegrind's stderr."""
    match = I_REFS.search(report)
    if match is None:
        raise ValueError("no 'I refs' line in valgrind's output")
    return int(match.group(1).replace(",", ""))


def count(root: Path, case: str, images: Path, renders: int) -> int:
    """Instructions of one process doing ``renders`` renders of ``case``."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--loop",
        str(renders),
        "--case",
        case,
        "--images",
        str(images),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]))
    # pymalloc's arenas are not visible to valgrind: count what glibc does.
    env["PYTHONMALLOC"] = "malloc"
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts, so the same count every run
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return instructions(done.stderr)


def loop(case_name: str, images: Path, renders: int) -> None:
    """The measured process: ``renders`` renders on this thread, as bench/inprocess.py's."""
    # First: bench.inprocess puts this checkout first on sys.path, and
    # whatever django_oximg is imported then (``--root``'s) must stay.
    from django_oximg.core import pipeline  # isort: skip

    from bench.cases import CASES
    from bench.inprocess import pipeline_render

    pipeline.configure(concurrency=1)
    case = CASES[case_name]
    run = pipeline_render(case, (images / case.source).read_bytes(), pipeline.RenderSettings())
    for index in range(renders):
        run(case.widths(1, index)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="medium-jpeg")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout holding django_oximg")
    parser.add_argument("--images", type=Path, help="the image set (default: generated)")
    parser.add_argument("--few", type=int, default=5)
    parser.add_argument("--many", type=int, default=45)
    parser.add_argument("--loop", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop is not None:
        loop(args.case, args.images, args.loop)
        return
    if not shutil.which("valgrind"):
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    images = args.images
    if images is None:
        from bench.images import write_set

        images = Path(tempfile.mkdtemp(prefix="oximg-instructions-")) / "media"
        write_set(images)
    few = count(args.root, args.case, images, args.few)
    many = count(args.root, args.case, images, args.many)
    per_render = (many - few) / (args.many - args.few)
    print(f"{args.case} with {args.root}: {per_render / 1e6:.2f} M instructions per render")


if __name__ == "__main__":
    main()
