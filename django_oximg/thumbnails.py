"""Build signed thumbnail URLs with their exact output size, from Python or templates.

:func:`get_thumbnail` is what ``{% thumbnail %}`` calls, and what views or
serializers may call directly (sorl-thumbnail has the same function). It never
processes an image: it reads the source's header once to know its size, keeps
that in Django's cache, and computes the output size with the same geometry
code the pipeline executes.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.core.cache import cache
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage
from django.urls import NoReverseMatch, reverse

from django_oximg import conf, runtime
from django_oximg.arguments import (
    ThumbnailError,
    geometry_text,
    is_geometry,
    output_format,
    preset_is_known,
    scoped_preset,
    sizing,
    tag_options,
)
from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.geometry import QUARTER_TURN_ORIENTATIONS, plan_geometry
from django_oximg.core.info import DEFAULT_BLURHASH, INFO_PREFIX
from django_oximg.core.options import (
    FORMAT_NAMES,
    Options,
    build_path,
    parse_path,
)
from django_oximg.core.signing import split_signed_path
from django_oximg.sizing import exact_size_options

__all__ = [
    "SourceMetadata",
    "Thumbnail",
    "ThumbnailError",
    "get_thumbnail",
    "output_format",
    "tag_options",
]

#: Source names made only of these go into URLs as ``plain/`` (readable);
#: anything else is base64-encoded, so no percent-encoding can be altered
#: by servers that decode the path.
PLAIN_NAME = re.compile(r"^[A-Za-z0-9._~/-]+$")

#: Hex digits of a URL's version token (:func:`url_version`).
URL_VERSION_LENGTH = 16


@dataclass(frozen=True)
class SourceMetadata:
    """What the tag needs of a source: its header size and a content version."""

    width: int
    height: int
    orientation: int
    version: str

    @property
    def upright_size(self) -> tuple[int, int]:
        """Width and height as shown, after the EXIF orientation."""
        if self.orientation in QUARTER_TURN_ORIENTATIONS:
            return self.height, self.width
        return self.width, self.height


@dataclass(frozen=True)
class Thumbnail:
    """A signed thumbnail URL and the size the image will have.

    ``x``, ``y``, ``size``, ``ratio`` and ``is_portrait`` are there for
    templates written for sorl-thumbnail, whose thumbnails have them.
    """

    url: str
    width: int
    height: int
    #: Output format, or "auto" when negotiated per request.
    format: str

    def __str__(self) -> str:
        return self.url

    @property
    def x(self) -> int:
        return self.width

    @property
    def y(self) -> int:
        return self.height

    @property
    def size(self) -> list[int]:
        """``[width, height]``: a list, as sorl-thumbnail's (so it prints the same)."""
        return [self.width, self.height]

    @property
    def ratio(self) -> float:
        """Width over height."""
        return self.width / self.height

    @property
    def is_portrait(self) -> bool:
        """Taller than wide (an attribute here, a method in sorl-thumbnail)."""
        return self.height > self.width


def get_thumbnail(source: Any, geometry: str = "", **kwargs: Any) -> Thumbnail:
    """A :class:`Thumbnail` for ``source`` (a FieldFile or a storage name).

    ``geometry`` is "WxH", "W" or "xH" (or easy-thumbnails' ``(W, H)``),
    or a preset's name; it may be left out with a ``preset`` that gives the
    size. Keywords: ``crop`` (center, top, bottom, left, right, "top left",
    ..., smart, "x% y%", True),
    ``format`` (jpeg, png, webp, avif, gif, auto; default: the preset's
    format, else the source's), ``quality``, ``upscale``, ``preset``,
    ``blur``, ``sharpen``, ``dpr``, ``background`` ("RRGGBB"), ``padding``
    and ``padding_color`` (pad to the whole box), ``pixelate``,
    ``watermark`` (opacity), ``filename``, ``attachment``, ``sizing`` ("imgproxy",
    "sorl", "easy-thumbnails": whose arithmetic rounds the size),
    ``options`` (raw imgproxy options, e.g. "rot:90/fl:1:0"). The preset
    and ``options`` apply first, so the tag's own keywords win over them, as
    later options do in a URL. ``OXIMG["TAG_DEFAULTS"]`` gives the keywords
    not given.

    Raises :class:`ThumbnailError` for bad arguments and the core's
    ``OximgError`` subclasses for a source that is missing or not an image.
    """
    geometry, kwargs = resolve_arguments(source, geometry, kwargs)
    return thumbnail_for(source_name(source), geometry, kwargs)


def resolve_arguments(
    source: Any, geometry: Any, kwargs: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The arguments as written, completed: defaults, a preset named as geometry, scopes.

    ``TAG_DEFAULTS`` fill in keywords not given; a geometry that is a
    preset's name (easy-thumbnails' ``{% thumbnail photo "avatar" %}``)
    becomes ``preset``; a preset name is looked up in the source's scopes
    first (:func:`~django_oximg.arguments.scoped_preset`).
    """
    settings = conf.get_settings()
    resolved = {**settings.TAG_DEFAULTS, **kwargs}
    text = geometry_text(geometry)
    named = text.strip()
    preset_named = named and not resolved.get("preset") and not is_geometry(named)
    if preset_named and preset_is_known(named, settings.PRESETS):
        resolved["preset"], text = named, ""
    if resolved.get("preset"):
        target = alias_target(source)
        resolved["preset"] = scoped_preset(str(resolved["preset"]), target, settings.PRESETS)
    return text, resolved


def alias_target(source: Any) -> str:
    """``app_label.Model.field`` of a model's file field, as easy-thumbnails scopes aliases."""
    field = getattr(source, "field", None)
    instance = getattr(source, "instance", None)
    if field is None or instance is None:
        return ""
    meta = type(instance)._meta
    return f"{meta.app_label}.{meta.object_name}.{field.name}"


def thumbnail_for(
    source_string: str,
    geometry: str,
    kwargs: dict[str, Any],
    metadata: SourceMetadata | None = None,
) -> Thumbnail:
    """:func:`get_thumbnail` for a source string, with its metadata if already read.

    Responsive images make a dozen sizes of one source; passing the
    metadata read once spares a cache read (and a stat) per size. The
    arguments are taken as :func:`resolve_arguments` leaves them.
    """
    settings = conf.get_settings()
    options = tag_options(geometry, kwargs)
    meta = metadata or source_metadata(source_string)
    prefix = hint_pins(settings) + option_prefix(kwargs)
    effective = effective_options(prefix, options, source_string, settings.PRESETS)
    if not effective.format and not kwargs.get("format"):
        # Nothing chose a format: keep the source's rather than negotiate.
        options = replace(options, format=source_format(source_string))
        effective = effective_options(prefix, options, source_string, settings.PRESETS)
    # An ONLY_PRESETS URL carries no size of the tag's: the presets' arithmetic stays.
    arithmetic = "imgproxy" if settings.ONLY_PRESETS else sizing(kwargs.get("sizing"))
    exact = exact_size_options(arithmetic, meta.width, meta.height, meta.orientation, effective)
    if exact is not None:
        options = replace(options, **exact)
        effective = effective_options(prefix, options, source_string, settings.PRESETS)
    version = url_version(meta.version, effective, source_string)
    options = replace(options, cachebuster=version)
    effective = replace(effective, cachebuster=version)
    path = prefix + build_path(options, source_string, encode=encoding_for(source_string))
    if settings.ONLY_PRESETS:
        path = presets_only_path(kwargs, effective, source_string)
    check_servable(path, effective, settings)
    plan = plan_geometry(
        meta.width,
        meta.height,
        effective,
        orientation=meta.orientation,
        max_result_dimension=settings.MAX_RESULT_DIMENSION,
    )
    signed = runtime.get_signer().signed_path(path)
    return Thumbnail(
        url=url_prefix() + signed[1:],
        width=plan.width,
        height=plan.height,
        format=effective.format or "auto",
    )


def unpredictable(options: Options) -> list[str]:
    """Options whose output size depends on the pixels (``trim``), or is the
    source's own or its thumbnail's: the tags could not print it."""
    found = {
        "trim": options.trim_threshold is not None,
        "raw": options.raw,
        "skip_processing": bool(options.skip_processing),
        "enforce_thumbnail": options.enforce_thumbnail,
    }
    return [name for name, present in found.items() if present]


def check_servable(path: str, effective: Options, settings: conf.OximgSettings) -> None:
    """Refuse a URL the server would refuse (``ALLOWED_PROCESSING_OPTIONS``,
    ``ONLY_PRESETS``), or whose size the tag cannot know."""
    for name in unpredictable(effective):
        raise ThumbnailError(f"{name}: the tags cannot know the size it makes")
    if effective.watermark.opacity and not settings.WATERMARK:
        raise ThumbnailError("watermark: set OXIMG['WATERMARK'] to the image to lay")
    try:
        parse_path(path, settings.PRESETS, runtime.url_rules(settings))
    except InvalidOptions as exc:
        raise ThumbnailError(f"the server would refuse this URL: {exc.public}") from exc


def hint_pins(settings: conf.OximgSettings) -> str:
    """With ``CLIENT_HINTS``, segments that keep hints out of the tags' URLs.

    A hint fills in only what a URL leaves unset; the tags print the size
    their URL makes, so their URLs set ``dpr`` and ``width`` (the tag's own
    values, written after these, still win).
    """
    return "/dpr:1/w:0" if settings.CLIENT_HINTS else ""


def presets_only_path(kwargs: dict[str, Any], effective: Options, source: str) -> str:
    """``ONLY_PRESETS``: the URL is the tag's presets, the source and the format, no more.

    There is no room for the version token (``cb``): a replaced source
    keeps its URL.
    """
    extra = set(kwargs) - {"preset", "format", "sizing"}
    if not kwargs.get("preset") or extra:
        raise ThumbnailError("ONLY_PRESETS: the tags take a preset (and a format) only")
    tail = build_path(Options(format=effective.format), source, encode=encoding_for(source))
    return f"/{kwargs['preset']}{tail}"


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
    output bytes (:func:`django_oximg.runtime.get_output_fingerprint`) and the
    options the URL expands to (presets included, which the URL names only
    as ``pr:name``). Unchanged, it stays the same across processes and
    deploys, so caches stay warm.
    """
    canonical = build_path(replace(effective, cachebuster=""), source)
    text = "\n".join((source_version, runtime.get_output_fingerprint(), canonical))
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
    """The OXIMG source alias serving ``storage`` ("" for the default source)."""
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


def source_format(source: str) -> str:
    """The source's own format, by extension, when it is one we encode; else JPEG."""
    extension = posixpath.splitext(source)[1][1:].lower()
    return FORMAT_NAMES.get(extension, "jpeg")


def url_prefix() -> str:
    """Where thumbnails are served: the URLconf's mount point, else URL_PREFIX."""
    try:
        return reverse("oximg:serve", kwargs={"path": "x"})[:-1]
    except NoReverseMatch:
        return conf.get_settings().URL_PREFIX


def source_metadata(source: str) -> SourceMetadata:
    """Header size and version of ``source``, from Django's cache when possible.

    Local files are cheap to stat, so their version is read every time and
    made part of the cache key: a replaced file is noticed at once. Remote
    storages are not asked at all on a cache hit; their entry expires after
    ``METADATA_CACHE_TIMEOUT`` (or when the purge hooks delete it).
    """
    resolved = runtime.get_source_resolver().resolve(source)
    store, name = resolved.store, resolved.name
    settings = conf.get_settings()
    local = runtime.source_is_local(resolved.alias)
    version = store.version(name) if local else ""
    key = metadata_key(source)
    cached = cache.get(key)
    if isinstance(cached, SourceMetadata) and (not local or cached.version == version):
        return cached
    if not local:
        version = store.version(name)
    info = pipeline.probe(store.read(name, settings.MAX_SRC_FILE_SIZE))
    meta = SourceMetadata(info.width, info.height, info.orientation, version)
    cache.set(key, meta, settings.METADATA_CACHE_TIMEOUT)
    return meta


def metadata_key(source: str) -> str:
    """Django cache key of ``source``'s metadata: one entry per source, from its name alone.

    One entry (rather than one per version) so that a purge can find and
    delete it without knowing the version; a local file's entry is replaced
    when its version no longer matches.
    """
    return "oximg:meta:" + hashlib.sha256(source.encode()).hexdigest()[:32]


def forget_source_metadata(source: str) -> bool:
    """Drop ``source``'s cached metadata (a purge); whether there was an entry."""
    return bool(cache.delete(metadata_key(source)))


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


# -- what sorl-thumbnail's and easy-thumbnails' filters need -------------------------


def source_size(source: Any) -> tuple[int, int]:
    """The size of a :class:`Thumbnail`, or of a source as shown (EXIF orientation applied)."""
    if isinstance(source, Thumbnail):
        return source.width, source.height
    return source_metadata(source_name(source)).upright_size


def thumbnail_path(thumbnail: Thumbnail | str) -> str:
    """The signed path (``/<signature>/...``) of a URL the tags wrote."""
    url = str(thumbnail)
    prefix = url_prefix()
    if not url.startswith(prefix):
        raise ThumbnailError(f"{url[:80]!r} is not a thumbnail URL of this site (no {prefix})")
    return "/" + url[len(prefix) :]


def url_at_resolution(thumbnail: Thumbnail | str, resolution: Any) -> str:
    """The URL of ``thumbnail`` at ``resolution`` ("2x", "1.5x") times its pixel size.

    sorl-thumbnail's ``resolution`` filter names an ``@2x`` file it made
    beforehand; here the URL gains a ``dpr`` (which, without ``upscale``,
    never enlarges past the source). Only URLs this site signed are
    accepted, and the new one gets its own signature and version token.
    """
    text = str(resolution).strip().lower().removesuffix("x")
    try:
        factor = float(text)
    except ValueError:
        factor = 0.0
    if not 0 < factor <= 8:
        raise ThumbnailError(f"bad resolution {resolution!r}: use '1.5x', '2x', ... up to '8x'")
    signature, path = split_signed_path(thumbnail_path(thumbnail))
    runtime.get_signer().verify(signature, path)
    presets = conf.get_settings().PRESETS
    parsed = parse_path(path, presets)
    segments = path.removeprefix("/").split("/")
    # Options run up to the first segment without ":"; the source follows.
    count = next((i for i, segment in enumerate(segments) if ":" not in segment), len(segments))
    kept = [s for s in segments[:count] if not s.startswith(("cb:", "cachebuster:"))]
    options = [*kept, f"dpr:{parsed.options.dpr * factor:g}"]  # later options win
    source = segments[count:]
    effective = parse_path("/" + "/".join([*options, *source]), presets).options
    version = url_version(source_metadata(parsed.source).version, effective, parsed.source)
    versioned = "/" + "/".join([*options, f"cb:{version}", *source])
    return url_prefix() + runtime.get_signer().signed_path(versioned)[1:]


def data_uri(thumbnail: Thumbnail | str) -> str:
    """The image of ``thumbnail`` as a ``data:`` URI, rendered now if it is not cached.

    easy-thumbnails' ``data_uri`` filter. The page waits for the image (a
    cache hit is a file read; a miss is a render on the bounded pool, tens
    of milliseconds), and the bytes are in the HTML, a third larger in
    base64: keep it for a few tiny images. Without an ``Accept`` header a
    format="auto" thumbnail comes out in the source's web format.
    """
    reply = runtime.get_thumbnailer().reply(thumbnail_path(thumbnail), "GET", {})
    try:
        body = reply.file.read() if reply.file is not None else reply.body
    finally:
        if reply.file is not None:
            reply.file.close()
    if reply.status != 200:
        message = body.decode("utf-8", "replace").strip()
        raise ThumbnailError(f"the thumbnail could not be made: {reply.status} {message}")
    content_type = next(value for name, value in reply.headers if name.lower() == "content-type")
    return f"data:{content_type};base64,{base64.b64encode(body).decode('ascii')}"


class SourceThumbnails:
    """easy-thumbnails' ``get_thumbnailer(field)``: a source's thumbnails by alias.

    ``get_thumbnailer(photo.image)["avatar"]`` is the ``avatar`` preset's
    :class:`Thumbnail` (scoped to the field's model first, as easy-thumbnails
    scopes aliases); an unknown preset is a ``KeyError``, as an unknown alias
    is there. ``get_thumbnail({"size": (100, 100), "crop": True})`` takes
    easy-thumbnails' option dict.
    """

    def __init__(self, source: Any) -> None:
        self.source = source

    def __getitem__(self, alias: str) -> Thumbnail:
        presets = conf.get_settings().PRESETS
        if scoped_preset(alias, alias_target(self.source), presets) not in presets:
            raise KeyError(alias)
        return get_thumbnail(self.source, preset=alias)

    def get_thumbnail(self, options: Mapping[str, Any]) -> Thumbnail:
        """A thumbnail from easy-thumbnails' options: ``size`` and the tag's keywords."""
        kwargs = dict(options)
        return get_thumbnail(self.source, kwargs.pop("size", ""), **kwargs)


def get_thumbnailer(source: Any) -> SourceThumbnails:
    """easy-thumbnails' entry point: ``get_thumbnailer(photo.image)["avatar"].url``."""
    return SourceThumbnails(source)
