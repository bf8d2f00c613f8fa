"""docs/settings.md, written from the field docstrings of :class:`~django_oximg.conf.OximgSettings`.

``python -m django_oximg.settings_reference > docs/settings.md`` prints it; a test keeps
the committed page equal to it. Apart from ``conf.py``, which reads the
settings, since writing their reference is a job of its own.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import sys

from django_oximg.conf import OximgSettings, default_of


def settings_reference() -> str:
    """The settings reference in Markdown, from the field docstrings of ``conf.py``.

    Reads only the source of :class:`~django_oximg.conf.OximgSettings` and its
    defaults, never Django's settings, so ``python -m django_oximg.settings_reference``
    works anywhere.
    ``docs/settings.md`` is this text; a test keeps the two equal.
    """
    lines = [
        "# Settings reference",
        "",
        "All keys of the `OXIMG` dict in `settings.py`. Generated from",
        "`django_oximg/conf.py`: `python -m django_oximg.settings_reference > docs/settings.md`.",
        "",
    ]
    for name, doc in field_docs().items():
        lines += [f"## `{name}`", "", f"Default: `{default_of(name)!r}`", "", doc, ""]
    return "\n".join(lines)


def field_docs() -> dict[str, str]:
    """Each field's docstring (the string literal after it), in declaration order."""
    tree = ast.parse(inspect.getsource(OximgSettings))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = ""
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                text = inspect.cleandoc(str(following.value.value))
            docs[node.target.id] = text
    return docs


if __name__ == "__main__":  # pragma: no cover - exercised by a subprocess test
    sys.stdout.write(settings_reference())
