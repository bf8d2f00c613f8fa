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
from html.parser import HTMLParser
from pathlib import Path

import pytest

#: The documentation site is built by MkDocs, without Django: built on one Django. The
#: wsgi.py snippet below runs Django, so it runs on both.
mkdocs_only = pytest.mark.one_django(reason="MkDocs builds the site; no Django is involved")

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
    """Where MkDocs writes ``page``: ``x.md`` -> ``x.html`` (``use_directory_urls: false``)."""
    return site / f"{page.stem}.html"


@mkdocs_only
def test_every_docs_page_is_built(site: Path) -> None:
    pages = sorted(DOCS_DIR.glob("*.md"))
    assert pages
    missing = [page.name for page in pages if not built_page(site, page).is_file()]
    assert missing == []


@mkdocs_only
def test_pages_load_nothing_from_other_sites(site: Path) -> None:
    """The docs work offline (``make docs-serve`` on a train): no CDN scripts or fonts."""
    offenders = {
        str(path.relative_to(site)): EXTERNAL_ASSET.findall(path.read_text())
        for path in site.rglob("*.html")
    }
    assert {name: tags for name, tags in offenders.items() if tags} == {}


class Links(HTMLParser):
    """The ``href`` and ``src`` of a built page's elements (not text in its code samples)."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.targets += [value for name, value in attrs if name in ("href", "src") and value]


def links_of(page: Path) -> list[str]:
    parser = Links()
    parser.feed(page.read_text())
    return parser.targets


@mkdocs_only
def test_every_link_between_built_pages_opens_a_file_from_disk(site: Path) -> None:
    """Opened as file:// (no server), a link to a directory shows a folder listing.

    404.html is left out: only a server shows it, for any path, so its links are absolute.
    """
    broken = {}
    for page in site.rglob("*.html"):
        if page.name == "404.html":
            continue
        for target in links_of(page):
            path = target.split("#")[0].split("?")[0]
            if not path or re.match(r"[a-z]+:|//", path):  # the same page, another site
                continue
            if not (page.parent / path).is_file():
                broken.setdefault(str(page.relative_to(site)), []).append(target)
    assert broken == {}
    assert "django.html" in links_of(site / "index.html")


@mkdocs_only
def test_make_docs_installs_only_what_the_docs_build_needs() -> None:
    """The docs' group (MkDocs) and the package with Django, which docs/settings.md needs."""
    dry_run = subprocess.run(
        ["make", "--dry-run", "--always-make", "docs"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=True,
    ).stdout
    installs = [line for line in dry_run.splitlines() if "pip install" in line]
    assert any("--group docs" in line for line in installs), installs
    assert not any("--group test" in line or "[" in line for line in installs), installs
    assert "mkdocs build --strict" in dry_run


def test_readme_links_to_existing_docs_pages() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert linked
    assert [link for link in linked if not (REPO_ROOT / link).is_file()] == []


#: The pages that show the middleware's wsgi.py.
WSGI_PAGES = ("README.md", "docs/django.md", "docs/index.md", "docs/deployment.md")


def test_the_wsgi_snippet_is_a_whole_working_file(tmp_path: Path) -> None:
    """Pasted as it is into a project's wsgi.py, it gives the middleware around Django."""
    snippets = {
        page: re.findall(
            r"```python\n(# mysite/wsgi\.py\n.*?)```", (REPO_ROOT / page).read_text(), re.S
        )
        for page in WSGI_PAGES
    }
    assert all(len(found) == 1 for found in snippets.values()), snippets
    [snippet] = {found[0] for found in snippets.values()}
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "__init__.py").write_text("")
    (site / "wsgi.py").write_text(snippet)
    (site / "settings.py").write_text(
        'SECRET_KEY = "docs"\n'
        'INSTALLED_APPS = ["django_oximg"]\n'
        f'OXIMG = {{"KEY": "{"ab" * 32}", "SALT": "{"cd" * 16}"}}\n'
    )
    check = (
        "from mysite.wsgi import application; from django_oximg.wsgi import OximgMiddleware; "
        "assert isinstance(application, OximgMiddleware), application"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no DJANGO_SETTINGS_MODULE
    result = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
