"""The scanner of Python: sorl's and easy-thumbnails' imports, calls and settings.

It walks a module's syntax tree (``ast``, so nothing is imported or run),
follows the names the module binds to either library, and writes each
import, reference, ``get_thumbnail()``/``get_thumbnailer()`` call,
``THUMBNAIL_*`` setting and ``INSTALLED_APPS`` entry as a finding.

Every import of either library is a finding, since each one fails once the
library is uninstalled. In a historical migration (a module in a
``migrations`` directory) the imports and the model fields get the advice
for migrations: the migration must stop naming the library's field, or a
fresh ``migrate`` fails. django-oscar's ``OSCAR_THUMBNAILER``, and an Oscar
``INSTALLED_APPS`` without it (Oscar then uses sorl-thumbnail), are findings
too.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePath
from typing import Any

from django_oximg.core.options import FORMAT_NAMES
from django_oximg.migration_scan.findings import (
    EASY,
    OSCAR,
    OSCAR_THUMBNAILER,
    OSCAR_THUMBNAILERS,
    SORL,
    Finding,
    ScanError,
)
from django_oximg.migration_scan.options import (
    VARIABLE,
    Part,
    easy_options,
    merge,
    preset_options,
    rewritten,
    sorl_option,
)
from django_oximg.migration_scan.support import SUPPORT, judged

#: What the replacements import, by the name they use.
OXIMG_IMPORTS = {
    "get_thumbnail": "from django_oximg.thumbnails import get_thumbnail",
    "get_thumbnailer": "from django_oximg.thumbnails import get_thumbnailer",
    "purge_source": "from django_oximg.purge import purge_source",
    "ImageField": "from django.db.models import ImageField",
    "FileField": "from django.db.models import FileField",
    "ThumbnailAdminMixin": "from django_oximg.admin import ThumbnailAdminMixin",
    "ThumbnailFileWidget": "from django_oximg.widgets import ThumbnailFileWidget",
}

#: Python names and the django-oximg name that replaces each (for import lines).
PYTHON_REPLACEMENTS = {
    "sorl.thumbnail.get_thumbnail": "get_thumbnail",
    "sorl.thumbnail.shortcuts.get_thumbnail": "get_thumbnail",
    "sorl.thumbnail.delete": "purge_source",
    "sorl.thumbnail.ImageField": "ImageField",
    "sorl.thumbnail.fields.ImageField": "ImageField",
    "sorl.thumbnail.admin.AdminImageMixin": "ThumbnailAdminMixin",
    "easy_thumbnails.files.get_thumbnailer": "get_thumbnailer",
    "easy_thumbnails.fields.ThumbnailerImageField": "ImageField",
    "easy_thumbnails.fields.ThumbnailerField": "FileField",
    "easy_thumbnails.widgets.ImageClearableFileInput": "ThumbnailFileWidget",
}

#: sorl-thumbnail's settings that are a keyword's default in OXIMG["TAG_DEFAULTS"].
TAG_DEFAULT_SETTINGS = {
    "THUMBNAIL_UPSCALE": "upscale",
    "THUMBNAIL_PADDING": "padding",
    "THUMBNAIL_PADDING_COLOR": "padding_color",
    "THUMBNAIL_BLUR": "blur",
}

#: Where Python's parser ends a line (not at a form feed or the other ends str.splitlines knows).
LINE_END = re.compile(r"\r\n|\r|\n")

#: Each library's package, which is also its INSTALLED_APPS entry.
PYTHON_PREFIXES = {"sorl.thumbnail": SORL, "easy_thumbnails": EASY}
GET_THUMBNAILER = "easy_thumbnails.files.get_thumbnailer"
#: The model fields' replacements, as a migration (which imports ``models``) writes them.
MIGRATION_FIELDS = {"ImageField": "models.ImageField", "FileField": "models.FileField"}
#: The directory Django keeps an app's migrations in.
MIGRATIONS = "migrations"


def is_migration(path: str) -> bool:
    """Whether ``path`` is a module in an app's ``migrations`` directory."""
    return MIGRATIONS in PurePath(path).parts[:-1]


def is_oscar_app(name: object) -> bool:
    """Whether an ``INSTALLED_APPS`` entry is django-oscar's (``"oscar.config.Shop"``...)."""
    return isinstance(name, str) and (name == "oscar" or name.startswith("oscar."))


def python_value(value: Any) -> str:
    """``value`` written as Python, strings in double quotes as ruff and black write them."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def python_library(dotted: str) -> str | None:
    for prefix, library in PYTHON_PREFIXES.items():
        if dotted == prefix or dotted.startswith(prefix + "."):
            return library
    return None


def _name_feature(library: str, dotted: str) -> str:
    """The SUPPORT feature of a name or of the module it is in ("other name" if neither)."""
    while dotted and dotted not in PYTHON_PREFIXES:
        if (library, dotted) in SUPPORT:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return "other name"


def guess_python_library(text: str, default: str) -> str:
    """The library a Python module's THUMBNAIL_* settings belong to."""
    easy = ("easy_thumbnails", "THUMBNAIL_ALIASES", "get_thumbnailer")
    if any(word in text for word in easy):
        return EASY
    if "sorl" in text:
        return SORL
    return default


def scan_python(path: str, text: str, default_library: str = SORL) -> list[Finding]:
    """The findings of one Python module (models, views, settings, migrations...).

    Raises :class:`ScanError` when the text cannot be read: it does not parse,
    or it nests deeper than Python's parser or this scanner's walk can go (an
    expression 5,000 levels deep parses on some Pythons and not on others).
    A leading byte-order mark is skipped, as Python skips it in a file.
    """
    text = text.removeprefix("\ufeff")
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ScanError(f"not valid Python: {exc.msg} (line {exc.lineno})") from exc
    except ValueError as exc:  # null bytes, before Python 3.12
        raise ScanError(f"not valid Python: {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        # The parser's own limits: "too complex to parse" is a MemoryError.
        raise ScanError("nested too deeply for Python's parser") from exc
    scanner = _PythonScanner(path, text, guess_python_library(text, default_library))
    try:
        scanner.visit(tree)
    except RecursionError as exc:
        raise ScanError("nested too deeply to scan") from exc
    scanner.finish()
    return sorted(scanner.findings, key=lambda finding: finding.line)


class _Source:
    """A module's text by the places ``ast`` gives: lines, and UTF-8 byte columns.

    ``ast.get_source_segment`` splits the whole text into lines on every call,
    which made a module with many findings take time in the square of its
    length; this splits it once, and encodes a line only when a segment
    needs it.
    """

    def __init__(self, text: str) -> None:
        self.lines: list[str] = []
        start = 0
        for end in LINE_END.finditer(text):
            self.lines.append(text[start : end.end()])
            start = end.end()
        self.lines.append(text[start:])
        self.encoded: dict[int, bytes] = {}

    def line(self, index: int) -> bytes:
        if index not in self.encoded:
            self.encoded[index] = self.lines[index].encode()
        return self.encoded[index]

    def segment(self, node: ast.AST) -> str:
        """The source of ``node``, as ``ast.get_source_segment`` gives it ("" if unknown)."""
        first = getattr(node, "lineno", None)
        last = getattr(node, "end_lineno", None)
        start = getattr(node, "col_offset", None)
        end = getattr(node, "end_col_offset", None)
        if first is None or last is None or start is None or end is None:
            return ""
        if first == last:
            return self.line(first - 1)[start:end].decode()
        return "".join(
            [
                self.line(first - 1)[start:].decode(),
                *self.lines[first : last - 1],
                self.line(last - 1)[:end].decode(),
            ]
        )


class _PythonScanner(ast.NodeVisitor):
    def __init__(self, path: str, text: str, settings_library: str) -> None:
        self.path = path
        self.migration = is_migration(path)
        self.source = _Source(text)
        self.settings_library = settings_library
        #: Local names bound to sorl/easy objects: name -> dotted name.
        self.names: dict[str, str] = {}
        self.findings: list[Finding] = []
        #: get_thumbnailer() calls already reported as part of a larger expression.
        self.seen: set[ast.Call] = set()
        #: The first Oscar entry of INSTALLED_APPS, and whether OSCAR_THUMBNAILER is set.
        self.oscar_app: ast.Constant | None = None
        self.oscar_thumbnailer = False

    def finish(self) -> None:
        """Findings about the module as a whole: Oscar installed with sorl-thumbnail's default."""
        if self.oscar_app is not None and not self.oscar_thumbnailer:
            replacement = f'OSCAR_THUMBNAILER = "{OSCAR_THUMBNAILER}"'
            node = self.oscar_app
            self.add(node, OSCAR, "oscar in INSTALLED_APPS", self.segment(node), replacement)

    def segment(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def add(
        self,
        node: ast.AST,
        library: str,
        feature: str,
        code: str,
        replacement: str = "",
        advice: str | None = None,
    ) -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(
            judged(self.path, line, library, (feature,), code, replacement, advice)
        )

    # imports

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        library = python_library(module)
        if library is None or node.level:
            return
        code = self.segment(node).splitlines()[0]
        if self.migration:
            for alias in node.names:
                self.names[alias.asname or alias.name] = f"{module}.{alias.name}"
            self.add(node, library, "import in a migration", code)
            return
        for alias in node.names:
            dotted = f"{module}.{alias.name}"
            self.names[alias.asname or alias.name] = dotted
            feature = _name_feature(library, dotted)
            new = PYTHON_REPLACEMENTS.get(dotted)
            replacement = OXIMG_IMPORTS[new] if new else ""
            if new and alias.asname:
                replacement += f" as {alias.asname}"
            self.add(node, library, feature, code, replacement)

    def visit_Import(self, node: ast.Import) -> None:
        """``import sorl.thumbnail.fields``: a finding, and the name it binds followed."""
        for alias in node.names:
            library = python_library(alias.name)
            if library:
                root = alias.asname or alias.name.split(".")[0]
                self.names[root] = alias.name if alias.asname else root
                feature = "import in a migration" if self.migration else "import"
                self.add(node, library, feature, self.segment(node).splitlines()[0])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """A base imported under a name django-oximg's replacement does not have.

        ``class ImageInline(AdminImageMixin, admin.StackedInline)`` must name
        ``ThumbnailAdminMixin`` once the import does.
        """
        for base in node.bases:
            if not isinstance(base, ast.Name) or base.id not in self.names:
                continue
            dotted = self.names[base.id]
            new = PYTHON_REPLACEMENTS.get(dotted)
            library = python_library(dotted)
            if new and library and base.id != new and base.id == dotted.split(".")[-1]:
                feature = _name_feature(library, dotted)
                self.add(base, library, feature, self.segment(base), new)
        self.generic_visit(node)

    # references, calls

    def dotted(self, node: ast.AST) -> str | None:
        """``a.b.c`` with ``a`` resolved through this module's sorl/easy imports."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self.dotted(node)
        library = python_library(dotted) if dotted else None
        if library is None or dotted is None:
            self.generic_visit(node)
            return
        feature = _name_feature(library, dotted)
        new = PYTHON_REPLACEMENTS.get(dotted, "")
        replacement = MIGRATION_FIELDS.get(new, new)
        if self.migration and new in MIGRATION_FIELDS:
            feature = "field in a migration"
        self.add(node, library, feature, self.segment(node), replacement)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self.dotted(node.func)
        handled = True
        if dotted in ("sorl.thumbnail.get_thumbnail", "sorl.thumbnail.shortcuts.get_thumbnail"):
            self.sorl_get_thumbnail(node)
        elif dotted == "sorl.thumbnail.delete" and node.args:
            source = self.segment(node.args[0])
            self.add(node, SORL, dotted, self.segment(node), f"purge_source({source}.name)")
        elif dotted == GET_THUMBNAILER:
            if node not in self.seen:
                self.add(node, EASY, "get_thumbnailer()", self.segment(node))
        else:
            handled = False
            inner = node.func.value if isinstance(node.func, ast.Attribute) else None
            if (
                isinstance(inner, ast.Call)
                and self.dotted(inner.func) == GET_THUMBNAILER
                and node.func.attr == "get_thumbnail"  # type: ignore[attr-defined]
            ):
                self.easy_get_thumbnail(node, inner)
                self.seen.add(inner)
        for child in ast.iter_child_nodes(node):
            if not (handled and child is node.func):
                self.visit(child)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        inner = node.value
        if (
            isinstance(inner, ast.Call)
            and self.dotted(inner.func) == GET_THUMBNAILER
            and inner.args
        ):
            self.seen.add(inner)
            alias = self.segment(node.slice)
            source = self.segment(inner.args[0])
            self.add(
                node,
                EASY,
                "get_thumbnailer()[alias]",
                self.segment(node),
                f'get_thumbnail({source}, "", preset={alias})',
            )
        self.generic_visit(node)

    def sorl_get_thumbnail(self, node: ast.Call) -> None:
        parts = []
        for keyword in node.keywords:
            if keyword.arg is None:
                parts.append(Part("unknown keyword", self.segment(keyword)))
                continue
            parts.append(
                sorl_option(keyword.arg, _python_value(keyword.value), self.segment(keyword))
            )
        features = tuple(part.feature for part in parts) or ("geometry",)
        arguments = [self.segment(arg) for arg in node.args]
        arguments += rewritten(SORL, parts, python_value)
        replacement = f"get_thumbnail({', '.join(arguments)})"
        self.findings.append(
            judged(self.path, node.lineno, SORL, features, self.segment(node), replacement)
        )

    def easy_get_thumbnail(self, node: ast.Call, thumbnailer: ast.Call) -> None:
        feature = "get_thumbnailer().get_thumbnail(options)"
        options = _python_value(node.args[0]) if node.args else VARIABLE
        if not isinstance(options, dict) or not thumbnailer.args:
            self.add(node, EASY, feature, self.segment(node))
            return
        geometry, parts = easy_options(options)
        features = (feature, *(part.feature for part in parts))
        arguments = [self.segment(thumbnailer.args[0]), python_value(geometry)]
        arguments += [f"{name}={python_value(value)}" for name, value in merge(parts).items()]
        replacement = f"get_thumbnail({', '.join(arguments)})"
        self.findings.append(
            judged(self.path, node.lineno, EASY, features, self.segment(node), replacement)
        )

    # settings

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.setting(node, target.id, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            self.setting(node, node.target.id, node.value)

    def setting(self, node: ast.stmt, name: str, value: ast.expr) -> None:
        if name == "INSTALLED_APPS":
            self.installed_apps(value)
            return
        if name == "OSCAR_THUMBNAILER":
            self.oscar_thumbnailer = True
            given = _python_value(value)
            if given not in OSCAR_THUMBNAILERS.values():
                code = self.segment(node).splitlines()[0]
                ours = OSCAR_THUMBNAILERS.get(str(given), OSCAR_THUMBNAILER)
                self.add(node, OSCAR, name, code, f'OSCAR_THUMBNAILER = "{ours}"')
            return
        if not name.startswith("THUMBNAIL_"):
            return
        other = EASY if self.settings_library == SORL else SORL
        library = next(
            (lib for lib in (self.settings_library, other) if (lib, name) in SUPPORT), ""
        )
        if not library:
            return
        code = self.segment(node).splitlines()[0]
        replacement = ""
        python_value = _python_value(value)
        if name == "THUMBNAIL_QUALITY" and isinstance(python_value, int):
            replacement = f'OXIMG["QUALITY"] = {{"jpeg": {python_value}}}'
        elif name == "THUMBNAIL_FORMAT" and isinstance(python_value, str):
            fmt = FORMAT_NAMES.get(python_value.lower(), python_value.lower())
            replacement = f'OXIMG["TAG_DEFAULTS"] = {{"format": "{fmt}"}}'
        elif name == "THUMBNAIL_UPSCALE" and python_value is False:
            self.add(node, library, name, code, advice="remove it: the default is the same")
            return
        elif name in TAG_DEFAULT_SETTINGS and python_value is not VARIABLE:
            keyword = TAG_DEFAULT_SETTINGS[name]
            default = f'"{python_value}"' if isinstance(python_value, str) else python_value
            replacement = f'OXIMG["TAG_DEFAULTS"] = {{"{keyword}": {default}}}'
        elif name == "THUMBNAIL_DEBUG" and isinstance(python_value, bool):
            replacement = f'OXIMG["RAISE_TEMPLATE_ERRORS"] = {python_value}'
        elif name == "THUMBNAIL_ALIASES" and isinstance(value, ast.Dict):
            replacement = self.aliases(value)
        elif name == "THUMBNAIL_DEFAULT_OPTIONS" and isinstance(python_value, dict):
            geometry, parts = easy_options(python_value)
            replacement = (
                f'OXIMG["PRESETS"] = {{"default": "{preset_options(geometry, merge(parts))}"}}'
            )
        self.add(node, library, name, code, replacement)

    def installed_apps(self, value: ast.expr) -> None:
        for node in ast.walk(value):
            if isinstance(node, ast.Constant) and node.value in PYTHON_PREFIXES:
                library = PYTHON_PREFIXES[node.value]
                self.add(node, library, "INSTALLED_APPS", self.segment(node), '"django_oximg"')
            elif (
                isinstance(node, ast.Constant)
                and is_oscar_app(node.value)
                and (self.oscar_app is None or node.lineno < self.oscar_app.lineno)
            ):
                self.oscar_app = node

    def aliases(self, value: ast.Dict) -> str:
        """OXIMG["PRESETS"] for THUMBNAIL_ALIASES, with a finding per alias."""
        presets: dict[str, str] = {}
        for target_node, aliases_node in zip(value.keys, value.values, strict=True):
            target = _python_value(target_node) if target_node is not None else VARIABLE
            if not isinstance(target, str) or not isinstance(aliases_node, ast.Dict):
                continue
            for name_node, options_node in zip(aliases_node.keys, aliases_node.values, strict=True):
                name = _python_value(name_node) if name_node is not None else VARIABLE
                options = _python_value(options_node)
                if not isinstance(name, str) or not isinstance(options, dict):
                    continue
                preset = f"{target}.{name}" if target else name
                geometry, parts = easy_options(options)
                option_text = preset_options(geometry, merge(parts))
                features = (
                    "scoped alias" if target else "alias definition",
                    *(part.feature for part in parts),
                )
                self.findings.append(
                    judged(
                        self.path,
                        name_node.lineno if name_node is not None else 0,
                        EASY,
                        features,
                        self.segment(name_node) if name_node is not None else name,
                        f'"{preset}": "{option_text}"',
                    )
                )
                presets[preset] = option_text
        body = ", ".join(f'"{name}": "{text}"' for name, text in presets.items())
        return f'OXIMG["PRESETS"] = {{{body}}}'


def _python_value(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return VARIABLE
