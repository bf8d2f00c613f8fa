"""Peak memory of rendering, measured in fresh processes: the data behind core/pipeline/budget.py.

    .venv/bin/python bench/memory.py weights [--concurrency 1] [--json out.json]
    .venv/bin/python bench/memory.py weights --from-json out.json   # re-estimate only
    .venv/bin/python bench/memory.py malloc [--renders 200] [--threads 4]
    .venv/bin/python bench/memory.py served [--budget-mib 200] [--requests 12]
    .venv/bin/python bench/memory.py dense

``weights``: for each source class (baseline/progressive JPEG, PNG, interlaced
PNG, WebP, still and animated GIF, animated WebP, AVIF) at several sizes, one
fresh subprocess renders it once with ``core.pipeline.render`` and reports the
peak RSS increase: the kernel's high-water mark (``VmHWM``) is reset through
``/proc/self/clear_refs`` after pyvips is imported, the source bytes are read
and a tiny image of the same format was rendered once (so one-time loader and
thread set-up is not charged to the job), and read back after the render. Each
row also shows ``core.budget.estimate_peak_bytes`` and the ratio
estimate/measured, which must be >= 1 everywhere.

``dense``: the same measurement for detail no encoder compresses (noise in
every band) kept at full size, as JPEG and WebP from quality 80 to 100: the
worst case behind ``core.budget.DENSE_DETAIL``, where libwebp's token
buffers and a 4:4:4 JPEG's size (with its re-encode by libvips when Pillow's
buffer is too small) outgrow the photo-fitted weights.

``malloc``: the RSS a long-lived process keeps after many renders on several
threads, with glibc's malloc at ``MALLOC_THRESHOLD``'s default and at 0
(glibc's own thresholds), ``MALLOC_ARENA_MAX=2`` and jemalloc
(``LD_PRELOAD``, if Debian's libjemalloc2 is installed).

``served``: the core thumbnailer serving concurrent misses of one 30 MP
progressive JPEG at distinct widths under a memory budget, RSS sampled every
20 ms: the end-to-end check that the budget bounds the process.

Images are drawn with pyvips (``bench/images.py``), cached in ``--images``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024
DEFAULT_IMAGES = Path(tempfile.gettempdir()) / "oximg-memory-images"
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")


def default_malloc_threshold() -> int:
    """``MALLOC_THRESHOLD``'s default: what a served process tells glibc's malloc."""
    from django_oximg.conf import OximgSettings

    return OximgSettings.MALLOC_THRESHOLD


#: The request every weight case makes: the reference benchmarks' 500x500 fit.
FIT = "rs:fit:500:500"
#: The crop path: a full decode, no shrink-on-load (the region is cut first).
CROP = "c:0.9:0.9/rs:fit:500:500"


@dataclass(frozen=True)
class Case:
    """One measurement: a generated source, a request and an output format."""

    name: str
    file: str
    request: str
    fmt: str


@dataclass(frozen=True)
class Measured:
    """What a child process reports for one case."""

    case: Case
    width: int
    height: int
    frames: int
    format: str
    interlaced: bool
    has_alpha: bool
    baseline_bytes: int
    peak_bytes: int

    @property
    def delta(self) -> int:
        return self.peak_bytes - self.baseline_bytes


# --- /proc ---------------------------------------------------------------------


def status_bytes(field: str) -> int:
    """A ``VmXXX`` line of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


# --- images --------------------------------------------------------------------


def drawers() -> dict[str, Callable[..., bytes]]:
    """Encoders for every source class; pyvips is imported only when drawing."""
    import pyvips

    from bench import images

    def jpeg(w: int, h: int, progressive: bool, subsample: bool) -> bytes:
        mode = "on" if subsample else "off"
        return bytes(
            images.photo(w, h).jpegsave_buffer(Q=85, interlace=progressive, subsample_mode=mode)
        )

    def png(w: int, h: int, interlaced: bool, alpha: bool = False, bits: int = 8) -> bytes:
        image = images.photo(w, h)
        if alpha:
            image = image.bandjoin(255)
        if bits == 16:
            image = (image.cast("ushort") * 257).cast("ushort").copy(interpretation="rgb16")
        return bytes(image.pngsave_buffer(interlace=interlaced, compression=1, bitdepth=bits))

    def webp(w: int, h: int) -> bytes:
        return bytes(images.photo(w, h).webpsave_buffer(Q=75, effort=0))

    def gif(w: int, h: int, frames: int = 1) -> bytes:
        if frames > 1:
            return images.animated_gif(w, h, frames)
        return bytes(images.photo(w, h).gifsave_buffer(effort=1))

    def anim_webp(w: int, h: int, frames: int) -> bytes:
        strip = pyvips.Image.new_from_buffer(images.animated_gif(w, h, frames), "", n=-1)
        return bytes(strip.webpsave_buffer(Q=75, effort=0))

    def noise_jpeg(w: int, h: int) -> bytes:
        from tests.images import noise

        return bytes(noise(w, h).jpegsave_buffer(Q=98))

    def avif(w: int, h: int) -> bytes:
        return bytes(
            images.photo(w, h).heifsave_buffer(Q=50, compression="av1", effort=0, bitdepth=8)
        )

    return {
        "jpeg": jpeg,
        "png": png,
        "webp": webp,
        "gif": gif,
        "anim_webp": anim_webp,
        "avif": avif,
        "noise_jpeg": noise_jpeg,
    }


#: Source sizes: about 4, 16 and 36 MP at 3:2.
SIZES = {4: (2448, 1632), 16: (4896, 3264), 36: (7360, 4912)}

#: (case name, drawer, drawer arguments). Animations use smaller frames.
SOURCES: list[tuple[str, str, tuple[Any, ...]]] = [
    *[(f"jpeg-baseline-420-{mp}mp", "jpeg", (*SIZES[mp], False, True)) for mp in SIZES],
    ("jpeg-baseline-444-36mp", "jpeg", (*SIZES[36], False, False)),
    *[(f"jpeg-progressive-420-{mp}mp", "jpeg", (*SIZES[mp], True, True)) for mp in SIZES],
    *[(f"jpeg-progressive-444-{mp}mp", "jpeg", (*SIZES[mp], True, False)) for mp in SIZES],
    *[(f"png-{mp}mp", "png", (*SIZES[mp], False)) for mp in SIZES],
    *[(f"png-interlaced-{mp}mp", "png", (*SIZES[mp], True)) for mp in SIZES],
    ("png-interlaced-rgba-16mp", "png", (*SIZES[16], True, True)),
    ("png-interlaced-rgba16-16mp", "png", (*SIZES[16], True, True, 16)),
    *[(f"webp-{mp}mp", "webp", SIZES[mp]) for mp in SIZES],
    *[(f"gif-{mp}mp", "gif", SIZES[mp]) for mp in (4, 16)],
    *[(f"gif-anim-{n}x0.3mp", "gif", (640, 480, n)) for n in (10, 50, 100)],
    *[(f"gif-anim-{n}x1mp", "gif", (1224, 816, n)) for n in (10, 50)],
    ("webp-anim-20x1mp", "anim_webp", (1224, 816, 20)),
    *[(f"avif-{mp}mp", "avif", SIZES[mp]) for mp in (4, 16)],
]


#: Noise sources for ``dense``: square, drawn as Q98 JPEGs.
DENSE_SIDES = (1000, 1400)
DENSE_SOURCES: list[tuple[str, str, tuple[Any, ...]]] = [
    (f"noise-{side}", "noise_jpeg", (side, side)) for side in DENSE_SIDES
]


def ensure_images(
    directory: Path, sources: list[tuple[str, str, tuple[Any, ...]]] = SOURCES
) -> dict[str, Path]:
    """Draw every source once into ``directory`` (kept between runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    draw: dict[str, Callable[..., bytes]] | None = None
    for name, drawer, args in sources:
        path = directory / f"{name}.{drawer.split('_')[-1]}"
        if not path.exists():
            draw = draw or drawers()
            print(f"drawing {path.name}", file=sys.stderr, flush=True)
            path.write_bytes(draw[drawer](*args))
        made[name] = path
    return made


def weight_cases(paths: dict[str, Path]) -> list[Case]:
    """Every source fitted into 500x500; animations also to animated WebP; crops."""
    cases = []
    for name, path in paths.items():
        animated = "-anim-" in name
        cases.append(Case(name, str(path), FIT, "jpeg"))
        if animated:
            cases.append(Case(f"{name}>webp-anim", str(path), FIT, "webp"))
        elif name.endswith(("-16mp", "-36mp")):
            cases.append(Case(f"{name}+crop", str(path), CROP, "jpeg"))
    # A large box: baseline JPEG with little or no shrink-on-load; the first
    # two are the largest results core/pipeline/encoder.py encodes (1.2 and 1.9 MP).
    for mp, box in ((16, 1350), (36, 1700), (36, 2000), (36, 3000)):
        path = paths[f"jpeg-baseline-420-{mp}mp"]
        cases.append(
            Case(f"jpeg-baseline-420-{mp}mp@{box}", str(path), f"rs:fit:{box}:{box}", "jpeg")
        )
    return cases


def dense_cases(paths: dict[str, Path]) -> list[Case]:
    """Each noise source kept at its size, as JPEG and WebP at high qualities."""
    return [
        Case(f"{name}>{fmt}-q{quality}", str(path), f"rs:fit:{side}:{side}/q:{quality}", fmt)
        for (name, path), side in zip(paths.items(), DENSE_SIDES, strict=True)
        for fmt in ("jpeg", "webp")
        for quality in (80, 90, 95, 100)
    ]


# --- one measurement (child process) --------------------------------------------


def tiny_source(fmt: str) -> bytes:
    """A 64x64 image in ``fmt``, to warm up the loader before measuring."""
    import pyvips

    image = pyvips.Image.black(64, 64, bands=3).linear(1, 90).cast("uchar")
    if fmt == "heif":
        return bytes(image.heifsave_buffer(compression="av1", effort=0))
    return bytes(getattr(image, f"{fmt}save_buffer")())


def measure_one(case: Case, concurrency: int, warm_up: bool) -> Measured:
    """Render ``case`` once in this process and return the peak RSS around it."""
    from django_oximg.core import pipeline
    from django_oximg.core.options import parse_path

    pipeline.configure(concurrency=concurrency)
    data = Path(case.file).read_bytes()
    options = parse_path(f"/{case.request}/plain/x").options
    settings = pipeline.RenderSettings()
    info = pipeline.probe(data)
    if warm_up:
        pipeline.render(tiny_source(info.format), options, case.fmt, settings)
    reset_peak()
    baseline = status_bytes("VmRSS")
    pipeline.render(data, options, case.fmt, settings)
    peak = status_bytes("VmHWM")
    return Measured(
        case,
        info.width,
        info.height,
        info.frames,
        info.format,
        info.interlaced,
        info.has_alpha,
        baseline,
        peak,
    )


def measure_in_child(
    case: Case, concurrency: int, warm_up: bool, env: dict[str, str] | None = None
) -> Measured:
    """Run :func:`measure_one` in a fresh interpreter so peaks never mix."""
    command = [sys.executable, __file__, "one", json.dumps(asdict(case))]
    command += ["--concurrency", str(concurrency)]
    if not warm_up:
        command.append("--no-warm-up")
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    fields = json.loads(out)
    fields["case"] = Case(**fields["case"])
    return Measured(**fields)


# --- weights ---------------------------------------------------------------------


def estimate_for(measured: Measured) -> int:
    """The budget's estimate for a measured case, as the thumbnailer would ask it."""
    from django_oximg.core.options import parse_path
    from django_oximg.core.pipeline import RenderSettings, SourceInfo, plan_render
    from django_oximg.core.pipeline.budget import estimate_peak_bytes
    from django_oximg.core.serving.staging import ANIMATED_FORMATS

    info = SourceInfo(
        measured.width,
        measured.height,
        measured.format,
        measured.frames,
        has_alpha=measured.has_alpha,
        interlaced=measured.interlaced,
    )
    frames = measured.frames if measured.case.fmt in ANIMATED_FORMATS else 1
    options = parse_path(f"/{measured.case.request}/plain/x").options
    plan = plan_render(info, options, measured.case.fmt, RenderSettings())
    return estimate_peak_bytes(plan, frames, Path(measured.case.file).read_bytes())


def print_weights(rows: list[Measured]) -> None:
    """A Markdown table: measured peak increase, bytes per source pixel, estimate, ratio."""
    print("| case | request | source px | measured MiB | B/src px | estimate MiB | est/meas |")
    print("|---|---|---|---|---|---|---|")
    worst = float("inf")
    for row in rows:
        pixels = row.width * row.height * (row.frames if row.case.fmt == "webp" else 1)
        estimate = estimate_for(row)
        ratio = estimate / max(row.delta, 1)
        worst = min(worst, ratio)
        print(
            f"| {row.case.name} | `{row.case.request}` {row.case.fmt} | {pixels / 1e6:.1f} M "
            f"| {row.delta / MIB:.1f} | {row.delta / pixels:.2f} "
            f"| {estimate / MIB:.1f} | {ratio:.2f} |"
        )
    print(f"\nlowest estimate/measured: {worst:.2f} (must be >= 1)")


def run_weights(args: argparse.Namespace) -> None:
    if args.from_json:
        raw = json.loads(Path(args.from_json).read_text())
        rows = [Measured(**{**r, "case": Case(**r["case"])}) for r in raw]
    else:
        if args.command == "dense":
            cases = dense_cases(ensure_images(args.images, DENSE_SOURCES))
        else:
            cases = weight_cases(ensure_images(args.images))
        if args.only:
            cases = [c for c in cases if args.only in c.name]
        rows = []
        for case in cases:
            print(f"measuring {case.name}", file=sys.stderr, flush=True)
            rows.append(measure_in_child(case, args.concurrency, not args.no_warm_up))
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    print_weights(rows)


# --- malloc ----------------------------------------------------------------------


def mixed_sources(directory: Path) -> list[Path]:
    """The mixed set the malloc run cycles through: JPEGs, PNG, WebP, GIF."""
    paths = ensure_images(directory)
    names = [
        "jpeg-baseline-420-4mp",
        "jpeg-progressive-420-4mp",
        "jpeg-baseline-420-16mp",
        "jpeg-progressive-444-16mp",
        "png-4mp",
        "png-interlaced-4mp",
        "webp-4mp",
        "gif-anim-10x0.3mp",
    ]
    return [paths[name] for name in names]


def churn(files: list[str], renders: int, threads: int, threshold: int) -> dict[str, int]:
    """Render ``renders`` jobs over ``files`` on ``threads`` threads; report RSS after.

    ``threshold`` is ``MALLOC_THRESHOLD``, applied as a served process applies it.
    """
    from django_oximg.core import pipeline
    from django_oximg.core.limits import malloc
    from django_oximg.core.options import parse_path

    pipeline.configure(concurrency=1)
    malloc.keep_freed_memory(threshold)
    settings = pipeline.RenderSettings()
    sources = [Path(name).read_bytes() for name in files]
    base = status_bytes("VmRSS")
    counter = iter(range(renders))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            width = 300 + (index * 37) % 500
            options = parse_path(f"/rs:fit:{width}:{width}/plain/x").options
            pipeline.render(sources[index % len(sources)], options, "jpeg", settings)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    after = status_bytes("VmRSS")
    time.sleep(2.0)  # let jemalloc's background decay return dirty pages
    return {
        "base": base,
        "peak": status_bytes("VmHWM"),
        "after": after,
        "after_2s": status_bytes("VmRSS"),
    }


def run_malloc(args: argparse.Namespace) -> None:
    files = [str(path) for path in mixed_sources(args.images)]
    kept = default_malloc_threshold()
    variants: list[tuple[str, dict[str, str], int]] = [
        ("glibc, MALLOC_THRESHOLD 0 (glibc's own)", {}, 0),
        ("glibc, MALLOC_THRESHOLD default", {}, kept),
        ("glibc MALLOC_ARENA_MAX=2, MALLOC_THRESHOLD 0", {"MALLOC_ARENA_MAX": "2"}, 0),
        ("glibc MALLOC_ARENA_MAX=2, MALLOC_THRESHOLD default", {"MALLOC_ARENA_MAX": "2"}, kept),
    ]
    if JEMALLOC.exists():
        variants.append(("jemalloc 5.3 (LD_PRELOAD)", {"LD_PRELOAD": str(JEMALLOC)}, 0))
    print("| allocator | base MiB | peak MiB | after MiB | after +2 s MiB |")
    print("|---|---|---|---|---|")
    for label, extra, threshold in variants:
        command = [sys.executable, __file__, "churn", json.dumps(files)]
        command += ["--renders", str(args.renders), "--threads", str(args.threads)]
        command += ["--malloc-threshold", str(threshold)]
        results = []
        for _ in range(args.repeat):
            out = subprocess.run(
                command, check=True, capture_output=True, text=True, env={**os.environ, **extra}
            ).stdout
            results.append(json.loads(out))
        for result in results:
            print(
                f"| {label} | {result['base'] / MIB:.0f} | {result['peak'] / MIB:.0f} "
                f"| {result['after'] / MIB:.0f} | {result['after_2s'] / MIB:.0f} |"
            )


# --- served ----------------------------------------------------------------------


def sample_rss(stop: threading.Event, interval: float) -> Iterator[int]:
    while not stop.is_set():
        yield status_bytes("VmRSS")
        stop.wait(interval)


def run_served(args: argparse.Namespace) -> None:
    """Concurrent misses of one 30 MP progressive JPEG through the core thumbnailer."""
    from django_oximg.core import pipeline
    from django_oximg.core.limits import malloc
    from django_oximg.core.limits.executor import Executor
    from django_oximg.core.options import parse_path
    from django_oximg.core.options.signing import URLSigner, pairs_from_hex
    from django_oximg.core.serving.handler import Thumbnailer, ThumbnailerConfig
    from django_oximg.core.serving.staging import Limits
    from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore

    work = Path(tempfile.mkdtemp(prefix="oximg-served-"))
    source = args.images / f"served-30mp-{args.subsample}.jpg"
    if not source.exists():
        # Drawn in a child so this process's base RSS is a server's, not a drawer's.
        args.images.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, __file__, "draw-served", str(source), args.subsample]
        subprocess.run(command, check=True)
    (work / "src").mkdir()
    (work / "src" / "big.jpg").write_bytes(source.read_bytes())

    pipeline.configure(concurrency=1)
    malloc.keep_freed_memory(args.malloc_threshold)
    signer = URLSigner(pairs_from_hex(["aa" * 32], ["bb" * 32]))
    executor = Executor(2, 32, 120.0, args.budget_mib * MIB)
    thumbnailer = Thumbnailer(
        ThumbnailerConfig(),
        signer,
        {"": FileSystemSourceStore(work / "src")},
        FileSystemCacheStore(work / "cache"),
        executor,
        limits=Limits(render_timeout=120.0),
    )
    warm_up = parse_path(f"/{FIT}/plain/x").options
    pipeline.render(tiny_source("jpeg"), warm_up, "jpeg", pipeline.RenderSettings())
    base = status_bytes("VmRSS")
    reset_peak()
    stop = threading.Event()
    samples: list[int] = []
    sampler = threading.Thread(
        target=lambda: samples.extend(sample_rss(stop, 0.02)), name="rss-sampler"
    )
    statuses: list[int] = []

    def request(width: int) -> None:
        path = signer.signed_path(f"/rs:fit:{width}:{width}/plain/big.jpg@jpeg")
        statuses.append(thumbnailer.reply(path, "GET", {}).status)

    sampler.start()
    started = time.monotonic()
    clients = [threading.Thread(target=request, args=(500 - i,)) for i in range(args.requests)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    elapsed = time.monotonic() - started
    stop.set()
    sampler.join()
    stats = executor.stats()
    executor.shutdown()
    peak = max([*samples, status_bytes("VmHWM")])
    print(f"source: 6708x4472 progressive JPEG {args.subsample}, {source.stat().st_size} bytes")
    print(f"requests: {args.requests} concurrent, distinct widths; statuses {sorted(statuses)}")
    print(f"executor: workers=2 queue=32 budget={args.budget_mib} MiB")
    print(
        f"base RSS {base / MIB:.0f} MiB; peak RSS {peak / MIB:.0f} MiB (sampled max "
        f"{max(samples) / MIB:.0f}, VmHWM {status_bytes('VmHWM') / MIB:.0f})"
    )
    print(
        f"peak - base {(peak - base) / MIB:.0f} MiB; target <= budget + 100 = "
        f"{args.budget_mib + 100} MiB"
    )
    print(
        f"peak reserved {stats.peak_reserved_bytes / MIB:.0f} MiB; "
        f"completed {stats.completed}; {elapsed:.1f} s; {len(samples)} samples"
    )


def draw_served(path: Path, subsample: str) -> None:
    """The served run's source: a 6708x4472 (30 MP) progressive JPEG."""
    from bench import images

    mode = "on" if subsample == "420" else "off"
    photo = images.photo(6708, 4472)
    path.write_bytes(bytes(photo.jpegsave_buffer(Q=85, interlace=True, subsample_mode=mode)))


# --- command line ------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES)
    commands = parser.add_subparsers(dest="command", required=True)

    weights = commands.add_parser("weights", help="peak RSS per source class")
    weights.add_argument("--concurrency", type=int, default=1, help="libvips threads")
    weights.add_argument("--json", help="save the measurements here")
    weights.add_argument("--from-json", help="print estimates for saved measurements")
    weights.add_argument("--only", help="only cases whose name contains this")
    weights.add_argument("--no-warm-up", action="store_true")

    dense = commands.add_parser("dense", help="peak RSS of incompressible detail")
    dense.add_argument("--concurrency", type=int, default=1, help="libvips threads")
    dense.add_argument("--json", help="save the measurements here")
    dense.set_defaults(from_json=None, only=None, no_warm_up=False)

    malloc = commands.add_parser("malloc", help="RSS after many renders, per allocator")
    malloc.add_argument("--renders", type=int, default=200)
    malloc.add_argument("--threads", type=int, default=4)
    malloc.add_argument("--repeat", type=int, default=1)

    served = commands.add_parser("served", help="concurrent misses under a budget")
    served.add_argument("--budget-mib", type=int, default=200)
    served.add_argument("--requests", type=int, default=12)
    served.add_argument("--subsample", choices=("420", "444"), default="420")
    served.add_argument(
        "--malloc-threshold",
        type=int,
        default=default_malloc_threshold(),
        help="MALLOC_THRESHOLD, applied as a served process applies it (0: glibc's own)",
    )

    one = commands.add_parser("one", help=argparse.SUPPRESS)
    one.add_argument("case")
    one.add_argument("--concurrency", type=int, default=1)
    one.add_argument("--no-warm-up", action="store_true")

    draw = commands.add_parser("draw-served", help=argparse.SUPPRESS)
    draw.add_argument("path", type=Path)
    draw.add_argument("subsample")

    churn_parser = commands.add_parser("churn", help=argparse.SUPPRESS)
    churn_parser.add_argument("files")
    churn_parser.add_argument("--renders", type=int, default=200)
    churn_parser.add_argument("--threads", type=int, default=4)
    churn_parser.add_argument("--malloc-threshold", type=int, default=default_malloc_threshold())

    args = parser.parse_args()
    if args.command == "one":
        measured = measure_one(Case(**json.loads(args.case)), args.concurrency, not args.no_warm_up)
        print(json.dumps(asdict(measured)))
    elif args.command == "churn":
        files = json.loads(args.files)
        print(json.dumps(churn(files, args.renders, args.threads, args.malloc_threshold)))
    elif args.command == "draw-served":
        draw_served(args.path, args.subsample)
    elif args.command in ("weights", "dense"):
        run_weights(args)
    elif args.command == "malloc":
        run_malloc(args)
    else:
        run_served(args)


if __name__ == "__main__":
    main()
