"""Shared fixtures: a fresh media root with a few drawn sources per test, and core
thumbnailers over temporary directories.

A module changes what the core fixtures build by overriding one of them:
``source_dir`` for other sources, ``sources`` or ``cache`` for other stores
(counting ones, say), ``make`` for other defaults (a ``functools.partial`` of
this ``make``); ``thumbnailer`` is ``make()`` with the keywords of an
indirect parameter, if any.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_django.fixtures as pytest_django_fixtures
from hypothesis import settings as hypothesis_settings

from django_oximg.core import defaults
from django_oximg.core.limits.executor import Executor
from django_oximg.core.options.signing import URLSigner
from django_oximg.core.serving.coordination import Coordinator
from django_oximg.core.serving.handler import (
    DEFAULT_SOURCE_READS,
    Thumbnailer,
    ThumbnailerConfig,
)
from django_oximg.core.serving.staging import Limits
from django_oximg.core.stores.disk import FileSystemCacheStore, FileSystemSourceStore
from django_oximg.core.stores.protocols import CacheStore, SourceStore
from django_oximg.core.stores.reads import SourceReads
from tests import images
from tests.constants import MIB, SIGNER

# No example may fail for taking long: the machine is shared and noisy, and
# wall-clock limits are measured in bench/, not asserted here.
hypothesis_settings.register_profile("oximg", deadline=None)
hypothesis_settings.load_profile("oximg")


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    """A MEDIA_ROOT of its own holding sources under ``photos/``."""
    root = tmp_path / "media"
    (root / "photos").mkdir(parents=True)
    (root / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
    (root / "photos" / "alpha.png").write_bytes(images.png_with_alpha())
    (root / "photos" / "anim.gif").write_bytes(images.animated_gif())
    settings.MEDIA_ROOT = str(root)
    settings.STORAGES = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root)},
        },
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    return root


# -- core thumbnailers ------------------------------------------------------------------


@pytest.fixture
def admin_site_settings(settings: Any) -> None:
    """The middleware and context processors Django's admin needs (tests/settings.py
    has none, so everything else runs without them)."""
    settings.MIDDLEWARE = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ]
    # No sessions table needed: the session lives in a signed cookie.
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    settings.MESSAGE_STORAGE = "django.contrib.messages.storage.cookie.CookieStorage"
    settings.TEMPLATES = [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ]
            },
        }
    ]


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    """Sources under ``photos/``, as the ``media`` fixture draws them, without Django."""
    root = tmp_path / "sources"
    (root / "photos").mkdir(parents=True)
    (root / "photos" / "landscape.jpg").write_bytes(images.jpeg(640, 480))
    (root / "photos" / "alpha.png").write_bytes(images.png_with_alpha())
    (root / "photos" / "anim.gif").write_bytes(images.animated_gif())
    return root


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def sources(source_dir: Path) -> SourceStore:
    """The source store :func:`make` reads from (under the alias "")."""
    return FileSystemSourceStore(source_dir)


@pytest.fixture
def cache(cache_dir: Path) -> CacheStore:
    """The result cache :func:`make` writes to."""
    return FileSystemCacheStore(cache_dir)


@pytest.fixture
def executors() -> Iterator[list[Executor]]:
    """Executors made by a test, shut down (and their threads joined) after it."""
    made: list[Executor] = []
    yield made
    for executor in made:
        executor.shutdown(wait=True)


@pytest.fixture
def make(
    sources: SourceStore, cache: CacheStore, executors: list[Executor]
) -> Callable[..., Thumbnailer]:
    """Build a core thumbnailer over ``sources`` and ``cache``, signed with SIGNER.

    ``workers``, ``queue_size``, ``queue_timeout`` and ``budget`` make its
    executor, unless ``executor`` is given; ``source`` replaces the "" store,
    ``stores`` all of them, ``cache`` the result cache; ``render``,
    ``max_src_resolution``, ``max_src_file_size`` and ``render_timeout`` make
    its :class:`Limits`, ``source_reads`` and ``source_timeout`` its
    :class:`SourceReads`; the other keywords go to :class:`ThumbnailerConfig`.
    """

    def build(
        *,
        workers: int = 2,
        queue_size: int = 16,
        queue_timeout: float = 5.0,
        budget: int = 512 * MIB,
        executor: Executor | None = None,
        source: SourceStore | None = None,
        stores: Mapping[str, SourceStore] | None = None,
        cache: CacheStore | None = None,
        signer: URLSigner = SIGNER,
        clock: Callable[[], float] | None = None,
        coordinator: Coordinator | None = None,
        **config: Any,
    ) -> Thumbnailer:
        if executor is None:
            executor = Executor(workers, queue_size, queue_timeout, budget)
        executors.append(executor)
        extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
        limits = {name: config.pop(name) for name in Limits._fields if name in config}
        reads = SourceReads(
            config.pop("source_reads", DEFAULT_SOURCE_READS),
            config.pop("source_timeout", defaults.SOURCE_TIMEOUT),
        )
        return Thumbnailer(
            ThumbnailerConfig(**config),
            signer,
            stores
            if stores is not None
            else {"": source if source is not None else default_sources},
            cache if cache is not None else default_cache,
            executor,
            coordinator=coordinator,
            limits=Limits(**limits),
            reads=reads,
            **extra,
        )

    default_sources, default_cache = sources, cache
    return build


@pytest.fixture
def thumbnailer(make: Callable[..., Thumbnailer], request: pytest.FixtureRequest) -> Thumbnailer:
    """``make()``; an indirect parameter gives its keywords (a dict)."""
    return make(**getattr(request, "param", {}))


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_fd_leak() -> Iterator[None]:
    """Fail a test that leaves file descriptors open (sorl's ``same_open_fd_count``)."""
    before = open_fd_count()
    yield
    assert open_fd_count() <= before


@pytest.fixture(autouse=True, scope="session")
def _no_connection_closing_on_responses() -> Iterator[None]:
    """Do what Django's test Client does around each request, for the whole session.

    Many tests call the WSGI handler or close Django responses themselves;
    closing a response fires ``request_finished``, whose
    ``close_old_connections`` touches the database connection, which
    pytest-django forbids in tests without database access once any earlier
    test has opened one. Django's test Client connects the receiver again after
    each request (by its module's name for it), so that name is pointed at a
    no-op for the session too; otherwise a test closing a response the Client
    returned would fail or pass depending on which tests ran before it.
    """
    import django.test.client
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    django.test.client.close_old_connections = _leave_connections_alone  # type: ignore[assignment]
    yield
    django.test.client.close_old_connections = close_old_connections
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _leave_connections_alone(**kwargs: Any) -> None:
    """Stands in for ``close_old_connections`` while the tests run (see above)."""


@pytest.fixture(scope="module")
def connections_closed_afterwards(django_db_blocker: Any) -> Iterator[None]:
    """Leave no database connection open for the tests that run after a module's.

    pytest-django runs database tests first and keeps their connection; a
    later test without database access that closes a response would then
    fail in ``request_finished -> close_old_connections``. A module of
    database tests asks for it with ``pytest.mark.usefixtures``.
    """
    from django.db import connections

    yield
    with django_db_blocker.unblock():
        connections.close_all()


# -- tests that run on one Django only -----------------------------------------------------

#: pytest-django's fixtures a test asks for when it needs Django (its autouse
#: ones, which start with "_", and the database blocker they use, come with
#: every test and do nothing for one that asks for none of these).
DJANGO_FIXTURES = frozenset(
    name for name in pytest_django_fixtures.__all__ if not name.startswith("_")
) | {"mailoutbox", "django_isolated_apps", "media", "connections_closed_afterwards"}

#: pytest-django's marks that give a test Django's database, URLs or templates.
DJANGO_MARKS = frozenset({"django_db", "urls", "ignore_template_errors"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test whose ``django_free`` or ``one_django`` mark could leave something untested.

    `make test-newest` deselects both marks, so a mistaken one would skip a
    test on Django's newest release without a word; the LTS run fails it
    instead. ``django_free`` must be the module's own mark (``pytestmark``:
    tests/test_core_isolation.py then imports the module without Django to
    prove it), and none of its tests may ask for a Django fixture or mark;
    ``one_django`` must say why.
    """
    if item.get_closest_marker("django_free") is not None:
        module_marks = getattr(getattr(item, "module", None), "pytestmark", [])
        if not isinstance(module_marks, list):
            module_marks = [module_marks]
        if "django_free" not in {mark.name for mark in module_marks}:
            pytest.fail("django_free is a module's mark (pytestmark), not a test's", pytrace=False)
        # A test's own parameter may share a fixture's name (``settings``, say).
        parameters = getattr(item, "callspec", None)
        own = set(parameters.params) if parameters is not None else set()
        uses = (DJANGO_FIXTURES.intersection(getattr(item, "fixturenames", ())) - own) | {
            mark.name for mark in item.iter_markers() if mark.name in DJANGO_MARKS
        }
        if uses:
            pytest.fail(f"marked django_free but uses {sorted(uses)}", pytrace=False)
    one_django = item.get_closest_marker("one_django")
    if one_django is not None and not one_django.kwargs.get("reason"):
        pytest.fail("one_django needs a reason=", pytrace=False)
