"""System checks with stable ids (one test each in tests/test_checks.py).

* ``oximg.E001`` OXIMG is invalid (bad hex key, bad limits, ...).
* ``oximg.E002`` OXIMG has unknown keys (a typo would silently do nothing).
* ``oximg.E003`` a storage alias named in OXIMG does not exist in STORAGES.
* ``oximg.E004`` libvips is older than the minimum we support.
* ``oximg.E005`` ``COORDINATION_CACHE`` names an alias that is not in CACHES.
* ``oximg.E006`` unsigned URLs are allowed while DEBUG is off.
* ``oximg.W001`` unsigned URLs are allowed (DEBUG on: a local experiment).
* ``oximg.W002`` no KEY is set: a key derived from SECRET_KEY is used, so URLs
  change when SECRET_KEY does and cannot be shared with other imgproxy tools.
* ``oximg.W003`` a KEY is shorter than 32 bytes: a weak HMAC key.
* ``oximg.W004`` HTTP sources may reach private networks.
* ``oximg.W005`` CACHE_REDIRECT is on but the result cache cannot redirect.
* ``oximg.W006`` nothing serves the URLs the tags write: the URLconf is not
  mounted, ``WSGI_APPLICATION`` is not wrapped in ``OximgMiddleware`` and
  ``MIDDLEWARE`` has no ``OximgServeMiddleware``.
* ``oximg.E007`` ``METADATA_CACHE`` names an alias that is not in CACHES.
* ``oximg.W007`` DEBUG is off and the ``METADATA_CACHE`` is a dummy cache: every
  page render reads every source's header again.
* ``oximg.W008`` DEBUG is off and the ``METADATA_CACHE`` lives in one process
  (``LocMemCache``): each process reads every header once, and a purge reaches
  only the process that ran it.
* ``oximg.W009`` the result cache is in a relative directory, which moves with
  the server's working directory (``MEDIA_ROOT`` unset or relative).
* ``oximg.W010`` (``--deploy``) the coordination or metadata cache is Redis or
  Memcached without a socket timeout: a server that stops answering holds
  each call for as long as the operating system keeps the connection.
* ``oximg.W011`` (``--deploy``) the result cache is on local disk and a write
  there fails now (a read-only directory or mount, a full disk, a path
  through a file). Remote storages are not probed: a write would be a paid
  request, over the network; ``/health`` names their failing writes.
* ``oximg.E020`` a declared size (``RENDER_AHEAD``, a model's
  ``oximg_render_ahead``) names no file field, or is not one the tag takes.
* ``oximg.E021`` sizes are declared but no task backend can run them: Django's
  Tasks framework is missing (Django 5.2 without ``django-tasks``) or
  ``RENDER_AHEAD_BACKEND`` is not in ``TASKS``.
* ``oximg.W020`` sizes are declared and their backend runs tasks at once
  (``ImmediateBackend``): the request that saves a file renders every size.
* ``oximg.E030`` ``EXTENSIONS`` names something that cannot serve: a path
  that does not import, an object that is no ``Extension``, a name another
  option or a tag keyword has, an unknown place, a default that does not
  read back, parts a child process cannot import (lambdas).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from django_oximg import conf
from django_oximg.setting_values import InvalidExtension


def register() -> None:
    checks.register(check_settings, "django_oximg")
    checks.register(check_libvips, "django_oximg")
    checks.register(check_serving, "django_oximg", checks.Tags.urls)
    checks.register(check_caches, "django_oximg")
    checks.register(check_render_ahead, "django_oximg")
    checks.register(check_fallback_image, "django_oximg")
    checks.register(check_cache_timeouts, "django_oximg", deploy=True)
    checks.register(check_result_cache_writes, "django_oximg", deploy=True)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    try:
        raw = conf.raw_settings()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="oximg.E001")]
    unknown = conf.unknown_keys(raw)
    if unknown:
        messages.append(
            checks.Error(
                f"OXIMG has unknown keys: {', '.join(unknown)}.",
                hint="See docs/settings.md for the keys django-oximg reads.",
                id="oximg.E002",
            )
        )
    try:
        settings = conf.build_settings(raw)
    except InvalidExtension as exc:
        hint = "See docs/extensions.md for what an extension declares."
        messages.append(checks.Error(str(exc), hint=hint, id="oximg.E030"))
        return messages
    except ImproperlyConfigured as exc:
        messages.append(checks.Error(str(exc), id="oximg.E001"))
        return messages
    aliases = [settings.SOURCE_STORAGE, *settings.SOURCES.values()]
    if settings.CACHE_STORAGE:
        aliases.append(settings.CACHE_STORAGE)
    configured = getattr(django_settings, "STORAGES", {})
    for alias in aliases:
        if alias not in configured:
            messages.append(
                checks.Error(
                    f"OXIMG names the storage alias {alias!r}, which is not in STORAGES.",
                    id="oximg.E003",
                )
            )
    if settings.COORDINATION_CACHE and settings.COORDINATION_CACHE not in getattr(
        django_settings, "CACHES", {}
    ):
        messages.append(
            checks.Error(
                f"OXIMG['COORDINATION_CACHE'] is {settings.COORDINATION_CACHE!r}, "
                "which is not in CACHES.",
                id="oximg.E005",
            )
        )
    if settings.ALLOW_UNSIGNED:
        unsigned = "OXIMG['ALLOW_UNSIGNED'] is on: anyone can make this server render any image."
        if django_settings.DEBUG:
            messages.append(
                checks.Warning(unsigned, hint="Only use it for local experiments.", id="oximg.W001")
            )
        else:
            messages.append(
                checks.Error(unsigned, hint="Never outside DEBUG: sign URLs.", id="oximg.E006")
            )
    if raw.get("KEY") and any(len(key) < MIN_KEY_HEX for key in settings.KEY):
        messages.append(
            checks.Warning(
                "An OXIMG KEY is shorter than 32 bytes (64 hex digits).",
                hint='Make one with: python -c "import secrets; print(secrets.token_hex(32))"',
                id="oximg.W003",
            )
        )
    if settings.HTTP_SOURCES and settings.HTTP_ALLOW_PRIVATE_NETWORKS:
        messages.append(
            checks.Warning(
                "OXIMG['HTTP_ALLOW_PRIVATE_NETWORKS'] is on: URL sources may reach "
                "loopback and private addresses (server-side request forgery).",
                hint="Only for sources you control on a private network.",
                id="oximg.W004",
            )
        )
    if settings.CACHE_REDIRECT and not cache_can_redirect(settings):
        messages.append(
            checks.Warning(
                "OXIMG['CACHE_REDIRECT'] is on, but only an S3 result cache can redirect; "
                "hits are streamed.",
                id="oximg.W005",
            )
        )
    if not raw.get("KEY"):
        messages.append(
            checks.Warning(
                "OXIMG['KEY'] is not set: a key derived from SECRET_KEY signs URLs.",
                hint="Set KEY and SALT (hex) so URLs survive a SECRET_KEY rotation.",
                id="oximg.W002",
            )
        )
    return messages


#: 32 bytes: the HMAC-SHA256 block's worth of key that imgproxy's docs advise.
MIN_KEY_HEX = 64


def cache_can_redirect(settings: conf.OximgSettings) -> bool:
    from django.core.files.storage import InvalidStorageError

    from django_oximg import runtime, storage

    try:
        return storage.is_s3(runtime.cache_storage(settings))
    except InvalidStorageError:  # a missing storage alias is reported by oximg.E003
        return True


def check_caches(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Where source metadata and results are kept (E007, W007, W008, W009)."""
    try:
        settings = conf.build_settings(conf.raw_settings())
    except ImproperlyConfigured:  # reported by check_settings as oximg.E001
        return []
    return metadata_cache_messages(settings) + result_cache_messages(settings)


def metadata_cache_messages(settings: conf.OximgSettings) -> list[checks.CheckMessage]:
    """E007, W007, W008: the cache the template tags keep source metadata in."""
    alias = settings.METADATA_CACHE
    configured = getattr(django_settings, "CACHES", {})
    if alias not in configured:
        return [
            checks.Error(
                f"OXIMG['METADATA_CACHE'] is {alias!r}, which is not in CACHES.",
                id="oximg.E007",
            )
        ]
    if django_settings.DEBUG:
        return []
    try:
        backend = import_string(configured[alias]["BACKEND"])
    except (ImportError, KeyError):  # Django's own cache checks report a broken entry
        return []
    if issubclass(backend, DummyCache):
        return [
            checks.Warning(
                f"The metadata cache {alias!r} is a DummyCache: every page render reads "
                "the header of every source it shows again.",
                hint="Point OXIMG['METADATA_CACHE'] at a shared cache (Redis, Memcached, "
                "database or file-based).",
                id="oximg.W007",
            )
        ]
    if issubclass(backend, LocMemCache):
        return [
            checks.Warning(
                f"The metadata cache {alias!r} is a LocMemCache, private to each process: "
                "every process reads each source's header once, and a purge reaches only "
                "the process that ran it (other processes keep a remote source's old size "
                "until METADATA_CACHE_TIMEOUT).",
                hint="Point OXIMG['METADATA_CACHE'] at a shared cache (Redis, Memcached, "
                "database or file-based), or silence oximg.W008 for a single process.",
                id="oximg.W008",
            )
        ]
    return []


#: Cache backends that talk to a server, and the OPTIONS that bound a call
#: to it (connecting, and waiting for an answer): all must be set.
CLIENT_TIMEOUT_OPTIONS = {
    "django.core.cache.backends.redis.RedisCache": ("socket_connect_timeout", "socket_timeout"),
    "django_redis.cache.RedisCache": ("SOCKET_CONNECT_TIMEOUT", "SOCKET_TIMEOUT"),
    "django.core.cache.backends.memcached.PyMemcacheCache": ("connect_timeout", "timeout"),
}


def check_cache_timeouts(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W010: a coordination or metadata cache whose client may wait forever."""
    try:
        settings = conf.build_settings(conf.raw_settings())
    except ImproperlyConfigured:  # reported by check_settings as oximg.E001
        return []
    configured = getattr(django_settings, "CACHES", {})
    messages: list[checks.CheckMessage] = []
    for setting in ("COORDINATION_CACHE", "METADATA_CACHE"):
        alias = getattr(settings, setting)
        entry = configured.get(alias) if alias else None
        if not entry:  # none, or a missing alias (E005, E007)
            continue
        wanted = CLIENT_TIMEOUT_OPTIONS.get(str(entry.get("BACKEND", "")), ())
        options = entry.get("OPTIONS") or {}
        missing = [name for name in wanted if options.get(name) is None]
        if missing:
            messages.append(
                checks.Warning(
                    f"OXIMG['{setting}'] is the cache {alias!r}, whose client has no "
                    f"{' or '.join(missing)}: a server that stops answering (frozen, or "
                    "behind a network partition) holds every call to it.",
                    hint=f"Set CACHES[{alias!r}]['OPTIONS'] "
                    + ", ".join(f"{name!r}" for name in wanted)
                    + " to a second or less (docs/deployment.md, Redis).",
                    id="oximg.W010",
                )
            )
    return messages


def result_cache_messages(settings: conf.OximgSettings) -> list[checks.CheckMessage]:
    """W009: a result cache on local disk under a relative path."""
    from django.core.files.storage import FileSystemStorage, InvalidStorageError

    from django_oximg import runtime

    try:
        storage = runtime.cache_storage(settings)
    except InvalidStorageError:  # a missing storage alias is reported by oximg.E003
        return []
    if not isinstance(storage, FileSystemStorage) or os.path.isabs(storage.base_location):
        return []
    return [
        checks.Warning(
            f"The result cache is in the relative directory {storage.base_location!r}, "
            f"which moves with the server's working directory (now {storage.location}).",
            hint="Set MEDIA_ROOT to an absolute path, or OXIMG['CACHE_STORAGE'] to a "
            "storage with an absolute location.",
            id="oximg.W009",
        )
    ]


def check_result_cache_writes(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W011: a result cache on local disk that cannot be written (tried, not guessed).

    Every miss would then be rendered again, and the server says so only in
    a log line and ``/health``. Run by the deploying user, which should be
    the server's.
    """
    from django.core.files.storage import FileSystemStorage, InvalidStorageError

    from django_oximg import runtime
    from django_oximg.core.stores.disk import write_problem

    try:
        settings = conf.build_settings(conf.raw_settings())
        storage = runtime.cache_storage(settings)
    except (ImproperlyConfigured, InvalidStorageError):  # oximg.E001, oximg.E003
        return []
    if not isinstance(storage, FileSystemStorage):
        return []
    problem = write_problem(Path(storage.location))
    if problem is None:
        return []
    return [
        checks.Warning(
            f"The result cache {storage.location} cannot be written: {problem}. Every "
            "thumbnail would be rendered again on each request.",
            hint="Make the directory (or MEDIA_ROOT) writable by the user the server runs "
            "as, or point OXIMG['CACHE_STORAGE'] at a storage that is.",
            id="oximg.W011",
        )
    ]


def check_libvips(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from django_oximg.core import pipeline

    try:
        pipeline.check_libvips_version()
    except RuntimeError as exc:
        return [checks.Error(str(exc), id="oximg.E004")]
    return []


def check_fallback_image(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``oximg.E040``: a ``FALLBACK_IMAGE_*`` image the server could not send.

    It is read when the thumbnailer is built, at the first thumbnail
    request; this reads it as that does, so ``manage.py check`` says so first.
    """
    from django_oximg import runtime

    try:
        settings = conf.get_settings()
    except ImproperlyConfigured:
        return []  # oximg.E001 reports it
    try:
        runtime.read_fallback(settings)
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="oximg.E040")]
    return []


def check_serving(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when the tags' URLs would 404: no URLconf mount and no middleware.

    The Django middleware is an entry of ``MIDDLEWARE``. The WSGI
    middleware wraps the WSGI application, outside Django, so it is
    looked for in ``WSGI_APPLICATION`` (imported, as ``runserver`` imports
    it), through the usual attributes by which middlewares keep the
    application they wrap, and among its module's globals (for a function
    that calls it). When that cannot be known (no
    ``WSGI_APPLICATION``, or importing it fails) there is no warning: a
    wrong warning would teach people to silence the check.
    """
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("oximg:serve", kwargs={"path": "x"})
    except NoReverseMatch:
        pass
    except (ImportError, ImproperlyConfigured):  # a broken URLconf: Django's own checks say so
        return []
    else:
        return []
    if SERVE_MIDDLEWARE in (getattr(django_settings, "MIDDLEWARE", None) or ()):
        return []
    name = getattr(django_settings, "WSGI_APPLICATION", None)
    if not name:
        return []
    try:
        application = import_string(name)
    except Exception:  # the project's own module: whatever it raises, nothing can be told
        return []
    module = sys.modules.get(name.rpartition(".")[0])
    # A wrapper function keeps the middleware in a global of its module.
    candidates = [application, *(vars(module).values() if module else ())]
    if any(wraps_oximg_middleware(candidate) for candidate in candidates):
        return []
    return [
        checks.Warning(
            "The thumbnail URLs the tags write will answer 404: django_oximg.urls is not "
            f"in the URLconf, {name} is not wrapped in OximgMiddleware and MIDDLEWARE "
            "has no OximgServeMiddleware.",
            hint='Add path("img/", include("django_oximg.urls")) to the URLconf, or wrap '
            "the application in wsgi.py: application = OximgMiddleware(get_wsgi_application()), "
            f'or put "{SERVE_MIDDLEWARE}" first in MIDDLEWARE. '
            "If something else answers OXIMG['URL_PREFIX'] (another WSGI file, a proxy), "
            "add oximg.W006 to SILENCED_SYSTEM_CHECKS.",
            id="oximg.W006",
        )
    ]


#: The MIDDLEWARE entry that serves the tags' URLs (django_oximg/django_middleware.py).
SERVE_MIDDLEWARE = "django_oximg.django_middleware.OximgServeMiddleware"

#: Attributes under which WSGI middlewares keep the application they wrap
#: (ours and Sentry's ``app``, WhiteNoise's ``application``, ...).
WRAPPED_ATTRIBUTES = ("app", "application", "wsgi_app", "__wrapped__")

#: How many wrappers deep the middleware is looked for.
MAX_WRAPPERS = 16


def wraps_oximg_middleware(application: Any) -> bool:
    """Whether ``application`` is, or wraps, the thumbnail middleware."""
    from django_oximg.core.serving.middleware import ThumbnailMiddleware

    current = application
    for _ in range(MAX_WRAPPERS):
        if isinstance(current, ThumbnailMiddleware):
            return True
        inner = next(
            (getattr(current, name) for name in WRAPPED_ATTRIBUTES if hasattr(current, name)),
            None,
        )
        if inner is None or inner is current:
            return False
        current = inner
    return False


def check_render_ahead(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E020, E021, W020: the declared sizes, and the task backend that renders them."""
    from django_oximg import declared_sizes as declared

    try:
        settings = conf.get_settings()
    except ImproperlyConfigured:  # reported by check_settings as oximg.E001
        return []
    try:
        found = declared.declarations()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="oximg.E020")]
    messages: list[checks.CheckMessage] = [
        checks.Error(problem, id="oximg.E020")
        for target, sizes in found.items()
        for problem in declared_size_problems(target, sizes, settings)
    ]
    if found:
        messages += render_ahead_backend_problems(settings)
    return messages


def declared_size_problems(
    target: str, sizes: tuple[Any, ...], settings: conf.OximgSettings
) -> list[str]:
    """What is wrong with ``target`` (``app_label.Model.field``) and its sizes."""
    from django.apps import apps
    from django.core.exceptions import FieldDoesNotExist
    from django.db.models import FileField

    from django_oximg.arguments import ThumbnailError, scoped_preset, tag_options

    label, _, field_name = target.rpartition(".")
    try:
        model = apps.get_model(label)
        field = model._meta.get_field(field_name)
    except (LookupError, ValueError, FieldDoesNotExist) as exc:
        return [f"Sizes are declared for {target}, which is not a model's field: {exc}"]
    if not isinstance(field, FileField):
        return [f"Sizes are declared for {target}, which is not a FileField."]
    problems = []
    names = [size.name for size in sizes if size.name]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"{target} declares two sizes named {name!r}.")
    for size in sizes:
        kwargs = size.kwargs
        try:
            geometry = size.geometry or ("" if kwargs.get("preset") else "1")
            tag_options(geometry, kwargs, settings.EXTENSIONS)
        except ThumbnailError as exc:
            problems.append(f"{target}: {size.text!r}: {exc}")
            continue
        preset = kwargs.get("preset")
        if preset and scoped_preset(str(preset), target, settings.PRESETS) not in settings.PRESETS:
            problems.append(f"{target}: {size.text!r}: unknown preset {preset!r}")
    return problems


def render_ahead_backend_problems(settings: conf.OximgSettings) -> list[checks.CheckMessage]:
    """E021 when no task backend can run the render-ahead tasks, W020 when it runs them at once."""
    alias = settings.RENDER_AHEAD_BACKEND
    try:
        from django_oximg.render_ahead.tasks import task_backends

        backend = task_backends[alias]
    except ImportError:
        return [
            checks.Error(
                "Sizes are declared to be rendered ahead, but Django's Tasks framework is "
                "not installed.",
                hint="On Django 5.2, pip install django-tasks (Django 6 has django.tasks).",
                id="oximg.E021",
            )
        ]
    except Exception as exc:  # the framework's InvalidTaskBackend(Error)
        return [
            checks.Error(
                f"OXIMG['RENDER_AHEAD_BACKEND'] {alias!r} is not a task backend: {exc}",
                hint="Name an alias of the TASKS setting.",
                id="oximg.E021",
            )
        ]
    if type(backend).__name__ == "ImmediateBackend":
        return [
            checks.Warning(
                f"The task backend {alias!r} runs tasks at once: the request that saves a "
                "file renders all its declared sizes before it answers.",
                hint="Configure a backend with a worker (e.g. django-tasks-db's "
                "DatabaseBackend and its db_worker command) in TASKS.",
                id="oximg.W020",
            )
        ]
    return []
