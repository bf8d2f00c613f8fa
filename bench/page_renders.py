"""Page renders: a page of 50 thumbnails of 10 photos, by django-oximg and its Django peers.

    .venv/bin/python bench/page_renders.py [--runs 5] [--renders 300] [--starts 5]
        [--contenders oximg,sorl,easy] [--before COMMIT] [--json FILE]

sorl-thumbnail and easy-thumbnails run in their own venv
(``bash bench/peers/setup_django_peers.sh``); a contender whose venv is
missing is skipped with a note.

The page is the same for all three, ``manage.py oximg_bench --pages``'s
synthetic page (django_oximg/benchmarking/pages.py): 10 model instances whose
``ImageField`` names a 2000x1333 JPEG, each shown at 5 sizes (two crops,
three fits), with each package's own tag and its ``url``/``width``/``height``. Every package
runs with its defaults and a file-based Django cache (``FileBasedCache``),
sorl-thumbnail's key-value store on its default cached database store,
easy-thumbnails on its database tables.

Each run measures every contender in fresh processes, on fresh state:

- **never made**: a new process renders the page once with empty caches.
  sorl-thumbnail and easy-thumbnails make the 50 thumbnails during the
  render; django-oximg reads the 10 headers and writes URLs (its thumbnails
  are made when the browser asks for them).
- **new process**: ``--starts`` more new processes, over the state the
  first left: Django's set-up (with the URLconf loaded, as the page's
  request does), the time to import the tag library, then the first render
  (template compiled and rendered, metadata in the shared cache but not in
  memory); the least of each is kept, since a busy machine only adds time.
- **warm**: the same process renders the page ``--renders`` times more;
  the median render is reported.

Ratios are taken within one run (same machine state) and reported as a
median with the range over runs. ``--before COMMIT`` adds ``oximg-before``:
django-oximg's package as it was at that commit, in the same runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PHOTOS = 10
#: Sizes per photo (``pages.PAGE_SIZES``, which is imported only once a
#: child's set-up has been timed: it brings Django's template modules).
SIZES_PER_PHOTO = 5
TAGS = PHOTOS * SIZES_PER_PHOTO

#: Modules django-oximg's tags must never load (they come with the pipeline).
HEAVY_MODULES = ("pyvips", "numpy", "simplejpeg", "PIL")

#: Each contender's name in ``pages``, and its tag library's module.
CONTENDERS = {
    "oximg": ("django-oximg", "django_oximg.templatetags.oximg"),
    "oximg-before": ("django-oximg", "django_oximg.templatetags.oximg"),
    "sorl": ("sorl-thumbnail", "sorl.thumbnail.templatetags.thumbnail"),
    "easy": ("easy-thumbnails", "easy_thumbnails.templatetags.thumbnail"),
}

KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"


# -- the child: one process, one contender ----------------------------------------


def configure(contender: str, state: Path) -> None:
    """Django settings for ``contender`` over ``state`` (media, cache, database)."""
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "bench.page_app"]
    extra: dict[str, Any] = {}
    if contender.startswith("oximg"):
        apps.append("django_oximg")
        extra = {"OXIMG": {"KEY": KEY, "SALT": SALT}}
    elif contender == "sorl":
        apps.append("sorl.thumbnail")
    else:
        apps.append("easy_thumbnails")
    settings.configure(
        SECRET_KEY="bench-only-not-secret",
        DEBUG=False,
        USE_TZ=True,
        INSTALLED_APPS=apps,
        DATABASES={
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(state / "db.sqlite3")}
        },
        CACHES={
            "default": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(state / "cache"),
            }
        },
        MEDIA_ROOT=str(state / "media"),
        MEDIA_URL="/media/",
        STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"}},
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
        ROOT_URLCONF="bench.page_app.urls",
        **extra,
    )


def child(contender: str, state: Path, renders: int, migrate: bool) -> dict[str, Any]:
    """Start Django, import the tag library, render the page; times in ms."""
    started = time.perf_counter()
    configure(contender, state)
    import django

    django.setup()
    if migrate:  # not timed: a site's database exists before it serves pages
        from django.core.management import call_command

        call_command("migrate", verbosity=0, run_syncdb=True)
    from django.urls import resolve

    resolve("/")  # as the request for the page does, before the view renders it
    set_up = time.perf_counter()
    name, library = CONTENDERS[contender]
    __import__(library)
    imported = time.perf_counter()
    from django.template import Context

    # The page is ``manage.py oximg_bench --pages``'s synthetic page: that
    # module needs only Django, so the peers' venv imports it from the checkout.
    from bench.page_app.models import Photo
    from django_oximg.benchmarking.pages import PAGE_SIZES, template_for

    assert len(PAGE_SIZES) == SIZES_PER_PHOTO

    photos = [Photo(image=f"photos/photo-{index}.jpg") for index in range(PHOTOS)]
    context = {"sources": [photo.image for photo in photos]}
    template = template_for(name, None)
    first_page = template.render(Context(context))
    first = time.perf_counter()
    times = []
    for _ in range(renders):
        start = time.perf_counter()
        page = template.render(Context(context))
        times.append(time.perf_counter() - start)
        if page != first_page:
            raise SystemExit(f"{contender}: a warm render differs from the first")
    if first_page.count("<img ") != TAGS or 'src=""' in first_page:
        raise SystemExit(f"{contender}: the page lacks thumbnails:\n{first_page[:2000]}")
    return {
        "setup_ms": 1000 * (set_up - started),
        "import_ms": 1000 * (imported - set_up),
        "first_ms": 1000 * (first - imported),
        "warm_ms": 1000 * statistics.median(times) if times else None,
        "warm_min_ms": 1000 * min(times) if times else None,
        "heavy_modules": [name for name in HEAVY_MODULES if name in sys.modules],
        "sample": first_page[:400],
    }


# -- the driver ---------------------------------------------------------------------


def draw_photos(directory: Path) -> None:
    """10 photo-like JPEGs of 2000x1333 (q90, about 0.5-1 MB each), drawn once."""
    from bench.images import photo

    directory.mkdir(parents=True, exist_ok=True)
    base = photo(2000, 1333)
    for index in range(PHOTOS):
        # A shifted crop each, so no two sources have the same bytes.
        image = base.embed(-index * 7, -index * 5, 2000, 1333, extend="mirror")
        (directory / f"photo-{index}.jpg").write_bytes(image.jpegsave_buffer(Q=90))


def python_for(contender: str) -> Path | None:
    from bench.servers import PEERS_PYTHON

    if contender.startswith("oximg"):
        return Path(sys.executable)
    return PEERS_PYTHON if PEERS_PYTHON.exists() else None


def run_child(
    python: Path,
    contender: str,
    state: Path,
    renders: int,
    migrate: bool,
    package_root: Path | None = None,
) -> Any:
    """One child process's figures; ``package_root`` holds another django_oximg, put first."""
    from bench.servers import bytecode_environment

    command = [
        str(python),
        str(Path(__file__).resolve()),
        "--child",
        contender,
        "--state",
        str(state),
        "--renders",
        str(renders),
    ]
    if migrate:
        command.append("--migrate")
    if package_root is not None:
        command += ["--package-root", str(package_root)]
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=ROOT, env=bytecode_environment()
    )
    if done.returncode:
        raise SystemExit(f"{contender} child failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def measure(
    contender: str,
    photos: Path,
    work: Path,
    renders: int,
    starts: int,
    package_root: Path | None = None,
) -> dict[str, Any]:
    """One run of one contender: never made, then ``starts`` new processes.

    A busy machine only ever adds time to a process start, so each start
    figure is the least of the ``starts`` processes; the last one also
    times the warm renders.
    """
    python = python_for(contender)
    assert python is not None
    state = work / contender
    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(photos, state / "media" / "photos")
    never = run_child(python, contender, state, 0, True, package_root)
    started = [
        run_child(python, contender, state, renders if last else 0, False, package_root)
        for last in [False] * (starts - 1) + [True]
    ]
    warm = started[-1]
    least = {
        field: min(child[field] for child in started)
        for field in ("setup_ms", "import_ms", "first_ms")
    }
    start = min(child["setup_ms"] + child["import_ms"] + child["first_ms"] for child in started)
    return {**warm, **least, "never_made_ms": never["first_ms"], "start_ms": start}


def spread(values: list[float]) -> str:
    values = sorted(values)
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.2f}"
    return f"{middle:.2f} ({values[0]:.2f}-{values[-1]:.2f})"


def report(results: list[dict[str, dict[str, Any]]], contenders: list[str]) -> None:
    rows = [
        ("warm render, ms/page", "warm_ms", 1.0),
        ("warm render, us/tag", "warm_ms", 1000 / TAGS),
        ("new process: first render, ms", "first_ms", 1.0),
        ("new process: import tag library, ms", "import_ms", 1.0),
        ("new process: Django set-up, ms", "setup_ms", 1.0),
        ("new process: set-up + import + render, ms", "start_ms", 1.0),
        ("never made: first render, ms", "never_made_ms", 1.0),
    ]
    print(f"{len(results)} run(s); median (min-max over runs)")
    print(f"{'':38}" + "".join(f"{name:>24}" for name in contenders))
    for label, field, scale in rows:
        cells = [spread([run[c][field] * scale for run in results]) for c in contenders]
        print(f"{label:38}" + "".join(f"{cell:>24}" for cell in cells))
    if "oximg" in contenders:
        for peer in (c for c in contenders if c != "oximg"):
            for label, field in (
                ("warm", "warm_ms"),
                ("new process", "first_ms"),
                ("never made", "never_made_ms"),
            ):
                ratios = [run["oximg"][field] / run[peer][field] for run in results]
                print(f"oximg / {peer}, {label}: {spread(ratios)}")
    loaded = results[-1].get("oximg", {}).get("heavy_modules")
    if loaded is not None:
        print(f"heavy modules in django-oximg's page-render process: {loaded or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--renders", type=int, default=300, help="warm renders per run")
    parser.add_argument("--starts", type=int, default=5, help="new processes per run")
    parser.add_argument("--contenders", default="oximg,sorl,easy")
    parser.add_argument(
        "--before", metavar="COMMIT", help="add oximg-before: the package at COMMIT"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=sorted(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--migrate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--package-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.package_root:  # before anything imports django_oximg
            sys.path.insert(0, str(args.package_root))
        print(json.dumps(child(args.child, args.state, args.renders, args.migrate)))
        return
    if args.before and "oximg-before" not in args.contenders.split(","):
        args.contenders += ",oximg-before"
    contenders = []
    for name in args.contenders.split(","):
        if python_for(name) is None:
            print(f"note: {name} skipped: run bash bench/peers/setup_django_peers.sh")
        else:
            contenders.append(name)
    from bench.load import checkout
    from bench.servers import compile_sources

    with tempfile.TemporaryDirectory(prefix="oximg-pages-") as temp:
        work = Path(temp)
        before = None
        if "oximg-before" in contenders:
            if not args.before:
                parser.error("oximg-before needs --before COMMIT")
            before = checkout(args.before, work)
            compile_sources(before)
        compile_sources()
        draw_photos(work / "photos")
        results = []
        for run in range(args.runs):
            # Interleaved, so slow drift of a shared machine hits all alike.
            order = contenders[run % len(contenders) :] + contenders[: run % len(contenders)]
            results.append(
                {
                    c: measure(
                        c,
                        work / "photos",
                        work,
                        args.renders,
                        args.starts,
                        before if c == "oximg-before" else None,
                    )
                    for c in order
                }
            )
            print(
                f"run {run + 1}: "
                + ", ".join(f"{c} {results[-1][c]['warm_ms']:.2f} ms warm" for c in contenders),
                file=sys.stderr,
            )
    report(results, contenders)
    if args.json:
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "cpus": os.cpu_count(),
        }
        args.json.write_text(json.dumps({"meta": meta, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
