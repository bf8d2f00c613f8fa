"""The documentation site builds cleanly from docs/ with mkdocs.yml.

``mkdocs build --strict`` turns every warning into a failure: a broken link
between pages, a nav entry naming a missing page, a page left out of the nav
(``validation.omitted_files``). The build runs in a subprocess into a
temporary directory, as ``make docs`` runs it, so the checked-in tree is not
touched. (That docs/settings.md matches the code is tests/test_conf.py's job.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS_DIR = REPO_ROOT / "docs"

#: Bound on one build; it takes about a second.
BUILD_TIMEOUT = 120

#: Tags that would make a built page load something from another site.
EXTERNAL_ASSET = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with --strict; the build's output is shown when it fails."""
    site_dir = tmp_path_factory.mktemp("docs-site")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(REPO_ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site_dir),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return site_dir


def built_page(site: Path, page: Path) -> Path:
    """Where MkDocs writes ``page`` (directory URLs: ``x.md`` -> ``x/index.html``)."""
    if page.name == "index.md":
        return site / "index.html"
    return site / page.stem / "index.html"


def test_every_docs_page_is_built(site: Path) -> None:
    pages = sorted(DOCS_DIR.glob("*.md"))
    assert pages
    missing = [page.name for page in pages if not built_page(site, page).is_file()]
    assert missing == []


def test_pages_load_nothing_from_other_sites(site: Path) -> None:
    """The docs work offline (``make docs-serve`` on a train): no CDN scripts or fonts."""
    offenders = {
        str(path.relative_to(site)): EXTERNAL_ASSET.findall(path.read_text())
        for path in site.rglob("*.html")
    }
    assert {name: tags for name, tags in offenders.items() if tags} == {}


def test_readme_links_to_existing_docs_pages() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert linked
    assert [link for link in linked if not (REPO_ROOT / link).is_file()] == []
