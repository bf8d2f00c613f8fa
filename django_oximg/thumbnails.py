"""Build signed thumbnail URLs with their exact output size, from Python or templates.

:func:`get_thumbnail` is what ``{% thumbnail %}`` calls, and what views or
serializers may call directly (sorl-thumbnail has the same function). It never
processes an image: it asks :mod:`django_oximg.source_metadata` for the
source's size and version (the first kilobytes of the file, read once and
kept in the ``METADATA_CACHE``), and computes the output size with the same
geometry code the pipeline executes.

A page of thumbnails runs this module once per tag, so it stays cheap: it
imports no image library (libvips is loaded only for a source whose header
the pure-Python reader cannot answer), and what depends only on the tag's
arguments and the settings (the options a URL expands to, the mount point)
is computed once per process.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from django.urls import (
    NoReverseMatch,
    URLResolver,
    get_resolver,
    get_script_prefix,
    get_urlconf,
    reverse,
)

from django_oximg import conf, runtime
from django_oximg.arguments import (
    ThumbnailError,
    focal_gravity,
    focal_point,
    geometry_text,
    is_geometry,
    output_format,
    preset_is_known,
    scoped_preset,
    sizing,
    tag_options,
)
from django_oximg.core.errors import InvalidOptions
from django_oximg.core.limits.source_limits import check_resolution
from django_oximg.core.options import (
    ANY_URL,
    FORMAT_NAMES,
    Options,
    ParsedPath,
    URLRules,
    build_path,
    lowered_limit,
    parse_path,
)
from django_oximg.core.options.geometry import plan_geometry
from django_oximg.core.options.signing import split_signed_path
from django_oximg.core.serving.info import DEFAULT_BLURHASH, INFO_PREFIX
from django_oximg.declared_sizes import size_named
from django_oximg.focal import stored_focal_point
from django_oximg.memo import SettingsMemo
from django_oximg.sizing import exact_size_options
from django_oximg.source_metadata import SourceMetadata, source_metadata, source_name

__all__ = [
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
class Thumbnail:
    """A signed thumbnail URL and the size the image will have.

    ``x``, ``y``, ``size``, ``ratio`` and ``is_portrait`` are there for
    templates written for sorl-thumbnail, whose thumbnails have them.
    """

    url: str
    width: int
    height: int
    #: Output format, "auto" when negotiated per request, "best" when chosen
    #: per thumbnail and request (``format:best``).
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

    ``TAG_DEFAULTS`` fill in keywords not given; a geometry that names one
    of the field's declared sizes (:mod:`django_oximg.declared_sizes`) becomes
    that size's arguments, the call's own keywords winning over them; a
    geometry that is a preset's name (easy-thumbnails' ``{% thumbnail photo "avatar" %}``)
    becomes ``preset``; a preset name is looked up in the source's scopes
    first (:func:`~django_oximg.arguments.scoped_preset`); a model's image
    brings the ``focal_point`` stored beside it (:mod:`django_oximg.focal`)
    unless the call gives one (``focal_point=None`` turns it off).
    """
    settings = conf.get_settings()
    resolved = {**settings.TAG_DEFAULTS, **kwargs}
    if "focal_point" not in resolved:
        point = stored_focal_point(source)
        if point is not None:
            resolved["focal_point"] = point
    text = geometry_text(geometry)
    named = text.strip()
    preset_named = named and not resolved.get("preset") and not is_geometry(named)
    declared = size_named(alias_target(source), named) if preset_named else None
    if declared is not None:  # the field's declared size (declared_sizes) by name
        text = declared.geometry
        resolved = {**settings.TAG_DEFAULTS, **declared.kwargs, **kwargs}
    elif preset_named and preset_is_known(named, settings.PRESETS):
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

    The same arguments for the same version of a source always give the
    same thumbnail, so the result is kept (:data:`_thumbnails`): a page
    rendered again costs, per tag, the source's version check and a lookup.
    """
    meta = metadata or source_metadata(source_string)
    prefix = url_prefix()
    arguments = arguments_key(geometry, kwargs)
    if arguments is None:
        return make_thumbnail(source_string, geometry, kwargs, arguments, meta, prefix)
    return _thumbnails.get(
        (source_string, meta, prefix, arguments),
        lambda: make_thumbnail(source_string, geometry, kwargs, arguments, meta, prefix),
    )


def make_thumbnail(
    source_string: str,
    geometry: str,
    kwargs: dict[str, Any],
    arguments: ArgumentsKey | None,
    meta: SourceMetadata,
    url_prefix: str,
) -> Thumbnail:
    """The signed URL and the size, computed (see :func:`thumbnail_for`)."""
    settings = conf.get_settings()
    request = url_request(source_string, geometry, kwargs, arguments)
    options, effective = request.options, request.effective
    # An ONLY_PRESETS URL carries no size of the tag's: the presets' arithmetic stays.
    arithmetic = "imgproxy" if settings.ONLY_PRESETS else sizing(kwargs.get("sizing"))
    exact = exact_size_options(arithmetic, meta.width, meta.height, meta.orientation, effective)
    if exact is not None:
        options = options._replace(**exact)
        effective = effective_options(request.prefix, options, settings)
    version = url_version(meta.version, effective, source_string)
    options = options._replace(cachebuster=version)
    path = request.prefix + build_path(options, source_string, encode=encoding_for(source_string))
    if settings.ONLY_PRESETS:
        path = presets_only_path(kwargs, effective.format, source_string)
    check_servable(path, effective, settings)
    check_source_limits(meta, effective, settings)
    plan = plan_geometry(
        meta.width,
        meta.height,
        effective,
        orientation=meta.orientation,
        max_result_dimension=settings.MAX_RESULT_DIMENSION,
    )
    signed = runtime.get_signer().signed_path(path)
    return Thumbnail(
        url=url_prefix + signed[1:],
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
    rules = runtime.url_rules(settings)
    if rules == ANY_URL:
        return  # the path without its cachebuster was parsed as the server parses it
    try:
        site_parse(path, settings, rules)
    except InvalidOptions as exc:
        raise ThumbnailError(f"the server would refuse this URL: {exc.public}") from exc


def check_source_limits(
    meta: SourceMetadata, effective: Options, settings: conf.OximgSettings
) -> None:
    """Refuse a source the server would refuse for its resolution, from its header.

    The server's own check (:func:`~django_oximg.core.limits.source_limits.check_resolution`,
    with the URL's ``max_src_resolution`` lowering the limit as it does
    there), so the tags take their empty or fallback path instead of
    printing a URL that would answer 422: a broken image. The header gives
    one frame's size, which every render counts at least once; what only
    the whole file tells (frames, bytes, the memory estimate) is left to
    the upload validator (:mod:`django_oximg.validators`) and the server.
    """
    limit = lowered_limit(settings.MAX_SRC_RESOLUTION, effective.max_src_resolution)
    check_resolution(meta.width, meta.height, 1, limit, 0)


def hint_pins(settings: conf.OximgSettings) -> str:
    """With ``CLIENT_HINTS``, segments that keep hints out of the tags' URLs.

    A hint fills in only what a URL leaves unset; the tags print the size
    their URL makes, so their URLs set ``dpr`` and ``width`` (the tag's own
    values, written after these, still win).
    """
    return "/dpr:1/w:0" if settings.CLIENT_HINTS else ""


def presets_only_path(kwargs: dict[str, Any], fmt: str, source: str) -> str:
    """``ONLY_PRESETS``: the URL is the tag's presets, the source and the format, no more.

    There is no room for the version token (``cb``): a replaced source
    keeps its URL.
    """
    # A focal point has no place in such a URL: the preset's gravity stays.
    extra = set(kwargs) - {"preset", "format", "sizing", "focal_point"}
    if not kwargs.get("preset") or extra:
        raise ThumbnailError("ONLY_PRESETS: the tags take a preset (and a format) only")
    tail = build_path(Options(format=fmt), source, encode=encoding_for(source))
    return f"/{kwargs['preset']}{tail}"


@dataclass(frozen=True)
class UrlRequest:
    """What a tag's arguments ask of a source, before its version is known."""

    #: The preset and raw ``options`` segments, which go first.
    prefix: str
    #: The tag's own options, the output format filled in when nothing chose one.
    options: Options
    #: What the server will apply: presets and raw options expanded, no cachebuster.
    effective: Options


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


def url_request(
    source: str, geometry: str, kwargs: dict[str, Any], arguments: ArgumentsKey | None
) -> UrlRequest:
    """What the tag's arguments ask of ``source`` (computed once per arguments).

    ``arguments`` is their :func:`arguments_key`. The answer does not depend
    on the source's name, only on the format to keep when neither the tag
    nor a preset names one: the source's own, by its extension ("" when the
    tag asked for "auto", which negotiates).
    """
    fallback = "" if kwargs.get("format") else source_format(source)
    if arguments is None:
        return _url_request(geometry, kwargs, fallback)
    return _url_requests.get(
        (arguments, fallback), lambda: _url_request(geometry, kwargs, fallback)
    )


def _url_request(geometry: str, kwargs: dict[str, Any], fallback_format: str) -> UrlRequest:
    settings = conf.get_settings()
    options = tag_options(geometry, kwargs, settings.EXTENSIONS)
    prefix = hint_pins(settings) + option_prefix(kwargs)
    point = focal_point(kwargs.get("focal_point"))
    if point is not None and kwargs.get("crop") is None and crops_without_gravity(prefix, settings):
        options = options._replace(gravity=focal_gravity(point))
    effective = effective_options(prefix, options, settings)
    if not effective.format and fallback_format:
        options = options._replace(format=fallback_format)
        effective = effective_options(prefix, options, settings)
    return UrlRequest(prefix, options, effective._replace(cachebuster=""))


#: The source name the options are parsed back with; options never depend on it.
PLACEHOLDER_SOURCE = "x"

#: Resizing types that crop to fill the box, where a gravity says what is kept.
FILLING = frozenset({"fill", "fill-down"})


def crops_without_gravity(prefix: str, settings: conf.OximgSettings) -> bool:
    """Whether the presets and raw options before the tag's own crop without saying where.

    A preset such as ``"rs:fill:400:300"`` crops at the default gravity, so
    a focal point should place it; one that names a gravity (``g:sm``) keeps it.
    """
    parsed = site_parse(f"{prefix}/plain/{PLACEHOLDER_SOURCE}", settings)
    return parsed.options.resizing_type in FILLING and "gravity" not in parsed.assigned


def option_prefix(kwargs: dict[str, Any]) -> str:
    """The preset and raw ``options`` segments, which go before the tag's own."""
    segments = [f"pr:{kwargs['preset']}"] if kwargs.get("preset") else []
    if kwargs.get("options"):
        segments.append(str(kwargs["options"]).strip("/"))
    return "".join(f"/{segment}" for segment in segments)


def effective_options(prefix: str, options: Options, settings: conf.OximgSettings) -> Options:
    """The options a server will apply for the URL of ``options`` after ``prefix``.

    The path is parsed back exactly as the server will parse it, so the size
    is computed from what will be served, presets and raw options included.
    """
    path = prefix + build_path(options, PLACEHOLDER_SOURCE)
    return site_parse(path, settings).options


def site_parse(path: str, settings: conf.OximgSettings, rules: URLRules = ANY_URL) -> ParsedPath:
    """``path`` parsed with the site's presets and extensions, as the server parses it."""
    return parse_path(path, settings.PRESETS, rules, extensions=settings.EXTENSIONS)


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
    if effective.cachebuster:
        effective = effective._replace(cachebuster="")
    canonical = build_path(effective, source)
    text = "\n".join((source_version, runtime.get_output_fingerprint(), canonical))
    return hashlib.sha256(text.encode()).hexdigest()[:URL_VERSION_LENGTH]


def encoding_for(name: str) -> str:
    return "plain" if PLAIN_NAME.fullmatch(name) else "base64"


def source_format(source: str) -> str:
    """The source's own format, by extension, when it is one we encode; else JPEG."""
    extension = posixpath.splitext(source)[1][1:].lower()
    return FORMAT_NAMES.get(extension, "jpeg")


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


def get_info_url(source: Any) -> str:
    """A signed ``/info`` URL for ``source`` (a FieldFile or a storage name).

    Its JSON gives the source's upright size, format, frames, a BlurHash and
    the dominant colour (docs/urls.md, "/info"), e.g. for placeholders. Like
    a thumbnail URL it carries the source's version as its cachebuster, so a
    replaced source gets a new URL while the old answer may be cached forever.

    The BlurHash components are spelled out although they are the default:
    ``/info`` is outside the signed part (as in imgproxy), and ``bh`` is no
    thumbnail option, so the signature cannot also fetch the full-size image.
    A source over ``MAX_SRC_RESOLUTION`` raises ``SourceTooLarge``, as the
    server would refuse the BlurHash of it.
    """
    name = source_name(source)
    meta = source_metadata(name)
    # The BlurHash decodes pixels: the server refuses it over the resolution limit.
    check_source_limits(meta, Options(), conf.get_settings())
    version = meta.version
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


#: Accept headers that make a negotiated (format "auto" or "best") thumbnail come out
#: as each format a browser may get: AVIF, WebP, and the fallback; "best"
#: keeps one answer per class of Accept, and browsers send AVIF with WebP.
NEGOTIATED_ACCEPTS = ("image/avif,image/webp", "image/avif", "image/webp", "")


def accepts_to_render(thumbnail: Thumbnail) -> tuple[str, ...]:
    """The ``Accept`` headers whose answers are every result a browser may get for
    ``thumbnail`` (rendering ahead of visitors: ``oximg_warm``, declared sizes)."""
    return NEGOTIATED_ACCEPTS if thumbnail.format in ("auto", "best") else ("",)


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
    settings = conf.get_settings()
    parsed = site_parse(path, settings)
    segments = path.removeprefix("/").split("/")
    # Options run up to the first segment without ":"; the source follows.
    count = next((i for i, segment in enumerate(segments) if ":" not in segment), len(segments))
    kept = [s for s in segments[:count] if not s.startswith(("cb:", "cachebuster:"))]
    options = [*kept, f"dpr:{parsed.options.dpr * factor:g}"]  # later options win
    source = segments[count:]
    effective = site_parse("/" + "/".join([*options, *source]), settings).options
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
