"""Replacements that only work together: a model field and the admin that previews it.

sorl-thumbnail's ``AdminImageMixin`` previews only sorl's own ``ImageField``;
an easy-thumbnails admin previews ``ThumbnailerImageField`` through
``formfield_overrides`` keyed by that class. Replace the field with
Django's and the previews go blank, with no error and no warning; keep
the admin's import and the project breaks once the library is gone. So the
field and the admin are one change, and each of their findings names the
other's places in the same app.

The scanners read one file at a time; this runs over a whole scan's
findings, so it is the one part of the scanner that looks across files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import PurePath

from django_oximg.migration_scan.findings import EASY, SORL, Finding

#: Per library: the model field's features, and the admin's.
PAIRS = {
    SORL: (
        frozenset({"sorl.thumbnail.ImageField", "sorl.thumbnail.fields.ImageField"}),
        frozenset({"sorl.thumbnail.admin.AdminImageMixin"}),
    ),
    EASY: (
        frozenset({"easy_thumbnails.fields.ThumbnailerImageField"}),
        frozenset({"easy_thumbnails.widgets.ImageClearableFileInput"}),
    ),
}

#: Modules and packages of an app that are not the app itself (``shop/models/product.py``).
APP_PARTS = frozenset({"models", "admin", "forms", "widgets"})


def app_of(path: str) -> PurePath:
    """The directory of the app ``path`` is in: its parent, above a ``models`` package."""
    directory = PurePath(path).parent
    while directory.name in APP_PARTS:
        directory = directory.parent
    return directory


def places(findings: Iterable[Finding]) -> str:
    """``path:line`` of each of ``findings``, once each, in order."""
    return ", ".join(dict.fromkeys(f"{finding.path}:{finding.line}" for finding in findings))


def paired(findings: list[Finding]) -> list[Finding]:
    """``findings``, each field's and admin's advice naming the other's places in its app."""
    # Each finding's app, worked out once: (library, app) -> its findings, in order.
    by_app: dict[tuple[str, PurePath], list[tuple[int, Finding]]] = {}
    for index, finding in enumerate(findings):
        by_app.setdefault((finding.library, app_of(finding.path)), []).append((index, finding))
    changed: dict[int, Finding] = {}
    for (library, _app), here in by_app.items():
        if library not in PAIRS:
            continue
        fields, admins = PAIRS[library]
        field_places = [(i, f) for i, f in here if fields & set(f.features)]
        admin_places = [(i, f) for i, f in here if admins & set(f.features)]
        if not (field_places and admin_places):
            continue
        for group, others, what in (
            (field_places, admin_places, "the admin that previews it"),
            (admin_places, field_places, "the field it previews"),
        ):
            where = places(finding for _, finding in others)
            for index, finding in group:
                advice = f"{finding.advice} ({what}: {where})"
                changed[index] = dataclasses.replace(finding, advice=advice)
    return [changed.get(index, finding) for index, finding in enumerate(findings)]
