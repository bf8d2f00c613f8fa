"""No module of django_oximg imports itself back, through any path, and no folder does.

An import circle makes a module's reader leave it and come back, hides
which module depends on which, and works only as long as the names each
side needs are bound before the other side runs. The graph is read from the
source with :mod:`ast`, not from ``sys.modules``: every import counts,
including those inside functions (taken lazily, to keep imports cheap) and
under ``if TYPE_CHECKING:`` (for annotations only), since either side of a
circle still has to be read with the other.

Folders are checked the same way, one level up: two modules each without a
circle can still make one between their folders (``benchmarking`` importing
from ``management`` while a command there imports ``benchmarking``), and
such a pair of folders can no longer be read, moved or tested one without
the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import django_oximg

PACKAGE_DIR = Path(django_oximg.__file__).resolve().parent


def module_files() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = ["django_oximg", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported(name: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The package's modules that module ``name`` (at ``path``) imports, anywhere in it.

    ``from package import name`` imports the submodule ``package.name`` when
    there is one, else ``package`` itself. The parent packages Python runs
    first are not counted: every module would otherwise sit in a circle
    with its package's ``__init__`` as soon as that re-exports it.
    """
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                if not is_package:
                    anchor.pop()
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    known = module_files()
    return {name: imported(name, path, known) for name, path in known.items()}


def folder_of(name: str) -> str:
    """The unit of the folder graph that module ``name`` belongs to.

    A sub-package of ``django_oximg`` (``render_ahead``, ``management`` with
    its ``commands``) is one unit, and so is each sub-package of the core
    (``core.serving``, ``core.pipeline`` with its ``steps``): the core is a
    layer of folders, not one folder. A module directly in ``django_oximg/``
    or ``core/`` is a unit of its own.
    """
    parts = name.split(".")
    depth = 3 if parts[1:2] == ["core"] and len(parts) > 2 else 2
    if PACKAGE_DIR.joinpath(*parts[1:depth]).is_dir():
        return ".".join(parts[:depth])
    return name


def folder_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its folder, arrows inside a folder dropped."""
    folders: dict[str, set[str]] = {folder_of(name): set() for name in graph}
    for name, targets in graph.items():
        folders[folder_of(name)].update(folder_of(t) for t in targets)
    for name, targets in folders.items():
        targets.discard(name)
    return folders


def circles(graph: Mapping[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[list[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                yield from visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                yield sorted(group)

    for node in sorted(graph):
        if node not in index:
            yield from visit(node)


def test_no_module_of_the_package_is_in_an_import_circle() -> None:
    found = list(circles(import_graph()))
    assert found == [], "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_no_folder_of_the_package_is_in_an_import_circle() -> None:
    found = list(circles(folder_graph(import_graph())))
    assert found == [], "folder circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_the_core_folders_import_only_downwards() -> None:
    """The order docs/design.md draws: serving on stores and the pipeline, they on limits."""
    folders = folder_graph(import_graph())
    core = "django_oximg.core"
    assert f"{core}.pipeline" in folders[f"{core}.serving"]
    assert f"{core}.stores" in folders[f"{core}.serving"]
    assert f"{core}.limits" in folders[f"{core}.pipeline"]
    for lower in ("pipeline", "stores", "limits", "options"):
        assert f"{core}.serving" not in folders[f"{core}.{lower}"]
    assert f"{core}.options" not in folders[f"{core}.limits"]


def test_a_circle_between_folders_is_found_where_modules_have_none() -> None:
    """The loop this test was written for, with the modules' own graph free of circles."""
    graph = {
        "django_oximg.benchmarking.misses": {"django_oximg.management.progress"},
        "django_oximg.management.progress": set(),
        "django_oximg.management.commands.oximg_bench": {"django_oximg.benchmarking.misses"},
        "django_oximg.core.serving.handler": {"django_oximg.core.errors"},
        "django_oximg.core.errors": set(),
    }
    assert list(circles(graph)) == []
    assert folder_of("django_oximg.management.commands.oximg_bench") == "django_oximg.management"
    assert folder_of("django_oximg.core.serving.handler") == "django_oximg.core.serving"
    assert folder_of("django_oximg.core.errors") == "django_oximg.core.errors"
    assert list(circles(folder_graph(graph))) == [
        ["django_oximg.benchmarking", "django_oximg.management"]
    ]


def test_the_graph_sees_every_kind_of_import() -> None:
    """The walk is not vacuous: it finds imports at the top, in functions and relative ones."""
    graph = import_graph()
    pipeline = "django_oximg.core.pipeline"
    # At the top of the module.
    assert f"{pipeline}.isolated" in graph[f"{pipeline}.render"]
    # ``from package import module`` names the module.
    assert f"{pipeline}.steps" in graph[f"{pipeline}.render"]
    # Inside a function: the runtime builds the thumbnailer lazily.
    assert "django_oximg.core.serving.handler" in graph["django_oximg.runtime"]
    # Under ``if TYPE_CHECKING:``.
    assert f"{pipeline}.plan" in graph[f"{pipeline}.isolated"]


def test_a_circle_through_three_modules_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert list(circles(graph)) == [["a", "b", "c"]]
