"""The template tags' keywords, checked and translated into imgproxy :class:`Options`.

One place decides what ``{% thumbnail %}``, :func:`~django_oximg.thumbnails.get_thumbnail`,
the ``TAG_DEFAULTS`` setting and the compile-time checks accept, and says
what is wrong in words a template author can act on. Nothing here reads
settings, storages or images: callers pass the presets and the site's
extensions they know, so the module is cheap to import from ``conf`` and
from the tag library.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from django_oximg.core.errors import InvalidOptions
from django_oximg.core.options import (
    BEST_FORMAT,
    FORMAT_NAMES,
    OUTPUT_FORMATS,
    QUALITY_MODES,
    AutoQuality,
    Extension,
    Gravity,
    Options,
    Watermark,
    build_path,
    parse_path,
)
from django_oximg.core.options.extensions import entries_with
from django_oximg.focal import FocalPoint, InvalidFocalPoint, parse_focal_point


class ThumbnailError(ValueError):
    """A thumbnail request that cannot be built (bad geometry, unknown keyword, ...)."""


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

#: ``crop`` values that mean "no crop": sorl-thumbnail's ``noop`` fits, as no crop does.
NO_CROP = frozenset({"", "noop", "false", "0", "no", "none"})

#: ``crop`` values that mean "crop, centred", as ``crop=True`` does in easy-thumbnails.
CENTRE_CROP = frozenset({"true", "1", "yes"})

GEOMETRY = re.compile(r"(?P<width>[0-9]{1,6})?(?:x(?P<height>[0-9]{1,6}))?")
PERCENT_CROP = re.compile(r"(?P<x>[0-9]{1,3})%(?:\s+(?P<y>[0-9]{1,3})%)?")

#: Tag keywords that are plain numbers.
NUMBER_KEYWORDS = {"quality": int, "blur": float, "sharpen": float, "dpr": float}

#: How templates may spell True and False as text.
BOOLEAN_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

#: sorl-thumbnail's default THUMBNAIL_PADDING_COLOR.
WHITE = (255, 255, 255)

#: Whose arithmetic turns a geometry into a size (see django_oximg/sizing.py).
SIZINGS = ("imgproxy", "sorl", "easy-thumbnails")

#: Keywords for imgproxy options that leave the size alone (:func:`effect_keywords`).
EFFECT_KEYWORDS = frozenset({"pixelate", "watermark", "filename", "attachment"})

#: Every keyword of ``{% thumbnail %}`` and ``get_thumbnail``.
KEYWORDS = frozenset(
    {
        "crop",
        "format",
        "upscale",
        "background",
        "options",
        "preset",
        "padding",
        "padding_color",
        "sizing",
        "quality_mode",
        "autoquality",
        "focal_point",
        *NUMBER_KEYWORDS,
        *EFFECT_KEYWORDS,
    }
)

#: Keywords that may be written alone in a tag, meaning True (``{% thumbnail p 80x80 crop %}``).
FLAGS = frozenset({"crop", "upscale", "padding"})

#: Keywords of sorl-thumbnail and easy-thumbnails that have no keyword here, and what to do.
UNSUPPORTED = {
    "progressive": (
        "JPEGs are written baseline with optimised Huffman tables, or all progressive "
        'with OXIMG["JPEG_PROGRESSIVE"]; drop it'
    ),
    "colorspace": "results are sRGB; options='scp:0' keeps the source's colour profile",
    "cropbox": "cut a region first with options='c:W:H:nowe:X:Y' (imgproxy's crop)",
    "rounded": "no equivalent",
    "orientation": "EXIF orientation is always applied; options='ar:0' turns it off",
    "format_options": "no equivalent",
    "bw": "no equivalent",
    "replace_alpha": "use background='RRGGBB' with a format without alpha",
    "zoom": "cut the source first: options='c:F:F' with F = 100 / (100 + zoom)",
    "target": "use a focus point: crop='40% 60%'",
    "subsampling": "no equivalent",
    "autocrop": "no equivalent",
    "keep_icc_profile": "use options='scp:0'",
    "detail": "use sharpen=0.5",
    "size": 'give the size as the geometry: {% thumbnail photo "100x100" %}',
}

#: Keywords that only ``TAG_DEFAULTS`` may not set, and why.
NOT_DEFAULTS = {
    "preset": "a preset named 'default' applies to every request",
    "options": "a preset named 'default' applies to every request",
    "focal_point": "a point belongs to one image; store it with FocalPointField",
}


def unknown_keyword_error(
    names: Iterable[str], extensions: Sequence[Extension] = ()
) -> ThumbnailError | None:
    """The error for keywords the tag does not know, with a hint for known peers' ones.

    Each of the site's ``extensions`` is a keyword by its long name.
    """
    unknown = sorted(set(names) - KEYWORDS - {extension.name for extension in extensions})
    if not unknown:
        return None
    hints = [f"{name}: {UNSUPPORTED[name]}" for name in unknown if name in UNSUPPORTED]
    message = f"unknown thumbnail keyword(s): {', '.join(unknown)}"
    return ThumbnailError(f"{message} ({'; '.join(hints)})" if hints else message)


def tag_options(
    geometry: str, kwargs: Mapping[str, Any], extensions: Sequence[Extension] = ()
) -> Options:
    """Translate sorl-thumbnail style arguments into :class:`Options`.

    ``geometry`` may be "" when ``kwargs`` names a ``preset`` (which then
    gives the size). The format is left empty unless the tag names one;
    values are checked here so a typo is a :class:`ThumbnailError` naming
    it, not a bare ``ValueError``. ``extensions`` are the site's
    (``OXIMG["EXTENSIONS"]``), whose long names are keywords too.
    """
    error = unknown_keyword_error(kwargs, extensions)
    if error is not None:
        raise error
    if not str(geometry).strip() and kwargs.get("preset"):
        width, height = 0, 0  # the preset gives the size
    else:
        width, height = parse_geometry(geometry)
    options = Options(width=width, height=height, enlarge=flag("upscale", kwargs.get("upscale")))
    gravity = crop_gravity(kwargs.get("crop"))
    point = focal_point(kwargs.get("focal_point"))
    if gravity is not None:
        if point is not None and crop_names_no_place(kwargs.get("crop")):
            gravity = focal_gravity(point)
        options = options._replace(resizing_type="fill", gravity=gravity)
    if kwargs.get("format"):
        options = options._replace(format=output_format(kwargs["format"]))
    numbers: dict[str, Any] = {
        name: number(name, kwargs[name], convert)
        for name, convert in NUMBER_KEYWORDS.items()
        if kwargs.get(name)
    }
    options = options._replace(**numbers)
    if kwargs.get("background"):
        options = options._replace(background=hex_color("background", kwargs["background"]))
    padding_color = kwargs.get("padding_color")
    colour = hex_color("padding_color", padding_color) if padding_color else WHITE
    if flag("padding", kwargs.get("padding")):
        options = options._replace(extend=True, background=colour)
    sizing(kwargs.get("sizing"))
    if kwargs.get("quality_mode"):
        options = options._replace(quality_mode=quality_mode(kwargs["quality_mode"]))
    if kwargs.get("autoquality"):
        options = options._replace(autoquality=autoquality(kwargs["autoquality"]))
    options = effect_keywords(options, kwargs)
    return extension_keywords(options, kwargs, extensions) if extensions else options


def extension_keywords(
    options: Options, kwargs: Mapping[str, Any], extensions: Sequence[Extension]
) -> Options:
    """The site's options given as keywords, read as a URL's arguments are.

    A value is its text in a URL: ``sepia=0.8`` is ``sepia:0.8``, a
    list or tuple gives several arguments (``["a", 2]`` is ``:a:2``), as
    does text with ":". None leaves the option out.
    """
    entries = options.extensions
    for extension in extensions:
        value = kwargs.get(extension.name)
        if value is None:
            continue
        args = [str(v) for v in value] if isinstance(value, list | tuple) else str(value).split(":")
        try:
            read = extension.arguments.read(args)
        except ValueError as exc:
            raise ThumbnailError(f"bad {extension.name} {value!r}: {exc}") from exc
        entries = entries_with(entries, extension, read)
    return options._replace(extensions=entries)


def quality_mode(value: Any) -> str:
    """``quality_mode="high"``: resize in linear light (the URL's ``qm``, docs/urls.md)."""
    if value not in QUALITY_MODES:
        raise ThumbnailError(f"bad quality_mode {value!r}: use {' or '.join(QUALITY_MODES)}")
    return str(value)


def autoquality(value: Any) -> AutoQuality:
    """``autoquality="dssim:0.008"``: the URL's ``aq`` arguments (docs/urls.md), as text.

    Read by the URL's own parser, so a tag and a URL can never disagree on
    what a value means; ``"none"`` turns a site-wide ``AUTOQUALITY`` off for
    the tag.
    """
    text = str(value).strip().strip(":")
    try:
        parsed = parse_path(f"/aq:{text}/plain/x")
    except InvalidOptions as exc:
        raise ThumbnailError(f"bad autoquality {value!r}: {exc.detail}") from exc
    return parsed.options.autoquality


def effect_keywords(options: Options, kwargs: Mapping[str, Any]) -> Options:
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
        changes["return_attachment"] = flag("attachment", kwargs["attachment"])
    return options._replace(**changes) if changes else options


def parse_geometry(geometry: str) -> tuple[int, int]:
    """Width and height of "WxH", "W" or "xH" (0 for the side left free)."""
    match = GEOMETRY.fullmatch(str(geometry).strip())
    width = int(match["width"] or 0) if match else 0
    height = int(match["height"] or 0) if match else 0
    if not (width or height):
        raise ThumbnailError(f"bad geometry {geometry!r}: use 'WxH', 'W' or 'xH', or a preset")
    return width, height


def geometry_text(geometry: Any) -> str:
    """A geometry as text: easy-thumbnails' ``(width, height)`` (0 for a free side) too."""
    if isinstance(geometry, tuple | list) and len(geometry) == 2:
        width, height = geometry
        return f"{width or ''}x{height}" if height else str(width)
    return "" if geometry is None else str(geometry)


def is_geometry(text: str) -> bool:
    """Whether ``text`` is a geometry with a size (not a preset name)."""
    try:
        parse_geometry(text)
    except ThumbnailError:
        return False
    return True


def flag(name: str, value: Any) -> bool:
    """A True/False keyword; text such as "false" from a template is not truthy."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in BOOLEAN_WORDS:
            return BOOLEAN_WORDS[word]
    elif value is None or value in (True, False):  # 0 and 1 too
        return bool(value)
    raise ThumbnailError(f"bad {name} {value!r}: use True or False")


def number(name: str, value: Any, convert: type[int] | type[float]) -> int | float:
    """A numeric keyword; its range is the server's (:func:`values_in_range`)."""
    try:
        return convert(value)
    except (TypeError, ValueError) as exc:
        raise ThumbnailError(f"bad {name} {value!r}: not a number") from exc


def crop_gravity(crop: Any) -> Gravity | None:
    """The gravity of a ``crop`` value, or None for no crop.

    sorl-thumbnail's words and focus points ("30% 70%", "30%" for both),
    easy-thumbnails' ``crop=True`` (centred), and the ways of saying "no
    crop" (False, "", sorl's "noop").
    """
    if crop is None or crop is False:
        return None
    if crop is True:
        return Gravity("ce")
    words = str(crop).lower().split()
    if len(words) == 2 and "center" in words:
        words.remove("center")  # "center top" is "top"
    text = " ".join(words)
    if text in NO_CROP:
        return None
    if text in CENTRE_CROP:
        return Gravity("ce")
    if text in CROP_GRAVITY:
        return Gravity(CROP_GRAVITY[text])
    match = PERCENT_CROP.fullmatch(text)
    if match:
        x = int(match["x"])
        y = int(match["y"] if match["y"] is not None else x)
        if x <= 100 and y <= 100:
            return Gravity("fp", x / 100, y / 100)
    raise ThumbnailError(f"bad crop {crop!r}: {crop_hint(text)}")


def crop_names_no_place(crop: Any) -> bool:
    """Whether ``crop`` asks for a crop without saying where (``crop``, ``crop=True``).

    Such a crop centres on the image's focal point when it has one; a crop
    that names a place (``"center"``, ``"top"``, ``"smart"``, ``"30% 60%"``)
    keeps it.
    """
    return crop is True or (isinstance(crop, str) and crop.strip().lower() in CENTRE_CROP)


def focal_point(value: Any) -> FocalPoint | None:
    """The ``focal_point`` keyword: a point, "x,y", an ``(x, y)`` pair; None or False for none."""
    try:
        return parse_focal_point(value)
    except InvalidFocalPoint as exc:
        raise ThumbnailError(str(exc)) from exc


def focal_gravity(point: FocalPoint) -> Gravity:
    """imgproxy's focus-point gravity (``g:fp:x:y``) at ``point``."""
    return Gravity("fp", point.x, point.y)


def crop_hint(text: str) -> str:
    """What to write instead of an unknown ``crop`` value."""
    if "px" in text:
        return "pixel offsets are not supported; use a focus point such as '30% 70%'"
    if text == "scale":
        return "easy-thumbnails' 'scale' (cover the box, cut nothing) has no equivalent; omit crop"
    if "," in text:
        return "for easy-thumbnails' edges use 'top', 'left', 'bottom right', ..."
    return "use center, top, bottom, left, right, 'top left', ..., smart, or 'X% Y%'"


def output_format(requested: Any) -> str:
    """The tag's explicit format: a name from OUTPUT_FORMATS, "best", or "" for auto.

    "best" (``format:best``) is chosen per thumbnail and per ``Accept``
    class by the server, as "auto" is negotiated: the URL says ``@best``.
    """
    fmt = str(requested).lower()
    if fmt == "auto":
        return ""
    if fmt == BEST_FORMAT:
        return fmt
    fmt = FORMAT_NAMES.get(fmt, fmt)
    if fmt not in OUTPUT_FORMATS:
        raise ThumbnailError(
            f"unknown format {requested!r}: use one of {', '.join(OUTPUT_FORMATS)}, best or auto"
        )
    return fmt


def hex_color(name: str, value: Any) -> tuple[int, int, int]:
    """A colour given as "RRGGBB" or "RGB", with or without "#"."""
    text = str(value).lstrip("#")
    if re.fullmatch(r"[0-9a-fA-F]{3}", text):
        text = "".join(c * 2 for c in text)
    if not re.fullmatch(r"[0-9a-fA-F]{6}", text):
        raise ThumbnailError(f"bad {name} {value!r}: use RRGGBB")
    return (int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16))


def sizing(value: Any) -> str:
    """Whose arithmetic sizes the thumbnail (default imgproxy's)."""
    name = str(value or "imgproxy").lower()
    if name not in SIZINGS:
        raise ThumbnailError(f"bad sizing {value!r}: use one of {', '.join(SIZINGS)}")
    return name


def values_in_range(options: Options, extensions: Sequence[Extension] = ()) -> None:
    """Refuse a value out of its option's range (``quality=150``, ``blur=-3``).

    The options are written as a path and read back by the server's own
    parser, so the ranges are the server's, with no copy of them to drift:
    the error names the option, its range and the value.
    """
    try:
        parse_path(build_path(options, "x"), extensions=extensions)
    except InvalidOptions as exc:
        raise ThumbnailError(f"bad {exc.detail}") from exc


# -- presets ----------------------------------------------------------------------


def scoped_preset(name: str, target: str, presets: Mapping[str, str]) -> str:
    """The preset ``name`` means for a source of ``target`` ("app.Model.field", or "").

    easy-thumbnails' aliases may be scoped to an app, a model or a field;
    here those are presets named ``app.name``, ``app.Model.name`` and
    ``app.Model.field.name``. The most specific that exists wins, then the
    plain ``name``, which is returned when none exists (the URL then fails
    as an unknown preset would).
    """
    parts = target.split(".") if target else []
    for end in range(len(parts), 0, -1):
        candidate = ".".join([*parts[:end], name])
        if candidate in presets:
            return candidate
    return name


def preset_is_known(name: str, presets: Mapping[str, str]) -> bool:
    """Whether some scope has a preset ``name`` (see :func:`scoped_preset`)."""
    return name in presets or any(key.endswith("." + name) for key in presets)


# -- what a template says before it renders ------------------------------------------


def check_arguments(
    geometry: str | None,
    names: Iterable[str],
    literals: Mapping[str, Any],
    presets: Mapping[str, str],
    sizes: Collection[str] = (),
    extensions: Sequence[Extension] = (),
) -> None:
    """Raise :class:`ThumbnailError` for what is already wrong in a tag as written.

    ``geometry`` is the literal geometry, or None when a variable gives it;
    ``names`` are all keywords written, ``literals`` the values written as
    literals; ``sizes`` the names of declared sizes, which a geometry may
    name; ``extensions`` the site's. Whatever variables give is checked
    when the tag renders.
    """
    names = set(names)
    error = unknown_keyword_error(names, extensions)
    if error is not None:
        raise error
    if geometry is not None:
        if not geometry.strip():
            if "preset" not in names:
                raise ThumbnailError("no geometry: give 'WxH', 'W' or 'xH', or a preset")
        elif (
            not is_geometry(geometry)
            and not preset_is_known(geometry, presets)
            and geometry.strip() not in sizes
        ):
            raise ThumbnailError(
                f"bad geometry {geometry!r}: use 'WxH', 'W' or 'xH', or a preset name"
            )
    values_in_range(tag_options("1", literals, extensions), extensions)
    preset = literals.get("preset")
    if preset and not preset_is_known(str(preset), presets):
        raise ThumbnailError(f"unknown preset {preset!r}: add it to OXIMG['PRESETS']")
    if literals.get("options"):
        raw = str(literals["options"]).strip("/")
        try:
            parse_path(f"/{raw}/plain/x", presets, extensions=extensions)
        except InvalidOptions as exc:
            raise ThumbnailError(f"bad options {raw!r}: {exc.detail}") from exc
