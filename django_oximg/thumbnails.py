"""Build signed thumbnail URLs with their exact output size, from Python or templates.

:func:`get_thumbnail` is what ``{% thumbnail %}`` calls, and what views or
serializers may call directly (sorl-thumbnail has the same function). It never
processes an image: it reads the source's header once to know its size, keeps
that in Django's cache, and computes the output size with the same geometry
code the pipeline executes.
"""

from __future__ import annotations

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
from django_oximg.core import pipeline
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.geometry import plan_geometry
from django_oximg.core.info import DEFAULT_BLURHASH, INFO_PREFIX
from django_oximg.core.options import (
    FORMAT_NAMES,
    OUTPUT_FORMATS,
    QUALITY_MODES,
    Gravity,
    Options,
    Watermark,
    build_path,
    parse_path,
)

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
    ("RRGGBB"), ``pixelate``, ``watermark`` (opacity), ``filename``,
    ``attachment``, ``options`` (raw imgproxy options, e.g. "rot:90/fl:1:0"). The
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
    extra = set(kwargs) - {"preset", "format"}
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


def tag_options(geometry: str, kwargs: dict[str, Any]) -> Options:
    """Translate sorl-thumbnail style arguments into :class:`Options`.

    The format is left empty unless the tag names one (see
    :func:`get_thumbnail`); values are checked here so a typo is a
    :class:`ThumbnailError` naming it, not a bare ``ValueError``.
    """
    unknown = set(kwargs) - {"crop", "format", "upscale", "background", "options", *NUMBER_KEYWORDS}
    unknown -= TAG_ONLY | EFFECT_KEYWORDS | {"quality_mode"}
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
    if kwargs.get("quality_mode"):
        options = replace(options, quality_mode=quality_mode(kwargs["quality_mode"]))
    return effect_keywords(options, kwargs)


#: Keywords for imgproxy options that leave the size alone (:func:`effect_keywords`).
EFFECT_KEYWORDS = frozenset({"pixelate", "watermark", "filename", "attachment"})


def effect_keywords(options: Options, kwargs: dict[str, Any]) -> Options:
    """``pixelate`` (block size), ``watermark`` (opacity 0..1 of ``OXIMG["WATERMARK"]``),
    ``filename`` and ``attachment`` (the ``Content-Disposition`` of the answer)."""
    changes: dict[str, Any] = {}
    if kwargs.get("pixelate"):
        changes["pixelate"] = number("pixelate", kwargs["pixelate"], int)
    if kwargs.get("watermark"):
        opacity = number("watermark", kwargs["watermark"], float)
        changes["watermark"] = Watermark(opacity=float(opacity))
    if kwargs.get("filename"):
        changes["filename"] = str(kwargs["filename"])
    if "attachment" in kwargs:
        changes["return_attachment"] = upscale(kwargs["attachment"], "attachment")
    return replace(options, **changes) if changes else options


def quality_mode(value: Any) -> str:
    """``quality_mode="high"``: resize in linear light (the URL's ``qm``, docs/urls.md)."""
    if value not in QUALITY_MODES:
        raise ThumbnailError(f"bad quality_mode {value!r}: use {' or '.join(QUALITY_MODES)}")
    return str(value)


def parse_geometry(geometry: str) -> tuple[int, int]:
    """Width and height of "WxH", "W" or "xH" (0 for the side left free)."""
    match = GEOMETRY.fullmatch(str(geometry).strip())
    width = int(match["width"] or 0) if match else 0
    height = int(match["height"] or 0) if match else 0
    if not (width or height):
        raise ThumbnailError(f"bad geometry {geometry!r}: use 'WxH', 'W' or 'xH'")
    return width, height


def upscale(value: Any, name: str = "upscale") -> bool:
    """``upscale`` (or keyword ``name``) as a bool; text such as "false" from a
    template is not truthy."""
    if isinstance(value, str):
        if value.strip().lower() not in BOOLEAN_WORDS:
            raise ThumbnailError(f"bad {name} {value!r}: use True or False")
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
