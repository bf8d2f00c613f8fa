"""``manage.py oximg_bench --pages``: what a page of thumbnails costs to render on this site.

A page is a template with ``{% thumbnail %}`` tags: the site's own (``--template``,
rendered with ``sources``, a list of the sources' file fields, in its
context), or a synthetic one showing each source at five sizes (two crops,
three fits), the page of the repository's ``bench/page_renders.py``. It is
rendered with this site's settings, storages and caches:

- **first**: once with the sources' metadata dropped from the
  ``METADATA_CACHE`` (each source's header is read), and once more in
  this process with the metadata cached;
- **warm**: then ``renders`` times, the median reported.

With ``--compare``, sorl-thumbnail and easy-thumbnails render the same page
with their own tags when they are installed and in ``INSTALLED_APPS`` (they
make their thumbnails during the first render, into their own storage, as
on a live page). The time a new process takes to import the tag library
is measured in a subprocess with this site's settings.

The page's sources are the ``--source`` names, else the first images found
in the source storage, else sample photos saved for the run and deleted
after it.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db.models import FileField
from django.db.models.fields.files import FieldFile
from django.template import Context, Engine, Template, engines

from django_oximg import conf
from django_oximg.benchmarking.bare_libvips import sample_jpeg
from django_oximg.benchmarking.sources import SAMPLE_SIZES
from django_oximg.core.keys import RESULT_KEY
from django_oximg.core.options import FORMAT_NAMES

#: The synthetic page's sizes: (geometry as sorl-thumbnail and we write it,
#: easy-thumbnails' geometry, cropped).
PAGE_SIZES = (
    ("120x120", "120x120", True),
    ("240x180", "240x180", True),
    ("400", "400x0", False),
    ("800x600", "800x600", False),
    ("1200", "1200x0", False),
)

#: Each package's tag library, loaded under a name of its own so the two
#: ``thumbnail`` libraries of the peers cannot shadow each other.
LIBRARIES = {
    "django-oximg": ("oximg", "django_oximg.templatetags.oximg"),
    "sorl-thumbnail": ("sorl_thumbnail", "sorl.thumbnail.templatetags.thumbnail"),
    "easy-thumbnails": ("easy_thumbnails", "easy_thumbnails.templatetags.thumbnail"),
}

#: The Django app each peer must be installed as.
PEER_APPS = {"sorl-thumbnail": "sorl.thumbnail", "easy-thumbnails": "easy_thumbnails"}

#: Sources a page shows at most (each at five sizes).
PAGE_SOURCES = 10

#: Directories listed at most while looking for a page's sources.
PAGE_SEARCH_DIRECTORIES = 200

IMG = '<img src="{{ t.url }}" width="{{ t.width }}" height="{{ t.height }}" alt="">'


@dataclass
class PageTimes:
    """One contender's renders of the page, in milliseconds."""

    contender: str
    tags: int
    #: The first render; for django-oximg, with the sources' metadata dropped.
    first_ms: float
    #: The next render in this process (django-oximg: metadata cached, nothing kept in memory).
    second_ms: float
    warm_ms: list[float]

    @property
    def warm_median_ms(self) -> float:
        return statistics.median(self.warm_ms)

    @property
    def per_tag_us(self) -> float:
        return 1000 * self.warm_median_ms / self.tags if self.tags else float("nan")


def synthetic_page(contender: str) -> str:
    """The page in ``contender``'s tag syntax, over ``sources``."""
    name, _module = LIBRARIES[contender]
    rows = []
    for geometry, easy_geometry, crop in PAGE_SIZES:
        if contender == "easy-thumbnails":
            rows.append(f'{{% thumbnail s "{easy_geometry}"{" crop" if crop else ""} as t %}}{IMG}')
        else:
            options = ' crop="center"' if crop else ""
            rows.append(f'{{% thumbnail s "{geometry}"{options} as t %}}{IMG}{{% endthumbnail %}}')
    body = "\n".join(rows)
    return f"{{% load {name} %}}{{% for s in sources %}}\n{body}\n{{% endfor %}}"


def template_for(contender: str, template_name: str | None) -> Template:
    """The site's template (django-oximg only), or the synthetic page for ``contender``."""
    if template_name:
        return engines["django"].get_template(template_name).template  # type: ignore[attr-defined,no-any-return]
    name, module = LIBRARIES[contender]
    engine = Engine(libraries={name: module})
    return engine.from_string(synthetic_page(contender))


def field_files(storage: Any, names: Sequence[str]) -> list[FieldFile]:
    """``names`` as the file fields a model instance would give the template."""
    field = FileField(storage=storage)
    return [FieldFile(instance=None, field=field, name=name) for name in names]  # type: ignore[arg-type]


def measure(
    contender: str,
    template: Template,
    sources: list[FieldFile],
    renders: int,
    before_first: Callable[[], None],
) -> PageTimes:
    """Render ``template`` once after ``before_first``, once more, then ``renders`` times."""
    context = {"sources": sources}
    before_first()
    times = []
    for _ in range(renders + 2):
        start = time.perf_counter()
        page = template.render(Context(context))
        times.append(1000 * (time.perf_counter() - start))
    return PageTimes(contender, page.count("<img "), times[0], times[1], times[2:])


def contenders(compare: bool) -> tuple[list[str], list[str]]:
    """The contenders to run, and notes on the peers left out."""
    found, notes = ["django-oximg"], list[str]()
    if not compare:
        return found, notes
    for peer, app in PEER_APPS.items():
        module = LIBRARIES[peer][1].partition(".")[0]
        if importlib.util.find_spec(module) and app in django_settings.INSTALLED_APPS:
            found.append(peer)
        else:
            notes.append(f"{peer} not installed or not in INSTALLED_APPS: skipped")
    return found, notes


def import_time_ms(module: str = "django_oximg.templatetags.oximg") -> float:
    """Milliseconds a new process takes to import ``module`` once Django is set up."""
    script = (
        "import time, django; django.setup(); start = time.perf_counter(); "
        f"import {module}; print(1000 * (time.perf_counter() - start))"
    )
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    environment.setdefault("DJANGO_SETTINGS_MODULE", str(django_settings.SETTINGS_MODULE))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


@dataclass
class PagesRun:
    """What ``--pages`` measured: each contender's renders and the tag library's import."""

    names: list[str]
    results: list[PageTimes]
    import_ms: float
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": self.names,
            "import_ms": self.import_ms,
            "results": [vars(result) for result in self.results],
            "notes": self.notes,
        }


def run(names: list[str], template_name: str | None, renders: int, compare: bool) -> PagesRun:
    """Render the page ``renders`` times per contender; samples saved for it are deleted after."""
    from django_oximg.thumbnails import forget_source_metadata

    storage = storages[conf.get_settings().SOURCE_STORAGE]
    names, made = page_sources(storage, names)
    found, notes = contenders(compare)

    def forget() -> None:
        for name in names:
            forget_source_metadata(name)

    results = []
    try:
        for contender in found:
            own = contender == "django-oximg"
            template = template_for(contender, template_name if own else None)
            sources = field_files(storage, names)
            results.append(measure(contender, template, sources, renders, forget if own else noop))
    finally:
        for name in made:
            storage.delete(name)
    return PagesRun(names, results, import_time_ms(), notes)


def noop() -> None:
    """Nothing to do before a peer's first render (its own caches are its business)."""


def page_sources(storage: Any, names: list[str]) -> tuple[list[str], list[str]]:
    """The page's source names, and those this run saved (to delete after).

    ``--source`` names, else the first images found in the source storage
    (results of a result cache sharing it are skipped), else sample photos
    saved under ``oximg-bench/``.
    """
    if names:
        return names, []
    found = find_images(storage)
    if found:
        return found, []
    token = secrets.token_hex(4)
    data = sample_jpeg(*SAMPLE_SIZES["medium"])
    made = [
        storage.save(f"oximg-bench/page-{token}-{index}.jpg", ContentFile(data))
        for index in range(PAGE_SOURCES)
    ]
    return made, made


def find_images(storage: Any) -> list[str]:
    """Up to :data:`PAGE_SOURCES` image names in ``storage``, breadth first."""
    found: list[str] = []
    directories = [""]
    for _ in range(PAGE_SEARCH_DIRECTORIES):
        if not directories or len(found) >= PAGE_SOURCES:
            break
        directory = directories.pop(0)
        try:
            subdirectories, files = storage.listdir(directory)
        except (OSError, NotImplementedError):
            continue
        for filename in sorted(files):
            name = f"{directory}/{filename}" if directory else filename
            extension = filename.rpartition(".")[2].lower()
            if extension in FORMAT_NAMES and not RESULT_KEY.search(name):
                found.append(name)
        directories += [f"{directory}/{d}" if directory else d for d in sorted(subdirectories)]
    return found[:PAGE_SOURCES]
