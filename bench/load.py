"""Load benchmark: django-oximg served, bare pyvips, thumbor and the Django peers, in one run.

    .venv/bin/python bench/load.py [--quick] [--cases medium-jpeg,large-jpeg]
        [--concurrency 1,4,16] [--runs 3] [--seconds 5] [--json FILE]
        [--before COMMIT [--before-settings JSON]] [--alt-settings JSON] [--redis]

Contenders (each skipped with a note when not installed):

- ``oximg-view`` / ``oximg-wsgi``: django-oximg under gunicorn (gthread, one
  process, 64 threads > WORKERS + QUEUE_SIZE) through the Django view and
  through ``OximgMiddleware``; keep-alive clients;
- ``thumbor`` / ``thumbor-close``: thumbor 7.8 (bench/peers/setup_thumbor.sh),
  2 processes, keep-alive and ``Connection: close`` clients;
- ``pyvips``: bare pyvips in-process on 2 threads, the same operation and
  encoder options (the ceiling); ``pipeline`` and ``thumbnailer``: our
  render function and the whole served path without HTTP, in-process on 2
  threads (bench/inprocess.py);
- ``sorl`` / ``easy``: sorl-thumbnail and easy-thumbnails generating in-process
  on 1 thread (bench/peers/django_peers.py; per-core figures);
- ``oximg-wsgi-before`` / ``oximg-wsgi-alt``: the middleware server on the
  package at ``--before COMMIT`` (with ``--before-settings``' OXIMG
  overrides), and on the work tree with ``--alt-*``'s differences.

``--redis`` starts a private redis-server on a Unix socket and offers it to
every django-oximg server as ``CACHES["coordination"]`` (bench/bench_settings.py);
``{"COORDINATION_CACHE": "coordination"}`` in ``--alt-settings`` or
``--before-settings`` turns leases on for that contender.

Method: every (run, case, concurrency, contender) point is measured once per
run, contenders interleaved inside each point and runs repeated, so slow drift
of a shared machine hits all contenders alike; the medians with min-max over
runs are reported. "diverse" URLs (width 485-500 + a cachebuster, a distinct
URL per request) always miss; "same" URLs hit the cache after the first.
wrk drives HTTP when installed (one thread per connection, each with its own
URL list; for one URL asked again and again, as many threads as CPUs), else
bench/driver.py's asyncio client.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import (  # noqa: E402
    CASES,
    PRIORITY_CASES,
    Case,
    oximg_url,
    thumbor_path,
    url_list,
)
from bench.driver import (  # noqa: E402
    OtherLoad,
    ProcessSample,
    RunStats,
    closed_loop,
    per_connection,
    spread,
    wait_until_idle,
    wrk_available,
)

#: Figures summarised per point (median, min, max over runs).
FIGURES = (
    "rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "cpu_ms_per_request",
    "cores_used",
    "peak_rss_mib",
    "page_faults_per_request",
    "switches_per_request",
    "bytes_per_response",
    "other_cpus",
)

HTTP_CONTENDERS = (
    "oximg-view",
    "oximg-wsgi",
    "oximg-wsgi-before",
    "oximg-wsgi-alt",
    "thumbor",
    "thumbor-close",
)
INPROCESS_CONTENDERS = ("pyvips", "pipeline", "thumbnailer")
PEER_CONTENDERS = ("sorl", "easy")


@dataclass
class Point:
    contender: str
    case: str
    kind: str
    concurrency: int
    runs: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        figures = {}
        for name in FIGURES:
            values = [
                float(r.get(name) if r.get(name) is not None else math.nan) for r in self.runs
            ]
            figures[name] = spread(values).to_dict()
        return {
            "contender": self.contender,
            "case": self.case,
            "kind": self.kind,
            "concurrency": self.concurrency,
            "runs": self.runs,
            **figures,
        }


def measure_http(
    server: servers.Running,
    urls: list[str],
    concurrency: int,
    seconds: float,
    close: bool,
    use_wrk: bool,
) -> dict[str, Any]:
    lists = per_connection(urls, concurrency)
    sample = ProcessSample(server.pid)
    other = OtherLoad()
    sample.start()
    stats: RunStats = closed_loop(server.port, lists, seconds, close=close, use_wrk=use_wrk)
    sample.stop(stats)
    server_cpu = stats.cpu_ms_per_request * stats.ok / 1000 if stats.ok else 0.0
    result = stats.to_dict()
    result["other_cpus"] = other.cpus(also_ours=server_cpu)
    result["settle_s"] = wait_until_idle(server.pid)
    return result


def run_json(command: list[str], timeout: float) -> dict[str, Any]:
    other = OtherLoad()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])}... failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["other_cpus"] = other.cpus()  # the child's CPU is ours: it was waited for
    return result


def measure_inprocess(
    contender: str, case: Case, images: Path, seconds: float, extra: list[str] | None = None
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(ROOT / "bench" / "inprocess.py"),
        "--contender",
        contender,
        "--case",
        case.name,
        "--images",
        str(images),
        "--seconds",
        str(seconds),
        "--threads",
        "2",
        *(extra or []),
    ]
    return run_json(command, timeout=seconds * 10 + 60)


def measure_peer(contender: str, case: Case, images: Path, seconds: float) -> dict[str, Any]:
    command = [
        str(servers.PEERS_PYTHON),
        str(ROOT / "bench" / "peers" / "django_peers.py"),
        "--contender",
        contender,
        "--case",
        case.name,
        "--images",
        str(images),
        "--seconds",
        str(seconds),
        "--threads",
        "1",
    ]
    return run_json(command, timeout=seconds * 10 + 120)


#: Distinct misses per second one connection may get: a keep-alive
#: connection pinned alone to one of several server processes has a core to
#: itself, about 70 medium-JPEG misses a second here; every other case is
#: slower. Twice that, so no connection runs out of URLs.
PER_CONNECTION_RATE = 150


def url_count(seconds: float, concurrency: int) -> int:
    """Enough distinct URLs that no connection wraps around within a run.

    Each connection gets its own share, so the share must last a connection
    that is served alone (4 s of renders with 250 URLs per connection did
    run out: its later requests were cache hits, 474 req/s at 4 ms of CPU).
    The drivers count connections that wrap anyway (:func:`wrapped_notes`).
    """
    return max(400, concurrency * math.ceil(seconds * PER_CONNECTION_RATE))


@dataclass(frozen=True)
class AltServer:
    """How ``oximg-wsgi-alt`` differs from ``oximg-wsgi`` (the ``--alt-*`` options)."""

    settings: dict[str, Any] | None = None
    processes: int = 1
    worker_class: str = "gthread"
    threads: int = servers.GTHREAD_THREADS
    #: Environment variables added to the server's (glibc's MALLOC_*, say).
    env: dict[str, str] | None = None

    @property
    def differs(self) -> bool:
        """Whether anything is set: an alt server like oximg-wsgi measures nothing new."""
        plain = replace(self, settings=None, env=None)
        return bool(self.settings) or bool(self.env) or plain != AltServer()

    def describe(self) -> str:
        threads = f" of {self.threads} threads" if self.worker_class == "gthread" else ""
        env = f", environment {self.env}" if self.env else ""
        return (
            f"oximg-wsgi-alt runs with OXIMG overrides {self.settings or {}}{env} "
            f"in {self.processes} gunicorn {self.worker_class} process(es){threads}"
        )


@contextlib.contextmanager
def started_servers(
    wanted: list[str],
    media: Path,
    logs: Path,
    notes: list[str],
    before: Path | None = None,
    alt: AltServer = AltServer(),
    env: dict[str, str] | None = None,
    before_settings: dict[str, Any] | None = None,
) -> Iterator[dict[str, servers.Running]]:
    """Every wanted HTTP contender, started; ``env`` is added to each django-oximg server's."""
    first_case = CASES["medium-jpeg"]
    running: dict[str, servers.Running] = {}
    with contextlib.ExitStack() as stack:
        for way_in, name in (("view", "oximg-view"), ("middleware", "oximg-wsgi")):
            if name in wanted:
                first = oximg_url(first_case, 500, f"cold-{way_in}")
                running[name] = stack.enter_context(
                    servers.oximg(media, way_in, first, log_dir=logs, extra_env=env)
                )

        def middleware(name: str, **options: Any) -> None:
            """Another OximgMiddleware server, started like oximg-wsgi."""
            first = oximg_url(first_case, 500, f"cold-{name}")
            options["extra_env"] = {**(env or {}), **(options.get("extra_env") or {})}
            running[name] = stack.enter_context(
                servers.oximg(media, "middleware", first, log_dir=logs, name=name, **options)
            )

        if "oximg-wsgi-before" in wanted:
            if before is None:
                notes.append("oximg-wsgi-before needs --before COMMIT: skipped")
            else:
                if before_settings:
                    notes.append(f"oximg-wsgi-before runs with OXIMG overrides {before_settings}")
                middleware("oximg-wsgi-before", package_root=before, oximg_settings=before_settings)
        if "oximg-wsgi-alt" in wanted:
            if not alt.differs:
                notes.append(
                    "oximg-wsgi-alt needs --alt-settings, --alt-env, --alt-processes, "
                    "--alt-worker-class or --alt-threads: skipped"
                )
            else:
                notes.append(alt.describe())
                middleware(
                    "oximg-wsgi-alt",
                    oximg_settings=alt.settings,
                    processes=alt.processes,
                    worker_class=alt.worker_class,
                    threads=alt.threads,
                    extra_env=alt.env,
                )
        if {"thumbor", "thumbor-close"} & set(wanted):
            if servers.thumbor_available():
                first = thumbor_path(first_case, 500, "cold")
                server = stack.enter_context(servers.thumbor(media, first, log_dir=logs))
                running["thumbor"] = running["thumbor-close"] = server
            else:
                notes.append("thumbor not installed (bash bench/peers/setup_thumbor.sh): skipped")
        yield running


def run_matrix(args: argparse.Namespace) -> dict[str, Any]:
    from bench.images import write_set

    work = Path(tempfile.mkdtemp(prefix="oximg-load-"))
    media = work / "media"
    write_set(media)
    notes: list[str] = []
    use_wrk = not args.python_driver and wrk_available()
    cases = [CASES[name] for name in args.cases]
    points: dict[tuple[str, str, str, int], Point] = {}
    wanted = args.contenders
    peers_ok = servers.PEERS_PYTHON.exists()
    if not peers_ok and set(PEER_CONTENDERS) & set(wanted):
        notes.append("sorl/easy not installed (bash bench/peers/setup_django_peers.sh): skipped")

    def record(
        contender: str, case: Case, kind: str, concurrency: int, result: dict[str, Any]
    ) -> None:
        key = (contender, case.name, kind, concurrency)
        points.setdefault(key, Point(contender, case.name, kind, concurrency)).runs.append(result)
        rps = result.get("rps", math.nan)
        print(
            f"  {contender:<14} {case.name:<16} {kind:<8} c={concurrency:<3} "
            f"{rps:7.1f} req/s  p50 {result.get('p50_ms') or math.nan:7.1f} ms  "
            f"cpu {result.get('cpu_ms_per_request') or math.nan:6.1f} ms/req  "
            f"faults {result.get('page_faults_per_request', math.nan):5.0f}/req  "
            f"switches {result.get('switches_per_request', math.nan):4.0f}/req  "
            f"others {result.get('other_cpus', math.nan):.2f} CPUs"
            + (f"  busy {result['settle_s']:.1f} s after" if result.get("settle_s", 0) > 1 else ""),
            flush=True,
        )

    cold: dict[str, float] = {}
    before = checkout(args.before, work) if args.before else None
    alt = AltServer(
        args.alt_settings, args.alt_processes, args.alt_worker_class, args.alt_threads, args.alt_env
    )
    with contextlib.ExitStack() as stack:
        env = stack.enter_context(servers.redis(work)) if args.redis else None
        if env:
            notes.append("a redis-server is every django-oximg server's CACHES['coordination']")
        running = stack.enter_context(
            started_servers(wanted, media, work, notes, before, alt, env, args.before_settings)
        )
        for name, server in running.items():
            cold[name] = server.cold_start
        # Warm every server on every case (imports, allocator, thumbor's engine).
        for case in cases:
            for name, server in running.items():
                build = thumbor_path if name.startswith("thumbor") else oximg_url
                urls = url_list(case, 8, "diverse", f"warm{name}", build)
                measure_http(server, urls, 2, 1.0, False, use_wrk)
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs}", flush=True)
            for case in cases:
                for contender in wanted:
                    if contender in INPROCESS_CONTENDERS:
                        record(
                            contender,
                            case,
                            "diverse",
                            2,
                            measure_inprocess(contender, case, media, args.seconds),
                        )
                    elif contender in PEER_CONTENDERS and peers_ok and case.format == "jpeg":
                        record(
                            contender,
                            case,
                            "diverse",
                            1,
                            measure_peer(contender, case, media, args.seconds),
                        )
                for concurrency in args.concurrency:
                    for kind in args.kinds:
                        for contender in wanted:
                            server = running.get(contender)
                            if server is None:
                                continue
                            is_thumbor = contender.startswith("thumbor")
                            if kind == "same" and is_thumbor:
                                continue  # no result storage: "same" is no cache test for it
                            build = thumbor_path if is_thumbor else oximg_url
                            tag = f"r{run}c{concurrency}{contender}"
                            urls = url_list(
                                case, url_count(args.seconds, concurrency), kind, tag, build
                            )
                            result = measure_http(
                                server,
                                urls,
                                concurrency,
                                args.seconds,
                                contender.endswith("-close"),
                                use_wrk,
                            )
                            record(contender, case, kind, concurrency, result)
            if args.cache_hits:
                for result in measure_cache_hits(running, work, args, use_wrk):
                    record(
                        result.pop("contender"),
                        CASES["medium-jpeg"],
                        "hit",
                        result.pop("concurrency"),
                        result,
                    )
    notes.extend(outlier_notes(points.values()))
    notes.extend(wrapped_notes(points.values()))
    return {
        "meta": metadata(use_wrk, args),
        "notes": notes,
        "cold_start_s": cold,
        "points": [point.summary() for point in points.values()],
    }


#: A run whose CPU per request is this far from its point's median (either
#: way) did different work: cache hits or shared renders in a run meant to
#: miss, or a stall. Noise between runs is about 10 %.
OUTLIER_CPU_RATIO = 0.7


def outlier_notes(points: Iterable[Point]) -> list[str]:
    """A note for each run whose CPU per request is far from its point's median."""
    notes = []
    for point in points:
        cpus = [run.get("cpu_ms_per_request") or math.nan for run in point.runs]
        median = spread(cpus).median
        for number, (run, cpu) in enumerate(zip(point.runs, cpus, strict=True), start=1):
            if math.isnan(median) or math.isnan(cpu) or len(cpus) < 2:
                continue
            if not OUTLIER_CPU_RATIO <= cpu / median <= 1 / OUTLIER_CPU_RATIO:
                notes.append(
                    f"outlier: {point.contender} {point.case} {point.kind} "
                    f"c={point.concurrency} run {number}: {run.get('rps', math.nan):.1f} req/s "
                    f"at {cpu:.1f} CPU ms/req against a median of {median:.1f}; "
                    "read that point's range with care"
                )
    return notes


def wrapped_notes(points: Iterable[Point]) -> list[str]:
    """A note for each run in which a connection ran out of distinct URLs and started over.

    Only for diverse URLs: same-URL runs (cache hits) repeat one URL by design.
    """
    return [
        f"wrapped: {point.contender} {point.case} {point.kind} c={point.concurrency} "
        f"run {number}: {run['wrapped']} connection(s) ran out of distinct URLs, so the "
        "run includes cache hits; raise PER_CONNECTION_RATE in bench/load.py"
        for point in points
        for number, run in enumerate(point.runs, start=1)
        if point.kind == "diverse" and run.get("wrapped")
    ]


def checkout(commit: str, work: Path) -> Path:
    """The package as it was at ``commit`` (``git archive``; the work tree is untouched)."""
    root = work / f"before-{commit}"
    root.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "django_oximg"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


#: The contenders of a cache-hit run: the servers that answer one URL of a
#: cached thumbnail, and whitenoise answering the same file.
HIT_CONTENDERS = {"oximg-wsgi": "oximg-wsgi-hit", "oximg-view": "oximg-view-hit"}


def measure_cache_hits(
    running: dict[str, servers.Running],
    work: Path,
    args: argparse.Namespace,
    use_wrk: bool,
) -> Iterator[dict[str, Any]]:
    """Same-URL hits through OximgMiddleware and the view against whitenoise on the same bytes.

    One run: at each concurrency, each contender in turn (interleaved), so
    the ratios compare measurements taken within seconds of each other.
    whitenoise runs under the same gunicorn settings as django-oximg, and so
    does ``canned``: the middleware's answer (the same bytes and headers)
    sent by an application that does nothing else, the ceiling for a hit
    under this server.
    """
    import urllib.request

    case = CASES["medium-jpeg"]
    url = oximg_url(case, case.width, "")
    ours = [(HIT_CONTENDERS[name], running[name]) for name in HIT_CONTENDERS if name in running]
    if not ours:
        return
    for _ in range(2):  # the miss, then a hit: its headers are the ones every hit sends
        with urllib.request.urlopen(f"http://127.0.0.1:{ours[0][1].port}{url}") as answer:
            body = answer.read()
            headers = [
                (name, value)
                for name, value in answer.headers.items()
                if name.lower() not in ("date", "server", "connection")
            ]
    static = work / "static"
    static.mkdir(exist_ok=True)
    (static / "thumb.jpg").write_bytes(body)
    (static / "headers.json").write_text(json.dumps(headers))
    with contextlib.ExitStack() as stack:
        whitenoise = stack.enter_context(
            servers.whitenoise(static, "/static/thumb.jpg", log_dir=work)
        )
        canned = stack.enter_context(servers.whitenoise(static, "/", log_dir=work, app="canned"))
        contenders = [(name, server, url) for name, server in ours]
        contenders.append(("whitenoise", whitenoise, "/static/thumb.jpg"))
        contenders.append(("canned", canned, "/"))
        for _name, server, path in contenders:  # every server has answered it before
            measure_http(server, [path] * 8, 2, 1.0, False, use_wrk)
        for concurrency in args.concurrency:
            for name, server, path in contenders:
                result = measure_http(
                    server, [path] * 64, concurrency, args.seconds, False, use_wrk
                )
                yield {"contender": name, "concurrency": concurrency, **result}


def hit_ratios(report: dict[str, Any], write: Callable[[str], None] = print) -> None:
    """Cache hits: each way in against whitenoise, and the view against the middleware."""
    by = {
        (p["contender"], p["concurrency"]): p["rps"]["median"]
        for p in report["points"]
        if p["kind"] == "hit"
    }
    for concurrency in sorted({c for _, c in by}):
        whitenoise = by.get(("whitenoise", concurrency), math.nan)
        wsgi = by.get(("oximg-wsgi-hit", concurrency), math.nan)
        view = by.get(("oximg-view-hit", concurrency), math.nan)
        canned = by.get(("canned", concurrency), math.nan)
        write(
            f"- hits c={concurrency}: middleware {wsgi:.0f}, view {view:.0f}, whitenoise "
            f"{whitenoise:.0f}, canned {canned:.0f} req/s (medians): middleware / whitenoise "
            f"{wsgi / whitenoise:.2f}, view / whitenoise {view / whitenoise:.2f}, view / "
            f"middleware {view / wsgi:.2f}, canned / whitenoise {canned / whitenoise:.2f}"
        )
        runs = {
            name: [r["rps"] for r in point["runs"]]
            for point in report["points"]
            if point["kind"] == "hit" and point["concurrency"] == concurrency
            for name in [point["contender"]]
        }
        if "whitenoise" in runs and "oximg-wsgi-hit" in runs:
            per_run = [
                ours / theirs
                for ours, theirs in zip(runs["oximg-wsgi-hit"], runs["whitenoise"], strict=False)
            ]
            write(
                "  middleware / whitenoise run by run: "
                + ", ".join(f"{ratio:.2f}" for ratio in per_run)
            )


def metadata(use_wrk: bool, args: argparse.Namespace) -> dict[str, Any]:
    from django_oximg.core import pipeline

    versions: dict[str, str] = {
        "python": platform.python_version(),
        "libvips": pipeline.libvips_version(),
    }
    from importlib import metadata as package_metadata

    for package in ("pyvips", "pyvips-binary", "Django", "gunicorn", "whitenoise"):
        with contextlib.suppress(package_metadata.PackageNotFoundError):
            versions[package] = package_metadata.version(package)
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "versions": versions,
        "driver": "wrk" if use_wrk else "python",
        "command": " ".join(sys.argv),
        "runs": args.runs,
        "seconds": args.seconds,
    }


def table(report: dict[str, Any], write: Callable[[str], None] = print) -> None:
    """Markdown table of medians (min-max) per point, and the ratios that matter."""
    write(
        "| case | kind | c | contender | req/s | p50 ms | p95 ms | p99 ms | CPU ms/req "
        "| cores | peak RSS MiB | bytes |"
    )
    write("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for point in sorted(
        report["points"], key=lambda p: (p["case"], p["kind"], p["concurrency"], p["contender"])
    ):

        def cell(name: str, digits: int = 1, point: dict[str, Any] = point) -> str:
            s = point[name]
            if math.isnan(s["median"]):
                return "-"
            if name == "rps":
                low, high = f"{s['low']:.{digits}f}", f"{s['high']:.{digits}f}"
                return f"{s['median']:.{digits}f} ({low}-{high})"
            return f"{s['median']:.{digits}f}"

        write(
            f"| {point['case']} | {point['kind']} | {point['concurrency']} "
            f"| {point['contender']} | "
            f"{cell('rps')} | {cell('p50_ms')} | {cell('p95_ms')} | {cell('p99_ms')} | "
            f"{cell('cpu_ms_per_request')} | {cell('cores_used', 2)} | {cell('peak_rss_mib', 0)} | "
            f"{cell('bytes_per_response', 0)} |"
        )


def ratios(report: dict[str, Any], write: Callable[[str], None] = print) -> None:
    """The targets: oximg / best thumbor, oximg / in-process, CPU per image vs the peers."""
    by = {(p["contender"], p["case"], p["kind"], p["concurrency"]): p for p in report["points"]}
    cases = sorted({p["case"] for p in report["points"]})
    for case in cases:
        concurrencies = sorted({c for (_, k, kind, c) in by if k == case and kind == "diverse"})
        best_thumbor = max(
            (
                by[key]["rps"]["median"]
                for key in by
                if key[0].startswith("thumbor") and key[1] == case and key[2] == "diverse"
            ),
            default=math.nan,
        )
        ceiling = by.get(("pyvips", case, "diverse", 2))
        inproc = by.get(("pipeline", case, "diverse", 2))
        for contender in ("oximg-wsgi", "oximg-view"):
            best = max(
                (
                    by[(contender, case, "diverse", c)]["rps"]["median"]
                    for c in concurrencies
                    if (contender, case, "diverse", c) in by
                ),
                default=math.nan,
            )
            if math.isnan(best):
                continue
            parts = [f"{case} {contender}: best {best:.1f} req/s"]
            if not math.isnan(best_thumbor):
                parts.append(f"x thumbor best {best / best_thumbor:.2f}")
            if ceiling:
                parts.append(f"x bare pyvips {best / ceiling['rps']['median']:.2f}")
            if inproc:
                parts.append(f"x pipeline in-process {best / inproc['rps']['median']:.2f}")
            write("- " + ", ".join(parts))
        ours = by.get(("oximg-wsgi", case, "diverse", max(concurrencies, default=0)))
        for peer in PEER_CONTENDERS:
            other = by.get((peer, case, "diverse", 1))
            if other and ours:
                theirs = other["cpu_ms_per_request"]["median"]
                mine = ours["cpu_ms_per_request"]["median"]
                write(
                    f"- {case} CPU per image: {peer} {theirs:.1f} ms / oximg-wsgi {mine:.1f} ms "
                    f"= {theirs / mine:.2f}x per core"
                )
        thumbnailer = by.get(("thumbnailer", case, "diverse", 2))
        if thumbnailer and inproc:
            extra = (
                thumbnailer["cpu_ms_per_request"]["median"] - inproc["cpu_ms_per_request"]["median"]
            )
            write(
                f"- {case} served-path overhead in-process (thumbnailer - pipeline CPU): "
                f"{extra:.2f} ms/req"
            )
        if ours and inproc:
            extra = ours["cpu_ms_per_request"]["median"] - inproc["cpu_ms_per_request"]["median"]
            write(
                f"- {case} gunicorn + WSGI overhead (oximg-wsgi - pipeline CPU): {extra:.2f} ms/req"
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="c=1,4,16, 1 run, 3 s, priority cases")
    parser.add_argument("--cases", default=",".join(PRIORITY_CASES))
    parser.add_argument("--concurrency", default="1,4,8,16,64")
    parser.add_argument("--kinds", default="diverse")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--contenders",
        default=",".join(HTTP_CONTENDERS + INPROCESS_CONTENDERS + PEER_CONTENDERS),
    )
    parser.add_argument(
        "--cache-hits",
        action="store_true",
        help="also same-URL hits through oximg-wsgi and oximg-view against whitenoise "
        "(with --kinds '' only those)",
    )
    parser.add_argument("--python-driver", action="store_true", help="never use wrk")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--before", metavar="COMMIT", help="add oximg-wsgi-before: the package at COMMIT"
    )
    parser.add_argument(
        "--before-settings",
        type=json.loads,
        metavar="JSON",
        help="OXIMG overrides for oximg-wsgi-before, e.g. "
        '\'{"COORDINATION_CACHE": "coordination"}\'',
    )
    parser.add_argument(
        "--redis",
        action="store_true",
        help="start a redis-server, offered to every django-oximg server as "
        "CACHES['coordination'] (turned on by COORDINATION_CACHE in --alt-settings "
        "or --before-settings)",
    )
    parser.add_argument(
        "--alt-env",
        type=json.loads,
        metavar="JSON",
        help="add oximg-wsgi-alt with these environment variables, "
        'e.g. \'{"MALLOC_TRIM_THRESHOLD_": "8388608"}\'',
    )
    parser.add_argument(
        "--alt-settings",
        type=json.loads,
        metavar="JSON",
        help="add oximg-wsgi-alt: the middleware with these OXIMG overrides, "
        "e.g. '{\"JPEG_SHRINK_MARGIN\": 1}'",
    )
    parser.add_argument(
        "--alt-processes",
        type=int,
        default=1,
        metavar="N",
        help="run oximg-wsgi-alt as N gunicorn worker processes (default 1)",
    )
    parser.add_argument(
        "--alt-worker-class",
        choices=("gthread", "sync"),
        default="gthread",
        help="oximg-wsgi-alt's gunicorn worker class (sync: one request at a time "
        "per process, no keep-alive)",
    )
    parser.add_argument(
        "--alt-threads",
        type=int,
        default=servers.GTHREAD_THREADS,
        metavar="N",
        help=f"oximg-wsgi-alt's gunicorn --threads (default {servers.GTHREAD_THREADS})",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.concurrency, args.runs, args.seconds = "1,4,16", 1, 3.0
    args.cases = [c for c in args.cases.split(",") if c]
    args.concurrency = [int(c) for c in str(args.concurrency).split(",")]
    args.kinds = [kind for kind in args.kinds.split(",") if kind]
    args.contenders = args.contenders.split(",")
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {sorted(CASES)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    report = run_matrix(args)
    print()
    for note in report["notes"]:
        print("note:", note)
    print(
        "cold start to first thumbnail (s):",
        {k: round(v, 2) for k, v in report["cold_start_s"].items()},
    )
    table(report)
    print()
    ratios(report)
    hit_ratios(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
