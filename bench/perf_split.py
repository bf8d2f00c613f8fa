"""Where a served miss's CPU goes, by shared object: django-oximg beside thumbor, under perf.

    .venv/bin/python bench/perf_split.py [--case medium-jpeg-boxes] [--seconds 10]
        [--connections 8] [--contenders oximg,thumbor] [--hand-offs]

Each server in turn (django-oximg: one gunicorn process through
``OximgMiddleware``, the load benchmark's settings; thumbor 7.8 with 2
processes, bench/peers/setup_thumbor.sh) is warmed with 400 misses, then
driven with ``--connections`` keep-alive connections of cache-missing URLs
for ``--seconds`` while Linux ``perf record`` samples every process of its
tree (``-F 999``, software clock: no hardware counters needed). The CPU ms
per request measured over the same run is split by perf's share of samples
per shared object (libjpeg, libvips, the interpreter, the kernel, libc,
Pillow's ``_imaging``): which work one server does and the other does not;
with the context switches of the server's threads per request.
Sampling costs some CPU itself, so read the split, not the totals, against
bench/load.py's figures.

``--hand-offs`` records each sample's call stack as well (DWARF unwinding,
at ``-F 499``: it costs more) and adds what no shared object shows: the
CPU spent handing the GIL between threads (``take_gil``/``drop_gil``, and
which calls released it), in futex calls, and faulting pages in.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, Case, oximg_url, thumbor_path, url_list  # noqa: E402
from bench.driver import (  # noqa: E402
    ProcessSample,
    RunStats,
    closed_loop,
    per_connection,
    perf_stacks,
    under_perf,
)
from bench.images import write_set  # noqa: E402

#: Shares below this (percent of samples) are left out of the listing.
SHOWN_PERCENT = 0.3

#: With ``--hand-offs``: frames that mark a sample as spent on each of these.
HAND_OFF_FRAMES = {
    "the GIL handed between threads": frozenset({"take_gil", "drop_gil"}),
    "futex calls (the GIL, locks, queues)": frozenset({"__x64_sys_futex"}),
    "page faults": frozenset({"asm_exc_page_fault"}),
}

#: The interpreter's own frames between a GIL hand-off and the call that released it.
GIL_FRAMES = frozenset({"take_gil", "drop_gil", "PyEval_SaveThread", "PyEval_RestoreThread"})

#: Calls listed as releasing the GIL, the most costly first.
SHOWN_RELEASERS = 8


def hand_offs(samples: list[list[str]], ms_per_request: float) -> list[tuple[float, str]]:
    """(ms per request, what) for :data:`HAND_OFF_FRAMES`, then the calls that gave the GIL up."""
    if not samples:
        return []
    scale = ms_per_request / len(samples)
    rows = [
        (scale * sum(1 for stack in samples if frames.intersection(stack)), label)
        for label, frames in HAND_OFF_FRAMES.items()
    ]
    releasers: Counter[str] = Counter()
    for stack in samples:
        inside = [index for index, frame in enumerate(stack) if frame in GIL_FRAMES]
        if inside:
            caller = next((f for f in stack[inside[-1] + 1 :] if f not in GIL_FRAMES), "?")
            # pyvips' calls into libvips each release the GIL: count them as one.
            releasers["pyvips' libvips calls" if caller.startswith("_cffi_f_") else caller] += 1
    rows += [
        (scale * count, f"  GIL given up around {caller}")
        for caller, count in releasers.most_common(SHOWN_RELEASERS)
    ]
    return rows


#: What :func:`split` gives: requests per second, CPU ms per request, context
#: switches per request, and (ms per request, what) rows.
Split = tuple[float, float, float, list[tuple[float, str]]]


def split(
    server: servers.Running,
    case: Case,
    build: Callable[[Case, int, str], str],
    connections: int,
    seconds: float,
    data: Path,
    stacks: bool = False,
) -> Split:
    """The figures of one server, split by shared object, with :func:`hand_offs`' rows
    when ``stacks``."""
    warm = url_list(case, 400, "diverse", f"warm{data.stem}", build)
    closed_loop(server.port, per_connection(warm, connections), 3)
    urls = url_list(case, max(2000, int(seconds * 300)), "diverse", f"perf{data.stem}", build)

    def run() -> RunStats:
        sample = ProcessSample(server.pid)
        sample.start()
        return sample.stop(closed_loop(server.port, per_connection(urls, connections), seconds))

    stats, shares = under_perf(server.pid, data, run, 499 if stacks else 999, stacks)
    if stats.ok != stats.requests:
        raise RuntimeError(f"statuses {stats.statuses}")
    rows = [
        (share * stats.cpu_ms_per_request, shared_object)
        for shared_object, share in sorted(shares.items(), key=lambda item: -item[1])
        if share * 100 >= SHOWN_PERCENT
    ]
    if stacks:
        rows += hand_offs(perf_stacks(data), stats.cpu_ms_per_request)
    return stats.requests / seconds, stats.cpu_ms_per_request, stats.switches_per_request, rows


def measure(args: argparse.Namespace, work: Path) -> dict[str, Split]:
    """:func:`split` of each server ``args`` asks for, its files under ``work``
    (removed after: with ``--hand-offs`` perf's data is hundreds of MB)."""
    wanted = args.contenders.split(",")
    media = work / "media"
    write_set(media)
    servers.compile_sources()
    case = CASES[args.case]
    first = CASES["medium-jpeg"]
    results = {}
    if "oximg" in wanted:
        with servers.oximg(media, "middleware", oximg_url(first, 500, "first"), log_dir=work) as s:
            results["django-oximg"] = split(
                s,
                case,
                oximg_url,
                args.connections,
                args.seconds,
                work / "oximg.data",
                args.hand_offs,
            )
    if "thumbor" in wanted:
        if not servers.thumbor_available():
            print("thumbor not installed (bash bench/peers/setup_thumbor.sh): skipped")
        else:
            path = thumbor_path(first, 500, "first")
            with servers.thumbor(media, path, log_dir=work) as s:
                results["thumbor"] = split(
                    s,
                    case,
                    thumbor_path,
                    args.connections,
                    args.seconds,
                    work / "thumbor.data",
                    args.hand_offs,
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="medium-jpeg-boxes")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--contenders", default="oximg,thumbor")
    parser.add_argument(
        "--hand-offs",
        action="store_true",
        help="record call stacks too: the GIL's hand-offs, futex calls and page faults",
    )
    args = parser.parse_args()
    if not shutil.which("perf"):
        parser.error("needs Linux perf (Debian: apt-get install linux-perf)")
    with tempfile.TemporaryDirectory(prefix="oximg-perf-split-") as temp:
        results = measure(args, Path(temp))
    case = CASES[args.case]
    print(f"{case.name}, c={args.connections}, {args.seconds:.0f} s under perf record")
    for name, (rate, cpu, switches, rows) in results.items():
        print(f"{name}: {rate:.1f} req/s, {cpu:.2f} CPU ms per request, {switches:.0f} switches")
        for ms, shared_object in rows:
            print(f"  {ms:6.2f} ms  {shared_object}")


if __name__ == "__main__":
    main()
