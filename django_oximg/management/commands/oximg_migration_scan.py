"""``manage.py oximg_migration_scan``: what moving from sorl-thumbnail or easy-thumbnails takes.

Finds the project's templates (every directory of every ``TEMPLATES``
engine, app templates included) and Python files (those beside the settings
module, and each installed app that is not an installed package), plus
any ``--path``, and prints what :mod:`django_oximg.migration_scan` finds in
them. It reads files and changes nothing.
"""

from __future__ import annotations

import importlib
import json
import os
import site
import sys
import sysconfig
from argparse import ArgumentParser
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.template import engines

from django_oximg import migration_scan
from django_oximg.migration_scan import EASY, SORL, Finding

#: Files under --path read as templates.
TEMPLATE_SUFFIXES = frozenset({".html", ".htm", ".txt", ".xml"})

#: Directories never read: version control, caches, installed packages.
SKIPPED_DIRECTORIES = frozenset(
    {".git", ".hg", "__pycache__", "node_modules", "site-packages", "dist-packages", ".tox"}
)

#: The template libraries that make {% thumbnail %} a builtin when listed in
#: a Django engine's OPTIONS["builtins"].
BUILTIN_LIBRARIES = frozenset(
    {"sorl.thumbnail.templatetags.thumbnail", "easy_thumbnails.templatetags.thumbnail"}
)


class Command(BaseCommand):
    help = (
        "List, file by file and line by line, the sorl-thumbnail and easy-thumbnails usage "
        "in this project's templates, Python code and settings, and say what runs unchanged "
        "on django-oximg, what needs an edit (and which) and what has no equivalent. "
        "Changes nothing."
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
        findings = scan_project(extra)
        if options["format"] == "json":
            self.stdout.write(json.dumps(migration_scan.json_report(findings), indent=2))
        else:
            self.stdout.write(migration_scan.text_report(findings), ending="")


def scan_project(extra: Iterable[Path] = ()) -> list[Finding]:
    """The findings of the project's files and of ``extra`` directories, file by file."""
    library = installed_library()
    templates: dict[Path, bool] = {}
    for directory, builtin in template_directories():
        for path in walk(directory):
            templates[path] = templates.get(path, False) or builtin
    python = set(settings_files())
    python.update(path for directory in app_directories() for path in python_files(directory))
    for directory in extra:
        for path in walk(directory):
            if path.suffix in TEMPLATE_SUFFIXES:
                templates.setdefault(path, False)
            elif path.suffix == ".py":
                python.add(path)
    findings: list[Finding] = []
    for path in sorted({*templates, *python}):
        text = read_text(path)
        if text is None:
            continue
        if path in python:
            findings += migration_scan.scan_python(shown(path), text, library)
        else:
            findings += migration_scan.scan_template(
                shown(path), text, library, loaded=templates[path]
            )
    return findings


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


def settings_files() -> Iterator[Path]:
    """The Python files beside the settings module (settings.py, urls.py, a settings package)."""
    module_name = getattr(settings, "SETTINGS_MODULE", None)
    if not module_name:
        return
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    if getattr(module, "__file__", None):
        yield from sorted(Path(str(module.__file__)).resolve().parent.glob("*.py"))


def app_directories() -> Iterator[Path]:
    """Every installed app of the project's own (not an installed package, not this one)."""
    ours = Path(__file__).resolve().parents[2]
    for config in apps.get_app_configs():
        path = Path(config.path).resolve()
        if path != ours and not is_installed(path):
            yield path


def python_files(directory: Path) -> Iterator[Path]:
    return (path for path in walk(directory) if path.suffix == ".py")


def walk(directory: Path) -> Iterator[Path]:
    """Files under ``directory``, skipping virtualenvs, caches and version control."""
    for root, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRECTORIES and not (Path(root) / name / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            yield (Path(root) / name).resolve()


def is_installed(path: Path) -> bool:
    """Whether ``path`` lies in the interpreter's or a virtualenv's installed packages."""
    resolved = path.resolve()
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if any(resolved.is_relative_to(Path(root).resolve()) for root in roots):
        return True
    return any(part in SKIPPED_DIRECTORIES for part in resolved.parts)


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary or unreadable file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if "\0" in text else text


def shown(path: Path) -> str:
    """``path`` relative to the working directory when under it."""
    cwd = Path.cwd().resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)
