"""The distributions a release uploads: they build, pass ``twine check``, and work installed.

The sdist and the wheel are built once per session with ``python -m build
--no-isolation`` (the backend, hatchling, comes with the test group, so the
build needs no network). The wheel is then installed, without its
dependencies, into a fresh virtualenv whose only other packages are the test
environment's, reached through a ``.pth`` file: django-oximg itself can only
come from the wheel there, while Django, pyvips and the rest need no second
download. A subprocess of that virtualenv renders a thumbnail through
``OximgMiddleware``, as a site that ran ``pip install django-oximg`` would.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import django
import pytest

from tests.services import missing

#: The subject is the distributions, built once from the sources: the Django installed
#: does not change them (test_the_classifiers_name_this_django_and_this_python runs on
#: both Djangos, since the Django it names is the one installed).
built_once = pytest.mark.one_django(
    reason="the distributions do not depend on the Django installed"
)

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Bound on building both distributions (a few seconds) and on one subprocess.
BUILD_TIMEOUT = 300


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel of this checkout, built from the sdist as PyPI's are."""
    for module in ("build", "hatchling", "twine"):
        if importlib.util.find_spec(module) is None:
            missing(f"{module} is not installed (it comes with the test group's 'package' group)")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def only(directory: Path, pattern: str) -> Path:
    [path] = directory.glob(pattern)
    return path


@built_once
def test_twine_check_passes(dist: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2


@built_once
def test_the_wheel_holds_the_package_and_the_licence(dist: Path) -> None:
    with zipfile.ZipFile(only(dist, "*.whl")) as wheel:
        names = set(wheel.namelist())
        [metadata_name] = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    assert {
        "django_oximg/py.typed",
        "django_oximg/templatetags/oximg.py",
        "django_oximg/contrib/wagtail/templatetags/oximg_wagtail.py",
        "django_oximg/contrib/oscar.py",
        "django_oximg/management/commands/oximg_migration_scan.py",
        "django_oximg/core/pipeline/render.py",
        # The focal point widget's static files (django_oximg/fields.py).
        "django_oximg/static/django_oximg/focal_point.js",
        "django_oximg/static/django_oximg/focal_point.css",
    } <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if name.split("/")[0] in ("tests", "bench", "docs")]
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert set(metadata.get_all("Project-URL")) == {
        "Homepage, https://github.com/django-oximg/django-oximg",
        "Documentation, https://github.com/django-oximg/django-oximg/tree/main/docs",
        "Changelog, https://github.com/django-oximg/django-oximg/blob/main/CHANGELOG.md",
        "Issues, https://github.com/django-oximg/django-oximg/issues",
    }


def test_the_classifiers_name_this_django_and_this_python(dist: Path) -> None:
    """Each environment `make test` runs in is one the package says it supports."""
    with zipfile.ZipFile(only(dist, "*.whl")) as wheel:
        [metadata_name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        classifiers = Parser().parsestr(wheel.read(metadata_name).decode()).get_all("Classifier")
    django_version = ".".join(map(str, django.VERSION[:2]))
    python_version = ".".join(map(str, sys.version_info[:2]))
    assert f"Framework :: Django :: {django_version}" in classifiers
    assert f"Programming Language :: Python :: {python_version}" in classifiers


@built_once
def test_the_sdist_holds_what_a_packager_needs(dist: Path) -> None:
    with tarfile.open(only(dist, "*.tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= names
    assert "tests/test_packaging.py" in names
    # Nothing a test run or a build leaves behind (.gitignore keeps it out).
    leftovers = (".venv", ".hypothesis", ".pytest_cache", "dist/", "build/", "example_project/var")
    assert not [name for name in names if name.startswith(leftovers)]


#: A site that installed the wheel: its settings, its URLconf, and a script that
#: draws a source, asks get_thumbnail() for a URL and fetches it through
#: OximgMiddleware. It prints where django_oximg was imported from and the answer.
SITE_SETTINGS = """
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "wheel-test"
INSTALLED_APPS = ["django_oximg"]
ROOT_URLCONF = "site_urls"
MEDIA_ROOT = HERE / "media"
STORAGES = {{
    "default": {{
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {{"location": str(HERE / "media")}},
    }},
    "oximg-cache": {{
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {{"location": str(HERE / "cache")}},
    }},
}}
OXIMG = {{"KEY": "{key}", "SALT": "{salt}", "CACHE_STORAGE": "oximg-cache"}}
"""

SITE_URLS = """
from django.urls import include, path

urlpatterns = [path("img/", include("django_oximg.urls"))]
"""

SITE_SCRIPT = """
import io, json, os, sys
import django

os.environ["DJANGO_SETTINGS_MODULE"] = "site_settings"
django.setup()

import pyvips
from django.core.files.storage import default_storage
from django.core.wsgi import get_wsgi_application
import django_oximg
from django_oximg.thumbnails import get_thumbnail
from django_oximg.wsgi import OximgMiddleware

source = pyvips.Image.black(400, 300).new_from_image([200, 120, 40])
default_storage.save("photo.jpg", io.BytesIO(source.jpegsave_buffer()))
thumbnail = get_thumbnail("photo.jpg", "80x60", crop="center", format="png")
application = OximgMiddleware(get_wsgi_application())
answer = {{}}

def start_response(status, headers, exc_info=None):
    answer["status"] = status
    answer["headers"] = dict(headers)

path = thumbnail.url
environ = {{
    "REQUEST_METHOD": "GET", "PATH_INFO": path, "RAW_URI": path, "SERVER_NAME": "testserver",
    "SERVER_PORT": "80", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(),
    "wsgi.errors": sys.stderr,
}}
body = b"".join(application(environ, start_response))
image = pyvips.Image.new_from_buffer(body, "")
print(json.dumps({{
    "module": django_oximg.__file__,
    "status": answer["status"],
    "type": answer["headers"]["Content-Type"],
    "size": [image.width, image.height],
    "tag_size": [thumbnail.width, thumbnail.height],
}}))
"""


@pytest.fixture(scope="session")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel, seeing the test environment's dependencies."""
    venv = tmp_path_factory.mktemp("wheel-venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        timeout=BUILD_TIMEOUT,
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(only(dist, "*.whl")),
        ],
        check=True,
        timeout=BUILD_TIMEOUT,
    )
    site_packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=BUILD_TIMEOUT,
    ).stdout.strip()
    # Only a site directory's .pth files are read, so the test environment's
    # editable install (a .pth naming this checkout) does not come along.
    (Path(site_packages) / "test_environment.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    return python


@built_once
def test_the_installed_wheel_serves_a_thumbnail(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "site_settings.py").write_text(
        textwrap.dedent(SITE_SETTINGS.format(key="ab" * 32, salt="cd" * 16))
    )
    (tmp_path / "site_urls.py").write_text(textwrap.dedent(SITE_URLS))
    (tmp_path / "site_script.py").write_text(textwrap.dedent(SITE_SCRIPT.format()))
    result = subprocess.run(
        [str(installed), "site_script.py"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    # django_oximg came from the wheel, not from this checkout.
    assert Path(answer["module"]).is_relative_to(installed.parent.parent)
    assert not Path(answer["module"]).is_relative_to(REPO_ROOT)
    assert answer["status"] == "200 OK"
    assert answer["type"] == "image/png"
    assert answer["size"] == answer["tag_size"] == [80, 60]
