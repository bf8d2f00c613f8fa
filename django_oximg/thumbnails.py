"""Build signed thumbnail URLs with their exact output size, from Python or templates.

:func:`get_thumbnail` is what ``{% thumbnail %}`` calls, and what views or
serializers may call directly (sorl-thumbnail has the same function). It never
processes an image: it reads the first kilobytes of the source once to know
its size (:mod:`django_oximg.core.headers`), keeps that in the
``METADATA_CACHE``, and computes the output size with the same geometry code
the pipeline executes.

A page of thumbnails runs this module once per tag, so it stays cheap: it
imports no image library (libvips is loaded only for a source whose header
the pure-Python reader cannot answer), and what depends only on the tag's
arguments and the settings (the options a URL expands to, the mount point)
is computed once per process.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from django.core.cache import BaseCache, caches
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage
from django.urls import (
    NoReverseMatch,
    URLResolver,
    get_resolver,
    get_script_prefix,
    get_urlconf,
    reverse,
)

from django_oximg import conf, runtime
from django_oximg.core import headers
from django_oximg.core.geometry import plan_geometry
from django_oximg.core.info import DEFAULT_BLURHASH, INFO_PREFIX
from django_oximg.core.options import (
    FORMAT_NAMES,
    OUTPUT_FORMATS,
    Gravity,
    Options,
    build_path,
    parse_path,
)
from django_oximg.core.stores import FileSystemSourceStore, SourceStore

#: sorl-thumbnail's crop keywords -> imgproxy gravity types.
CROP_GRAVITY = {
    "center": "ce",
    "top": "no",
    "bottom": "so",
    "left": "we",
    "right": "ea",
    "top left": "nowe",
    "left top": "nowe",
    "top right": "noea",
    "right top": "noea",
    "bottom left": "sowe",
    "left bottom": "sowe",
    "bottom right": "soea",
    "right bottom": "soea",
    "smart": "sm",
}

GEOMETRY = re.compile(r"(?P<width>[0-9]{1,6})?(?:x(?P<height>[0-9]{1,6}))?")
PERCENT_CROP = re.compile(r"(?P<x>[0-9]{1,3})%\s+(?P<y>[0-9]{1,3})%")

#: Tag keywords, besides ``upscale``, that are plain numbers.
NUMBER_KEYWORDS = {"quality": int, "blur": float, "sharpen": float, "dpr": float}

#: How templates may spell ``upscale`` as text.
BOOLEAN_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

#: Source names made only of these go into URLs as ``plain/`` (readable);
#: anything else is base64-encoded, so no percent-encoding can be altered
#: by servers that decode the path.
PLAIN_NAME = re.compile(r"^[A-Za-z0-9._~/-]+$")

#: Hex digits of a URL's version token (:func:`url_version`).
URL_VERSION_LENGTH = 16

#: Tag keywords that are not processing options.
TAG_ONLY = frozenset({"preset"})


class ThumbnailError(ValueError):
    """A thumbnail request that cannot be built (bad geometry, unknown keyword, ...)."""


@dataclass(frozen=True)
class SourceMetadata:
    """What the tag needs of a source: its header size and a content version."""

    width: int
    height: int
    orientation: int
    version: str


@dataclass(frozen=True)
class Thumbnail:
    """A signed thumbnail URL and the size the image will have."""

    url: str
    width: int
    height: int
    #: Output format, or "auto" when negotiated per request.
    format: str

    def __str__(self) -> str:
        return self.url


def get_thumbnail(source: Any, geometry: str, **kwargs: Any) -> Thumbnail:
    """A :class:`Thumbnail` for ``source`` (a FieldFile or a storage name).

    ``geometry`` is "WxH", "W" or "xH" ("" with a ``preset`` that gives the
    size). Keywords: ``crop`` (center, top, bottom, left, right, "top left",
    ..., smart, "x% y%"), ``format`` (jpeg, png, webp, avif, gif, auto;
    default: the preset's format, else the source's), ``quality``,
    ``upscale``, ``preset``, ``blur``, ``sharpen``, ``dpr``, ``background``
    ("RRGGBB"), ``options`` (raw imgproxy options, e.g. "rot:90/fl:1:0"). The
    preset and ``options`` apply first, so the tag's own keywords win over
    them, as later options do in a URL.

    Raises :class:`ThumbnailError` for bad arguments and the core's
    ``OximgError`` subclasses for a source that is missing or not an image.
    """
    return thumbnail_for(source_name(source), geometry, kwargs)


def thumbnail_for(
    source_string: str,
    geometry: str,
    kwargs: dict[str, Any],
    metadata: SourceMetadata | None = None,
) -> Thumbnail:
    """:func:`get_thumbnail` for a source string, with its metadata if already read.

    Responsive images make a dozen sizes of one source; passing the
    metadata read once spares a cache read (and a stat) per size.

    The same arguments for the same version of a source always give the
    same thumbnail, so the result is kept (:data:`_thumbnails`): a page
    rendered again costs, per tag, the source's version check and a lookup.
    """
    meta = metadata or source_metadata(source_string)
    prefix = url_prefix()
    arguments = arguments_key(geometry, kwargs)
    if arguments is None:
        return make_thumbnail(source_string, geometry, kwargs, meta, prefix)
    return _thumbnails.get(
        (source_string, meta, prefix, arguments),
        lambda: make_thumbnail(source_string, geometry, kwargs, meta, prefix),
    )


def make_thumbnail(
    source_string: str,
    geometry: str,
    kwargs: dict[str, Any],
    meta: SourceMetadata,
    url_prefix: str,
) -> Thumbnail:
    """The signed URL and the size, computed (see :func:`thumbnail_for`)."""
    request = url_request(source_string, geometry, kwargs)
    version = url_version(meta.version, request.effective, source_string)
    options = replace(request.options, cachebuster=version)
    path = request.prefix + build_path(options, source_string, encode=encoding_for(source_string))
    plan = plan_geometry(
        meta.width,
        meta.height,
        request.effective,
        orientation=meta.orientation,
        max_result_dimension=conf.get_settings().MAX_RESULT_DIMENSION,
    )
    signed = runtime.get_signer().signed_path(path)
    return Thumbnail(
        url=url_prefix + signed[1:],
        width=plan.width,
        height=plan.height,
        format=request.effective.format or "auto",
    )


@dataclass(frozen=True)
class UrlRequest:
    """What a tag's arguments ask of a source, before its version is known."""

    #: The preset and raw ``options`` segments, which go first.
    prefix: str
    #: The tag's own options, the output format filled in when nothing chose one.
    options: Options
    #: What the server will apply: presets and raw options expanded, no cachebuster.
    effective: Options


Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class SettingsMemo(Generic[Key, Value]):
    """Values computed from the settings, kept until the settings change.

    The template tags compute the same things for every tag of every page
    (the options a tag's arguments expand to, the mount point, the URL of
    a source at a size). Kept here, each is computed once per process; a
    new settings object (a changed setting, a test) empties the memo.
    Bounded: when ``size`` entries are held it starts again, so arguments
    that vary without end (a geometry from a query string) cannot grow it.
    Thread-safe as Python's dict operations are; two threads may compute
    the same value, and both get an equal one.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[Key, Value] = {}
        self._settings: conf.OximgSettings | None = None
        self._lock = threading.Lock()

    def peek(self, key: Key) -> Value | None:
        settings = conf.get_settings()
        if self._settings is not settings:
            with self._lock:
                self._values, self._settings = {}, settings
        return self._values.get(key)

    def put(self, key: Key, value: Value) -> None:
        if len(self._values) >= self.size:
            self._values = {}
        self._values[key] = value

    def discard(self, key: Key) -> None:
        self._values.pop(key, None)

    def get(self, key: Key, compute: Callable[[], Value]) -> Value:
        found = self.peek(key)
        if found is None:
            found = compute()
            self.put(key, found)
        return found


#: Tag arguments as a hashable key: the geometry, then (name, type, value)
#: for each keyword (the type, because ``True == 1`` but ``crop=True`` and
#: ``crop=1`` are different requests).
ArgumentsKey = tuple[Hashable, ...]

#: Thumbnails by source, metadata, mount point and arguments.
_thumbnails: SettingsMemo[tuple[str, SourceMetadata, str, ArgumentsKey], Thumbnail] = SettingsMemo(
    8192
)

#: Tag arguments (and the format a source's extension gives) to what they ask.
_url_requests: SettingsMemo[tuple[ArgumentsKey, str], UrlRequest] = SettingsMemo(1024)


def arguments_key(geometry: str, kwargs: Mapping[str, Any]) -> ArgumentsKey | None:
    """The tag's arguments as a key, or None when a value is not hashable."""
    key = (geometry, *((name, type(value), value) for name, value in sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def url_request(source: str, geometry: str, kwargs: dict[str, Any]) -> UrlRequest:
    """What the tag's arguments ask of ``source`` (computed once per arguments).

    The answer does not depend on the source's name, only on the format to
    keep when neither the tag nor a preset names one: the source's own, by
    its extension ("" when the tag asked for "auto", which negotiates).
    """
    fallback = "" if kwargs.get("format") else source_format(source)
    arguments = arguments_key(geometry, kwargs)
    if arguments is None:
        return _url_request(geometry, kwargs, fallback)
    return _url_requests.get(
        (arguments, fallback), lambda: _url_request(geometry, kwargs, fallback)
    )


def _url_request(geometry: str, kwargs: dict[str, Any], fallback_format: str) -> UrlRequest:
    options, prefix = tag_options(geometry, kwargs), option_prefix(kwargs)
    presets = conf.get_settings().PRESETS
    effective = effective_options(prefix, options, PLACEHOLDER_SOURCE, presets)
    if not effective.format and fallback_format:
        options = replace(options, format=fallback_format)
        effective = effective_options(prefix, options, PLACEHOLDER_SOURCE, presets)
    return UrlRequest(prefix, options, replace(effective, cachebuster=""))


#: The source name the options are parsed back with; options never depend on it.
PLACEHOLDER_SOURCE = "x"


def option_prefix(kwargs: dict[str, Any]) -> str:
    """The preset and raw ``options`` segments, which go before the tag's own."""
    segments = [f"pr:{kwargs['preset']}"] if kwargs.get("preset") else []
    if kwargs.get("options"):
        segments.append(str(kwargs["options"]).strip("/"))
    return "".join(f"/{segment}" for segment in segments)


def effective_options(
    prefix: str, options: Options, source: str, presets: Mapping[str, str]
) -> Options:
    """The options a server will apply for the URL of ``options`` after ``prefix``.

    The path is parsed back exactly as the server will parse it, so the size
    is computed from what will be served, presets and raw options included.
    """
    path = prefix + build_path(options, source, encode=encoding_for(source))
    return parse_path(path, presets).options


def url_version(source_version: str, effective: Options, source: str) -> str:
    """The URL's cachebuster: it changes whenever the image the URL stands for does.

    Thumbnails are cached for a year by browsers and CDNs, which no purge
    reaches, so a URL must never come to mean other bytes. The token covers
    the source's content (its storage version), every setting that changes
    output bytes (:func:`django_oximg.conf.output_fingerprint`) and the
    options the URL expands to (presets included, which the URL names only
    as ``pr:name``). Unchanged, it stays the same across processes and
    deploys, so caches stay warm.
    """
    if effective.cachebuster:
        effective = replace(effective, cachebuster="")
    canonical = build_path(effective, source)
    text = "\n".join((source_version, conf.get_output_fingerprint(), canonical))
    return hashlib.sha256(text.encode()).hexdigest()[:URL_VERSION_LENGTH]


def source_name(source: Any) -> str:
    """The source string for a FieldFile (with its source alias) or a name."""
    if isinstance(source, File):
        name = str(source.name or "")
        storage = getattr(source, "storage", None)
        if not name:
            raise ThumbnailError("the file field is empty")
        alias = storage_alias(storage) if storage is not None else ""
        return f"{alias}:{name}" if alias else name
    name = str(source or "")
    if not name:
        raise ThumbnailError("no source given")
    return name


def storage_alias(storage: Storage) -> str:
    """The OXIMG source alias serving ``storage`` ("" for the default source).

    Looked up once per storage object (a model field keeps one).
    """
    return _storage_aliases.get(storage, lambda: _storage_alias(storage))


_storage_aliases: SettingsMemo[Storage, str] = SettingsMemo(256)


def _storage_alias(storage: Storage) -> str:
    for alias, candidate in runtime.source_storages(conf.get_settings()).items():
        if candidate is storage or _same_location(candidate, storage):
            return alias
    raise ThumbnailError(
        f"the file's storage {type(storage).__name__} is not an OXIMG source; "
        "add its STORAGES alias to OXIMG['SOURCES']"
    )


def _same_location(a: Storage, b: Storage) -> bool:
    return (
        isinstance(a, FileSystemStorage)
        and isinstance(b, FileSystemStorage)
        and a.location == b.location
    )


def encoding_for(name: str) -> str:
    return "plain" if PLAIN_NAME.fullmatch(name) else "base64"


def tag_options(geometry: str, kwargs: dict[str, Any]) -> Options:
    """Translate sorl-thumbnail style arguments into :class:`Options`.

    The format is left empty unless the tag names one (see
    :func:`get_thumbnail`); values are checked here so a typo is a
    :class:`ThumbnailError` naming it, not a bare ``ValueError``.
    """
    unknown = set(kwargs) - {"crop", "format", "upscale", "background", "options", *NUMBER_KEYWORDS}
    unknown -= TAG_ONLY
    if unknown:
        raise ThumbnailError(f"unknown thumbnail keyword(s): {', '.join(sorted(unknown))}")
    if not str(geometry).strip() and kwargs.get("preset"):
        width, height = 0, 0  # the preset gives the size
    else:
        width, height = parse_geometry(geometry)
    options = Options(width=width, height=height, enlarge=upscale(kwargs.get("upscale", False)))
    crop = kwargs.get("crop")
    if crop:
        options = replace(options, resizing_type="fill", gravity=crop_gravity(str(crop)))
    if kwargs.get("format"):
        options = replace(options, format=output_format(kwargs["format"]))
    numbers: dict[str, Any] = {
        name: number(name, kwargs[name], convert)
        for name, convert in NUMBER_KEYWORDS.items()
        if kwargs.get(name)
    }
    options = replace(options, **numbers)
    if kwargs.get("background"):
        options = replace(options, background=hex_color(str(kwargs["background"])))
    return options


def parse_geometry(geometry: str) -> tuple[int, int]:
    """Width and height of "WxH", "W" or "xH" (0 for the side left free)."""
    match = GEOMETRY.fullmatch(str(geometry).strip())
    width = int(match["width"] or 0) if match else 0
    height = int(match["height"] or 0) if match else 0
    if not (width or height):
        raise ThumbnailError(f"bad geometry {geometry!r}: use 'WxH', 'W' or 'xH'")
    return width, height


def upscale(value: Any) -> bool:
    """``upscale`` as a bool; text such as "false" from a template is not truthy."""
    if isinstance(value, str):
        if value.strip().lower() not in BOOLEAN_WORDS:
            raise ThumbnailError(f"bad upscale {value!r}: use True or False")
        return BOOLEAN_WORDS[value.strip().lower()]
    return bool(value)


def number(name: str, value: Any, convert: type[int] | type[float]) -> int | float:
    """A numeric keyword; its range is checked when the built path is parsed."""
    try:
        return convert(value)
    except (TypeError, ValueError) as exc:
        raise ThumbnailError(f"bad {name} {value!r}: not a number") from exc


def crop_gravity(crop: str) -> Gravity:
    crop = " ".join(crop.lower().split())
    if crop in CROP_GRAVITY:
        return Gravity(CROP_GRAVITY[crop])
    match = PERCENT_CROP.fullmatch(crop)
    if match and int(match["x"]) <= 100 and int(match["y"]) <= 100:
        return Gravity("fp", int(match["x"]) / 100, int(match["y"]) / 100)
    raise ThumbnailError(f"bad crop {crop!r}")


def output_format(requested: Any) -> str:
    """The tag's explicit format: a name from OUTPUT_FORMATS, or "" for auto."""
    fmt = str(requested).lower()
    if fmt == "auto":
        return ""
    fmt = FORMAT_NAMES.get(fmt, fmt)
    if fmt not in OUTPUT_FORMATS:
        raise ThumbnailError(
            f"unknown format {requested!r}: use one of {', '.join(OUTPUT_FORMATS)}"
        )
    return fmt


def source_format(source: str) -> str:
    """The source's own format, by extension, when it is one we encode; else JPEG."""
    extension = posixpath.splitext(source)[1][1:].lower()
    return FORMAT_NAMES.get(extension, "jpeg")


def hex_color(value: str) -> tuple[int, int, int]:
    value = value.lstrip("#")
    if not re.fullmatch(r"[0-9a-fA-F]{6}", value):
        raise ThumbnailError(f"bad background {value!r}: use RRGGBB")
    return (int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16))


_mount_points: SettingsMemo[tuple[URLResolver, str], str] = SettingsMemo(64)


def url_prefix() -> str:
    """Where thumbnails are served: the URLconf's mount point, else URL_PREFIX.

    Reversed once per URLconf and script prefix (a request may bring its
    own of each), not once per tag. Keyed by Django's resolver object,
    which Django replaces whenever the URLconf changes (``clear_url_caches``).
    """
    resolver = get_resolver(get_urlconf())
    return _mount_points.get((resolver, get_script_prefix()), _mount_point)


def _mount_point() -> str:
    try:
        return reverse("oximg:serve", kwargs={"path": "x"})[:-1]
    except NoReverseMatch:
        return conf.get_settings().URL_PREFIX


def source_metadata(source: str) -> SourceMetadata:
    """Header size and version of ``source``, from the ``METADATA_CACHE`` when possible.

    Local files are cheap to stat, so their version is read every time and
    compared with the one kept: a replaced file is noticed at once, and
    their metadata is also kept in this process (:data:`_local_metadata`),
    sparing the cache read. Remote storages are not asked at all on a cache
    hit; their entry expires after ``METADATA_CACHE_TIMEOUT`` (or when the
    purge hooks delete it). A miss reads the source's first kilobytes, not
    the whole file.
    """
    resolved = runtime.get_source_resolver().resolve(source)
    store, name = resolved.store, resolved.name
    local = isinstance(store, FileSystemSourceStore)
    version = ""
    if local:
        version = store.version(name)
        held = _local_metadata.peek(source)
        if held is not None and held.version == version:
            return held
    cache = metadata_cache()
    key = metadata_key(source)
    cached = cache.get(key)
    if isinstance(cached, SourceMetadata) and (not local or cached.version == version):
        meta = cached
    else:
        if not local:
            version = store.version(name)
        header = source_header(store, name)
        meta = SourceMetadata(header.width, header.height, header.orientation, version)
        cache.set(key, meta, conf.get_settings().METADATA_CACHE_TIMEOUT)
    if local:
        _local_metadata.put(source, meta)
    return meta


#: Metadata of local sources, by source: checked against the file's version
#: on every use, so it can never be stale (remote sources have no such check
#: and live in the shared ``METADATA_CACHE`` only).
_local_metadata: SettingsMemo[str, SourceMetadata] = SettingsMemo(8192)


def source_header(store: SourceStore, name: str) -> headers.Header:
    """What ``name``'s header says: from its first kilobytes, else from libvips.

    libvips (and with it the whole pipeline) is imported only here, for a
    source the pure-Python reader cannot answer exactly; that reads the
    whole file, as the server will.
    """
    try:
        return headers.read_header(lambda limit: store.read_header(name, limit))
    except headers.UnknownHeader:
        from django_oximg.core import pipeline

        info = pipeline.probe(store.read(name, conf.get_settings().MAX_SRC_FILE_SIZE))
        return headers.Header(info.format, info.width, info.height, info.orientation)


def metadata_cache() -> BaseCache:
    """The Django cache holding source metadata (``METADATA_CACHE``)."""
    return caches[conf.get_settings().METADATA_CACHE]


def metadata_key(source: str) -> str:
    """Cache key of ``source``'s metadata: one entry per source, from its name alone.

    One entry (rather than one per version) so that a purge can find and
    delete it without knowing the version; a local file's entry is replaced
    when its version no longer matches.
    """
    return "oximg:meta:" + hashlib.sha256(source.encode()).hexdigest()[:32]


def forget_source_metadata(source: str) -> bool:
    """Drop ``source``'s cached metadata (a purge); whether there was an entry."""
    _local_metadata.discard(source)
    return bool(metadata_cache().delete(metadata_key(source)))


def get_info_url(source: Any) -> str:
    """A signed ``/info`` URL for ``source`` (a FieldFile or a storage name).

    Its JSON gives the source's upright size, format, frames, a BlurHash and
    the dominant colour (docs/urls.md, "/info"), e.g. for placeholders. Like
    a thumbnail URL it carries the source's version as its cachebuster, so a
    replaced source gets a new URL while the old answer may be cached forever.

    The BlurHash components are spelled out although they are the default:
    ``/info`` is outside the signed part (as in imgproxy), and ``bh`` is no
    thumbnail option, so the signature cannot also fetch the full-size image.
    """
    name = source_name(source)
    version = source_metadata(name).version
    x, y = DEFAULT_BLURHASH
    versioned = build_path(Options(cachebuster=version), name, encode=encoding_for(name))
    path = f"/bh:{x}:{y}{versioned}"
    return url_prefix() + INFO_PREFIX.lstrip("/") + runtime.get_signer().signed_path(path)
