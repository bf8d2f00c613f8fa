"""What django-oximg supports, feature by feature, and the verdict a place gets from it.

Written down once, in :data:`SUPPORT`, keyed by library and feature: when the
tag learns an option, its row changes here and nowhere else. The scanners
label what they find with the features; :func:`judged` turns the labels into
a finding's verdict and advice, so no scanner decides a verdict itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from django_oximg.migration_scan.findings import (
    EASY,
    EDIT,
    OSCAR,
    OSCAR_THUMBNAILER,
    SORL,
    UNCHANGED,
    UNSUPPORTED,
    Finding,
    Rule,
    worst,
)


def _unchanged(advice: str = "") -> Rule:
    return Rule(UNCHANGED, advice)


def _edit(advice: str) -> Rule:
    return Rule(EDIT, advice)


def _unsupported(advice: str) -> Rule:
    return Rule(UNSUPPORTED, advice)


#: Rows that several features (of one library or of both) share word for word.
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
_RESULTS_STORAGE = _edit(
    'OXIMG["CACHE_STORAGE"] names the results\' storage (an alias in STORAGES)'
)
_SERVED_BY_THE_VIEW = _edit(
    'remove it: results are served by the view; OXIMG["CACHE_STORAGE"] says where they live'
)
_DJANGO_IMAGE_FIELD = _edit(
    'Django\'s own ImageField (same column); purge_on_change(Model, "field") drops '
    "the results with the file. An admin with sorl's AdminImageMixin needs "
    "django_oximg.admin.ThumbnailAdminMixin in the same change: that mixin previews "
    "only sorl's ImageField, so its previews go blank without a word"
)
_SORL_ADMIN_MIXIN = _edit(
    "django_oximg.admin.ThumbnailAdminMixin, which previews Django's own ImageField: "
    "this mixin previews only sorl's, so its previews go blank without a word once the "
    "field is Django's; replace the two in one change"
)
_EASY_WIDGET = _edit(
    "django_oximg.widgets.ThumbnailFileWidget (in the admin, "
    "django_oximg.admin.ThumbnailAdminMixin, which previews every ImageField); "
    "formfield_overrides keyed by ThumbnailerImageField stop matching once the field "
    "is Django's, and the previews go blank: replace the two in one change"
)


def _import_gone(library: str, module: str) -> Rule:
    return _edit(
        f"the module goes with {library} (No module named '{module}'): import what "
        "replaces the names used below instead"
    )


def _historical_import(library: str, module: str) -> Rule:
    return _edit(
        f"a historical migration imports {library}, so once it is uninstalled a fresh "
        f"migrate fails (No module named '{module}'). Delete the import and write its "
        "fields in this migration as Django's models.ImageField (models.FileField for "
        "ThumbnailerField), as Django advises for a field class that is gone: the same "
        "column, so no database change. Or, once the model uses Django's field, squash "
        "the app's migrations (manage.py squashmigrations) and delete the old ones when "
        "every database has applied the squashed one"
    )


_HISTORICAL_FIELD = _edit(
    "the field of a historical migration: Django's own field is the same column, so "
    "editing the migration changes no database; once the model uses it too, "
    "manage.py makemigrations --check finds nothing to write"
)
_WARM_A_PRESET = _edit("render ahead of visitors with manage.py oximg_warm --preset NAME")
_NO_THUMBNAILER = _unsupported(
    "no thumbnailer object: {% thumbnail %} or {% thumbnail_url %} with a preset"
)
_OWN_LAYOUT = _edit("remove it: the result cache has its own layout")
_NO_DUMMY = _unsupported("no placeholder images for missing sources")
_NO_TEXT_FILTERS = _unsupported("no filters that rewrite text")
_UNKNOWN_OPTION = _unsupported("not an option django-oximg's tag knows")
_NO_EQUIVALENT = _unsupported("no equivalent in django-oximg")
_RAISE_TEMPLATE_ERRORS = _edit('tags raise with OXIMG["RAISE_TEMPLATE_ERRORS"]')
_SAME_ARGUMENTS = _edit("same arguments as the tag")
_BASELINE = _edit('OXIMG["JPEG_PROGRESSIVE"]: every JPEG progressive (baseline without it)')
_PER_FORMAT_QUALITY = _edit("qualities are per format")
_LOAD_OXIMG = _edit("load django-oximg's tag library instead")

#: Everything the scanner knows, keyed by (library, feature). The features are
#: the labels findings carry, so a finding can always be traced to its row.
SUPPORT: dict[tuple[str, str], Rule] = {
    # -- sorl-thumbnail: templates ------------------------------------------------
    (SORL, "{% load thumbnail %}"): _LOAD_OXIMG,
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
        'remove it: JPEGs are written baseline, or all progressive with OXIMG["JPEG_PROGRESSIVE"]'
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
    (SORL, "unknown keyword"): _UNKNOWN_OPTION,
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
    (SORL, "|html_thumbnails"): _NO_TEXT_FILTERS,
    (SORL, "|markdown_thumbnails"): _NO_TEXT_FILTERS,
    # -- sorl-thumbnail: Python ---------------------------------------------------------
    (SORL, "sorl.thumbnail.get_thumbnail"): _SAME_ARGUMENTS,
    (SORL, "sorl.thumbnail.shortcuts.get_thumbnail"): _SAME_ARGUMENTS,
    (SORL, "sorl.thumbnail.delete"): _edit(
        "purge_source(file.name) drops a source's results; purge_on_change(Model, "
        '"field") does it on every save and delete'
    ),
    (SORL, "sorl.thumbnail.ImageField"): _DJANGO_IMAGE_FIELD,
    (SORL, "sorl.thumbnail.fields.ImageField"): _DJANGO_IMAGE_FIELD,
    (SORL, "sorl.thumbnail.fields.ImageFormField"): _edit("Django's own forms.ImageField"),
    (SORL, "sorl.thumbnail.admin.AdminImageMixin"): _SORL_ADMIN_MIXIN,
    (SORL, "import"): _import_gone(SORL, "sorl"),
    (SORL, "import in a migration"): _historical_import(SORL, "sorl"),
    (SORL, "field in a migration"): _HISTORICAL_FIELD,
    (SORL, "sorl.thumbnail.default"): _unsupported(
        "no key-value store or backend object: get_thumbnail() is the API"
    ),
    (SORL, "other name"): _NO_EQUIVALENT,
    (SORL, "INSTALLED_APPS"): _edit(
        'add "django_oximg"; remove "sorl.thumbnail" once no template loads it '
        "(after manage.py migrate thumbnail zero); "
        'OXIMG["TAG_DEFAULTS"] = {"upscale": True, "sizing": "sorl"} keeps sorl\'s sizes'
    ),
    # -- sorl-thumbnail: settings ----------------------------------------------------
    (SORL, "THUMBNAIL_DEBUG"): _RAISE_TEMPLATE_ERRORS,
    (SORL, "THUMBNAIL_STORAGE"): _RESULTS_STORAGE,
    (SORL, "THUMBNAIL_PREFIX"): _OWN_LAYOUT,
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
    (SORL, "THUMBNAIL_QUALITY"): _PER_FORMAT_QUALITY,
    (SORL, "THUMBNAIL_UPSCALE"): _edit(
        'django-oximg never enlarges unless asked: "upscale" in OXIMG["TAG_DEFAULTS"]'
    ),
    (SORL, "THUMBNAIL_PADDING"): _edit('"padding" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_PADDING_COLOR"): _edit('"padding_color" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_BLUR"): _edit('"blur" in OXIMG["TAG_DEFAULTS"]'),
    (SORL, "THUMBNAIL_ALTERNATIVE_RESOLUTIONS"): _edit(
        '{% picture %} and {% thumbnail_srcset %} with OXIMG["SRCSET_WIDTHS"]'
    ),
    (SORL, "THUMBNAIL_PROGRESSIVE"): _BASELINE,
    (SORL, "THUMBNAIL_DUMMY"): _NO_DUMMY,
    (SORL, "THUMBNAIL_DUMMY_SOURCE"): _NO_DUMMY,
    (SORL, "THUMBNAIL_DUMMY_RATIO"): _NO_DUMMY,
    (SORL, "THUMBNAIL_URL_TIMEOUT"): _edit('OXIMG["HTTP_TIMEOUT"] (for OXIMG["HTTP_SOURCES"])'),
    (SORL, "THUMBNAIL_COLORSPACE"): _edit(
        'remove it: results are sRGB (options="scp:0" keeps the source\'s profile)'
    ),
    (SORL, "THUMBNAIL_ORIENTATION"): _edit(
        'remove it: orientation is always applied (options="ar:0" per tag turns it off)'
    ),
    (SORL, "THUMBNAIL_FILTER_WIDTH"): _NO_TEXT_FILTERS,
    # -- easy-thumbnails: templates ---------------------------------------------------
    (EASY, "{% load thumbnail %}"): _LOAD_OXIMG,
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
    (EASY, "unknown option"): _UNKNOWN_OPTION,
    (EASY, "as"): _unchanged(
        "as sets the variable, as in easy-thumbnails, in a template with no {% endthumbnail %}"
    ),
    (EASY, "t.other"): _NOT_A_FILE,
    (EASY, "|thumbnail_url"): _unchanged(),
    (EASY, "|thumbnailer"): _NO_THUMBNAILER,
    (EASY, "|thumbnailer_passive"): _NO_THUMBNAILER,
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
        "Django's own ImageField (same column: a migration that only changes the class). "
        "An admin that previews it through formfield_overrides keyed by "
        "ThumbnailerImageField goes blank without a word: "
        "django_oximg.admin.ThumbnailAdminMixin previews Django's"
    ),
    (EASY, "easy_thumbnails.fields.ThumbnailerField"): _edit(
        "Django's own FileField (same column: a migration that only changes the class)"
    ),
    (EASY, "easy_thumbnails.widgets.ImageClearableFileInput"): _EASY_WIDGET,
    (EASY, "import"): _import_gone(EASY, "easy_thumbnails"),
    (EASY, "import in a migration"): _historical_import(EASY, "easy_thumbnails"),
    (EASY, "field in a migration"): _HISTORICAL_FIELD,
    (EASY, "easy_thumbnails.signals.saved_file"): _edit(
        "render ahead of visitors with manage.py oximg_warm --preset NAME after imports or "
        "deploys; otherwise the first visitor renders it"
    ),
    (EASY, "easy_thumbnails.signal_handlers.generate_aliases"): _WARM_A_PRESET,
    (EASY, "easy_thumbnails.signal_handlers.generate_aliases_global"): _WARM_A_PRESET,
    (EASY, "other name"): _NO_EQUIVALENT,
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
    (EASY, "THUMBNAIL_DEBUG"): _RAISE_TEMPLATE_ERRORS,
    (EASY, "THUMBNAIL_QUALITY"): _PER_FORMAT_QUALITY,
    (EASY, "THUMBNAIL_EXTENSION"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_TRANSPARENCY_EXTENSION"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_PRESERVE_EXTENSIONS"): _REMOVE_FORMAT,
    (EASY, "THUMBNAIL_DEFAULT_STORAGE"): _RESULTS_STORAGE,
    (EASY, "THUMBNAIL_MEDIA_ROOT"): _SERVED_BY_THE_VIEW,
    (EASY, "THUMBNAIL_MEDIA_URL"): _SERVED_BY_THE_VIEW,
    (EASY, "THUMBNAIL_BASEDIR"): _OWN_LAYOUT,
    (EASY, "THUMBNAIL_SUBDIR"): _OWN_LAYOUT,
    (EASY, "THUMBNAIL_PREFIX"): _OWN_LAYOUT,
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
    (EASY, "THUMBNAIL_PROGRESSIVE"): _BASELINE,
    # -- django-oscar (on sorl-thumbnail by default, or easy-thumbnails) ------------------
    (OSCAR, "{% oscar_thumbnail %}"): _unchanged(
        f'Oscar\'s tag runs as it is once OSCAR_THUMBNAILER = "{OSCAR_THUMBNAILER}"'
    ),
    (OSCAR, "OSCAR_THUMBNAILER"): _edit(
        "Oscar's {% oscar_thumbnail %} renders through the class this names: "
        "django-oximg's takes the same arguments"
    ),
    (OSCAR, "oscar in INSTALLED_APPS"): _edit(
        "Oscar renders {% oscar_thumbnail %} through sorl-thumbnail unless "
        "OSCAR_THUMBNAILER names another class; this settings module names none"
    ),
}


def rule(library: str, feature: str) -> Rule:
    return SUPPORT[(library, feature)]


def advice_for(library: str, features: Iterable[str]) -> str:
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


def judged(
    path: str,
    line: int,
    library: str,
    features: tuple[str, ...],
    code: str,
    replacement: str = "",
    advice: str | None = None,
) -> Finding:
    """The finding for ``code``: its worst feature's verdict and the features' advice.

    A place that runs unchanged has nothing to replace, so ``replacement`` is
    kept only for one that needs something. ``advice`` overrides the table's
    where the value found says more than the feature does.
    """
    verdict = worst(rule(library, feature).verdict for feature in features)
    return Finding(
        path,
        line,
        library,
        features,
        code,
        verdict,
        replacement if verdict != UNCHANGED else "",
        advice_for(library, features) if advice is None else advice,
    )
