"""Every encoder's time and memory, small to MAX_RESULT_DIMENSION: the data behind the
render deadline's encoder plan (core/pipeline/plan.py) and the output side of the
memory estimate (core/pipeline/budget.py).

    .venv/bin/python bench/encoders.py rates
    .venv/bin/python bench/encoders.py matrix [--only avif] [--json out.json]
    .venv/bin/python bench/encoders.py matrix --from-json out.json
    .venv/bin/python bench/encoders.py deadline [--timeout 1]

``rates``: CPU seconds of libvips' AVIF and GIF savers alone (pixels already in
memory) at the efforts the plan uses, on a photo-like image and on noise, at
several sizes, with the affine fit (seconds per frame + seconds per pixel)
that ``UNSTOPPABLE_ENCODERS`` rounds up.

``matrix``: for every output format (JPEG, PNG, WebP, AVIF, GIF; still from a
4096x4096 photo JPEG and a 2048x2048 RGBA PNG, animated from GIFs) at sizes up
to 8192x8192 (``el:1`` above the source), one fresh process renders the case
once through ``core.pipeline.render`` as the thumbnailer would (the plan,
hence the effort and whether the render runs in a child process, included)
and reports the wall and CPU time and the peak memory: the process's
high-water mark (``VmHWM``, reset after the source is read and the loader
warmed up) plus, for a render in a child process, the child's own peak RSS
(``RUSAGE_CHILDREN``). Beside it, ``core.budget.estimate_peak_bytes`` and the
ratio estimate/measured, which must be >= 1 everywhere. A case whose
predicted encode time exceeds the render deadline is refused (422) by the
thumbnailer and is shown so, not run.

``deadline``: the same cases with a short render deadline (``--timeout``,
1 s): how long each render took to come back (done, 422 refused up front, or
503 killed), and the largest overrun per format, which must stay under 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.driver import own_cpu_seconds as cpu_seconds  # noqa: E402
from bench.memory import DEFAULT_IMAGES, MIB, Case, reset_peak, status_bytes  # noqa: E402

#: The fields of :class:`Outcome` that :func:`estimate_of` gives.
ESTIMATES = ("estimate_bytes", "other_bytes")

#: The deadline of the matrix: the default ``RENDER_TIMEOUT``.
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Outcome:
    """What a child process reports for one case."""

    case: Case
    #: "200", "422" (refused before rendering), "503" (killed at the deadline).
    status: str
    detail: str
    width: int
    height: int
    frames: int
    isolated: bool
    effort: int | None
    predicted_seconds: float
    wall_seconds: float
    cpu_seconds: float
    #: This process's peak RSS increase during the render.
    own_bytes: int
    #: A child process's peak RSS (0 when the render ran here).
    child_bytes: int
    estimate_bytes: int
    #: The estimate less its output side: what the output side must cover the rest of.
    other_bytes: int

    @property
    def peak(self) -> int:
        return self.own_bytes + self.child_bytes


# --- sources ---------------------------------------------------------------------


def draw_sources(directory: Path) -> dict[str, Path]:
    """The matrix's sources, drawn once into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, Callable[[], bytes]] = {
        "photo-4096.jpg": lambda: jpeg(4096, 4096),
        "alpha-2048.png": lambda: alpha_png(2048, 2048),
        "anim-20x640.gif": lambda: animated(640, 480, 20),
        "anim-100x480.gif": lambda: animated(480, 360, 100),
    }
    paths = {}
    for name, draw in wanted.items():
        path = directory / name
        if not path.exists():
            print(f"drawing {name}", file=sys.stderr, flush=True)
            path.write_bytes(draw())
        paths[name] = path
    return paths


def jpeg(width: int, height: int) -> bytes:
    from bench import images

    return bytes(images.photo(width, height).jpegsave_buffer(Q=85))


def alpha_png(width: int, height: int) -> bytes:
    from bench import images

    return images.alpha_png(width, height)


def animated(width: int, height: int, frames: int) -> bytes:
    from bench import images

    return images.animated_gif(width, height, frames)


#: Longest output side of the still cases; above the source, ``el:1`` enlarges.
STILL_SIZES = (256, 1024, 2048, 4096, 8192)
ALPHA_SIZES = (1024, 4096, 8192)
FORMATS = ("jpeg", "png", "webp", "avif", "gif")


def fit(size: int, source_size: int) -> str:
    return f"rs:fit:{size}:{size}" + ("/el:1" if size > source_size else "")


def matrix_cases(paths: dict[str, Path]) -> list[Case]:
    cases = []
    photo, alpha = str(paths["photo-4096.jpg"]), str(paths["alpha-2048.png"])
    for fmt in FORMATS:
        for size in STILL_SIZES:
            cases.append(Case(f"photo>{size}", photo, fit(size, 4096), fmt))
    for fmt in ("png", "webp", "avif", "gif"):
        for size in ALPHA_SIZES:
            cases.append(Case(f"alpha>{size}", alpha, fit(size, 2048), fmt))
    for fmt in ("gif", "webp"):
        for size in (320, 640, 1280):
            anim20 = str(paths["anim-20x640.gif"])
            cases.append(Case(f"anim20x640>{size}", anim20, fit(size, 640), fmt))
        anim100 = str(paths["anim-100x480.gif"])
        cases.append(Case("anim100x480>480", anim100, fit(480, 480), fmt))
    return cases


# --- one case (child process) ----------------------------------------------------


def measure_one(case: Case, timeout: float, kill: bool) -> Outcome:
    """Render ``case`` once here, as the thumbnailer would, and report time and memory.

    ``timeout`` is the render deadline the thumbnailer refuses by; ``kill``
    whether the render is also stopped at it (else it runs to the end).
    """
    from django_oximg.core import pipeline
    from django_oximg.core.errors import OximgError
    from django_oximg.core.options import parse_path
    from django_oximg.core.pipeline.budget import estimate_peak_bytes, output_bytes, sizes_of
    from django_oximg.core.serving.replies import status_for
    from django_oximg.core.serving.staging import ANIMATED_FORMATS

    pipeline.configure(concurrency=1)
    data = Path(case.file).read_bytes()
    options = parse_path(f"/{case.request}/plain/x").options
    settings = pipeline.RenderSettings()
    info = pipeline.probe(data)
    frames = info.frames if case.fmt in ANIMATED_FORMATS else 1
    plan = pipeline.plan_render(info, options, case.fmt, settings)
    geometry = plan.geometry
    estimate = estimate_peak_bytes(plan, frames, data)
    common: dict[str, Any] = {
        "case": case,
        "width": geometry.width,
        "height": geometry.height,
        "frames": frames if plan.animated else 1,
        "isolated": plan.isolated,
        "effort": plan.effort,
        "predicted_seconds": plan.encode_seconds,
        "estimate_bytes": estimate,
        "other_bytes": estimate - int(output_bytes(plan, sizes_of(plan), frames, data)),
    }
    if plan.encode_seconds > timeout:
        refused = {"status": "422", "detail": "refused: encode over the deadline"}
        return Outcome(
            **refused, wall_seconds=0, cpu_seconds=0, own_bytes=0, child_bytes=0, **common
        )
    # Warm the loader up on a tiny render (one-time set-up is not the job's).
    pipeline.render(data, parse_path("/rs:fit:16:16/plain/x").options, "png", settings)
    reset_peak()
    baseline = status_bytes("VmRSS")
    started, cpu = time.monotonic(), cpu_seconds()
    status, detail = "200", ""
    try:
        deadline = time.monotonic() + timeout if kill else None
        pipeline.render(data, options, case.fmt, settings, plan=plan, deadline=deadline)
    except OximgError as error:
        status, detail = str(status_for(error)), error.detail[:80]
    wall, cpu = time.monotonic() - started, cpu_seconds() - cpu
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return Outcome(
        status=status,
        detail=detail,
        wall_seconds=wall,
        cpu_seconds=cpu,
        own_bytes=status_bytes("VmHWM") - baseline,
        child_bytes=child if plan.isolated else 0,
        **common,
    )


def measure_in_child(case: Case, timeout: float, kill: bool) -> Outcome:
    command = [sys.executable, __file__, "one", json.dumps(asdict(case))]
    command += ["--timeout", str(timeout), *(["--kill"] if kill else [])]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return outcome_from(json.loads(out))


def outcome_from(fields: dict[str, Any]) -> Outcome:
    return Outcome(**{**fields, "case": Case(**fields["case"])})


def estimate_of(case: Case) -> tuple[int, int]:
    """The budget's estimate for ``case`` now, and the estimate less its output side."""
    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path
    from django_oximg.core.pipeline.budget import estimate_peak_bytes, output_bytes, sizes_of
    from django_oximg.core.serving.staging import ANIMATED_FORMATS

    data = Path(case.file).read_bytes()
    info = pipeline.probe(data)
    frames = info.frames if case.fmt in ANIMATED_FORMATS else 1
    options = parse_path(f"/{case.request}/plain/x").options
    plan = pipeline.plan_render(info, options, case.fmt, pipeline.RenderSettings())
    estimate = estimate_peak_bytes(plan, frames, data)
    return estimate, estimate - int(output_bytes(plan, sizes_of(plan), frames, data))


def run_cases(args: argparse.Namespace, kill: bool) -> list[Outcome]:
    if args.from_json:
        # Measured then, estimated now: a changed model is checked without measuring again.
        saved = [outcome_from(row) for row in json.loads(Path(args.from_json).read_text())]
        return [
            replace(row, **dict(zip(ESTIMATES, estimate_of(row.case), strict=True)))
            for row in saved
        ]
    cases = matrix_cases(draw_sources(args.images))
    if args.only:
        cases = [case for case in cases if args.only in f"{case.name} {case.fmt}"]
    rows = []
    for case in cases:
        print(f"measuring {case.name} {case.fmt}", file=sys.stderr, flush=True)
        rows.append(measure_in_child(case, args.timeout, kill))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(row) for row in rows], indent=1))
    return rows


# --- tables ------------------------------------------------------------------------


def output_size(row: Outcome) -> str:
    return f"{row.width}x{row.height}" + (f"x{row.frames}" if row.frames > 1 else "")


def print_matrix(rows: list[Outcome], timeout: float) -> None:
    print(
        "| case | format | output | effort | child | wall s | CPU s | predicted s "
        "| measured MiB | estimate MiB | est/meas | out B/px |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    lowest = float("inf")
    for row in rows:
        effort = "" if row.effort is None else str(row.effort)
        head = (
            f"| {row.case.name} | {row.case.fmt} | {output_size(row)} | {effort} "
            f"| {'yes' if row.isolated else ''} "
        )
        if row.status == "422":
            print(
                f"{head}| 422 | - | {row.predicted_seconds:.2f} | - "
                f"| {row.estimate_bytes / MIB:.1f} | - | - |"
            )
            continue
        ratio = row.estimate_bytes / max(row.peak, 1)
        lowest = min(lowest, ratio)
        per_pixel = (row.peak - row.other_bytes) / (row.width * row.height * row.frames)
        print(
            f"{head}| {row.wall_seconds:.2f} | {row.cpu_seconds:.2f} "
            f"| {row.predicted_seconds:.2f} | {row.peak / MIB:.1f} "
            f"| {row.estimate_bytes / MIB:.1f} | {ratio:.2f} | {per_pixel:.2f} |"
        )
    print(
        f"\nlowest estimate/measured: {lowest:.2f} (must be >= 1); "
        f"422: refused under the {timeout:g} s deadline"
    )


def print_deadline(rows: list[Outcome], timeout: float) -> None:
    print("| case | format | output | child | status | came back after s | CPU s |")
    print("|---|---|---|---|---|---|---|")
    slowest: dict[str, float] = {}
    for row in rows:
        slowest[row.case.fmt] = max(slowest.get(row.case.fmt, 0.0), row.wall_seconds)
        print(
            f"| {row.case.name} | {row.case.fmt} | {output_size(row)} "
            f"| {'yes' if row.isolated else ''} | {row.status} "
            f"| {row.wall_seconds:.2f} | {row.cpu_seconds:.2f} |"
        )
    print(
        f"\nslowest per format (deadline {timeout:g} s): "
        + ", ".join(f"{fmt} {seconds:.2f} s" for fmt, seconds in slowest.items())
    )


# --- rates -------------------------------------------------------------------------


def run_rates() -> None:
    """CPU seconds the deadline cannot stop, per encoder, effort, content and size.

    AVIF and GIF: the whole saver call (pixels already in memory). WebP:
    the most CPU spent after the kill flag was set, over kills at 19 points
    of the encode (libwebp stops, except while it compresses alpha).
    """
    import pyvips

    from bench import images
    from django_oximg.core.pipeline.plan import UNSTOPPABLE_ENCODERS

    pyvips.cache_set_max(0)
    pyvips.concurrency_set(1)

    def noise(size: int, bands: int = 3) -> Any:
        planes = [
            pyvips.Image.gaussnoise(size, size, sigma=80, mean=128, seed=s) for s in range(bands)
        ]
        return planes[0].bandjoin(planes[1:]).cast("uchar").copy(interpretation="srgb")

    def photo(size: int, bands: int = 3) -> Any:
        image = images.photo(size, size)
        return image if bands == 3 else image.bandjoin(noise(size, 1))

    def saver(fmt: str, effort: int) -> Callable[[Any], Any]:
        if fmt == "avif":
            return lambda im: im.heifsave_buffer(Q=65, compression="av1", effort=effort, bitdepth=8)
        if fmt == "gif":
            return lambda im: im.gifsave_buffer(effort=effort)
        return lambda im: im.webpsave_buffer(Q=75, effort=effort)

    print("| encoder | effort | content | size | unstoppable CPU s | us/px | model s |")
    print("|---|---|---|---|---|---|---|")
    for fmt, encoder in UNSTOPPABLE_ENCODERS.items():
        for rate in dict.fromkeys((encoder.slow, encoder.fast)):
            sizes = (256, 1024, 2048) if rate.per_pixel < 1e-6 else (128, 256, 512)
            for bands in (3, 4) if encoder.alpha_factor != 1 else (3,):
                for content, draw in (("photo", photo), ("noise", noise)):
                    for size in sizes:
                        image = draw(size, bands).copy_memory()
                        save = saver(fmt, rate.effort)
                        if fmt == "webp":
                            spent = worst_after_kill(image, save)
                        else:
                            before = cpu_seconds()
                            save(image)
                            spent = cpu_seconds() - before
                        pixels = size * size
                        factor = encoder.alpha_factor if bands == 4 else 1.0
                        model = rate.seconds(pixels) * factor
                        alpha = "+alpha" if bands == 4 else ""
                        print(
                            f"| {fmt} | {rate.effort} | {content}{alpha} | {size}x{size} "
                            f"| {spent:.3f} | {spent / pixels * 1e6:.3f} | {model:.3f} |",
                            flush=True,
                        )


def worst_after_kill(image: Any, save: Callable[[Any], Any]) -> float:
    """The most CPU ``save`` spends after the image's kill flag is set (19 kill points)."""
    import pyvips

    before = cpu_seconds()
    save(image.copy())
    whole = cpu_seconds() - before
    worst = 0.0
    for point in range(1, 20):
        target = image.copy()
        finished = threading.Event()
        killed: list[float] = []

        def kill(
            target: Any = target,
            share: float = point / 20,
            finished: threading.Event = finished,
            killed: list[float] = killed,
        ) -> None:
            start = cpu_seconds()
            while cpu_seconds() - start < whole * share:
                if finished.wait(0.002):
                    return  # done before this point: nothing ran after a kill
            killed.append(cpu_seconds())
            target.set_kill(True)

        killer = threading.Thread(target=kill)
        killer.start()
        with contextlib.suppress(pyvips.Error):
            save(target)
        ended = cpu_seconds()
        finished.set()
        killer.join()
        if killed:
            worst = max(worst, ended - killed[0])
    return worst


# --- command line --------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("rates", help="AVIF and GIF encoder CPU time")
    for name in ("matrix", "deadline"):
        sub = commands.add_parser(name)
        sub.add_argument("--only", help="only cases whose name or format contains this")
        sub.add_argument("--json", help="save the measurements here")
        sub.add_argument("--from-json", help="print saved measurements")
        sub.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    one = commands.add_parser("one", help=argparse.SUPPRESS)
    one.add_argument("case")
    one.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    one.add_argument("--kill", action="store_true")
    args = parser.parse_args()
    if args.command == "one":
        outcome = measure_one(Case(**json.loads(args.case)), args.timeout, args.kill)
        print(json.dumps(asdict(outcome)))
    elif args.command == "rates":
        run_rates()
    elif args.command == "matrix":
        print_matrix(run_cases(args, kill=False), args.timeout)
    else:
        print_deadline(run_cases(args, kill=True), args.timeout)


if __name__ == "__main__":
    main()
