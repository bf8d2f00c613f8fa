"""What moving from sorl-thumbnail or easy-thumbnails to django-oximg takes, place by place.

``manage.py oximg_migration_scan`` finds a project's templates and Python
files; this module reads them. It is pure functions over text with no Django
import, so its rules can be read and tested alone. :func:`scan_template` and
:func:`scan_python` return :class:`Finding` objects, each a place (path and
line), the code found there and a verdict:

- ``unchanged``: runs as it is on django-oximg (once the template loads
  ``oximg`` and the import names django-oximg's module);
- ``edit``: needs an edit, written out in ``replacement`` where one piece of
  text can say it exactly, and described in ``advice``;
- ``unsupported``: django-oximg has no equivalent; ``advice`` says why and
  what comes closest.

What django-oximg supports today is written down once, in :data:`SUPPORT`,
keyed by library and feature: when the tag learns an option, its row changes
there and nowhere else. The translations (a crop, a colour, an alias into a
preset) are used only for the rows that say ``edit``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django_oximg.arguments import ThumbnailError, output_format
from django_oximg.arguments import crop_gravity as tag_crop_gravity
from django_oximg.core.options import FORMAT_NAMES

SORL = "sorl-thumbnail"
EASY = "easy-thumbnails"

UNCHANGED = "unchanged"
EDIT = "edit"
UNSUPPORTED = "unsupported"
#: Verdicts from best to worst: a tag is as bad as its worst part.
VERDICTS = (UNCHANGED, EDIT, UNSUPPORTED)


@dataclass(frozen=True)
class Rule:
    """What django-oximg makes of one feature: a verdict and, unless unchanged, why or how."""

    verdict: str
    advice: str = ""


def _unchanged(advice: str = "") -> Rule:
    return Rule(UNCHANGED, advice)


def _edit(advice: str) -> Rule:
    return Rule(EDIT, advice)


def _unsupported(advice: str) -> Rule:
    return Rule(UNSUPPORTED, advice)


_REMOVE_KVSTORE = _edit(
    "remove it: no key-value store; sizes and versions live in Django's cache "
    '(OXIMG["METADATA_CACHE_TIMEOUT"])'
)
_REMOVE_FORMAT = _edit(
    "remove it: results keep the source's format (PNG stays PNG, the rest become JPEG); "
    'choose one per tag with format=, or for every thumbnail with a "default" preset'
)
_NOT_A_FILE = _unsupported(
    "django-oximg's thumbnail is not a file until a browser asks for it: "
    "it has url, width, height and format"
)

#: Everything the scanner knows, keyed by (library, feature). The features are
#: the labels findings carry, so a finding can always be traced to its row.
SUPPORT: dict[tuple[str, str], Rule] = {
    # -- sorl-thumbnail: templates ------------------------------------------------
    (SORL, "{% load thumbnail %}"): _edit("load django-oximg's tag library instead"),
    (SORL, "geometry"): _unchanged(),
    (SORL, "crop"): _unchanged(),
    (SORL, "crop by pixels"): _unsupported(
        'no crop by pixel offsets: a focus point, crop="X% Y%", or options="c:W:H:GRAVITY"'
    ),
    (SORL, "upscale"): _unchanged(),
    (SORL, "quality"): _unchanged(),
    (SORL, "blur"): _unchanged(),
    (SORL, "format"): _unchanged(),
    (SORL, "other format"): _unsupported("formats are jpeg, png, webp, avif, gif and auto"),
    (SORL, "padding"): _unchanged(),
    (SORL, "padding_color"): _unchanged(),
    (SORL, "progressive"): _edit(
        "remove it: JPEGs are written baseline, with optimised Huffman tables"
    ),
    (SORL, "orientation"): _edit(
        'EXIF orientation is always applied; options="ar:0" leaves it unapplied'
    ),
    (SORL, "colorspace"): _unsupported("results are sRGB; there is no grayscale output"),
    (SORL, "cropbox"): _edit('a fixed cut before resizing is options="c:W:H:nowe:X:Y"'),
    (SORL, "rounded"): _unsupported("no rounded corners"),
    (SORL, "options"): _unsupported(
        "sorl's options= is a dict of engine options; django-oximg's options= takes "
        'imgproxy options such as "rot:90"'
    ),
    (SORL, "unknown keyword"): _unsupported("not an option django-oximg's tag knows"),
    (SORL, "im.x"): _unchanged(),
    (SORL, "im.y"): _unchanged(),
    (SORL, "im.size"): _unchanged(),
    (SORL, "im.ratio"): _unchanged(),
    (SORL, "im.is_portrait"): _unchanged("in Python an attribute, im.is_portrait, not a method"),
    (SORL, "im.other"): _NOT_A_FILE,
    (SORL, "|is_portrait"): _unchanged(),
    (SORL, "|margin"): _unchanged(),
    (SORL, "|background_margin"): _unsupported(
        'no filter: pad the image to the box (options="ex:1") or centre it with CSS'
    ),
    (SORL, "|resolution"): _unchanged(
        "the URL gains a dpr: no THUMBNAIL_ALTERNATIVE_RESOLUTIONS file is needed"
    ),
    (SORL, "|html_thumbnails"): _unsupported("no filters that rewrite text"),
    (SORL, "|markdown_thumbnails"): _unsupported("no filters that rewrite text"),
    # -- sorl-thumbnail: Python ---------------------------------------------------------
    (SORL, "sorl.thumbnail.get_thumbnail"): _edit("same arguments as the tag"),
    (SORL, "sorl.thumbnail.shortcuts.get_thumbnail"): _edit("same arguments as the tag"),
    (SORL, "sorl.thumbnail.delete"): _edit(
        "purge_source(file.name) drops a source's results; purge_on_change(Model, "
        '"field") does it on every save and delete'
    ),
    (SORL, "sorl.thumbnail.ImageField"): _edit(
        'Django\'s own ImageField (same column); purge_on_change(Model, "field") drops '
        "the results with the file"
    ),
    (SORL, "sorl.thumbnail.fields.ImageField"): _edit(
        'Django\'s own ImageField (same column); purge_on_change(Model, "field") drops '
        "the results with the file"
    ),
    (SORL, "sorl.thumbnail.fields.ImageFormField"): _edit("Django's own forms.ImageField"),
    (SORL, "sorl.thumbnail.admin.AdminImageMixin"): _edit("the admin mixin"),
    (SORL, "sorl.thumbnail.default"): _unsupported(
        "no key-value store or backend object: get_thumbnail() is the API"
    ),
    (SORL, "other name"): _unsupported("no equivalent in django-oximg"),
    (SORL, "INSTALLED_APPS"): _edit(
        'add "django_oximg"; remove "sorl.thumbnail" once no template loads it '
        "(after manage.py migrate thumbnail zero); "
        'OXIMG["TAG_DEFAULTS"] = {"upscale": True, "sizing": "sorl"} keeps sorl\'s sizes'
    ),
    # -- sorl-thumbnail: settings ----------------------------------------------------
    (SORL, "THUMBNAIL_DEBUG"): _edit('tags raise with OXIMG["RAISE_TEMPLATE_ERRORS"]'),
    (SORL, "THUMBNAIL_STORAGE"): _edit(
        'OXIMG["CACHE_STORAGE"] names the results\' storage (an alias in STORAGES)'
    ),
    (SORL, "THUMBNAIL_PREFIX"): _edit("remove it: the result cache has its own layout"),
    (SORL, "THUMBNAIL_KVSTORE"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_KEY_PREFIX"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_CACHE_TIMEOUT"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_HOST"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_PORT"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_DB"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_PASSWORD"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_URL"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_REDIS_TIMEOUT"): _REMOVE_KVSTORE,
    (SORL, "THUMBNAIL_ENGINE"): _edit("remove it: libvips renders every thumbnail"),
    (SORL, "THUMBNAIL_BACKEND"): _unsupported("no pluggable backend"),
    (SORL, "THUMBNAIL_FORMAT"): _edit('the tags\' default format is in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_PRESERVE_FORMAT"): _edit("remove it: keeping the format is the default"),
    (SORL, "THUMBNAIL_QUALITY"): _edit("qualities are per format"),
    (SORL, "THUMBNAIL_UPSCALE"): _edit(
        'django-oximg never enlarges unless asked: "upscale" in OXIMG["TAG_DEFAULTS"]'
    ),
    (SORL, "THUMBNAIL_PADDING"): _edit('"padding" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_PADDING_COLOR"): _edit('"padding_color" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_BLUR"): _edit('"blur" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_ALTERNATIVE_RESOLUTIONS"): _edit(
        '{% picture %} and {% thumbnail_srcset %} with OXIMG["SRCSET_WIDTHS"]'
    ),
    (SORL, "THUMBNAIL_PROGRESSIVE"): _edit("remove it: JPEGs are written baseline"),
    (SORL, "THUMBNAIL_DUMMY"): _unsupported("no placeholder images for missing sources"),
    (SORL, "THUMBNAIL_DUMMY_SOURCE"): _unsupported("no placeholder images for missing sources"),
    (SORL, "THUMBNAIL_DUMMY_RATIO"): _unsupported("no placeholder images for missing sources"),
    (SORL, "THUMBNAIL_URL_TIMEOUT"): _edit('OXIMG["HTTP_TIMEOUT"] (for OXIMG["HTTP_SOURCES"])'),
    (SORL, "THUMBNAIL_COLORSPACE"): _edit(
        'remove it: results are sRGB (options="scp:0" keeps the source\'s profile)'
    ),
    (SORL, "THUMBNAIL_ORIENTATION"): _edit(
        'remove it: orientation is always applied (options="ar:0" per tag turns it off)'
    ),
    (SORL, "THUMBNAIL_FILTER_WIDTH"): _unsupported("no filters that rewrite text"),
    # -- easy-thumbnails: templates ---------------------------------------------------
    (EASY, "{% load thumbnail %}"): _edit("load django-oximg's tag library instead"),
    (EASY, "unquoted size"): _unchanged(),
    (EASY, "quoted size"): _unchanged(),
    (EASY, "size from a variable"): _unchanged(
        'the variable holds "WxH", (W, H) or a preset\'s name, as easy-thumbnails takes them'
    ),
    (EASY, "alias"): _unchanged('the alias is a preset: THUMBNAIL_ALIASES become OXIMG["PRESETS"]'),
    (EASY, "crop"): _unchanged(),
    (EASY, "crop with a word"): _edit(
        'easy-thumbnails centres a crop it does not know; say so: crop="center"'
    ),
    (EASY, 'crop="smart"'): _unchanged(),
    (EASY, "crop from a variable"): _unchanged(
        'the variable must hold a django-oximg crop: "center", "top left", "smart", "X% Y%"...'
    ),
    (EASY, "crop to edges"): _edit('edges are named: crop="top left", "bottom"...'),
    (EASY, "crop with offsets"): _unsupported(
        'no crop offset from an edge; a focus point, crop="X% Y%", comes close'
    ),
    (EASY, 'crop="scale"'): _unsupported('no "scale" crop'),
    (EASY, "upscale"): _unchanged(),
    (EASY, "upscale=value"): _unchanged(),
    (EASY, "quality"): _unchanged(),
    (EASY, "sharpen"): _edit("sharpen takes a Gaussian sigma: sharpen=0.5"),
    (EASY, "detail"): _unsupported("no detail filter; sharpen= comes close"),
    (EASY, "bw"): _unsupported("no grayscale output"),
    (EASY, "replace_alpha"): _edit(
        'flatten onto background= in a format without alpha: background="RRGGBB" format="jpeg"'
    ),
    (EASY, "background"): _edit('pad to the whole box: padding=True padding_color="RRGGBB"'),
    (EASY, "autocrop"): _unsupported("no trimming of plain edges"),
    (EASY, "zoom"): _edit('zoom cuts the source first: options="c:F:F", F = 100 / (100 + zoom)'),
    (EASY, "target"): _edit('a focal point is a focus-point crop: crop="X% Y%"'),
    (EASY, "target without crop"): _edit("remove it: a focal point only matters with crop"),
    (EASY, "keep_icc_profile"): _edit('keep the source\'s colour profile with options="scp:0"'),
    (EASY, "subsampling"): _unsupported("no chroma subsampling option"),
    (EASY, "HIGH_RESOLUTION"): _unsupported(
        "no @2x files: {% thumbnail_srcset %} or {% picture %}, or dpr=2"
    ),
    (EASY, "unknown option"): _unsupported("not an option django-oximg's tag knows"),
    (EASY, "as"): _unchanged(
        "as sets the variable, as in easy-thumbnails, in a template with no {% endthumbnail %}"
    ),
    (EASY, "t.other"): _NOT_A_FILE,
    (EASY, "|thumbnail_url"): _unchanged(),
    (EASY, "|thumbnailer"): _unsupported(
        "no thumbnailer object: {% thumbnail %} or {% thumbnail_url %} with a preset"
    ),
    (EASY, "|thumbnailer_passive"): _unsupported(
        "no thumbnailer object: {% thumbnail %} or {% thumbnail_url %} with a preset"
    ),
    (EASY, "|data_uri"): _unchanged(
        "it renders the image while the page renders: keep it for a few tiny images"
    ),
    # -- easy-thumbnails: Python -------------------------------------------------------
    (EASY, "easy_thumbnails.files.get_thumbnailer"): _edit(
        "django-oximg's get_thumbnailer takes aliases as presets"
    ),
    (EASY, "get_thumbnailer()[alias]"): _unchanged(),
    (EASY, "get_thumbnailer().get_thumbnail(options)"): _unchanged(),
    (EASY, "get_thumbnailer()"): _unchanged(
        'django-oximg\'s has ["alias"] and get_thumbnail(options), no files or generation'
    ),
    (EASY, "easy_thumbnails.fields.ThumbnailerImageField"): _edit(
        "Django's own ImageField (same column: a migration that only changes the class)"
    ),
    (EASY, "easy_thumbnails.fields.ThumbnailerField"): _edit(
        "Django's own FileField (same column: a migration that only changes the class)"
    ),
    (EASY, "easy_thumbnails.widgets.ImageClearableFileInput"): _edit("the thumbnail widget"),
    (EASY, "easy_thumbnails.signals.saved_file"): _edit(
        "render ahead of visitors with manage.py oximg_warm --preset NAME after imports or "
        "deploys; otherwise the first visitor renders it"
    ),
    (EASY, "easy_thumbnails.signal_handlers.generate_aliases"): _edit(
        "render ahead of visitors with manage.py oximg_warm --preset NAME"
    ),
    (EASY, "easy_thumbnails.signal_handlers.generate_aliases_global"): _edit(
        "render ahead of visitors with manage.py oximg_warm --preset NAME"
    ),
    (EASY, "other name"): _unsupported("no equivalent in django-oximg"),
    (EASY, "INSTALLED_APPS"): _edit(
        'add "django_oximg"; remove "easy_thumbnails" once nothing uses it '
        "(after manage.py migrate easy_thumbnails zero); "
        'OXIMG["TAG_DEFAULTS"] = {"sizing": "easy-thumbnails"} keeps its sizes'
    ),
    # -- easy-thumbnails: settings -------------------------------------------------------
    (EASY, "THUMBNAIL_ALIASES"): _edit("aliases are presets"),
    (EASY, "alias definition"): _edit("this alias as a preset"),
    (EASY, "scoped alias"): _edit(
        "a preset named with its scope; for that app, model or field the alias's name finds it"
    ),
    (EASY, "THUMBNAIL_DEFAULT_OPTIONS"): _edit(
        'a preset named "default" applies to every URL (or OXIMG["TAG_DEFAULTS"])'
    ),
    (EASY, "THUMBNAIL_DEBUG"): _edit('tags raise with OXIMG["RAISE_TEMPLATE_ERRORS"]'),
    (EASY, "THUMBNAIL_QUALITY"): _edit("qualities are per format"),
    (EASY, "THUMBNAIL_EXTENSION"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_TRANSPARENCY_EXTENSION"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_PRESERVE_EXTENSIONS"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_DEFAULT_STORAGE"): _edit(
        'OXIMG["CACHE_STORAGE"] names the results\' storage (an alias in STORAGES)'
    ),
    (EASY, "THUMBNAIL_MEDIA_ROOT"): _edit(
        'remove it: results are served by the view; OXIMG["CACHE_STORAGE"] says where they live'
    ),
    (EASY, "THUMBNAIL_MEDIA_URL"): _edit(
        'remove it: results are served by the view; OXIMG["CACHE_STORAGE"] says where they live'
    ),
    (EASY, "THUMBNAIL_BASEDIR"): _edit("remove it: the result cache has its own layout"),
    (EASY, "THUMBNAIL_SUBDIR"): _edit("remove it: the result cache has its own layout"),
    (EASY, "THUMBNAIL_PREFIX"): _edit("remove it: the result cache has its own layout"),
    (EASY, "THUMBNAIL_HIGH_RESOLUTION"): _edit(
        '{% picture %} and {% thumbnail_srcset %} with OXIMG["SRCSET_WIDTHS"], or dpr=2'
    ),
    (EASY, "THUMBNAIL_HIGHRES_INFIX"): _edit("remove it: no @2x files"),
    (EASY, "THUMBNAIL_PROCESSORS"): _unsupported("the pipeline is fixed"),
    (EASY, "THUMBNAIL_SOURCE_GENERATORS"): _unsupported(
        "the pipeline is fixed; SVG and PDF sources are refused"
    ),
    (EASY, "THUMBNAIL_CHECK_CACHE_MISS"): _edit("remove it: no thumbnail table to check"),
    (EASY, "THUMBNAIL_CACHE_DIMENSIONS"): _edit(
        "remove it: sizes are always known before the image exists"
    ),
    (EASY, "THUMBNAIL_NAMER"): _edit("remove it: result names are hashes"),
    (EASY, "THUMBNAIL_WIDGET_OPTIONS"): _edit("ThumbnailFileWidget(geometry=...)"),
    (EASY, "THUMBNAIL_PROGRESSIVE"): _edit("remove it: JPEGs are written baseline"),
}

#: What the replacements import, by the name they use.
OXIMG_IMPORTS = {
    "get_thumbnail": "from django_oximg.thumbnails import get_thumbnail",
    "get_thumbnailer": "from django_oximg.thumbnails import get_thumbnailer",
    "purge_source": "from django_oximg.purge import purge_source",
    "ImageField": "from django.db.models import ImageField",
    "FileField": "from django.db.models import FileField",
    "ThumbnailAdminMixin": "from django_oximg.admin import ThumbnailAdminMixin",
    "ThumbnailFileWidget": "from django_oximg.widgets import ThumbnailFileWidget",
}

#: Python names and the django-oximg name that replaces each (for import lines).
PYTHON_REPLACEMENTS = {
    "sorl.thumbnail.get_thumbnail": "get_thumbnail",
    "sorl.thumbnail.shortcuts.get_thumbnail": "get_thumbnail",
    "sorl.thumbnail.delete": "purge_source",
    "sorl.thumbnail.ImageField": "ImageField",
    "sorl.thumbnail.fields.ImageField": "ImageField",
    "sorl.thumbnail.admin.AdminImageMixin": "ThumbnailAdminMixin",
    "easy_thumbnails.files.get_thumbnailer": "get_thumbnailer",
    "easy_thumbnails.fields.ThumbnailerImageField": "ImageField",
    "easy_thumbnails.fields.ThumbnailerField": "FileField",
    "easy_thumbnails.widgets.ImageClearableFileInput": "ThumbnailFileWidget",
}

#: sorl-thumbnail's settings that are a keyword's default in OXIMG["TAG_DEFAULTS"].
TAG_DEFAULT_SETTINGS = {
    "THUMBNAIL_UPSCALE": "upscale",
    "THUMBNAIL_PADDING": "padding",
    "THUMBNAIL_PADDING_COLOR": "padding_color",
    "THUMBNAIL_BLUR": "blur",
}

#: Template libraries by the name templates load them under.
TEMPLATE_LIBRARIES = {"sorl_thumbnail": SORL, "easy_thumbnails_tags": EASY}
SHARED_LIBRARY = "thumbnail"
OXIMG_LIBRARY = "oximg"

#: Attributes of a thumbnail that django-oximg's has too.
THUMBNAIL_ATTRIBUTES = frozenset({"url", "width", "height"})

#: easy-thumbnails' literal size: "100x100" (0 leaves a side free).
EASY_SIZE = re.compile(r"(\d+)x(\d+)")
#: easy-thumbnails' edge crop: "x,y" percentages, "-" from the right or bottom.
EASY_EDGE_CROP = re.compile(r"(-?)(\d+)?,(-?)(\d+)?")
EASY_TARGET = re.compile(r"(\d+)?,(\d+)?")
SORL_CROPBOX = re.compile(r"\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*")
HEX_COLOR = re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})")


@dataclass(frozen=True)
class Finding:
    """One place that uses sorl-thumbnail or easy-thumbnails, and what it takes to move."""

    path: str
    line: int
    library: str
    #: The SUPPORT row (library, feature) that decided; several for a tag.
    features: tuple[str, ...]
    #: The code as found (one tag, filter, import or setting).
    code: str
    verdict: str
    #: The code as it reads on django-oximg, when one piece of text says it exactly.
    replacement: str = ""
    advice: str = ""


class _Variable:
    """A value only known when the template renders (a variable, a filter)."""

    def __repr__(self) -> str:
        return "VARIABLE"


VARIABLE: Any = _Variable()


@dataclass
class _Part:
    """One argument of a tag or call: its SUPPORT feature and what it becomes."""

    feature: str
    #: The original text, kept as it is when the feature runs unchanged.
    text: str
    #: The django-oximg keywords it becomes when it needs an edit.
    keywords: dict[str, Any] = field(default_factory=dict)


def rule(library: str, feature: str) -> Rule:
    return SUPPORT[(library, feature)]


def worst(verdicts: Iterable[str]) -> str:
    return max(verdicts, key=VERDICTS.index, default=UNCHANGED)


def _advice(library: str, features: Iterable[str]) -> str:
    """The advice of the features that need something, each once, in order.

    When every feature runs unchanged, their caveats (a variable that must
    hold the right kind of value) are the advice.
    """
    rules = [rule(library, feature) for feature in features]
    needing = [found for found in rules if found.verdict != UNCHANGED] or rules
    advice: list[str] = []
    for found in needing:
        if found.advice and found.advice not in advice:
            advice.append(found.advice)
    return "; ".join(advice)


# -- values ---------------------------------------------------------------------------


def literal(text: str) -> Any:
    """The value of a template literal, or :data:`VARIABLE` for anything else."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d*\.\d+", text):
        return float(text)
    return VARIABLE


def template_value(value: Any) -> str:
    """``value`` written as a template literal."""
    if isinstance(value, int | float):  # bool included
        return str(value)
    text = str(value)
    return f"'{text}'" if '"' in text else f'"{text}"'


def python_value(value: Any) -> str:
    """``value`` written as Python, strings in double quotes as ruff and black write them."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def hex_color(value: Any) -> Any:
    """A colour as django-oximg writes it ("#fff" -> "ffffff"); a variable stays one."""
    match = HEX_COLOR.fullmatch(str(value).strip()) if value is not VARIABLE else None
    if not match:
        return value
    digits = match[1]
    return "".join(c * 2 for c in digits).lower() if len(digits) == 3 else digits.lower()


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def tag_takes(parse: Callable[[Any], object], value: Any) -> bool:
    """Whether the tag takes ``value`` (its own parser, ``parse``, says)."""
    try:
        parse(value)
    except ThumbnailError:
        return False
    return True


def crop_gravity(crop: Any) -> str:
    """The imgproxy gravity of a crop the tag takes ("center" -> "ce", "50% 20%" -> "fp:...")."""
    gravity = tag_crop_gravity(crop)
    if gravity is None:
        return ""
    if gravity.type == "fp":
        return f"fp:{_number(gravity.x)}:{_number(gravity.y)}"
    return gravity.type


def _merge(parts: Iterable[_Part]) -> dict[str, Any]:
    """The keywords of every part; raw ``options`` are joined, later keywords win."""
    merged: dict[str, Any] = {}
    for part in parts:
        for name, value in part.keywords.items():
            if name == "options" and "options" in merged:
                merged[name] = f"{merged[name]}/{value}"
            else:
                merged[name] = value
    return merged


# -- sorl-thumbnail options ------------------------------------------------------------


def sorl_option(name: str, value: Any, text: str) -> _Part:
    """sorl-thumbnail's ``name=value`` (tag keyword or get_thumbnail() argument)."""
    if name == "crop":
        if value is VARIABLE or tag_takes(tag_crop_gravity, value):
            return _Part("crop", text, {"crop": value})
        return _Part("crop by pixels", text)
    if name == "format":
        if value is VARIABLE or tag_takes(output_format, value):
            return _Part("format", text, {"format": value})
        return _Part("other format", text)
    if name in ("upscale", "quality", "blur", "padding", "padding_color"):
        return _Part(name, text, {name: value})
    if name == "orientation":
        return _Part("orientation", text, {"options": "ar:0"} if value is False else {})
    if name == "cropbox":
        box = SORL_CROPBOX.fullmatch(str(value)) if value is not VARIABLE else None
        if box:
            x, y, x2, y2 = (int(n) for n in box.groups())
            return _Part("cropbox", text, {"options": f"c:{x2 - x}:{y2 - y}:nowe:{x}:{y}"})
        return _Part("cropbox", text)
    if (SORL, name) in SUPPORT:
        return _Part(name, text)
    return _Part("unknown keyword", text)


# -- easy-thumbnails options ------------------------------------------------------------


def easy_edge_crop(value: str) -> str | None:
    """easy-thumbnails' "0,0" / ",-0" edge crops as crop words; None for offsets."""
    match = EASY_EDGE_CROP.fullmatch(value.replace(" ", ""))
    if not match:
        return None
    x_from_end, x, y_from_end, y = match.groups()
    if (x and int(x)) or (y and int(y)):
        return None
    horizontal = "" if x is None else ("right" if x_from_end else "left")
    vertical = "" if y is None else ("bottom" if y_from_end else "top")
    return " ".join(word for word in (vertical, horizontal) if word) or "center"


def easy_option(name: str, value: Any, text: str, *, flag: bool = False) -> _Part:
    """easy-thumbnails' option ``name`` (``flag``: given without a value, meaning True)."""
    if name == "crop":
        if flag or value in (True, False, None):
            return _Part("crop", text, {"crop": bool(flag or value)})
        if value is VARIABLE:
            return _Part("crop from a variable", text, {"crop": value})
        crop = str(value)
        if crop == "smart":
            return _Part('crop="smart"', text, {"crop": "smart"})
        if crop == "scale":
            return _Part('crop="scale"', text)
        if EASY_EDGE_CROP.fullmatch(crop.replace(" ", "")):
            edges = easy_edge_crop(crop)
            if edges is None:
                return _Part("crop with offsets", text)
            return _Part("crop to edges", text, {"crop": edges})
        if tag_takes(tag_crop_gravity, crop) and crop_gravity(crop) == "ce":
            return _Part("crop", text, {"crop": crop})
        return _Part("crop with a word", text, {"crop": "center"})
    if name == "upscale":
        if flag:
            return _Part("upscale", text, {"upscale": True})
        return _Part("upscale=value", text, {"upscale": value})
    if name == "quality":
        return _Part("quality", text, {"quality": value})
    if name == "sharpen":
        return _Part("sharpen", text, {"sharpen": 0.5} if flag or value else {})
    if name == "replace_alpha":
        return _Part("replace_alpha", text, {"background": hex_color(value), "format": "jpeg"})
    if name == "background":
        return _Part("background", text, {"padding": True, "padding_color": hex_color(value)})
    if name == "zoom":
        if isinstance(value, int | float) and value > 0:
            fraction = _number(100 / (100 + value))
            return _Part("zoom", text, {"options": f"c:{fraction}:{fraction}"})
        return _Part("zoom", text)
    if name == "target":
        point = EASY_TARGET.fullmatch(_target_text(value)) if value is not VARIABLE else None
        if point:
            x, y = (int(n) if n else 50 for n in point.groups())
            return _Part("target", text, {"crop": f"{x}% {y}%"})
        return _Part("target", text)
    if name == "keep_icc_profile":
        return _Part("keep_icc_profile", text, {"options": "scp:0"} if flag or value else {})
    if (EASY, name) in SUPPORT:
        return _Part(name, text)
    return _Part("unknown option", text)


def _target_text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join("" if n is None else str(n) for n in value)
    return str(value).replace(" ", "")


def _easy_target(parts: list[_Part]) -> list[_Part]:
    """A focal point only matters with crop; with one, it decides the crop."""
    has_crop = any(part.feature.startswith("crop") for part in parts)
    for part in parts:
        if part.feature == "target" and not has_crop:
            part.feature, part.keywords = "target without crop", {}
    return parts


def easy_options(options: Mapping[str, Any]) -> tuple[str, list[_Part]]:
    """An easy-thumbnails options dict (an alias, get_thumbnail()) as a geometry and parts."""
    size = options.get("size")
    geometry = ""
    if isinstance(size, tuple | list) and len(size) == 2:
        geometry = f"{int(size[0])}x{int(size[1])}"
    parts = [
        easy_option(name, value, f"{name!r}: {value!r}")
        for name, value in options.items()
        if name != "size"
    ]
    return geometry, _easy_target(parts)


def preset_options(geometry: str, keywords: Mapping[str, Any]) -> str:
    """The imgproxy options a preset needs to do what ``geometry`` and the tag keywords do.

    Raw ``options`` come first, as the tag applies them first.
    """
    segments = [str(keywords["options"])] if keywords.get("options") else []
    crop = keywords.get("crop")
    if geometry:
        width, _, height = geometry.partition("x")
        segments.append(f"rs:{'fill' if crop else 'fit'}:{width or 0}:{height or 0}")
    if crop:
        segments.append(f"g:{crop_gravity(crop)}")
    if keywords.get("upscale"):
        segments.append("el:1")
    for name, short in (("quality", "q"), ("sharpen", "sh"), ("blur", "bl")):
        if keywords.get(name):
            segments.append(f"{short}:{_number(float(keywords[name]))}")
    if keywords.get("padding"):
        segments.append("ex:1")
    colour = keywords.get("padding_color") or keywords.get("background")
    if colour:
        segments.append(f"bg:{colour}")
    if keywords.get("format"):
        segments.append(f"f:{FORMAT_NAMES.get(str(keywords['format']).lower(), 'jpeg')}")
    return "/".join(segments)


# -- templates ----------------------------------------------------------------------------

#: Django's own tokens; like Django's lexer, none spans lines.
TOKEN = re.compile(r"{%(.*?)%}|{{(.*?)}}|{#.*?#}")
BIT = re.compile(r"""(?:"[^"]*"|'[^']*'|[^\s"'])+""")
FILTER = re.compile(r"""\|\s*(\w+)(?:\s*:\s*("[^"]*"|'[^']*'|[^\s|]+))?""")
SKIPPED_BLOCKS = {"comment": "endcomment", "verbatim": "endverbatim"}


@dataclass(frozen=True)
class _Token:
    line: int
    start: int
    end: int
    #: "tag" or "var"
    kind: str
    text: str
    contents: str


def template_tokens(text: str) -> Iterator[_Token]:
    """Tags and variables with their lines, outside {% comment %} and {% verbatim %}."""
    closing = ""
    for match in TOKEN.finditer(text):
        if match[1] is None and match[2] is None:
            continue
        kind = "tag" if match[1] is not None else "var"
        contents = (match[1] if kind == "tag" else match[2]).strip()
        name = contents.split(None, 1)[0] if contents else ""
        if closing:
            if kind == "tag" and name == closing:
                closing = ""
            continue
        if kind == "tag" and name in SKIPPED_BLOCKS:
            closing = SKIPPED_BLOCKS[name]
            continue
        line = text.count("\n", 0, match.start()) + 1
        yield _Token(line, match.start(), match.end(), kind, match[0], contents)


def template_library(text: str, default: str) -> str:
    """Which library a template's {% thumbnail %} is: its load, its syntax, else ``default``."""
    for token in template_tokens(text):
        bits = token.contents.split()
        if token.kind == "tag" and bits[:1] == ["load"]:
            for name in bits[1:]:
                if name in TEMPLATE_LIBRARIES:
                    return TEMPLATE_LIBRARIES[name]
    if re.search(r"{%\s*endthumbnail\b", text):
        return SORL
    easy_habits = (
        r"{%\s*thumbnail\s+\S+\s+\d+x\d+",
        r"\|\s*(thumbnail_url|thumbnailer|thumbnailer_passive)\b",
    )
    if any(re.search(habit, text) for habit in easy_habits):
        return EASY
    return default


def scan_template(
    path: str, text: str, default_library: str = SORL, *, loaded: bool = False
) -> list[Finding]:
    """The findings of one template.

    Only templates that load sorl-thumbnail's or easy-thumbnails' library are
    read, unless ``loaded`` (the library is one of the engine's builtins).
    ``default_library`` decides for ``{% load thumbnail %}`` when the template's
    syntax does not.
    """
    tokens = list(template_tokens(text))
    loads = {
        name
        for token in tokens
        if token.kind == "tag" and token.contents.startswith("load ")
        for name in token.contents.split()[1:]
    }
    thumbnail_libraries = {SHARED_LIBRARY, *TEMPLATE_LIBRARIES}
    if not loaded and not thumbnail_libraries & loads:
        return []
    library = template_library(text, default_library)
    findings: list[Finding] = []
    for index, token in enumerate(tokens):
        bits = BIT.findall(token.contents)
        if token.kind == "tag" and bits[:1] == ["load"]:
            findings.extend(_load_finding(path, token, bits, library))
        elif token.kind == "tag" and bits[:1] == ["thumbnail"]:
            if library == SORL:
                findings.extend(_sorl_tag(path, token, bits, tokens[index + 1 :]))
            else:
                findings.extend(_easy_tag(path, token, bits, tokens[index + 1 :]))
        findings.extend(_filter_findings(path, token, library))
    return findings


def _load_finding(path: str, token: _Token, bits: list[str], library: str) -> list[Finding]:
    names = bits[1:]
    if "from" in names or not {SHARED_LIBRARY, *TEMPLATE_LIBRARIES} & set(names):
        return []
    kept: list[str] = []
    for name in names:
        new = OXIMG_LIBRARY if name == SHARED_LIBRARY or name in TEMPLATE_LIBRARIES else name
        if new not in kept:
            kept.append(new)
    feature = "{% load thumbnail %}"
    return [
        Finding(
            path,
            token.line,
            library,
            (feature,),
            token.text,
            rule(library, feature).verdict,
            "{% load " + " ".join(kept) + " %}",
            rule(library, feature).advice,
        )
    ]


def _sorl_tag(path: str, token: _Token, bits: list[str], rest: list[_Token]) -> list[Finding]:
    as_var = bits[-1] if len(bits) >= 2 and bits[-2] == "as" else None
    arguments = bits[3:-2] if as_var else bits[3:]
    parts = [_Part("geometry", " ".join(bits[1:3]))]
    for bit in arguments:
        name, _, value = bit.partition("=")
        parts.append(sorl_option(name, literal(value), bit))
    findings = [_tag_finding(path, token, SORL, bits[:3], parts, as_var)]
    if as_var:
        findings.extend(_attribute_findings(path, SORL, as_var, _block(rest)))
    return findings


def _easy_tag(path: str, token: _Token, bits: list[str], rest: list[_Token]) -> list[Finding]:
    as_var = bits[-1] if len(bits) > 4 and bits[-2] == "as" else None
    arguments = bits[3:-2] if as_var else bits[3:]
    size = bits[2] if len(bits) > 2 else ""
    value = literal(size)
    head = bits[:2]
    parts: list[_Part] = []
    if EASY_SIZE.fullmatch(size):
        parts.append(_Part("unquoted size", size))
        head.append(f'"{size}"')
    elif isinstance(value, str) and EASY_SIZE.fullmatch(value):
        parts.append(_Part("quoted size", size))
        head.append(size)
    elif isinstance(value, str):
        parts.append(_Part("alias", size, {"preset": value}))
        head.append('""')
    else:
        parts.append(_Part("size from a variable", size))
        head.append(size)
    for bit in arguments:
        name, sep, text = bit.partition("=")
        parts.append(easy_option(name, literal(text), bit, flag=not sep))
    parts = _easy_target(parts)
    if as_var:
        parts.append(_Part("as", f"as {as_var}"))
    finding = _tag_finding(path, token, EASY, head, parts, as_var)
    findings = [finding]
    if as_var:
        uses = [t for t in rest if re.search(rf"\b{re.escape(as_var)}\b", t.contents)]
        last = uses[-1].line if uses else token.line
        advice = finding.advice.replace(
            "after the last use", f"after the last use of {as_var} (line {last})"
        )
        findings[0] = replace(finding, advice=advice)
        findings.extend(_attribute_findings(path, EASY, as_var, rest))
    return findings


def _tag_finding(
    path: str, token: _Token, library: str, head: list[str], parts: list[_Part], as_var: str | None
) -> Finding:
    """One tag's finding: its worst part's verdict and the tag as django-oximg takes it."""
    features = tuple(part.feature for part in parts)
    verdict = worst(rule(library, feature).verdict for feature in features)
    replacement = ""
    if verdict != UNCHANGED:
        kept = [
            part.text
            for part in parts[1:]
            if rule(library, part.feature).verdict == UNCHANGED and part.feature != "as"
        ]
        edited = _merge(part for part in parts if rule(library, part.feature).verdict != UNCHANGED)
        bits = [*head, *kept, *(f"{name}={template_value(v)}" for name, v in edited.items())]
        if as_var:
            bits += ["as", as_var]
        replacement = "{% " + " ".join(bits) + " %}"
    return Finding(
        path,
        token.line,
        library,
        features,
        token.text,
        verdict,
        replacement,
        _advice(library, features),
    )


def _block(rest: list[_Token]) -> list[_Token]:
    """The tokens up to the {% endthumbnail %} that closes a block (nesting counted)."""
    depth = 1
    for index, token in enumerate(rest):
        name = token.contents.split(None, 1)[0] if token.kind == "tag" and token.contents else ""
        if name == "thumbnail" and re.search(r"\bas\s+\w+$", token.contents):
            depth += 1
        elif name == "endthumbnail":
            depth -= 1
            if depth == 0:
                return rest[:index]
    return rest


def _attribute_findings(path: str, library: str, var: str, tokens: list[_Token]) -> list[Finding]:
    """Uses of the thumbnail's attributes that django-oximg's thumbnail does not have."""
    findings = []
    for token in tokens:
        for match in re.finditer(rf"\b{re.escape(var)}\.(\w+)", token.contents):
            attribute = match[1]
            if attribute in THUMBNAIL_ATTRIBUTES:
                continue
            prefix = "im" if library == SORL else "t"
            feature = f"{prefix}.{attribute}"
            if (library, feature) not in SUPPORT:
                feature = f"{prefix}.other"
            found = rule(library, feature)
            replacement = {"x": "width", "y": "height"}.get(attribute, "")
            findings.append(
                Finding(
                    path,
                    token.line,
                    library,
                    (feature,),
                    match[0],
                    found.verdict,
                    f"{var}.{replacement}" if replacement and found.verdict == EDIT else "",
                    found.advice,
                )
            )
    return findings


def _filter_findings(path: str, token: _Token, library: str) -> list[Finding]:
    findings = []
    for match in FILTER.finditer(token.contents):
        name, argument = match[1], match[2]
        feature = f"|{name}"
        owner = next((lib for lib in (library, SORL, EASY) if (lib, feature) in SUPPORT), None)
        if owner is None:
            continue
        found = rule(owner, feature)
        replacement = ""
        if name == "thumbnail_url" and found.verdict == EDIT and token.kind == "var":
            source = token.contents[: match.start()].strip()
            after = token.contents[match.end() :].strip()
            if source and "|" not in source and not after and argument:
                alias = literal(argument)
                preset = template_value(alias) if alias is not VARIABLE else argument
                replacement = f'{{% thumbnail_url {source} "" preset={preset} %}}'
        findings.append(
            Finding(
                path,
                token.line,
                owner,
                (feature,),
                token.text,
                found.verdict,
                replacement,
                found.advice,
            )
        )
    return findings


# -- Python ---------------------------------------------------------------------------------

#: Each library's package, which is also its INSTALLED_APPS entry.
PYTHON_PREFIXES = {"sorl.thumbnail": SORL, "easy_thumbnails": EASY}
GET_THUMBNAILER = "easy_thumbnails.files.get_thumbnailer"


def python_library(dotted: str) -> str | None:
    for prefix, library in PYTHON_PREFIXES.items():
        if dotted == prefix or dotted.startswith(prefix + "."):
            return library
    return None


def _name_feature(library: str, dotted: str) -> str:
    """The SUPPORT feature of a name or of the module it is in ("other name" if neither)."""
    while dotted and dotted not in PYTHON_PREFIXES:
        if (library, dotted) in SUPPORT:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return "other name"


def guess_python_library(text: str, default: str) -> str:
    """The library a Python module's THUMBNAIL_* settings belong to."""
    easy = ("easy_thumbnails", "THUMBNAIL_ALIASES", "get_thumbnailer")
    if any(word in text for word in easy):
        return EASY
    if "sorl" in text:
        return SORL
    return default


def scan_python(path: str, text: str, default_library: str = SORL) -> list[Finding]:
    """The findings of one Python module (models, views, settings, migrations...)."""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return []
    scanner = _PythonScanner(path, text, guess_python_library(text, default_library))
    scanner.visit(tree)
    return sorted(scanner.findings, key=lambda finding: finding.line)


class _PythonScanner(ast.NodeVisitor):
    def __init__(self, path: str, text: str, settings_library: str) -> None:
        self.path = path
        self.text = text
        self.settings_library = settings_library
        #: Local names bound to sorl/easy objects: name -> dotted name.
        self.names: dict[str, str] = {}
        self.findings: list[Finding] = []
        #: get_thumbnailer() calls already reported as part of a larger expression.
        self.seen: set[ast.Call] = set()

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def add(
        self,
        node: ast.AST,
        library: str,
        feature: str,
        code: str,
        replacement: str = "",
        advice: str | None = None,
    ) -> None:
        found = rule(library, feature)
        self.findings.append(
            Finding(
                self.path,
                getattr(node, "lineno", 0),
                library,
                (feature,),
                code,
                found.verdict,
                replacement if found.verdict != UNCHANGED else "",
                found.advice if advice is None else advice,
            )
        )

    # imports

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        library = python_library(module)
        if library is None or node.level:
            return
        for alias in node.names:
            dotted = f"{module}.{alias.name}"
            self.names[alias.asname or alias.name] = dotted
            feature = _name_feature(library, dotted)
            new = PYTHON_REPLACEMENTS.get(dotted)
            replacement = OXIMG_IMPORTS[new] if new else ""
            if new and alias.asname:
                replacement += f" as {alias.asname}"
            self.add(node, library, feature, self.segment(node).splitlines()[0], replacement)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if python_library(alias.name):
                root = alias.asname or alias.name.split(".")[0]
                self.names[root] = alias.name if alias.asname else root

    # references, calls

    def dotted(self, node: ast.AST) -> str | None:
        """``a.b.c`` with ``a`` resolved through this module's sorl/easy imports."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self.dotted(node)
        library = python_library(dotted) if dotted else None
        if library is None or dotted is None:
            self.generic_visit(node)
            return
        feature = _name_feature(library, dotted)
        new = PYTHON_REPLACEMENTS.get(dotted, "")
        replacement = {"ImageField": "models.ImageField", "FileField": "models.FileField"}.get(
            new, new
        )
        self.add(node, library, feature, self.segment(node), replacement)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self.dotted(node.func)
        handled = True
        if dotted in ("sorl.thumbnail.get_thumbnail", "sorl.thumbnail.shortcuts.get_thumbnail"):
            self.sorl_get_thumbnail(node)
        elif dotted == "sorl.thumbnail.delete" and node.args:
            source = self.segment(node.args[0])
            self.add(node, SORL, dotted, self.segment(node), f"purge_source({source}.name)")
        elif dotted == GET_THUMBNAILER:
            if node not in self.seen:
                self.add(node, EASY, "get_thumbnailer()", self.segment(node))
        else:
            handled = False
            inner = node.func.value if isinstance(node.func, ast.Attribute) else None
            if (
                isinstance(inner, ast.Call)
                and self.dotted(inner.func) == GET_THUMBNAILER
                and node.func.attr == "get_thumbnail"  # type: ignore[attr-defined]
            ):
                self.easy_get_thumbnail(node, inner)
                self.seen.add(inner)
        for child in ast.iter_child_nodes(node):
            if not (handled and child is node.func):
                self.visit(child)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        inner = node.value
        if (
            isinstance(inner, ast.Call)
            and self.dotted(inner.func) == GET_THUMBNAILER
            and inner.args
        ):
            self.seen.add(inner)
            alias = self.segment(node.slice)
            source = self.segment(inner.args[0])
            self.add(
                node,
                EASY,
                "get_thumbnailer()[alias]",
                self.segment(node),
                f'get_thumbnail({source}, "", preset={alias})',
            )
        self.generic_visit(node)

    def sorl_get_thumbnail(self, node: ast.Call) -> None:
        parts = []
        for keyword in node.keywords:
            if keyword.arg is None:
                parts.append(_Part("unknown keyword", self.segment(keyword)))
                continue
            parts.append(
                sorl_option(keyword.arg, _python_value(keyword.value), self.segment(keyword))
            )
        features = tuple(part.feature for part in parts) or ("geometry",)
        verdict = worst(rule(SORL, feature).verdict for feature in features)
        replacement = ""
        if verdict != UNCHANGED:
            kept = [self.segment(arg) for arg in node.args] + [
                part.text for part in parts if rule(SORL, part.feature).verdict == UNCHANGED
            ]
            edited = _merge(part for part in parts if rule(SORL, part.feature).verdict != UNCHANGED)
            kept += [f"{name}={python_value(value)}" for name, value in edited.items()]
            replacement = f"get_thumbnail({', '.join(kept)})"
        self.findings.append(
            Finding(
                self.path,
                node.lineno,
                SORL,
                features,
                self.segment(node),
                verdict,
                replacement,
                _advice(SORL, features),
            )
        )

    def easy_get_thumbnail(self, node: ast.Call, thumbnailer: ast.Call) -> None:
        feature = "get_thumbnailer().get_thumbnail(options)"
        options = _python_value(node.args[0]) if node.args else VARIABLE
        if not isinstance(options, dict) or not thumbnailer.args:
            self.add(node, EASY, feature, self.segment(node))
            return
        geometry, parts = easy_options(options)
        features = (feature, *(part.feature for part in parts))
        verdict = worst(rule(EASY, f).verdict for f in features)
        keywords = _merge(parts)
        arguments = [self.segment(thumbnailer.args[0]), python_value(geometry)]
        arguments += [f"{name}={python_value(value)}" for name, value in keywords.items()]
        self.findings.append(
            Finding(
                self.path,
                node.lineno,
                EASY,
                features,
                self.segment(node),
                verdict,
                f"get_thumbnail({', '.join(arguments)})" if verdict != UNCHANGED else "",
                _advice(EASY, features),
            )
        )

    # settings

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.setting(node, target.id, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            self.setting(node, node.target.id, node.value)

    def setting(self, node: ast.stmt, name: str, value: ast.expr) -> None:
        if name == "INSTALLED_APPS":
            self.installed_apps(value)
            return
        if not name.startswith("THUMBNAIL_"):
            return
        other = EASY if self.settings_library == SORL else SORL
        library = next(
            (lib for lib in (self.settings_library, other) if (lib, name) in SUPPORT), ""
        )
        if not library:
            return
        code = self.segment(node).splitlines()[0]
        replacement = ""
        python_value = _python_value(value)
        if name == "THUMBNAIL_QUALITY" and isinstance(python_value, int):
            replacement = f'OXIMG["QUALITY"] = {{"jpeg": {python_value}}}'
        elif name == "THUMBNAIL_FORMAT" and isinstance(python_value, str):
            fmt = FORMAT_NAMES.get(python_value.lower(), python_value.lower())
            replacement = f'OXIMG["TAG_DEFAULTS"] = {{"format": "{fmt}"}}'
        elif name == "THUMBNAIL_UPSCALE" and python_value is False:
            self.add(node, library, name, code, advice="remove it: the default is the same")
            return
        elif name in TAG_DEFAULT_SETTINGS and python_value is not VARIABLE:
            keyword = TAG_DEFAULT_SETTINGS[name]
            default = f'"{python_value}"' if isinstance(python_value, str) else python_value
            replacement = f'OXIMG["TAG_DEFAULTS"] = {{"{keyword}": {default}}}'
        elif name == "THUMBNAIL_DEBUG" and isinstance(python_value, bool):
            replacement = f'OXIMG["RAISE_TEMPLATE_ERRORS"] = {python_value}'
        elif name == "THUMBNAIL_ALIASES" and isinstance(value, ast.Dict):
            replacement = self.aliases(value)
        elif name == "THUMBNAIL_DEFAULT_OPTIONS" and isinstance(python_value, dict):
            geometry, parts = easy_options(python_value)
            replacement = (
                f'OXIMG["PRESETS"] = {{"default": "{preset_options(geometry, _merge(parts))}"}}'
            )
        self.add(node, library, name, code, replacement)

    def installed_apps(self, value: ast.expr) -> None:
        for node in ast.walk(value):
            if isinstance(node, ast.Constant) and node.value in PYTHON_PREFIXES:
                library = PYTHON_PREFIXES[node.value]
                self.add(node, library, "INSTALLED_APPS", self.segment(node), '"django_oximg"')

    def aliases(self, value: ast.Dict) -> str:
        """OXIMG["PRESETS"] for THUMBNAIL_ALIASES, with a finding per alias."""
        presets: dict[str, str] = {}
        for target_node, aliases_node in zip(value.keys, value.values, strict=True):
            target = _python_value(target_node) if target_node is not None else VARIABLE
            if not isinstance(target, str) or not isinstance(aliases_node, ast.Dict):
                continue
            for name_node, options_node in zip(aliases_node.keys, aliases_node.values, strict=True):
                name = _python_value(name_node) if name_node is not None else VARIABLE
                options = _python_value(options_node)
                if not isinstance(name, str) or not isinstance(options, dict):
                    continue
                preset = f"{target}.{name}" if target else name
                geometry, parts = easy_options(options)
                option_text = preset_options(geometry, _merge(parts))
                features = (
                    "scoped alias" if target else "alias definition",
                    *(part.feature for part in parts),
                )
                verdict = worst(rule(EASY, f).verdict for f in features)
                self.findings.append(
                    Finding(
                        self.path,
                        name_node.lineno if name_node is not None else 0,
                        EASY,
                        features,
                        self.segment(name_node) if name_node is not None else name,
                        verdict,
                        f'"{preset}": "{option_text}"',
                        _advice(EASY, features),
                    )
                )
                presets[preset] = option_text
        body = ", ".join(f'"{name}": "{text}"' for name, text in presets.items())
        return f'OXIMG["PRESETS"] = {{{body}}}'


def _python_value(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return VARIABLE


# -- reports ---------------------------------------------------------------------------------


def summary(findings: Iterable[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for finding in findings:
        counts[finding.verdict] += 1
    return counts


def text_report(findings: list[Finding]) -> str:
    """The findings as plain text, one place after another, and their counts."""
    lines = []
    for finding in findings:
        lines.append(f"{finding.path}:{finding.line}: {finding.verdict} ({finding.library})")
        lines.append(f"    {finding.code}")
        if finding.replacement:
            lines.append(f"    -> {finding.replacement}")
        if finding.advice:
            lines.append(f"    {finding.advice}")
    if not findings:
        return "No sorl-thumbnail or easy-thumbnails usage found.\n"
    counts = summary(findings)
    places = "1 place" if len(findings) == 1 else f"{len(findings)} places"
    lines.append(
        f"{places}: {counts[UNCHANGED]} unchanged, {counts[EDIT]} to edit, "
        f"{counts[UNSUPPORTED]} unsupported"
    )
    return "\n".join(lines) + "\n"


def json_report(findings: list[Finding]) -> dict[str, Any]:
    return {
        "findings": [
            finding.__dict__ | {"features": list(finding.features)} for finding in findings
        ],
        "summary": summary(findings),
    }
