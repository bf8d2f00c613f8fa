"""Cold start: from spawning a server to the first 200 of a cache miss, against thumbor.

    .venv/bin/python bench/cold_start.py [--samples 7] [--apps deferred,middleware]
        [--before COMMIT]
    .venv/bin/python bench/cold_start.py --imports [--app deferred] [--before COMMIT]
    .venv/bin/python bench/cold_start.py --instructions [--before COMMIT]

Each sample starts a fresh server on 127.0.0.1 and asks for one thumbnail
that is in no cache (the medium photo fitted into 500x500, q80, a
cachebuster of its own): django-oximg under gunicorn (gthread, one worker
process, the load benchmark's settings: bench/servers.py), and thumbor 7.8
with one process (bench/peers/setup_thumbor.sh). The clock starts just
before the process is spawned and stops when the whole answer has been
read; the port is tried every millisecond, and the request is sent on the
first connection accepted (gunicorn's master listens before its worker has
imported the application: the request then waits in the listen queue).
``gunicorn-hello`` is the same gunicorn serving a WSGI application that
imports nothing and answers 10 KB: the server's own start, which every
gunicorn application pays before its own. ``gunicorn-stack`` serves
``bench.wsgi_apps:stack``: Django's settings and storage, Pillow and pyvips,
and one render of the same thumbnail by hand (a 1/2 decode, as the defaults
make), with nothing of django_oximg: the floor of a cold start on the stack
the package is built on. ``--before COMMIT`` adds
``oximg-before``: the first of ``--apps``' applications, on the package at
COMMIT (which must have it: ``deferred`` needs 2026-11 or later).
Samples of all contenders are interleaved; medians with min-max. The
checkout is byte-compiled first and its servers run with bytecode caches
on, as an installed wheel's (:func:`bench.servers.bytecode_environment`).

``--instructions`` counts where a new worker's instructions go, stage by
stage, with valgrind's cachegrind (which the host's speed does not move):
each stage runs in a fresh interpreter after the ones before it, and the
count without it is subtracted; the last stage is the first miss itself.

``--imports`` lists where the worker's time goes instead: in a fresh
interpreter that has imported gunicorn's worker modules (as a forked worker
has), ``python -X importtime`` of the WSGI application module, then the
first request in the same process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import servers  # noqa: E402
from bench.cases import CASES, thumbor_path  # noqa: E402
from bench.load import oximg_url  # noqa: E402

#: Bound on one cold start (a loaded machine takes seconds).
TIMEOUT = 60.0

#: Seconds between two connection attempts while the server starts.
POLL = 0.001


def first_answer(port: int, path: str, started: float, process: subprocess.Popen[bytes]) -> float:
    """Seconds from ``started`` to the whole answer to ``path`` (which must be a 200)."""
    deadline = started + TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before answering")
        try:
            connection = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            break
        except OSError:
            if time.perf_counter() > deadline:
                raise
            time.sleep(POLL)
    with connection:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        connection.sendall(request.encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    elapsed = time.perf_counter() - started
    status = answer[9:12]
    if status != b"200":
        raise RuntimeError(f"first answer was {answer[:200]!r}")
    return elapsed


def oximg_command(app: str, port: int) -> list[str]:
    return servers.gunicorn_command(f"bench.wsgi_apps:{app}", port, servers.GTHREAD_THREADS)


@contextlib.contextmanager
def spawned(
    command: list[str], env: dict[str, str], cwd: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        servers.stop(process)


def sample_oximg(app: str, media: Path, tag: str, package_root: Path | None = None) -> float:
    port = servers.free_port()
    path = oximg_url(CASES["medium-jpeg"], 500, tag)
    env = servers.oximg_env(media, package_root)
    started = time.perf_counter()
    # ``python -m gunicorn`` puts its working directory first on sys.path.
    with spawned(oximg_command(app, port), env, package_root or ROOT) as process:
        return first_answer(port, path, started, process)


def sample_bare(app: str, media: Path) -> float:
    """``gunicorn-hello`` or ``gunicorn-stack``: an application that ignores the path."""
    port = servers.free_port()
    started = time.perf_counter()
    with spawned(oximg_command(app, port), servers.oximg_env(media)) as process:
        return first_answer(port, "/", started, process)


def sample_thumbor(conf: Path, tag: str) -> float:
    port = servers.free_port()
    path = thumbor_path(CASES["medium-jpeg"], 500, tag)
    started = time.perf_counter()
    with spawned(servers.thumbor_command(conf, port, 1), servers.thumbor_env()) as process:
        return first_answer(port, path, started, process)


def measure(samples: int, apps: list[str], before: str | None) -> dict[str, list[float]]:
    from bench.images import write_set
    from bench.load import checkout

    work = Path(tempfile.mkdtemp(prefix="oximg-cold-"))
    media = work / "media"
    write_set(media)
    servers.compile_sources()
    conf = work / "thumbor.conf"
    conf.write_text(servers.thumbor_config(media))
    package_root = checkout(before, work) if before else None
    if package_root:
        servers.compile_sources(package_root)
    contenders = [f"oximg-{app}" for app in apps]
    if package_root:
        contenders.append("oximg-before")
    contenders.extend(["gunicorn-hello", "gunicorn-stack"])
    if servers.thumbor_available():
        contenders.append("thumbor")
    else:
        print("thumbor not installed (bash bench/peers/setup_thumbor.sh): skipped")
    found: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(samples + 1):  # the first round warms the page cache: not counted
        for name in contenders:
            tag = f"cold{time.time_ns()}"
            if name == "thumbor":
                seconds = sample_thumbor(conf, tag)
            elif name.startswith("gunicorn-"):
                seconds = sample_bare(name.removeprefix("gunicorn-"), media)
            elif name == "oximg-before":
                seconds = sample_oximg(apps[0], media, tag, package_root)
            else:
                seconds = sample_oximg(name.removeprefix("oximg-"), media, tag)
            found[name].append(seconds)
    return {name: values[1:] for name, values in found.items()}


# -- where the import time goes --------------------------------------------------------

#: Run in a fresh interpreter: import the WSGI application, answer one miss.
FIRST_REQUEST = """
import dataclasses, io, sys, time
import gunicorn.app.wsgiapp, gunicorn.http.wsgi, gunicorn.workers.gthread  # as in a worker
made = []  # (ms, name) of each dataclass defined from here on
define = dataclasses._process_class
def timed(cls, *args, **kwargs):
    begun = time.perf_counter()
    try:
        return define(cls, *args, **kwargs)
    finally:
        made.append(((time.perf_counter() - begun) * 1000, cls.__qualname__))
dataclasses._process_class = timed
started = time.perf_counter()
import bench.wsgi_apps as apps
app = getattr(apps, sys.argv[1])
imported = time.perf_counter()
path = sys.argv[2]
environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "RAW_URI": path, "SCRIPT_NAME": "",
           "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
           "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(),
           "wsgi.errors": sys.stderr}
statuses = []
body = b"".join(app(environ, lambda status, headers, exc=None: statuses.append(status)))
answered = time.perf_counter()
assert statuses[0].startswith("200"), statuses
print("TIMES", imported - started, answered - imported, file=sys.stderr)
print("DATACLASSES", len(made), sum(ms for ms, _ in made), file=sys.stderr)
"""

IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| *(\S+)")


def import_costs(
    app: str, media: Path, package_root: Path | None = None
) -> tuple[list[tuple[str, float]], float, float, tuple[int, float]]:
    """(the costliest imports as (name, ms cumulative), import ms, first request ms,
    (dataclasses defined, ms defining them))."""
    path = oximg_url(CASES["medium-jpeg"], 500, f"imports{time.time_ns()}")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", FIRST_REQUEST, app, path],
        env=servers.oximg_env(media, package_root),
        cwd=package_root or ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            rows.append((match[3], int(match[2]) / 1000))
    [times] = [line for line in done.stderr.splitlines() if line.startswith("TIMES ")]
    imported, answered = (float(t) * 1000 for t in times.split()[1:])
    [made] = [line for line in done.stderr.splitlines() if line.startswith("DATACLASSES ")]
    count, defining = made.split()[1:]
    return costliest(rows), imported, answered, (int(count), float(defining))


#: Modules whose import cost is listed: each line is the cumulative time of
#: the module's first import, whoever imported it (nested imports included,
#: so lines overlap: pyvips and PIL.Image are inside the pipeline).
MODULES = (
    "django_oximg.wsgi",
    "django.core.wsgi",
    "django.urls",
    "django.conf",
    "django.core.files.storage",
    "django_oximg.runtime",
    "django_oximg.core.pipeline",
    "pyvips",
    "simplejpeg",
    "numpy",
    "PIL.Image",
    "prometheus_client",
    "urllib3",
    "blurhash",
    "whitenoise.responders",
    "itsdangerous",
)


def costliest(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """(module, cumulative ms) for each of :data:`MODULES` that was imported."""
    first = {}
    for name, cumulative in rows:
        first.setdefault(name, cumulative)
    return [(name, first[name]) for name in MODULES if name in first]


#: What a new worker does before its first answer, in order: (what, Python).
STAGES = (
    (
        "python and gunicorn's worker modules",
        "import gunicorn.app.wsgiapp, gunicorn.http.wsgi, gunicorn.workers.gthread",
    ),
    (
        "django.conf and the settings module",
        "import django.conf; django.conf.settings.INSTALLED_APPS",
    ),
    ("django.core.files.storage", "import django.core.files.storage"),
    ("django_oximg.conf, django_oximg.runtime", "import django_oximg.conf, django_oximg.runtime"),
    ("django_oximg.wsgi", "import django_oximg.wsgi"),
    (
        "Pillow (PIL.Image, the JPEG and WebP plugins)",
        "import PIL.Image; from PIL import JpegImagePlugin, WebPImagePlugin",
    ),
    ("pyvips and libvips' start", "import pyvips; pyvips.Image.black(1, 1).avg()"),
    ("the pipeline's modules", "import django_oximg.core.pipeline"),
    ("the thumbnailer's modules", "import django_oximg.core.serving.handler"),
)


def stage_instructions(media: Path, package_root: Path | None, code: str, path: str) -> int:
    """Instructions of a fresh interpreter running ``code`` (``FIRST_REQUEST``'s arguments)."""
    from bench.instructions import CACHEGRIND, COUNTED, instructions

    done = subprocess.run(
        [*CACHEGRIND, sys.executable, "-c", code, "deferred", path],
        env=dict(servers.oximg_env(media, package_root), **COUNTED),
        cwd=package_root or ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return instructions(done.stderr)


def print_instructions(before: str | None) -> None:
    from bench.images import write_set
    from bench.load import checkout

    work = Path(tempfile.mkdtemp(prefix="oximg-instructions-"))
    write_set(work / "media")
    roots: list[tuple[str, Path | None]] = [("now", None)]
    if before:
        roots.append((before, checkout(before, work)))
    for label, root in roots:
        servers.compile_sources(root)
        path = oximg_url(CASES["medium-jpeg"], 500, f"count{time.time_ns()}")
        stages = [*STAGES, ("the first miss (its render, its lazy imports)", FIRST_REQUEST)]
        print(f"instructions of a new worker, by stage ({label}):")
        done, previous = [], 0
        for name, code in stages:
            done.append(code)
            count = stage_instructions(work / "media", root, "\n".join(done), path)
            print(f"- {name}: {(count - previous) / 1e6:.0f} M")
            previous = count
        print(f"- in all: {previous / 1e6:.0f} M")


def print_imports(app: str, runs: int, before: str | None) -> None:
    from bench.images import write_set
    from bench.load import checkout

    work = Path(tempfile.mkdtemp(prefix="oximg-imports-"))
    write_set(work / "media")
    servers.compile_sources()
    print_import_costs(
        f"bench.wsgi_apps:{app}", [import_costs(app, work / "media") for _ in range(runs)]
    )
    if before:
        root = checkout(before, work)
        servers.compile_sources(root)
        costs = [import_costs(app, work / "media", root) for _ in range(runs)]
        print_import_costs(f"bench.wsgi_apps:{app} of {before}", costs)


def print_import_costs(
    title: str, results: list[tuple[list[tuple[str, float]], float, float, tuple[int, float]]]
) -> None:
    """Medians of :func:`import_costs` over fresh interpreters."""
    print(f"{title}, {len(results)} fresh interpreters, medians (ms; -X importtime inflates them)")
    imported = statistics.median(r[1] for r in results)
    answered = statistics.median(r[2] for r in results)
    print(f"- importing the application: {imported:.0f} ms; the first miss: {answered:.0f} ms")
    count = statistics.median(r[3][0] for r in results)
    defining = statistics.median(r[3][1] for r in results)
    print(f"- dataclasses defined until the first answer: {count:.0f}, {defining:.1f} ms")
    print("first import of each module, nested imports included (so lines overlap):")
    for name in MODULES:
        values = [dict(r[0]).get(name) for r in results]
        if all(value is None for value in values):
            print(f"- {name}: not imported")
        else:
            found = [value or 0.0 for value in values]
            print(f"- {name}: {statistics.median(found):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument(
        "--apps", default="deferred,middleware", help="bench.wsgi_apps names, comma-separated"
    )
    parser.add_argument("--imports", action="store_true", help="list the import costs instead")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions by stage instead"
    )
    parser.add_argument("--app", default="deferred", help="the application --imports looks at")
    parser.add_argument("--before", metavar="COMMIT", help="add the package at COMMIT")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.instructions:
        print_instructions(args.before)
        return
    if args.imports:
        print_imports(args.app, max(3, args.samples // 2), args.before)
        return
    found = measure(args.samples, [app for app in args.apps.split(",") if app], args.before)
    print(f"spawn to the first 200 of a miss (s), {args.samples} samples each, interleaved")
    for name, values in found.items():
        print(
            f"- {name}: median {statistics.median(values):.3f} "
            f"(min {min(values):.3f}, max {max(values):.3f})"
        )
    if "thumbor" in found:
        theirs = statistics.median(found["thumbor"])
        for name, values in found.items():
            if name != "thumbor":
                print(f"- {name} / thumbor: {statistics.median(values) / theirs:.2f}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
