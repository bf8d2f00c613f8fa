"""What moving from sorl-thumbnail or easy-thumbnails to django-oximg takes, place by place.

Every place that breaks once the library is uninstalled is a finding: the
tags, filters and settings, every import (historical migrations included)
and django-oscar's tag and ``OSCAR_THUMBNAILER``.

``manage.py oximg_migration_scan`` finds a project's templates and Python
files; this package reads them. Its scanners are pure functions over text
and it imports no Django, so its rules can be read and tested alone;
``files``, which walks the directories and reads the files, is its one part
that touches the disk.
:func:`scan_template` and :func:`scan_python` return :class:`Finding`
objects, each a place (path and line), the code found there and a verdict:

- ``unchanged``: runs as it is on django-oximg (once the template loads
  ``oximg`` and the import names django-oximg's module);
- ``edit``: needs an edit, written out in ``replacement`` where one piece of
  text can say it exactly, and described in ``advice``;
- ``unsupported``: django-oximg has no equivalent; ``advice`` says why and
  what comes closest.

Python it cannot read (it does not parse, or nests too deeply) is a
:class:`ScanError`, which the command reports as a file not scanned.

What django-oximg supports today is written down once, in :data:`SUPPORT`,
keyed by library and feature: when the tag learns an option, its row changes
there and nowhere else. The translations (a crop, a colour, an alias into a
preset) are used only for the rows that say ``edit``.

The modules, one job each: ``findings`` (the verdicts and a finding),
``support`` (the table, and a finding's verdict and advice from it),
``options`` (sorl's and easy-thumbnails' options as django-oximg's keywords
and presets), ``templates`` and ``python`` (the two scanners), ``report``
(text and JSON), ``pairs`` (the replacements that only work together, across
files: a model field and the admin that previews it) and ``files`` (the
regular files inside a directory, read without blocking or leaving it).
"""

from __future__ import annotations

from django_oximg.migration_scan.findings import (
    EASY,
    EDIT,
    SORL,
    UNCHANGED,
    UNSUPPORTED,
    VERDICTS,
    Finding,
    NotScanned,
    Rule,
    ScanError,
)
from django_oximg.migration_scan.pairs import paired
from django_oximg.migration_scan.python import scan_python
from django_oximg.migration_scan.report import json_report, summary, text_report
from django_oximg.migration_scan.support import SUPPORT, rule
from django_oximg.migration_scan.templates import scan_template

__all__ = [
    "EASY",
    "EDIT",
    "SORL",
    "SUPPORT",
    "UNCHANGED",
    "UNSUPPORTED",
    "VERDICTS",
    "Finding",
    "NotScanned",
    "Rule",
    "ScanError",
    "json_report",
    "paired",
    "rule",
    "scan_python",
    "scan_template",
    "summary",
    "text_report",
]
