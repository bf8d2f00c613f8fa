"""Instructions per render, counted by valgrind: an A/B for small pipeline changes.

    .venv/bin/python bench/instructions.py [--case medium-jpeg] [--root DIR]
        [--margin 1.5] [--parts]

On this shared VM a 2-3 % change in CPU per render is inside the run-to-run
noise of any timing, and the VM exposes no hardware counters to ``perf
stat``. valgrind's cachegrind counts every user-space instruction the
process executes: four runs of the same code here were within 0.7 % of
each other, where timings move by 5-10 %. The script runs
``core.pipeline.render`` in a loop of ``--few`` and of ``--many`` renders
(one thread, diverse widths, one probe) and prints the difference divided
by the extra renders: start-up and imports cancel out.

``--margin`` sets ``JPEG_SHRINK_MARGIN``. ``--parts`` counts with callgrind
instead and splits the difference by where it went: libjpeg-turbo's
entropy decoding (its one function whose count does not change with the
decode scale; the library's symbols are stripped), the rest of
libjpeg-turbo (inverse DCT, colour, the encode), libvips, libc (memory
zeroed, copied, allocated), Pillow and the interpreter.

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

from django_oximg.core import defaults

ROOT = Path(__file__).resolve().parent.parent

#: valgrind counting every instruction and nothing else (the command's start).
CACHEGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")

#: The environment for a counted Python: pymalloc's arenas are not visible to
#: valgrind, so count what glibc does; the same hash seed gives the same
#: dict layouts, so the same count every run.
COUNTED = {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"}

#: cachegrind's summary line, e.g. ``==123== I refs:        1,234,567``.
I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")

#: A line of ``callgrind_annotate``: the count, its share, the function and its object.
ANNOTATED = re.compile(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$")

#: libjpeg-turbo's entropy decoder in Pillow's bundled copy, by its address
#: (the library is stripped): the function whose count is the same at every scale.
ENTROPY_DECODER = "0x0000000000059620"


def part_of(function: str) -> str:
    """Which part of the render a function of ``callgrind_annotate``'s list belongs to."""
    if "libjpeg" in function:
        return "entropy decoding" if ENTROPY_DECODER in function else "libjpeg-turbo, the rest"
    for marker, part in (
        ("libvips", "libvips"),
        ("libglib", "libvips"),
        ("libgobject", "libvips"),
        ("PIL", "Pillow"),
        ("libc.so", "libc"),
        ("libpython", "the interpreter"),
    ):
        if marker in function:
            return part
    return "other"


def parts(report: str) -> dict[str, int]:
    """Instructions per part from ``callgrind_annotate --inclusive=no`` output."""
    found: dict[str, int] = {}
    for line in report.splitlines():
        match = ANNOTATED.match(line)
        if match and "PROGRAM TOTALS" not in line:
            part = part_of(match.group(2))
            found[part] = found.get(part, 0) + int(match.group(1).replace(",", ""))
    return found


def instructions(report: str) -> int:
    """The total instruction count from cachegrind's stderr."""
    match = I_REFS.search(report)
    if match is None:
        raise ValueError("no 'I refs' line in valgrind's output")
    return int(match.group(1).replace(",", ""))


def count(
    root: Path, case: str, images: Path, renders: int, margin: float, by_part: bool = False
) -> dict[str, int]:
    """Instructions of one process doing ``renders`` renders of ``case`` (``{"total": n}``,
    or per part with ``by_part``)."""
    out = Path(tempfile.mkdtemp(prefix="oximg-callgrind-")) / "out" if by_part else None
    valgrind = (
        ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}") if out else CACHEGRIND
    )
    command = [
        *valgrind,
        sys.executable,
        str(Path(__file__).resolve()),
        "--loop",
        str(renders),
        "--case",
        case,
        "--images",
        str(images),
        "--margin",
        str(margin),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]), **COUNTED)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    if out is None:
        return {"total": instructions(done.stderr)}
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.rmtree(out.parent, ignore_errors=True)
    return parts(annotated.stdout)


def loop(case_name: str, images: Path, renders: int, margin: float) -> None:
    """The measured process: ``renders`` renders on this thread, as bench/inprocess.py's."""
    # First: bench.inprocess puts this checkout first on sys.path, and
    # whatever django_oximg is imported then (``--root``'s) must stay.
    from django_oximg.core import pipeline  # isort: skip

    from bench.cases import CASES
    from bench.inprocess import pipeline_render

    pipeline.configure(concurrency=1)
    case = CASES[case_name]
    settings = pipeline.RenderSettings(jpeg_shrink_margin=margin)
    run = pipeline_render(case, (images / case.source).read_bytes(), settings)
    for index in range(renders):
        run(case.widths(1, index)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="medium-jpeg")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout holding django_oximg")
    parser.add_argument("--images", type=Path, help="the image set (default: generated)")
    parser.add_argument("--few", type=int, default=5)
    parser.add_argument("--many", type=int, default=45)
    parser.add_argument("--margin", type=float, default=defaults.JPEG_SHRINK_MARGIN)
    parser.add_argument("--parts", action="store_true", help="split by part (callgrind)")
    parser.add_argument("--loop", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop is not None:
        loop(args.case, args.images, args.loop, args.margin)
        return
    if not shutil.which("valgrind"):
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    images = args.images
    if images is None:
        from bench.images import write_set

        images = Path(tempfile.mkdtemp(prefix="oximg-instructions-")) / "media"
        write_set(images)
    few = count(args.root, args.case, images, args.few, args.margin, args.parts)
    many = count(args.root, args.case, images, args.many, args.margin, args.parts)
    extra = args.many - args.few
    per_part = {part: (many.get(part, 0) - few.get(part, 0)) / extra for part in {*few, *many}}
    total = sum(per_part.values())
    print(
        f"{args.case}, margin {args.margin:g}, with {args.root}: "
        f"{total / 1e6:.2f} M instructions per render"
    )
    if args.parts:
        for part, value in sorted(per_part.items(), key=lambda item: -item[1]):
            print(f"  {part:24s} {value / 1e6:7.1f} M  {100 * value / total:5.1f} %")


if __name__ == "__main__":
    main()
