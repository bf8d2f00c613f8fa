"""Shared fixtures: a fresh media root with a few drawn sources per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests import images

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
