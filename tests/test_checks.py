"""System checks: one test per id, through Django's registry and the functions."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import pyvips
from django.core import checks

from django_oximg import checks as oximg_checks
from tests.constants import KEY, SALT
from tests.services import small_disk

#: Task backends of Django's Tasks framework (django.tasks on Django 6, the backport on 5.2).
TASKS_MODULE = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
DUMMY_BACKEND = f"{TASKS_MODULE}.backends.dummy.DummyBackend"
IMMEDIATE_BACKEND = f"{TASKS_MODULE}.backends.immediate.ImmediateBackend"


def oximg_messages() -> list[checks.CheckMessage]:
    """What ``manage.py check`` reports for this app (Django's own checks left out)."""
    return [
        m for m in checks.run_checks() if str(m.id).startswith("oximg.") and not m.is_silenced()
    ]


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return sorted(str(m.id) for m in messages)


def test_a_clean_configuration_has_no_messages(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "PRESETS": {"card": "rs:fill:300:200"}}
    assert oximg_messages() == []
    assert oximg_checks.check_settings() == []
    assert oximg_checks.check_libvips() == []


@pytest.mark.parametrize(
    "raw",
    [
        {"KEY": "zz", "SALT": SALT},
        {"KEY": KEY, "SALT": SALT, "SIGNATURE_SIZE": 0},
        {"KEY": KEY, "SALT": SALT, "WORKERS": -1},
        {"KEY": KEY, "SALT": SALT, "WORKERS": "2"},
        {"KEY": KEY, "SALT": SALT, "SOURCES": ["x"]},
        {"KEY": KEY, "SALT": SALT, "PRESETS": {"p": "bogus:1"}},
    ],
)
def test_e001_invalid_values(settings: Any, raw: dict[str, Any]) -> None:
    settings.OXIMG = raw
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E001"]
    assert messages[0].level == checks.ERROR
    assert "OXIMG" in messages[0].msg


@pytest.mark.parametrize(
    "extensions",
    [
        ["tests.site_extensions.NOPE"],
        ["tests.site_extensions.NOT_AN_EXTENSION"],
        ["tests.site_extensions.LAMBDA_STEP"],
        ["tests.site_extensions.TAG_KEYWORD"],
        ["tests.site_extensions.SEPIA", "tests.site_extensions.SEPIA_V2"],
    ],
    ids=["import", "not-an-extension", "lambda", "tag-keyword", "twice"],
)
def test_e030_an_extension_that_cannot_serve(settings: Any, extensions: list[str]) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "EXTENSIONS": extensions}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E030"]
    assert messages[0].msg.startswith("OXIMG: EXTENSIONS: ")
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "EXTENSIONS": ["tests.site_extensions.SEPIA"]}
    assert oximg_messages() == []


def test_e001_oximg_is_not_a_dict(settings: Any) -> None:
    settings.OXIMG = "KEY=abc"
    assert ids(oximg_messages()) == ["oximg.E001"]


def test_e002_unknown_keys(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "WORKRES": 4, "QUALTY": {}}
    messages = oximg_checks.check_settings()
    assert ids(messages) == ["oximg.E002"]
    assert "QUALTY, WORKRES" in messages[0].msg
    assert ids(oximg_messages()) == ["oximg.E002"]


def test_e002_is_reported_along_with_e001(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "WORKRES": 4, "WORKERS": -1}
    assert ids(oximg_checks.check_settings()) == ["oximg.E001", "oximg.E002"]


@pytest.mark.parametrize(
    ("raw", "alias"),
    [
        ({"SOURCE_STORAGE": "photos"}, "photos"),
        ({"SOURCES": {"archive": "s3archive"}}, "s3archive"),
        ({"CACHE_STORAGE": "thumbs"}, "thumbs"),
    ],
)
def test_e003_missing_storage_alias(settings: Any, raw: dict[str, Any], alias: str) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, **raw}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E003"]
    assert repr(alias) in messages[0].msg


def test_e003_not_raised_for_configured_aliases(settings: Any) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    settings.OXIMG = {
        "KEY": KEY,
        "SALT": SALT,
        "SOURCES": {"old": "archive"},
        "CACHE_STORAGE": "archive",
    }
    assert oximg_messages() == []


def test_e005_coordination_cache_alias_missing(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "COORDINATION_CACHE": "redis"}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E005"]
    assert "'redis'" in messages[0].msg
    settings.CACHES = {**settings.CACHES, "redis": settings.CACHES["default"]}
    assert oximg_messages() == []


def test_e004_libvips_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real comparison runs against a libvips that reports 8.17.9."""
    old_version = (8, 17, 9)
    monkeypatch.setattr(pyvips, "version", lambda part: old_version[part])
    messages = oximg_checks.check_libvips()
    assert ids(messages) == ["oximg.E004"]
    assert "8.17.9" in messages[0].msg
    assert ids(oximg_messages()) == ["oximg.E004"]


def test_e004_not_raised_for_the_installed_libvips() -> None:
    assert oximg_checks.check_libvips() == []


def test_e040_a_fallback_image_that_cannot_be_read(settings: Any, tmp_path: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "FALLBACK_IMAGE_PATH": str(tmp_path / "gone.png")}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E040"]
    assert "FALLBACK_IMAGE_PATH cannot be read" in messages[0].msg
    (tmp_path / "gone.png").write_bytes(pyvips.Image.black(4, 4).pngsave_buffer())
    assert oximg_messages() == []


def test_w001_allow_unsigned_with_debug(settings: Any) -> None:
    settings.DEBUG = True
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "ALLOW_UNSIGNED": True}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.W001"]
    assert messages[0].level == checks.WARNING


def test_e006_allow_unsigned_without_debug(settings: Any) -> None:
    settings.DEBUG = False
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "ALLOW_UNSIGNED": True}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E006"]
    assert messages[0].level == checks.ERROR


def test_w003_weak_key(settings: Any) -> None:
    settings.OXIMG = {"KEY": "ab" * 16, "SALT": SALT}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.W003"]
    settings.OXIMG = {"KEY": [KEY, "ab" * 8], "SALT": [SALT, SALT]}
    assert ids(oximg_messages()) == ["oximg.W003"]


def test_w004_http_sources_on_private_networks(settings: Any) -> None:
    settings.OXIMG = {
        "KEY": KEY,
        "SALT": SALT,
        "HTTP_SOURCES": ["https://images.example.com/"],
        "HTTP_ALLOW_PRIVATE_NETWORKS": True,
    }
    assert ids(oximg_messages()) == ["oximg.W004"]
    settings.OXIMG = {**settings.OXIMG, "HTTP_ALLOW_PRIVATE_NETWORKS": False}
    assert oximg_messages() == []


def test_w005_cache_redirect_without_s3(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "CACHE_REDIRECT": True}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.W005"]


def test_w002_no_key(settings: Any) -> None:
    settings.OXIMG = {"WORKERS": 2}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.W002"]
    assert messages[0].level == checks.WARNING


def test_w002_also_without_any_oximg_setting(settings: Any) -> None:
    del settings.OXIMG
    assert ids(oximg_messages()) == ["oximg.W002"]


def test_w006_nothing_serves_the_tags_urls(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.WSGI_APPLICATION = "tests.wsgi_plain.application"
    messages = oximg_messages()
    assert ids(messages) == ["oximg.W006"]
    assert "tests.wsgi_plain.application is not wrapped in OximgMiddleware" in messages[0].msg
    assert ids(oximg_checks.check_serving()) == ["oximg.W006"]


@pytest.mark.parametrize(
    ("urlconf", "application"),
    [
        ("tests.urls", "tests.wsgi_plain.application"),  # the URLconf is mounted
        ("tests.urls_empty", "tests.wsgi_wrapped.application"),  # inside another middleware
        ("tests.urls_empty", "tests.e2e_app.application"),  # called by a function
        ("tests.urls_empty", None),  # no WSGI_APPLICATION: it cannot be told
        ("tests.urls_empty", "tests.no_such_module.application"),  # nor when it cannot be imported
    ],
)
def test_w006_not_raised_when_something_may_serve_them(
    settings: Any, urlconf: str, application: str | None
) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    settings.ROOT_URLCONF = urlconf
    settings.WSGI_APPLICATION = application
    assert oximg_checks.check_serving() == []


def test_w006_not_raised_with_the_middleware_entry(settings: Any) -> None:
    """django_oximg/django_middleware.py's entry in MIDDLEWARE serves the tags' URLs."""
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    settings.ROOT_URLCONF = "tests.urls_empty"
    settings.WSGI_APPLICATION = "tests.wsgi_plain.application"
    settings.MIDDLEWARE = ["django_oximg.django_middleware.OximgServeMiddleware"]
    assert oximg_checks.check_serving() == []
    settings.MIDDLEWARE = []
    assert ids(oximg_checks.check_serving()) == ["oximg.W006"]


# -- the metadata cache and the result cache's place ------------------------------------

LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
DUMMY = {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
FILES = {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": "/tmp/x"}


def test_e007_metadata_cache_alias_missing(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "METADATA_CACHE": "shared"}
    messages = oximg_messages()
    assert ids(messages) == ["oximg.E007"]
    assert "'shared'" in messages[0].msg
    settings.CACHES = {**settings.CACHES, "shared": FILES}
    assert oximg_messages() == []


@pytest.mark.parametrize("debug", [False, True])
def test_w007_dummy_metadata_cache_without_debug(settings: Any, debug: bool) -> None:
    settings.DEBUG = debug
    settings.CACHES = {"default": LOCMEM, "none": DUMMY}
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "METADATA_CACHE": "none"}
    messages = oximg_messages()
    assert ids(messages) == ([] if debug else ["oximg.W007"])
    if not debug:
        assert "'none'" in messages[0].msg


@pytest.mark.parametrize(
    ("caches", "debug", "expected"),
    [
        ({"default": LOCMEM}, False, ["oximg.W008"]),
        ({"default": LOCMEM}, True, []),
        ({"default": FILES}, False, []),
    ],
)
def test_w008_per_process_metadata_cache_without_debug(
    settings: Any, caches: dict[str, Any], debug: bool, expected: list[str]
) -> None:
    settings.SILENCED_SYSTEM_CHECKS = []  # the suite's settings silence it (one process)
    settings.DEBUG = debug
    settings.CACHES = caches
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    assert ids(oximg_messages()) == expected


@pytest.mark.parametrize(
    ("media_root", "storage_location", "expected"),
    [
        ("", None, ["oximg.W009"]),  # a startproject site: ./oximg under the server's cwd
        ("var/media", None, ["oximg.W009"]),
        ("/srv/media", None, []),
        ("/srv/media", "thumbs", ["oximg.W009"]),
        ("", "/srv/thumbs", []),
    ],
)
def test_w009_result_cache_in_a_relative_directory(
    settings: Any, media_root: str, storage_location: str | None, expected: list[str]
) -> None:
    settings.MEDIA_ROOT = media_root
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    if storage_location is not None:
        settings.STORAGES = {
            **settings.STORAGES,
            "thumbs": {
                "BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": storage_location},
            },
        }
        settings.OXIMG = {**settings.OXIMG, "CACHE_STORAGE": "thumbs"}
    messages = oximg_messages()
    assert ids(messages) == expected
    if expected:
        assert "relative directory" in messages[0].msg


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"testapp.Nothing.scan": ["100"]}, "not a model's field"),
        ({"testapp.Document.nothing": ["100"]}, "has no field named 'nothing'"),
        ({"testapp.Photo.title": ["100"]}, "not a FileField"),
        ({"testapp.Document.scan": ["100 crop=sideways"]}, "crop"),
        ({"testapp.Document.scan": ["100 colour=red"]}, "unknown thumbnail keyword"),
        ({"testapp.Document.scan": ["nosuchpreset"]}, "unknown preset"),
        ({"testapp.Document.scan": ["100 'unclosed"]}, "closing quotation"),
    ],
)
def test_e020_a_bad_declared_size(settings: Any, declaration: Any, message: str) -> None:
    settings.TASKS = {"default": {"BACKEND": DUMMY_BACKEND}}
    settings.OXIMG = {**settings.OXIMG, "RENDER_AHEAD": declaration}
    found = oximg_checks.check_render_ahead()
    assert [m.id for m in found] == ["oximg.E020"], found
    assert re.search(message, found[0].msg), found[0].msg


def test_e021_w020_not_raised_without_declared_sizes(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": IMMEDIATE_BACKEND}}
    assert oximg_checks.check_render_ahead() == []


def test_w020_immediate_task_backend_and_e021_missing_one(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": DUMMY_BACKEND}}
    settings.OXIMG = {**settings.OXIMG, "RENDER_AHEAD": {"testapp.Document.scan": ["100"]}}
    assert oximg_checks.check_render_ahead() == []
    settings.TASKS = {"default": {"BACKEND": IMMEDIATE_BACKEND}}
    assert [m.id for m in oximg_checks.check_render_ahead()] == ["oximg.W020"]
    settings.OXIMG = {**settings.OXIMG, "RENDER_AHEAD_BACKEND": "elsewhere"}
    assert [m.id for m in oximg_checks.check_render_ahead()] == ["oximg.E021"]
    assert all(isinstance(m, checks.CheckMessage) for m in oximg_checks.check_render_ahead())


REDIS = "django.core.cache.backends.redis.RedisCache"


def deploy_messages() -> list[checks.CheckMessage]:
    """What ``manage.py check --deploy`` adds for this app."""
    return [
        m
        for m in checks.run_checks(include_deployment_checks=True)
        if str(m.id).startswith("oximg.") and not m.is_silenced()
    ]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, ["oximg.W010", "oximg.W010"]),
        ({"socket_timeout": 0.5}, ["oximg.W010", "oximg.W010"]),
        ({"socket_timeout": 0.5, "socket_connect_timeout": 0.5}, []),
    ],
)
def test_w010_redis_caches_without_socket_timeouts(
    settings: Any, options: dict[str, Any], expected: list[str]
) -> None:
    """Only with --deploy: a frozen Redis would hold every call for as long as TCP lets it."""
    redis = {"BACKEND": REDIS, "LOCATION": "redis://127.0.0.1:1/0", "OPTIONS": options}
    settings.CACHES = {"default": LOCMEM, "leases": redis, "meta": redis}
    settings.OXIMG = {
        "KEY": KEY,
        "SALT": SALT,
        "COORDINATION_CACHE": "leases",
        "METADATA_CACHE": "meta",
    }
    assert ids(oximg_messages()) == []  # a deployment check only
    messages = deploy_messages()
    assert ids(messages) == expected
    if expected:
        assert "socket_connect_timeout" in messages[0].msg
        assert "COORDINATION_CACHE" in messages[0].msg and "METADATA_CACHE" in messages[1].msg


def test_w010_leaves_caches_without_a_server_alone(settings: Any) -> None:
    settings.CACHES = {"default": LOCMEM, "files": FILES}
    settings.OXIMG = {"KEY": KEY, "SALT": SALT, "COORDINATION_CACHE": "files"}
    assert [m for m in deploy_messages() if m.id == "oximg.W010"] == []


def w011(messages: list[checks.CheckMessage]) -> list[checks.CheckMessage]:
    return [m for m in messages if m.id == "oximg.W011"]


def test_w011_a_result_cache_that_cannot_be_written(settings: Any, tmp_path: Path) -> None:
    """Tried by a write, which fails for root too: the cache's path runs through a file."""
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    settings.MEDIA_ROOT = str(tmp_path / "media")  # not made yet: its parent is tried
    assert w011(deploy_messages()) == []
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind

    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    settings.MEDIA_ROOT = str(blocker / "media")
    assert w011(oximg_messages()) == []  # a deployment check only
    [message] = w011(deploy_messages())
    assert f"{blocker / 'media' / 'oximg'} cannot be written: {blocker} is not a directory" in (
        message.msg
    )


def test_w011_a_result_cache_on_a_full_disk(settings: Any) -> None:
    settings.OXIMG = {"KEY": KEY, "SALT": SALT}
    with small_disk() as disk:
        (disk.path / "oximg").mkdir()
        settings.MEDIA_ROOT = str(disk.path)
        assert w011(deploy_messages()) == []
        disk.fill()
        [message] = w011(deploy_messages())
        assert "No space left on device" in message.msg
