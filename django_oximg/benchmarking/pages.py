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

This module imports only Django: bench/page_renders.py imports it in the
peers' venv (no pyvips there) and in a process that must not load an image
library. Where the page's images come from and the run around it are in
:mod:`.page_runs`.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.db.models import FileField
from django.db.models.fields.files import FieldFile
from django.template import Context, Engine, Template, engines

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
