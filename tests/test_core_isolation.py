"""The core stays free of Django, and pyvips stays inside core/pipeline/.

A plain-WSGI user can run the core without Django, and libvips is
initialised (and its errors wrapped) in exactly one package
(docs/design.md, "Django-free core").
"""

from __future__ import annotations

import ast
import functools
import json
import os
import pkgutil
import re
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
        "serving",
        "serving.handler",
        "serving.replies",
        "serving.middleware",
        "limits",
        "limits.executor",
        "options",
        "options.signing",
        "pipeline",
        "stores",
        "stores.protocols",
        "errors",
    ):
        assert f"django_oximg.core.{expected}" in names


def environment_without_django() -> dict[str, str]:
    """This environment, minus the settings module pytest-django exported."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(PACKAGE_DIR.parent)
    return env


def django_modules_after_importing(names: list[str]) -> list[str]:
    """The Django modules a fresh interpreter has loaded once it has imported ``names``.

    In a fresh interpreter: pytest-django has already imported Django into this one.
    """
    script = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
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
    loaded: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_every_core_module_loads_no_django() -> None:
    names = [*core_module_names(), *DJANGO_FREE_OUTSIDE_CORE]
    assert django_modules_after_importing(names) == []


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth of its code."""
    tree = parsed(path)
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


# -- the test modules that run on one Django only ----------------------------------------

REPO_DIR = PACKAGE_DIR.parent
TESTS_DIR = REPO_DIR / "tests"

#: Where a test could bring Django in without importing it: a process of a
#: Django project (gunicorn, manage.py) or pytest-django's settings.
DJANGO_PROCESS_WORDS = ("DJANGO_SETTINGS_MODULE", "manage.py", "gunicorn", "--ds")


def parsed(path: Path) -> ast.Module:
    """The module's syntax tree (the scanners below read the same files many times)."""
    return parsed_text(path.read_text(), str(path))


@functools.cache
def parsed_text(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename=filename)


def declares_django_free(path: Path) -> bool:
    """The module's own ``pytestmark`` (assigned at its top level) has ``django_free``."""
    for node in parsed(path).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            return any(
                isinstance(inner, ast.Attribute) and inner.attr == "django_free"
                for inner in ast.walk(node.value)
            )
    return False


def django_free_test_modules() -> list[str]:
    return sorted(
        f"tests.{path.stem}" for path in TESTS_DIR.glob("test_*.py") if declares_django_free(path)
    )


def module_file(name: str) -> Path | None:
    """The file of ``tests.*`` or ``django_oximg.*`` module ``name``; None for others."""
    if name.split(".")[0] not in ("tests", "django_oximg"):
        return None
    base = REPO_DIR.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_names(path: Path, name: str) -> set[str]:
    """Full names of the modules (or names in them) ``path`` imports, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def reachable_modules(roots: list[str]) -> dict[str, Path]:
    """The ``tests`` and ``django_oximg`` modules ``roots`` import, and theirs, at any depth."""
    seen: dict[str, Path] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        path = module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        pending.extend(imported_names(path, name))
        parent = name.rpartition(".")[0]
        if parent:
            pending.append(parent)  # importing a module runs its package's __init__
    return seen


def test_the_django_free_declarations_are_found() -> None:
    """The scanner sees the declarations (it would otherwise check nothing)."""
    modules = django_free_test_modules()
    assert {"tests.test_pipeline", "tests.test_signing", "tests.test_options"} <= set(modules)
    assert "tests.test_views" not in modules
    assert not declares_django_free(Path(__file__))


def test_the_django_free_test_modules_import_no_django() -> None:
    """In a fresh interpreter, importing them (and all they import) loads no Django.

    `make test-newest` deselects their tests (the ``django_free`` mark), since
    nothing they run depends on which Django is installed.
    """
    names = sorted(reachable_modules(django_free_test_modules()))
    assert django_modules_after_importing(names) == []


def test_nothing_a_django_free_test_module_reaches_imports_django_even_lazily() -> None:
    """Imports inside functions too, in the modules and in everything they import."""
    reached = reachable_modules(django_free_test_modules())
    offenders = sorted(name for name, path in reached.items() if "django" in imported_modules(path))
    assert offenders == []


def code_words(path: Path) -> str:
    """The module's names and string literals, without its docstrings and comments."""
    tree = parsed(path)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    words: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
    return "\n".join(words)


def test_nothing_a_django_free_test_module_reaches_starts_a_django_process() -> None:
    offenders = set()
    for name, path in reachable_modules(django_free_test_modules()).items():
        words = code_words(path)
        offenders |= {(name, word) for word in DJANGO_PROCESS_WORDS if word in words}
    assert offenders == set()


def test_the_scanners_see_what_a_module_reaches(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import pytest\npytestmark = [pytest.mark.django_free]\n")
    assert declares_django_free(sample)
    sample.write_text("import pytest\ndef f():\n    pytestmark = pytest.mark.django_free\n")
    assert not declares_django_free(sample)
    reached = reachable_modules(["tests.test_thumbnailer"])
    assert {"tests", "tests.images", "tests.constants", "django_oximg.core.options.signing"} <= set(
        reached
    )
    assert "django_oximg.core.errors" in reachable_modules(["django_oximg.core.options.signing"])
    assert "tests.servers" in reachable_modules(["tests.test_e2e_gunicorn"])
    assert "gunicorn" in code_words(TESTS_DIR / "servers.py")
    assert "gunicorn" not in code_words(TESTS_DIR / "test_isolated.py")  # only in its docstring


def test_the_request_map_names_modules_that_exist_and_each_links_back() -> None:
    """core/serving's docstring maps a request's steps; the map and its modules agree.

    Every module the map names exists, and every module of the core that
    says it is a step of a request is named in the map: a module renamed or
    added to the walk without the map fails here.
    """
    import importlib

    import django_oximg.core.serving as serving

    doc = serving.__doc__ or ""
    named = set(re.findall(r":mod:`~?(django_oximg\.core\.[\w.]+)`", doc))
    assert len(named) >= 20
    for name in named:
        importlib.import_module(name)
    claiming = {
        name
        for name in core_module_names()
        if "of a request (the map: :mod:`django_oximg.core.serving`)"
        in (importlib.import_module(name).__doc__ or "")
    }
    assert len(claiming) >= 20
    assert claiming <= named, sorted(claiming - named)
