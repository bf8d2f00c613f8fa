"""The option table: every processing option, declared once for parsing and building.

Each :class:`Option` gives the names a URL may call it by (the long name
first, which is the one errors name; the canonical short name last), the
:class:`~.model.Options` fields it owns, how its arguments are read into a
parse in progress, and the canonical text of those fields. The parser
(:mod:`.parse`) looks options up here by any name; the builder
(:mod:`.build`) walks :data:`OPTIONS` in order, so the table's order *is*
the canonical order of a path's options. Cache keys are made from that
path: reordering the table, or changing how an option writes its text,
changes every key.

Most options take one argument into one field and are written unless that
field holds its default: :func:`single` derives both directions from the
argument's :class:`~.values.Kind`. The others (several arguments, arguments
that keep the current value when left out, meta options such as ``resize``)
have their reading and their text written next to each other below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from django_oximg.core.options.model import (
    AUTOQUALITY_METHODS,
    DEFAULTS,
    MAX_AUTOQUALITY_TARGET,
    MAX_DIMENSION,
    MAX_FILENAME_LENGTH,
    MAX_TRIM_THRESHOLD,
    MAX_ZOOM,
    QUALITY_MODES,
    RESIZING_TYPES,
    WATERMARK_POSITIONS,
    AutoQuality,
    Crop,
    Draft,
    Gravity,
    Options,
    Watermark,
)
from django_oximg.core.options.values import (
    BOOLEAN,
    COUNT,
    DIMENSION,
    DPR,
    FORMAT,
    FORMAT_NAMES,
    MEGAPIXELS,
    QUALITY,
    ROTATION,
    SIGMA,
    TEXT,
    Kind,
    base64_text,
    boolean,
    choice,
    color_text,
    filename_text,
    flag,
    format_name,
    gravity,
    gravity_text,
    hex_color,
    integer,
    invalid,
    number,
    one_argument,
    real,
    trailing_defaults_dropped,
)

#: Reads an option's arguments (the text between its ":"s) into the draft.
Handler = Callable[[Draft, list[str]], None]

#: The canonical arguments of an option's fields, or None to leave it out of the path.
Text = Callable[[Options], str | None]

T = TypeVar("T")


class Option(NamedTuple):
    """One processing option, both ways: read from a URL, written into a canonical path."""

    #: Every name a URL may use: the long name first, the canonical short name last.
    names: tuple[str, ...]
    #: The fields whose canonical text this option writes (none for meta options,
    #: which set other options' fields).
    fields: tuple[str, ...]
    read: Handler
    text: Text

    @property
    def name(self) -> str:
        """The long name, which errors show."""
        return self.names[0]

    @property
    def short(self) -> str:
        """The name canonical paths use."""
        return self.names[-1]

    def segment(self, options: Options) -> str | None:
        """This option's segment of the canonical path of ``options``, or None."""
        text = self.text(options)
        return None if text is None else f"{self.short}:{text}"


def _not_in_path(options: Options) -> None:
    """The text of an option that no canonical path writes as a segment."""
    return None


def single(names: tuple[str, ...], field: str, kind: Kind[T], *, in_path: bool = True) -> Option:
    """An option of one argument held in one field, written unless it holds its default.

    ``in_path`` False: the field is carried elsewhere in the path (``format``
    is the extension).
    """
    option = names[0]
    default = getattr(DEFAULTS, field)

    def read(draft: Draft, args: list[str]) -> None:
        draft[field] = kind.read(option, one_argument(option, args))

    def text(options: Options) -> str | None:
        value = getattr(options, field)
        return None if value == default else kind.write(value)

    return Option(names, (field,), read, text if in_path else _not_in_path)


# -- size and geometry ------------------------------------------------------------

RESIZING_TYPE = single(
    ("resizing_type", "rt"), "resizing_type", choice(RESIZING_TYPES, "unknown resizing type")
)
WIDTH = single(("width", "w"), "width", DIMENSION)
HEIGHT = single(("height", "h"), "height", DIMENSION)
ENLARGE = single(("enlarge", "el"), "enlarge", BOOLEAN)


def extend_option(names: tuple[str, ...], field: str) -> Option:
    """``%extend:%gravity...`` into ``field`` and its ``_gravity`` field (``extend`` and
    ``extend_aspect_ratio``); smart gravity is not allowed here. Written as ``1``
    and the gravity when it is not the centre (the normal form folds that to None)."""
    option = names[0]
    gravity_field = f"{field}_gravity"

    def read(draft: Draft, args: list[str]) -> None:
        if len(args) > 4:
            raise invalid(option, ":".join(args), "too many arguments")
        draft[field] = boolean(option, args[0])
        if len(args) > 1:
            current = draft[gravity_field] or Gravity()
            draft[gravity_field] = gravity(
                f"{option} gravity", args[1:], current, allow_smart=False
            )

    def text(options: Options) -> str | None:
        if not getattr(options, field):
            return None
        anchor: Gravity | None = getattr(options, gravity_field)
        return "1" if anchor is None else f"1:{gravity_text(anchor)}"

    return Option(names, (field, gravity_field), read, text)


#: ``ex:%extend:%gravity...``
EXTEND = extend_option(("extend", "ex"), "extend")


def _read_resize(draft: Draft, args: list[str]) -> None:
    """``rs:%type:%width:%height:%enlarge:%extend:%gravity...``"""
    if len(args) > 8:
        raise invalid("resize", ":".join(args), "too many arguments")
    if args[0]:
        RESIZING_TYPE.read(draft, args[:1])
    if len(args) > 1:
        _read_size(draft, args[1:])


def _read_size(draft: Draft, args: list[str]) -> None:
    """``s:%width:%height:%enlarge:%extend:%gravity...``; empty arguments are skipped."""
    if len(args) > 7:
        raise invalid("size", ":".join(args), "too many arguments")
    for option, arg in zip((WIDTH, HEIGHT, ENLARGE), args, strict=False):
        if arg:
            option.read(draft, [arg])
    if len(args) > 3 and args[3]:
        EXTEND.read(draft, args[3:])


def _read_gravity(draft: Draft, args: list[str]) -> None:
    draft["gravity"] = gravity("gravity", args, draft["gravity"], allow_smart=True)


def _gravity_text(options: Options) -> str | None:
    return None if options.gravity == DEFAULTS.gravity else gravity_text(options.gravity)


def _read_crop(draft: Draft, args: list[str]) -> None:
    """``c:%width:%height:%gravity...``; the gravity defaults to the request's."""
    current = draft["crop"] or Crop()
    width = real("crop", args[0], 0.0, MAX_DIMENSION)
    height = real("crop", args[1], 0.0, MAX_DIMENSION) if len(args) > 1 else current.height
    anchor = current.gravity
    if len(args) > 2:
        anchor = gravity("crop gravity", args[2:], anchor or Gravity(), allow_smart=True)
    draft["crop"] = Crop(width, height, anchor)


def _crop_text(options: Options) -> str | None:
    crop = options.crop
    if crop is None:
        return None
    text = f"{number(crop.width)}:{number(crop.height)}"
    return text if crop.gravity is None else f"{text}:{gravity_text(crop.gravity)}"


def _read_padding(draft: Draft, args: list[str]) -> None:
    """``pd:%top:%right:%bottom:%left``, CSS-style: each value fills the sides after it."""
    if len(args) > 4:
        raise invalid("padding", ":".join(args), "too many arguments")
    top, right, bottom, left = draft["padding"]
    if args[0]:
        top = right = bottom = left = DIMENSION.read("padding", args[0])
    if len(args) > 1 and args[1]:
        right = left = DIMENSION.read("padding", args[1])
    if len(args) > 2 and args[2]:
        bottom = DIMENSION.read("padding", args[2])
    if len(args) > 3 and args[3]:
        left = DIMENSION.read("padding", args[3])
    draft["padding"] = (top, right, bottom, left)


def _padding_text(options: Options) -> str | None:
    """All four sides, always: the CSS shorthand would be shorter, not clearer."""
    if options.padding == DEFAULTS.padding:
        return None
    return ":".join(str(side) for side in options.padding)


def _read_zoom(draft: Draft, args: list[str]) -> None:
    """``z:%zoom_x_y`` or ``z:%zoom_x:%zoom_y``: multiply the requested box."""
    if len(args) > 2:
        raise invalid("zoom", ":".join(args), "too many arguments")
    width = real("zoom", args[0], 0.0, MAX_ZOOM, above_low=True)
    height = real("zoom", args[1], 0.0, MAX_ZOOM, above_low=True) if len(args) > 1 else width
    draft["zoom_width"], draft["zoom_height"] = width, height


def _zoom_text(options: Options) -> str | None:
    """One factor when both axes share it, else both."""
    zoom = [options.zoom_width, options.zoom_height]
    if zoom == [DEFAULTS.zoom_width, DEFAULTS.zoom_height]:
        return None
    return ":".join(map(number, zoom[:1] if zoom[0] == zoom[1] else zoom))


# -- effects ------------------------------------------------------------------------


def _read_trim(draft: Draft, args: list[str]) -> None:
    """``t:%threshold:%color:%equal_hor:%equal_ver``, as imgproxy reads it.

    An empty threshold switches trimming off; the colour, left out or
    empty, is the top-left pixel's; the two flags keep their values when
    left out.
    """
    if len(args) > 4:
        raise invalid("trim", ":".join(args), "too many arguments")
    draft["trim_threshold"] = real("trim", args[0], 0.0, MAX_TRIM_THRESHOLD) if args[0] else None
    color = args[1] if len(args) > 1 else ""
    draft["trim_color"] = hex_color(color, "trim") if color else None
    if len(args) > 2 and args[2]:
        draft["trim_equal_horizontal"] = boolean("trim", args[2])
    if len(args) > 3 and args[3]:
        draft["trim_equal_vertical"] = boolean("trim", args[3])


def _trim_text(options: Options) -> str | None:
    if options.trim_threshold is None:
        return None
    args = [
        number(options.trim_threshold),
        color_text(options.trim_color) if options.trim_color else "",
        flag(options.trim_equal_horizontal),
        flag(options.trim_equal_vertical),
    ]
    return trailing_defaults_dropped(args, ["", "", "0", "0"])


def _read_background(draft: Draft, args: list[str]) -> None:
    """``bg:%R:%G:%B`` or ``bg:%hex``; ``bg:`` alone switches the background off."""
    if len(args) == 1:
        draft["background"] = hex_color(args[0]) if args[0] else None
    elif len(args) == 3:
        red, green, blue = (integer("background", arg, 0, 255) for arg in args)
        draft["background"] = (red, green, blue)
    else:
        raise invalid("background", ":".join(args), "takes R:G:B or a hex colour")


def _background_text(options: Options) -> str | None:
    return None if options.background is None else color_text(options.background)


def _read_flip(draft: Draft, args: list[str]) -> None:
    """``fl:%horizontal:%vertical``; empty arguments are skipped."""
    if len(args) > 2:
        raise invalid("flip", ":".join(args), "too many arguments")
    if args[0]:
        draft["flip_horizontal"] = boolean("flip", args[0])
    if len(args) > 1 and args[1]:
        draft["flip_vertical"] = boolean("flip", args[1])


def _flip_text(options: Options) -> str | None:
    """Both flags, whichever is set."""
    if not (options.flip_horizontal or options.flip_vertical):
        return None
    return f"{flag(options.flip_horizontal)}:{flag(options.flip_vertical)}"


def _read_watermark(draft: Draft, args: list[str]) -> None:
    """``wm:%opacity:%position:%x_offset:%y_offset:%scale``; empty arguments are skipped."""
    if len(args) > 5:
        raise invalid("watermark", ":".join(args), "too many arguments")
    mark: Watermark = draft["watermark"]
    changes: dict[str, Any] = {"opacity": real("watermark", args[0], 0.0, 1.0)}
    if len(args) > 1 and args[1]:
        if args[1] not in WATERMARK_POSITIONS:
            raise invalid("watermark", args[1], "unknown position")
        changes["position"] = args[1]
    for name, index in (("x", 2), ("y", 3)):
        if len(args) > index and args[index]:
            changes[name] = real("watermark", args[index], -MAX_DIMENSION, MAX_DIMENSION)
    if len(args) > 4 and args[4]:
        changes["scale"] = real("watermark", args[4], 0.0, MAX_ZOOM, above_low=True)
    draft["watermark"] = mark._replace(**changes)


def _watermark_text(options: Options) -> str | None:
    mark = options.watermark
    if not mark.opacity:
        return None
    numbers = [number(value) for value in (mark.x, mark.y, mark.scale)]
    return trailing_defaults_dropped(
        [number(mark.opacity), mark.position, *numbers], ["", "ce", "0", "0", "0"]
    )


# -- output and handling --------------------------------------------------------


def _read_format_quality(draft: Draft, args: list[str]) -> None:
    """``fq:%format:%quality:...``: merged into earlier pairs; quality 0 removes one."""
    if len(args) % 2:
        raise invalid("format_quality", ":".join(args), "needs format:quality pairs")
    merged = dict(draft["format_quality"])
    for name, quality in zip(args[::2], args[1::2], strict=True):
        merged[format_name("format_quality", name)] = integer("format_quality", quality, 0, 100)
    draft["format_quality"] = tuple(sorted((f, q) for f, q in merged.items() if q))


def _format_quality_text(options: Options) -> str | None:
    if not options.format_quality:
        return None
    return ":".join(f"{name}:{quality}" for name, quality in options.format_quality)


def _read_autoquality(draft: Draft, args: list[str]) -> None:
    """``aq:%method:%target:%min_quality:%max_quality:%allowed_error``.

    Every argument may be left out or empty, keeping what an earlier
    ``aq`` (or the site's setting) says. A minimum above the maximum, both
    given, is refused: no quality meets it.
    """
    if len(args) > 5:
        raise invalid("autoquality", ":".join(args), "too many arguments")
    args = args + [""] * (5 - len(args))
    current: AutoQuality = draft["autoquality"]
    changes: dict[str, Any] = {}
    if args[0]:
        if args[0] not in AUTOQUALITY_METHODS:
            why = f"expected one of {', '.join(AUTOQUALITY_METHODS)}"
            raise invalid("autoquality", args[0], why)
        changes["method"] = args[0]
    if args[1]:
        changes["target"] = real("autoquality", args[1], 0.0, MAX_AUTOQUALITY_TARGET)
    for field, text in (("min_quality", args[2]), ("max_quality", args[3])):
        if text:
            changes[field] = integer("autoquality", text, 1, 100)
    if args[4]:
        changes["allowed_error"] = real("autoquality", args[4], 0.0, 1.0)
    value = current._replace(**changes)
    if value.min_quality and value.max_quality and value.min_quality > value.max_quality:
        raise invalid("autoquality", ":".join(args), "min_quality above max_quality")
    draft["autoquality"] = value


def _autoquality_text(options: Options) -> str | None:
    value = options.autoquality
    if value == DEFAULTS.autoquality:
        return None
    args = [
        value.method,
        "" if value.target is None else number(value.target),
        str(value.min_quality or ""),
        str(value.max_quality or ""),
        "" if value.allowed_error is None else number(value.allowed_error),
    ]
    return trailing_defaults_dropped(args, [""] * 5)


def _read_filename(draft: Draft, args: list[str]) -> None:
    """``fn:%filename:%encoded``: the name, or its URL-safe base64 when ``encoded``."""
    if len(args) > 2:
        raise invalid("filename", ":".join(args), "too many arguments")
    name = args[0]
    if len(args) > 1 and args[1] and boolean("filename", args[1]):
        name = base64_text(name, "filename")
    if len(name) > MAX_FILENAME_LENGTH:
        raise invalid("filename", name, f"longer than {MAX_FILENAME_LENGTH} characters")
    draft["filename"] = name


def _filename_text(options: Options) -> str | None:
    return filename_text(options.filename) if options.filename else None


def _read_skip_processing(draft: Draft, args: list[str]) -> None:
    """``skp:%extension1:%extension2...``: added to the formats already named."""
    names = set(draft["skip_processing"])
    for text in args:
        name = FORMAT_NAMES.get(text)
        if name is None:
            raise invalid("skip_processing", text, "unsupported format")
        names.add(name)
    draft["skip_processing"] = tuple(sorted(names))


def _skip_processing_text(options: Options) -> str | None:
    return ":".join(options.skip_processing) if options.skip_processing else None


#: Every option but ``preset``, in the canonical order of a built path.
OPTIONS: tuple[Option, ...] = (
    # Meta options: they set the fields of the options they stand for.
    Option(("resize", "rs"), (), _read_resize, _not_in_path),
    Option(("size", "s"), (), _read_size, _not_in_path),
    # Size, gravity, crop and padding.
    RESIZING_TYPE,
    WIDTH,
    HEIGHT,
    single(("min-width", "mw"), "min_width", DIMENSION),
    single(("min-height", "mh"), "min_height", DIMENSION),
    single(("dpr",), "dpr", DPR),
    ENLARGE,
    EXTEND,
    Option(("gravity", "g"), ("gravity",), _read_gravity, _gravity_text),
    Option(("crop", "c"), ("crop",), _read_crop, _crop_text),
    Option(("padding", "pd"), ("padding",), _read_padding, _padding_text),
    Option(("zoom", "z"), ("zoom_width", "zoom_height"), _read_zoom, _zoom_text),
    extend_option(("extend_aspect_ratio", "extend_ar", "exar"), "extend_aspect_ratio"),
    # Background, filters, rotation and flips.
    Option(
        ("trim", "t"),
        ("trim_threshold", "trim_color", "trim_equal_horizontal", "trim_equal_vertical"),
        _read_trim,
        _trim_text,
    ),
    Option(("background", "bg"), ("background",), _read_background, _background_text),
    single(("blur", "bl"), "blur", SIGMA),
    single(("sharpen", "sh"), "sharpen", SIGMA),
    single(("rotate", "rot"), "rotate", ROTATION),
    Option(("flip", "fl"), ("flip_horizontal", "flip_vertical"), _read_flip, _flip_text),
    single(("pixelate", "pix"), "pixelate", DIMENSION),
    Option(("watermark", "wm"), ("watermark",), _read_watermark, _watermark_text),
    # Encoding, metadata and handling.
    single(("quality", "q"), "quality", QUALITY),
    single(
        ("quality_mode", "qm"),
        "quality_mode",
        choice(QUALITY_MODES, f"expected one of {', '.join(QUALITY_MODES)}"),
    ),
    Option(
        ("format_quality", "fq"), ("format_quality",), _read_format_quality, _format_quality_text
    ),
    Option(("autoquality", "aq"), ("autoquality",), _read_autoquality, _autoquality_text),
    # The format is the path's extension (which wins over this option, as in imgproxy).
    single(("format", "f", "ext"), "format", FORMAT, in_path=False),
    single(("strip_metadata", "sm"), "strip_metadata", BOOLEAN),
    single(("keep_copyright", "kcr"), "keep_copyright", BOOLEAN),
    single(("strip_color_profile", "scp"), "strip_color_profile", BOOLEAN),
    single(("auto_rotate", "ar"), "auto_rotate", BOOLEAN),
    single(("cachebuster", "cb"), "cachebuster", TEXT),
    # ``exp:%timestamp``: stored only; the thumbnailer compares it with its clock.
    single(("expires", "exp"), "expires", COUNT),
    single(("max_bytes", "mb"), "max_bytes", COUNT),
    Option(("filename", "fn"), ("filename",), _read_filename, _filename_text),
    single(("return_attachment", "att"), "return_attachment", BOOLEAN),
    single(("raw",), "raw", BOOLEAN),
    single(("enforce_thumbnail", "eth"), "enforce_thumbnail", BOOLEAN),
    Option(
        ("skip_processing", "skp"),
        ("skip_processing",),
        _read_skip_processing,
        _skip_processing_text,
    ),
    single(("max_src_resolution", "msr"), "max_src_resolution", MEGAPIXELS),
    single(
        ("max_animation_frame_resolution", "mafr"), "max_animation_frame_resolution", MEGAPIXELS
    ),
    single(("max_src_file_size", "msfs"), "max_src_file_size", COUNT),
    single(("max_animation_frames", "maf"), "max_animation_frames", COUNT),
    single(("max_result_dimension", "mrd"), "max_result_dimension", DIMENSION),
)

#: Every option by each of its names.
BY_NAME = {name: option for option in OPTIONS for name in option.names}

#: ``preset``/``pr`` recurse into the parser, so they are not in the table.
PRESET_NAMES = ("preset", "pr")

#: Every option name a URL may use, long and short.
OPTION_NAMES = frozenset(BY_NAME) | frozenset(PRESET_NAMES)

#: Why an open-source imgproxy option is refused here, by each of its names:
#: a URL naming one gets a 400 saying so, not "Unknown option".
#: ``preserve_hdr``: every result is 8-bit sRGB (the colour step, the
#: encoders' qualities and the memory estimate are all 8-bit), and a JPEG's
#: UltraHDR gain map would have to follow every crop, turn, flip and
#: extension, where libvips keeps it right only through its thumbnail
#: operation (and writes it into JPEG only); docs/urls.md says more.
UNSUPPORTED: Mapping[str, str] = MappingProxyType(
    dict.fromkeys(
        ("preserve_hdr", "ph"),
        "preserve_hdr is not supported: results are 8-bit, without an HDR gain map",
    )
)
