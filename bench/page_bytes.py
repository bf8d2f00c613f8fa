"""Bytes per page: a gallery loaded in headless Chromium, by django-oximg and its Django peers.

    .venv/bin/python bench/page_bytes.py [--rounds 3] [--photos bench/photos]
        [--contenders oximg-auto,oximg-auto-defaults,oximg,oximg-webp,oximg-best,sorl,easy]
        [--json FILE]

The page shows 12 photos cropped to 400x300 and 6 drawn graphics
(bench/graphics.py: logo with alpha, screenshot, text, flat illustration,
gradient, noise) fitted into 200x200, with each package's own tag and
``url``/``width``/``height``. The photos are the first 12 of ``--photos``
(``bash bench/fetch_photos.sh``: real photos, 2560x1600 and larger), else 12
drawn ones of 2560x1600 (bench/images.py), and the output says which.

Contenders (``CONTENDERS``; one line each to add one):

- ``oximg-auto``: django-oximg with ``format="auto"`` on the tag (AVIF or
  WebP, negotiated from the browser's ``Accept``);
- ``oximg-auto-defaults``: the same through the settings, the template
  as for ``oximg`` (``TAG_DEFAULTS`` ``{"format": "auto"}``), as a site
  moving from sorl-thumbnail would set it;
- ``oximg``: django-oximg at the tag's default (the source's format);
- ``oximg-webp``: django-oximg with ``format="webp"``: what a first visit
  answered in a fast format while AVIF is made later would at best cost
  (its bytes, and its time without the AVIF renders' CPU beside it);
- ``oximg-best``: django-oximg with ``format="best"``, skipped with the tag's
  own message while the tag refuses the option;
- ``sorl``, ``easy``: sorl-thumbnail and easy-thumbnails with their defaults,
  from their own venv (``bash bench/peers/setup_django_peers.sh``), skipped
  with a note when it is missing.

Each contender is a gunicorn server (2 processes, 4 threads each) on
127.0.0.1 over the same sources and settings (bench/page_app/gallery*.py),
started on a new state directory each round: its thumbnails, database and
cache are empty before the first visit. Chromium (Debian's
``/usr/bin/chromium``, driven by Playwright, whose own browser download is
never used) loads the page in a new browser context (empty HTTP cache:
**first visit**), then again in a new tab of the same context (its cache
kept: **repeat visit**), each until every image has loaded. Rounds
interleave the contenders, the order rotated each round.

Per visit, from the browser's own records: the bytes received (the sum of
the DevTools protocol's ``Network.loadingFinished`` ``encodedDataLength``:
headers and bodies as they crossed the wire, 0 for a cache hit), the
images' bytes (Resource Timing's ``encodedBodySize``: the page's image
weight, whether or not it came from the cache), requests (sent over the
network, answered from the cache, revalidated with a 304), the formats
served (each image response's MIME type) and the time to the ``load``
event. Medians over rounds, and each contender's bytes as a ratio to
sorl-thumbnail's within a round.

sorl-thumbnail and easy-thumbnails write files that ``/media/`` serves with
Django's static view (``Last-Modified``, no ``Cache-Control``): a browser
revalidates them on the repeat visit unless the site's web server adds
caching headers. django-oximg sends its own ``Cache-Control``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.chromium import CHROMIUM_ARGS, VIEWPORT  # noqa: E402

CHROMIUM = "/usr/bin/chromium"

#: Bound on one visit, in milliseconds: a first visit makes every thumbnail
#: (AVIF among them) on a shared machine; never reached when it works.
LOAD_TIMEOUT_MS = 300_000

PHOTOS = 12
PHOTO_BOX = "400x300"  # cropped
GRAPHIC_BOX = "200x200"  # fitted
GENERATED_PHOTO_SIZE = (2560, 1600)

BASELINE = "sorl"


@dataclass(frozen=True)
class Contender:
    """One package and tag options on the same page; ``app`` picks the server's package."""

    name: str
    label: str
    app: str  # "oximg", "sorl" or "easy"
    #: Extra options for django-oximg's tag, as written in the template.
    options: str = ""
    #: Extra ``OXIMG`` settings for django-oximg's server, as JSON.
    settings: str = ""


CONTENDERS = [
    Contender("oximg-auto", 'django-oximg format="auto"', "oximg", ' format="auto"'),
    Contender("oximg", "django-oximg (tag default)", "oximg"),
    Contender(
        "oximg-auto-defaults",
        'django-oximg, TAG_DEFAULTS format "auto"',
        "oximg",
        settings='{"TAG_DEFAULTS": {"format": "auto"}}',
    ),
    Contender("oximg-webp", 'django-oximg format="webp"', "oximg", ' format="webp"'),
    Contender("oximg-best", 'django-oximg format="best"', "oximg", ' format="best"'),
    Contender("sorl", "sorl-thumbnail", "sorl"),
    Contender("easy", "easy-thumbnails", "easy"),
]
BY_NAME = {contender.name: contender for contender in CONTENDERS}

IMG = '<img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">'


def page_template(contender: Contender) -> str:
    """The gallery in ``contender``'s tag syntax over ``sources`` (photos first, then graphics)."""
    if contender.app == "easy":
        photo = f'{{% thumbnail s "{PHOTO_BOX}" crop as t %}}{IMG}'
        graphic = f'{{% thumbnail s "{GRAPHIC_BOX}" as t %}}{IMG}'
        library = "thumbnail"
    else:
        options = contender.options
        end = "{% endthumbnail %}"
        photo = f'{{% thumbnail s "{PHOTO_BOX}" crop="center"{options} as t %}}{IMG}{end}'
        graphic = f'{{% thumbnail s "{GRAPHIC_BOX}"{options} as t %}}{IMG}{end}'
        library = "oximg" if contender.app == "oximg" else "thumbnail"
    return (
        f"{{% load {library} %}}<!doctype html><html><head><meta charset=utf-8>"
        '<link rel="icon" href="data:,"><title>Gallery</title></head><body>\n'
        f'{{% for s in sources|slice:":{PHOTOS}" %}}{photo}\n{{% endfor %}}\n'
        f'{{% for s in sources|slice:"{PHOTOS}:" %}}{graphic}\n{{% endfor %}}\n'
        "</body></html>\n"
    )


# -- what a visit recorded, summarised (pure) -------------------------------------------


def format_of(mime_type: str) -> str:
    """``image/avif`` -> ``avif``; anything else by its whole type."""
    kind, _, sub = mime_type.partition("/")
    return sub if kind == "image" and sub else mime_type or "unknown"


def summarize(visit: Mapping[str, Any], photos: int = PHOTOS) -> dict[str, Any]:
    """One visit's figures from its records (see ``record_visit`` for their shape).

    ``wire_bytes``: what crossed the network, headers included, from the
    DevTools protocol (0 for a response from the cache). ``image_bytes``:
    the images' encoded bodies from Resource Timing, the page's image weight
    whether or not it was sent again; ``photo_bytes`` and ``graphic_bytes``
    split it by the page's order (the first ``photos`` images are photos),
    and so do the formats. A request is ``from_cache`` when it crossed no
    network (Resource Timing ``transferSize`` 0), ``revalidated`` when it
    was answered 304.
    """
    responses = {response["url"]: response for response in visit["responses"]}
    navigation = visit["navigation"]
    images = [entry for entry in visit["resources"] if entry["initiatorType"] == "img"]
    body = {entry["name"]: entry["encodedBodySize"] for entry in images}
    shown = [image["src"] for image in visit["images"]]
    entries = [navigation, *visit["resources"]]

    def formats(sources: list[str]) -> dict[str, int]:
        kinds = Counter(format_of(responses.get(src, {}).get("mimeType", "")) for src in sources)
        return dict(sorted(kinds.items()))

    return {
        "requests": len(entries),
        "from_cache": sum(1 for entry in entries if entry["transferSize"] == 0),
        "revalidated": sum(
            1 for entry in entries if responses.get(entry["name"], {}).get("status") == 304
        ),
        "wire_bytes": sum(response["encodedDataLength"] for response in visit["responses"]),
        "image_bytes": sum(body.values()),
        "photo_bytes": sum(body.get(src, 0) for src in shown[:photos]),
        "graphic_bytes": sum(body.get(src, 0) for src in shown[photos:]),
        "html_bytes": navigation["encodedBodySize"],
        "images": len(shown),
        "photo_formats": formats(shown[:photos]),
        "graphic_formats": formats(shown[photos:]),
        "load_ms": navigation["loadMs"],
    }


def median_of(rounds: Sequence[Mapping[str, Any]], name: str, visit: str, field: str) -> float:
    return float(
        statistics.median(
            run[name][visit][field] for run in rounds if name in run and "skipped" not in run[name]
        )
    )


def ratios(
    rounds: Sequence[Mapping[str, Any]], name: str, visit: str, field: str, baseline: str = BASELINE
) -> list[float]:
    """``name``'s ``field`` over ``baseline``'s, within each round both ran in."""
    return [
        run[name][visit][field] / run[baseline][visit][field]
        for run in rounds
        if all(n in run and "skipped" not in run[n] for n in (name, baseline))
        and run[baseline][visit][field]
    ]


def spread(values: Sequence[float], digits: int = 2) -> str:
    """The median of ``values``, with their range when they differ."""
    from bench import driver

    if not values:
        return "-"
    found = driver.spread(values)
    if found.low == found.high:
        return f"{found.median:.{digits}f}"
    return f"{found.median:.{digits}f} ({found.low:.{digits}f}-{found.high:.{digits}f})"


def table(rounds: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str:
    """The medians over rounds per contender and visit, and the ratios to the baseline."""
    lines = [
        "| contender | visit | requests (cache / 304) | KB received "
        f"| x {BASELINE} | photos KB | graphics KB | formats: photos; graphics | load ms "
        "| server CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for name in names:
        ran = [run[name] for run in rounds if name in run and "skipped" not in run[name]]
        if not ran:
            continue
        label = BY_NAME[name].label if name in BY_NAME else name
        for visit in ("first", "repeat"):
            last = ran[-1][visit]
            formats = "; ".join(
                ", ".join(f"{count} {kind}" for kind, count in last[group].items())
                for group in ("photo_formats", "graphic_formats")
            )
            by_bytes = ratios(rounds, name, visit, "wire_bytes") if BASELINE in names else []

            def median(
                field: str, scale: float = 1.0, name: str = name, visit: str = visit
            ) -> float:
                return median_of(rounds, name, visit, field) * scale

            lines.append(
                f"| {label} | {visit} | {median('requests'):.0f} "
                f"({median('from_cache'):.0f} / {median('revalidated'):.0f}) "
                f"| {median('wire_bytes', 1e-3):.1f} | {spread(by_bytes)} "
                f"| {median('photo_bytes', 1e-3):.1f} | {median('graphic_bytes', 1e-3):.1f} "
                f"| {formats} | {median('load_ms'):.0f} | {median('server_cpu_s'):.2f} |"
            )
    return "\n".join(lines)


# -- the run -------------------------------------------------------------------------


def python_for(contender: Contender) -> Path | None:
    from bench.servers import PEERS_PYTHON

    if contender.app == "oximg":
        return Path(sys.executable)
    # Their gunicorn too (bench/peers/setup_django_peers.sh installs it).
    return PEERS_PYTHON if (PEERS_PYTHON.parent / "gunicorn").exists() else None


def prepare_sources(photos: Path, directory: Path) -> tuple[list[str], str]:
    """Photos then graphics under ``directory``; their names, and where the photos came from."""
    import pyvips

    from bench.graphics import write_graphics
    from bench.images import photo

    directory.mkdir(parents=True, exist_ok=True)
    found = sorted(photos.glob("*.jpg"))[:PHOTOS] if photos.is_dir() else []
    names = []
    if len(found) == PHOTOS:
        for path in found:
            shutil.copy(path, directory / path.name)
            names.append(path.name)
        origin = f"{PHOTOS} real photos from {photos}"
    else:
        width, height = GENERATED_PHOTO_SIZE
        base = photo(width, height)
        for index in range(PHOTOS):
            image: pyvips.Image = base.embed(-index * 7, -index * 5, width, height, extend="mirror")
            name = f"photo-{index:02}.jpg"
            (directory / name).write_bytes(image.jpegsave_buffer(Q=90))
            names.append(name)
        origin = f"{PHOTOS} generated photos of {width}x{height} (bench/images.py)"
    names += [path.name for path in write_graphics(directory)]
    return [f"sources/{name}" for name in names], origin


def server_env(contender: Contender, state: Path) -> dict[str, str]:
    from bench.servers import bytecode_environment

    environment = {
        name: value
        for name, value in bytecode_environment().items()
        if name not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")
    }
    return dict(
        environment,
        DJANGO_SETTINGS_MODULE="bench.page_app.gallery_settings",
        OXIMG_PAGE_CONTENDER=contender.app,
        OXIMG_PAGE_STATE=str(state),
        OXIMG_PAGE_SETTINGS=contender.settings,
        PYTHONPATH=str(ROOT),
    )


def new_state(contender: Contender, sources: Path, names: list[str], state: Path) -> None:
    """A state directory with the sources and the page: empty caches, a migrated database."""
    import subprocess

    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(sources, state / "media" / "sources")
    (state / "page.html").write_text(page_template(contender), encoding="utf-8")
    (state / "sources.json").write_text(json.dumps(names), encoding="utf-8")
    python = python_for(contender)
    assert python is not None
    subprocess.run(
        [str(python), "-m", "django", "migrate", "--run-syncdb", "-v", "0"],
        env=server_env(contender, state),
        cwd=ROOT,
        check=True,
    )


@contextmanager
def gallery_server(contender: Contender, state: Path, logs: Path) -> Iterator[tuple[int, int]]:
    """gunicorn (2 processes, 4 threads) serving the gallery; yields its port and master's pid."""
    from bench.servers import free_port, gunicorn_command, spawn

    python = python_for(contender)
    assert python is not None
    port = free_port()
    command = gunicorn_command("bench.page_app.gallery_wsgi:application", port, 4, workers=2)
    command[0] = str(python)
    log = logs / f"{contender.name}.log"
    environment = server_env(contender, state)
    with spawn(contender.name, command, environment, port, "/ping", log) as running:
        yield port, running.process.pid


def refusal(port: int) -> str | None:
    """The page's 501 message when the template refuses a tag option, else None."""
    # Only compiled: rendering the page would make sorl-thumbnail's and
    # easy-thumbnails' thumbnails before the first visit.
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/check", timeout=30):
            return None
    except urllib.error.HTTPError as error:
        if error.code == 501:
            return error.read().decode("utf-8", "replace").strip() or "refused"
        raise


#: Every image on the page has loaded and decoded (or failed: naturalWidth 0).
ALL_IMAGES_DONE = "() => Array.from(document.images).every((img) => img.complete)"

READ_TIMING = """
() => {
    const navigation = performance.getEntriesByType("navigation")[0];
    const pick = (entry) => ({
        name: entry.name,
        initiatorType: entry.initiatorType,
        transferSize: entry.transferSize,
        encodedBodySize: entry.encodedBodySize,
        decodedBodySize: entry.decodedBodySize,
    });
    return {
        navigation: {...pick(navigation), loadMs: navigation.loadEventEnd - navigation.startTime},
        resources: performance.getEntriesByType("resource").map(pick),
        images: Array.from(document.images, (img) => ({
            src: img.currentSrc, width: img.naturalWidth, height: img.naturalHeight,
        })),
    };
}
"""


def record_visit(context: Any, url: str) -> dict[str, Any]:
    """Load ``url`` in a new tab of ``context``: Resource Timing and the network's responses.

    ``responses``: per request, its URL, status (as received: 304 for a
    revalidation), MIME type, whether the disk cache answered it, and
    ``encodedDataLength`` (bytes received, headers included) from
    ``Network.loadingFinished``.
    """
    page = context.new_page()
    session = context.new_cdp_session(page)
    seen: dict[str, dict[str, Any]] = {}

    def received(params: dict[str, Any]) -> None:
        response = params["response"]
        seen[params["requestId"]] = {
            "url": response["url"],
            "status": response["status"],
            "mimeType": response["mimeType"],
            "fromDiskCache": response.get("fromDiskCache", False),
            "encodedDataLength": 0,
        }

    def finished(params: dict[str, Any]) -> None:
        if params["requestId"] in seen:
            seen[params["requestId"]]["encodedDataLength"] = params["encodedDataLength"]

    def raw(params: dict[str, Any]) -> None:
        # The status on the wire: ``responseReceived`` gives a revalidated
        # response the cached one's 200; only this event has the 304.
        wire[params["requestId"]] = params["statusCode"]

    wire: dict[str, int] = {}
    session.on("Network.responseReceived", received)
    session.on("Network.responseReceivedExtraInfo", raw)
    session.on("Network.loadingFinished", finished)
    session.send("Network.enable")
    page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
    page.wait_for_function(ALL_IMAGES_DONE, timeout=LOAD_TIMEOUT_MS)
    recorded: dict[str, Any] = page.evaluate(READ_TIMING)
    page.close()
    broken = [image["src"] for image in recorded["images"] if not image["width"]]
    if broken:
        raise SystemExit(f"{url}: images that did not load: {broken[:3]}")
    for request_id, response in seen.items():
        response["status"] = wire.get(request_id, response["status"])
    return {**recorded, "responses": list(seen.values())}


def measure(browser: Any, contender: Contender, port: int, pid: int) -> dict[str, Any]:
    """A first visit in a new context, then a repeat visit in a new tab of the same context.

    Each visit's summary also has ``server_cpu_s``: the CPU time the server
    spent during it (the browser shares the machine's CPUs with it).
    """
    from bench.driver import tree_cpu_seconds

    context = browser.new_context(viewport=VIEWPORT)
    try:
        url = f"http://127.0.0.1:{port}/"
        before = tree_cpu_seconds(pid)
        first = record_visit(context, url)
        between = tree_cpu_seconds(pid)
        repeat = record_visit(context, url)
        after = tree_cpu_seconds(pid)
    finally:
        context.close()
    return {
        "first": {**summarize(first), "server_cpu_s": between - before},
        "repeat": {**summarize(repeat), "server_cpu_s": after - between},
        "records": [first, repeat],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--photos", type=Path, default=ROOT / "bench" / "photos")
    parser.add_argument("--contenders", default=",".join(c.name for c in CONTENDERS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        hint = "playwright is not installed (it is in the test dependency group)"
        raise SystemExit(hint) from error
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    names = args.contenders.split(",")
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown contenders {unknown}: use {', '.join(BY_NAME)}")
    notes = []
    contenders = []
    for name in names:
        if python_for(BY_NAME[name]) is None:
            notes.append(f"{name} skipped: run bash bench/peers/setup_django_peers.sh")
        else:
            contenders.append(BY_NAME[name])
    from bench.servers import compile_sources

    compile_sources()
    rounds: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="oximg-page-bytes-") as temp, sync_playwright() as pw:
        work = Path(temp)
        sources, origin = prepare_sources(args.photos, work / "sources")
        print(f"sources: {origin}, and 6 drawn graphics (bench/graphics.py)", file=sys.stderr)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for number in range(args.rounds):
                shift = number % len(contenders)
                order = [
                    c for c in contenders[shift:] + contenders[:shift] if c.name not in refused
                ]
                results: dict[str, Any] = {}
                for contender in order:
                    state = work / "state" / contender.name
                    new_state(contender, work / "sources", sources, state)
                    with gallery_server(contender, state, work) as (port, pid):
                        message = refusal(port)
                        if message is not None:
                            refused[contender.name] = message
                            results[contender.name] = {"skipped": message}
                            continue
                        results[contender.name] = measure(browser, contender, port, pid)
                    first = results[contender.name]["first"]
                    print(
                        f"round {number + 1}: {contender.name}: "
                        f"{first['wire_bytes'] / 1000:.1f} KB, {first['photo_formats']}, "
                        f"{first['graphic_formats']}, "
                        f"{first['load_ms']:.0f} ms",
                        file=sys.stderr,
                    )
                rounds.append(results)
        finally:
            browser.close()
    notes += [f"{name} skipped: the tag refused it: {message}" for name, message in refused.items()]
    measured = [c.name for c in contenders if c.name not in refused]
    print(f"{len(rounds)} round(s), medians; sources: {origin} and 6 drawn graphics")
    print(table(rounds, measured))
    if BASELINE in measured:
        for name in measured:
            if name == BASELINE:
                continue
            for visit in ("first", "repeat"):
                print(
                    f"{name} / {BASELINE}, {visit} visit: bytes received "
                    f"{spread(ratios(rounds, name, visit, 'wire_bytes'))}, photos "
                    f"{spread(ratios(rounds, name, visit, 'photo_bytes'))}, graphics "
                    f"{spread(ratios(rounds, name, visit, 'graphic_bytes'))}, load time "
                    f"{spread(ratios(rounds, name, visit, 'load_ms'))}, server CPU "
                    f"{spread(ratios(rounds, name, visit, 'server_cpu_s'))}"
                )
    for note in notes:
        print(f"note: {note}")
    if args.json:
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "cpus": os.cpu_count(),
            "sources": origin,
            "files": sources,
            "contenders": {c.name: c.label for c in contenders},
            "notes": notes,
        }
        args.json.write_text(json.dumps({"meta": meta, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
