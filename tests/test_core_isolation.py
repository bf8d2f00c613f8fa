"""The core stays free of Django, and pyvips stays inside core/pipeline/.

A plain-WSGI user can run the core without Django, and libvips is
initialised (and its errors wrapped) in exactly one package
(docs/design.md, "Django-free core").
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import django_oximg
import django_oximg.core

PACKAGE_DIR = Path(django_oximg.__file__).resolve().parent
CORE_DIR = PACKAGE_DIR / "core"

#: The one package allowed to import pyvips.
PYVIPS_HOME = CORE_DIR / "pipeline"

#: Outside the core, the benchmark's bare-libvips ceiling imports pyvips too:
#: it must not go through the pipeline it is compared with. Nothing that
#: serves requests does.
PYVIPS_OUTSIDE_CORE = {"benchmarking/bare_libvips.py"}


#: Modules outside the core that are Django-free too: what rendering ahead
#: makes is the core thumbnailer's work, kept beside the rest of render ahead.
DJANGO_FREE_OUTSIDE_CORE = ("django_oximg.render_ahead.rendering",)


def core_module_names() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(django_oximg.core.__path__, "django_oximg.core.")
    )


def test_the_core_has_the_modules_the_design_names() -> None:
    names = set(core_module_names())
    for expected in (
        "options",
        "signing",
        "pipeline",
        "executor",
        "stores",
        "thumbnailer",
        "responders",
        "wsgi",
        "errors",
    ):
        assert f"django_oximg.core.{expected}" in names


def environment_without_django() -> dict[str, str]:
    """This environment, minus the settings module pytest-django exported."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(PACKAGE_DIR.parent)
    return env


def test_importing_every_core_module_loads_no_django() -> None:
    """In a fresh interpreter: pytest-django has already imported Django into this one."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {[*core_module_names(), *DJANGO_FREE_OUTSIDE_CORE]!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'django' "
        "or m.startswith('django.'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=PACKAGE_DIR.parent,
        env=environment_without_django(),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_pipeline_imports_pyvips() -> None:
    importers = {path for path in PACKAGE_DIR.rglob("*.py") if "pyvips" in imported_modules(path)}
    in_core = {path for path in importers if path.is_relative_to(CORE_DIR)}
    assert in_core and all(path.is_relative_to(PYVIPS_HOME) for path in in_core)
    outside = {str(path.relative_to(PACKAGE_DIR)) for path in importers - in_core}
    assert outside == PYVIPS_OUTSIDE_CORE


def test_no_core_module_imports_django_even_lazily() -> None:
    """Catches imports inside functions too, which the subprocess test cannot see."""
    paths = [*CORE_DIR.rglob("*.py"), PACKAGE_DIR / "render_ahead" / "rendering.py"]
    offenders = {path.name for path in paths if "django" in imported_modules(path)}
    assert offenders == set()


def test_the_import_scanner_sees_nested_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    import pyvips.enums\n    from django.conf import settings\n")
    assert imported_modules(sample) == {"pyvips", "django"}
