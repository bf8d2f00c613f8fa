"""The one place ``settings.OXIMG`` is read, validated and defaulted.

Everything else asks :func:`get_settings` for a frozen :class:`OximgSettings`.
It is computed on first use (never at import time) and dropped when a test
changes settings (``setting_changed``), so nothing captures stale values.

The docstring of each field below is the settings reference: the docs page is
generated from it (``docs/settings.md``, ``python -m django_oximg.conf``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.crypto import salted_hmac

from django_oximg.core.signing import pairs_from_hex

MIB = 1024 * 1024


@dataclass(frozen=True)
class OximgSettings:
    """django-oximg's settings: the keys of the ``OXIMG`` dict in settings.py."""

    KEY: tuple[str, ...] = ()
    """Hex-encoded HMAC key, or a list of keys for rotation (the first signs,
    all verify). Empty: a key is derived from ``SECRET_KEY``, so signing is on
    without configuration. Set it explicitly to share URLs with imgproxy
    tools or with other sites."""

    SALT: tuple[str, ...] = ()
    """Hex-encoded salt, or a list paired one-to-one with ``KEY``."""

    SIGNATURE_SIZE: int = 32
    """Bytes of the HMAC digest kept in the signature (1..32), as imgproxy's
    ``IMGPROXY_SIGNATURE_SIZE``."""

    ALLOW_UNSIGNED: bool = False
    """Accept ``insecure``/``unsafe`` in place of a signature. For local
    experiments only: anyone could then make the server render anything.
    A system check warns when it is on."""

    URL_PREFIX: str = "/img/"
    """Where the WSGI middleware answers, and the prefix the template tag uses
    when the URLconf is not mounted (when it is, its mount point wins)."""

    SOURCE_STORAGE: str = "default"
    """Alias in ``STORAGES`` holding the source images."""

    SOURCES: Mapping[str, str] = field(default_factory=dict)
    """More named sources: ``{"archive": "s3photos"}`` makes
    ``plain/archive:path/x.jpg`` read ``path/x.jpg`` from the ``s3photos``
    storage."""

    CACHE_STORAGE: str = ""
    """Alias in ``STORAGES`` for the result cache. Empty: a
    ``FileSystemStorage`` under ``MEDIA_ROOT/oximg``."""

    WORKERS: int = 0
    """Render threads per process. 0: the CPUs this process may use
    (affinity and cgroup quota)."""

    QUEUE_SIZE: int = 0
    """Jobs allowed to wait for a worker; one more is answered 429.
    0: ``WORKERS`` x 16."""

    QUEUE_TIMEOUT: float = 5.0
    """Seconds a job may wait for a worker and memory before a 503."""

    RENDER_TIMEOUT: float = 10.0
    """Seconds a render may run inside libvips before it is killed (503)."""

    MEMORY_BUDGET: int = 0
    """Bytes of estimated peak render memory per process. 0: the smaller of
    512 MiB and a quarter of the cgroup memory limit."""

    MAX_SRC_RESOLUTION: int = 50_000_000
    """Largest source in pixels, all rendered frames summed (422 above)."""

    MAX_SRC_FILE_SIZE: int = 50 * MIB
    """Largest source in bytes (422 above)."""

    MAX_ANIMATION_FRAMES: int = 100
    """Animations with more frames are rendered as their first frame only."""

    MAX_RESULT_DIMENSION: int = 8192
    """Largest output width or height; larger requests are clamped."""

    QUALITY: Mapping[str, int] = field(
        default_factory=lambda: {"jpeg": 80, "webp": 75, "avif": 65}
    )
    """Default encoder quality per output format (merged over the defaults)."""

    AUTO_FORMAT: bool = True
    """When a URL names no format, choose AVIF or WebP from the request's
    ``Accept`` header (and send ``Vary: Accept``). Off: the source's format."""

    PRESETS: Mapping[str, str] = field(default_factory=dict)
    """Named option sets, e.g. ``{"card": "rs:fill:400:300/q:70"}``, used as
    ``pr:card`` in URLs or ``preset="card"`` in the tag. A preset named
    ``default`` applies to every request."""

    CACHE_CONTROL: str = "public, max-age=31536000, immutable"
    """Cache-Control of successful responses. A signed URL's bytes never
    change (a changed source gets a new URL), so forever is safe."""

    LIBVIPS_CONCURRENCY: int = 1
    """libvips threads per render. 1 with ``WORKERS`` = CPUs keeps every core
    busy on separate requests without oversubscription; see docs/operations.md."""

    METADATA_CACHE_TIMEOUT: int = 60 * 60 * 24 * 30
    """Seconds the template tag keeps a source's size and version in Django's
    cache (the key contains the storage's modification data)."""


#: Keys whose value may be given as one string or a list of strings.
LIST_KEYS = ("KEY", "SALT")


def derived_hex(purpose: str) -> str:
    """A key or salt derived from ``SECRET_KEY``, so signing is never off by default."""
    return salted_hmac(
        f"django_oximg.{purpose}", "v1", secret=django_settings.SECRET_KEY, algorithm="sha256"
    ).hexdigest()


def unknown_keys(raw: Mapping[str, Any]) -> list[str]:
    names = {f.name for f in dataclasses.fields(OximgSettings)}
    return sorted(set(raw) - names)


def build_settings(raw: Mapping[str, Any]) -> OximgSettings:
    """Validate ``raw`` (the OXIMG dict) into settings; raise ImproperlyConfigured."""
    known = {f.name: f for f in dataclasses.fields(OximgSettings)}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in known:
            continue  # reported by the system check oximg.E002, not fatal here
        if name in LIST_KEYS:
            value = (value,) if isinstance(value, str) else tuple(value)
        values[name] = value
    if "QUALITY" in values:
        values["QUALITY"] = {**OximgSettings().QUALITY, **values["QUALITY"]}
    if not values.get("KEY"):
        values["KEY"] = (derived_hex("key"),)
        values["SALT"] = (derived_hex("salt"),)
    result = OximgSettings(**values)
    _validate(result)
    return result


def _validate(conf: OximgSettings) -> None:
    try:
        pairs_from_hex(conf.KEY, conf.SALT)
    except ValueError as exc:
        raise ImproperlyConfigured(f"OXIMG: KEY and SALT: {exc}.") from exc
    if not 1 <= conf.SIGNATURE_SIZE <= 32:
        raise ImproperlyConfigured("OXIMG: SIGNATURE_SIZE must be between 1 and 32.")
    if not conf.URL_PREFIX.startswith("/") or not conf.URL_PREFIX.endswith("/"):
        raise ImproperlyConfigured("OXIMG: URL_PREFIX must start and end with '/'.")
    for name in ("WORKERS", "QUEUE_SIZE", "MEMORY_BUDGET", "MAX_SRC_RESOLUTION",
                 "MAX_SRC_FILE_SIZE", "MAX_ANIMATION_FRAMES", "MAX_RESULT_DIMENSION"):
        if getattr(conf, name) < 0:
            raise ImproperlyConfigured(f"OXIMG: {name} must not be negative.")
    for name in ("QUEUE_TIMEOUT", "RENDER_TIMEOUT"):
        if getattr(conf, name) <= 0:
            raise ImproperlyConfigured(f"OXIMG: {name} must be positive.")


def raw_settings() -> Mapping[str, Any]:
    value = getattr(django_settings, "OXIMG", {})
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured("OXIMG must be a dict.")
    return value


@functools.cache
def get_settings() -> OximgSettings:
    """The validated settings of this process (cached; see :func:`reset`)."""
    return build_settings(raw_settings())


def reset() -> None:
    """Forget the cached settings (called on ``setting_changed``)."""
    get_settings.cache_clear()


def settings_reference() -> str:
    """The settings reference in Markdown, from the field docstrings above."""
    import ast
    import inspect

    source = inspect.getsource(OximgSettings)
    tree = ast.parse(source)
    lines = ["# Settings reference", "", "All keys of the `OXIMG` dict in `settings.py`.", ""]
    body = tree.body[0].body  # type: ignore[attr-defined]
    defaults = OximgSettings.__dataclass_fields__
    for node, following in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
            doc = ""
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                doc = inspect.cleandoc(str(following.value.value))
            default = defaults[name].default
            if default is dataclasses.MISSING:
                factory = defaults[name].default_factory
                default = factory() if factory is not dataclasses.MISSING else None
            lines += [f"## `{name}`", "", f"Default: `{default!r}`", "", doc, ""]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(settings_reference())
