"""``manage.py oximg_migration_scan``: what moving from sorl-thumbnail or easy-thumbnails takes.

Finds the project's templates (every directory of every ``TEMPLATES``
engine, app templates included) and Python files (those beside the settings
module, and each installed app that is not an installed package), plus
any ``--path``, and prints what :mod:`django_oximg.migration_scan` finds in
them. It reads files and changes nothing.

Only regular files inside each directory are read
(:mod:`django_oximg.migration_scan.files`); the report lists what was
skipped and what could not be read or parsed, and the command fails (after
printing the report) when something could not be.
"""

from __future__ import annotations

import importlib
import json
import site
import sys
import sysconfig
from argparse import ArgumentParser
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.template import engines

from django_oximg import migration_scan
from django_oximg.migration_scan import EASY, SORL, Finding, NotScanned, ScanError, files
from django_oximg.migration_scan.files import SKIPPED_DIRECTORIES

#: Files under --path read as templates.
TEMPLATE_SUFFIXES = frozenset({".html", ".htm", ".txt", ".xml"})

#: The template libraries that make {% thumbnail %} a builtin when listed in
#: a Django engine's OPTIONS["builtins"].
BUILTIN_LIBRARIES = frozenset(
    {"sorl.thumbnail.templatetags.thumbnail", "easy_thumbnails.templatetags.thumbnail"}
)


class Command(BaseCommand):
    help = (
        "List, file by file and line by line, the sorl-thumbnail and easy-thumbnails usage "
        "in this project's templates, Python code, migrations and settings (django-oscar's "
        "tag and OSCAR_THUMBNAILER included), and say what runs unchanged on django-oximg, "
        "what needs an edit (and which) and what has no equivalent. Changes nothing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--path",
            action="append",
            default=[],
            help="Also read this directory (templates: .html, .htm, .txt, .xml; Python: "
            ".py). Repeatable.",
        )
        parser.add_argument("--format", choices=("text", "json"), default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        extra = [Path(path) for path in options["path"]]
        missing = [str(path) for path in extra if not path.is_dir()]
        if missing:
            raise CommandError(f"not a directory: {', '.join(missing)}")
        scan = scan_project(extra)
        if options["format"] == "json":
            report = migration_scan.json_report(scan.findings, scan.not_scanned, scan.skipped)
            self.stdout.write(json.dumps(report, indent=2))
        else:
            text = migration_scan.text_report(scan.findings, scan.not_scanned, scan.skipped)
            self.stdout.write(text, ending="")
        if scan.not_scanned:
            count = len(scan.not_scanned)
            raise CommandError(f"{count} file{'s' if count > 1 else ''} could not be scanned")


@dataclass
class ProjectScan:
    """What a scan found, the files it could not read and those it skipped on purpose."""

    findings: list[Finding] = field(default_factory=list)
    not_scanned: list[NotScanned] = field(default_factory=list)
    skipped: list[NotScanned] = field(default_factory=list)

    def read(self, path: Path, library: str, *, python: bool, loaded: bool) -> None:
        """Scan one file, or say why it was not."""
        try:
            data = files.read(path)
        except OSError as exc:
            self.not_scanned.append(NotScanned(shown(path), f"cannot be read: {files.reason(exc)}"))
            return
        if files.is_binary(data):
            # An image in a template directory is no template; a module with a
            # NUL byte is one Python cannot import, so it is not scanned.
            entries = self.not_scanned if python else self.skipped
            entries.append(NotScanned(shown(path), "not text: it holds NUL bytes"))
            return
        try:
            if python:
                text = files.python_text(data)
                self.findings += migration_scan.scan_python(shown(path), text, library)
            else:
                text = files.template_text(data)
                self.findings += migration_scan.scan_template(
                    shown(path), text, library, loaded=loaded
                )
        except ScanError as exc:
            self.not_scanned.append(NotScanned(shown(path), str(exc)))


def scan_project(extra: Iterable[Path] = ()) -> ProjectScan:
    """The findings of the project's files and of ``extra`` directories, file by file."""
    library = installed_library()
    walk = files.Walk(shown=shown)
    templates: dict[Path, bool] = {}
    for directory, builtin in template_directories():
        for path in walk.files(directory):
            templates[path] = templates.get(path, False) or builtin
    python = set(settings_files(walk))
    for directory in app_directories():
        python.update(walk.files(directory, is_python))
    for directory in extra:
        for path in walk.files(directory, lambda name: is_python(name) or is_template(name)):
            if is_template(path.name):
                templates.setdefault(path, False)
            else:
                python.add(path)
    scan = ProjectScan()
    for path in sorted({*templates, *python}):
        scan.read(path, library, python=path in python, loaded=templates.get(path, False))
    scan.findings = migration_scan.paired(scan.findings)
    scan.not_scanned += [NotScanned(shown(p), why) for p, why in walk.unreadable.items()]
    scan.skipped += [NotScanned(shown(p), why) for p, why in walk.skipped.items()]
    scan.not_scanned.sort(key=lambda entry: entry.path)
    scan.skipped.sort(key=lambda entry: entry.path)
    return scan


def is_python(name: str) -> bool:
    return Path(name).suffix == ".py"


def is_template(name: str) -> bool:
    """Whether a file under --path is read as a template."""
    return Path(name).suffix in TEMPLATE_SUFFIXES


def installed_library() -> str:
    """The library the project has installed, which decides ``{% load thumbnail %}``."""
    if "easy_thumbnails" in settings.INSTALLED_APPS and "sorl.thumbnail" not in (
        settings.INSTALLED_APPS
    ):
        return EASY
    return SORL


def template_directories() -> Iterator[tuple[Path, bool]]:
    """Every engine's template directories, and whether sorl's or easy's tag is a builtin."""
    for engine in engines.all():
        inner = getattr(engine, "engine", None)
        builtin = bool(BUILTIN_LIBRARIES & set(getattr(inner, "builtins", ())))
        for directory in engine.template_dirs:
            if Path(directory).is_dir() and not is_installed(Path(directory)):
                yield Path(directory), builtin


def settings_files(walk: files.Walk) -> Iterator[Path]:
    """The Python files beside the settings module (settings.py, urls.py, a settings package)."""
    module_name = getattr(settings, "SETTINGS_MODULE", None)
    if not module_name:
        return
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    if getattr(module, "__file__", None):
        directory = Path(str(module.__file__)).resolve().parent
        yield from walk.files(directory, is_python, recursive=False)


def app_directories() -> Iterator[Path]:
    """Every installed app of the project's own (not an installed package, not this one)."""
    ours = Path(__file__).resolve().parents[2]
    for config in apps.get_app_configs():
        path = Path(config.path).resolve()
        if path != ours and not is_installed(path):
            yield path


def is_installed(path: Path) -> bool:
    """Whether ``path`` lies in the interpreter's or a virtualenv's installed packages."""
    resolved = path.resolve()
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if any(resolved.is_relative_to(Path(root).resolve()) for root in roots):
        return True
    return any(part in SKIPPED_DIRECTORIES for part in resolved.parts)


def shown(path: Path) -> str:
    """``path`` relative to the working directory when under it."""
    cwd = Path.cwd().resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
