"""The URL contract: parse and build imgproxy-style processing options.

A request path (after the signature) looks like either of::

    /<option>/<option>/.../plain/<percent-encoded source>@<ext>
    /<option>/<option>/.../<base64url(source), may be split by "/">.<ext>

Options use imgproxy's names and short forms, with imgproxy's semantics, so any
imgproxy URL builder works unchanged: an option is ``name:arg1:arg2...``;
omitted trailing arguments keep their current values; later options override
earlier ones; a ``default`` preset applies before everything else; the URL's
extension wins over a ``format`` option. Parsing yields a frozen
:class:`Options`; :func:`build_path` turns one back into the canonical path,
which is what the result-cache key is made from (never the raw URL, so encoding
variants of one request share one cache object).

Where imgproxy is lenient this package is strict, because a silently ignored
value would still make a distinct cache key: a bad boolean, a non-finite or
out-of-range number and an unknown format are all
:class:`~django_oximg.core.errors.InvalidOptions`.

This module is the package's public face; the work is in its modules:
:mod:`.model` (the frozen values and their normal form), :mod:`.values` (one
argument's text, read and written), :mod:`.table` (every option, declared
once for both directions), :mod:`.extensions` (a site's own options, and
the steps that make their pixels), :mod:`.parse` and :mod:`.build`.
"""

from __future__ import annotations

from django_oximg.core.options.build import build_path
from django_oximg.core.options.extensions import (
    PLACES,
    Arguments,
    Choice,
    Extension,
    Integer,
    Number,
)
from django_oximg.core.options.model import (
    ANY_URL,
    AUTOQUALITY_METHODS,
    GRAVITY_TYPES,
    MAX_APPLIED_OPTIONS,
    MAX_DIMENSION,
    MAX_DPR,
    MAX_FILENAME_LENGTH,
    MAX_MEGAPIXELS,
    MAX_SIGMA,
    MAX_TRIM_THRESHOLD,
    MAX_ZOOM,
    OUTPUT_FORMATS,
    QUALITY_MODES,
    RESIZING_TYPES,
    WATERMARK_POSITIONS,
    AutoQuality,
    Crop,
    Draft,
    Gravity,
    Options,
    ParsedPath,
    URLRules,
    Watermark,
    lowered_limit,
    result_dimension_limit,
)
from django_oximg.core.options.parse import parse_path
from django_oximg.core.options.table import OPTION_NAMES, PRESET_NAMES, Handler
from django_oximg.core.options.values import (
    BEST_FORMAT,
    BOOLEANS,
    FORMAT_NAMES,
    INTEGER_TEXT,
    REAL_TEXT,
)

__all__ = [
    "ANY_URL",
    "AUTOQUALITY_METHODS",
    "BEST_FORMAT",
    "BOOLEANS",
    "FORMAT_NAMES",
    "GRAVITY_TYPES",
    "INTEGER_TEXT",
    "MAX_APPLIED_OPTIONS",
    "MAX_DIMENSION",
    "MAX_DPR",
    "MAX_FILENAME_LENGTH",
    "MAX_MEGAPIXELS",
    "MAX_SIGMA",
    "MAX_TRIM_THRESHOLD",
    "MAX_ZOOM",
    "OPTION_NAMES",
    "OUTPUT_FORMATS",
    "PLACES",
    "PRESET_NAMES",
    "QUALITY_MODES",
    "REAL_TEXT",
    "RESIZING_TYPES",
    "WATERMARK_POSITIONS",
    "Arguments",
    "AutoQuality",
    "Choice",
    "Crop",
    "Draft",
    "Extension",
    "Gravity",
    "Handler",
    "Integer",
    "Number",
    "Options",
    "ParsedPath",
    "URLRules",
    "Watermark",
    "build_path",
    "lowered_limit",
    "parse_path",
    "result_dimension_limit",
]
