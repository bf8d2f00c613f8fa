"""sorl-thumbnail's and easy-thumbnails' options as django-oximg's tag keywords and presets.

Both scanners read an option's name and value (from a template tag, a
``get_thumbnail()`` call or an alias in the settings) into a :class:`Part`:
the SUPPORT feature it is and the keywords it becomes. The translations are
used only for the features whose row says ``edit``; the rest keep their text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django_oximg.arguments import ThumbnailError, output_format
from django_oximg.arguments import crop_gravity as tag_crop_gravity
from django_oximg.core.options import FORMAT_NAMES
from django_oximg.migration_scan.findings import EASY, SORL, UNCHANGED
from django_oximg.migration_scan.support import SUPPORT, rule

#: easy-thumbnails' edge crop: "x,y" percentages, "-" from the right or bottom.
EASY_EDGE_CROP = re.compile(r"(-?)(\d+)?,(-?)(\d+)?")
EASY_TARGET = re.compile(r"(\d+)?,(\d+)?")
SORL_CROPBOX = re.compile(r"\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*")
HEX_COLOR = re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})")


class _Variable:
    """A value only known when the template renders (a variable, a filter)."""

    def __repr__(self) -> str:
        return "VARIABLE"


VARIABLE: Any = _Variable()


@dataclass
class Part:
    """One argument of a tag or call: its SUPPORT feature and what it becomes."""

    feature: str
    #: The original text, kept as it is when the feature runs unchanged.
    text: str
    #: The django-oximg keywords it becomes when it needs an edit.
    keywords: dict[str, Any] = field(default_factory=dict)


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


def merge(parts: Iterable[Part]) -> dict[str, Any]:
    """The keywords of every part; raw ``options`` are joined, later keywords win."""
    merged: dict[str, Any] = {}
    for part in parts:
        for name, value in part.keywords.items():
            if name == "options" and "options" in merged:
                merged[name] = f"{merged[name]}/{value}"
            else:
                merged[name] = value
    return merged


def rewritten(library: str, parts: Iterable[Part], write: Callable[[Any], str]) -> list[str]:
    """The arguments as django-oximg takes them, for a tag or a ``get_thumbnail()`` call.

    What runs unchanged keeps its text, in place; what needs an edit follows
    as the keywords it becomes, each value written by ``write`` (as a template
    literal or as Python). An ``as`` part is the caller's to write.
    """
    parts = list(parts)
    kept = [
        part.text
        for part in parts
        if rule(library, part.feature).verdict == UNCHANGED and part.feature != "as"
    ]
    edited = merge(part for part in parts if rule(library, part.feature).verdict != UNCHANGED)
    return kept + [f"{name}={write(value)}" for name, value in edited.items()]


# -- sorl-thumbnail options ------------------------------------------------------------


def sorl_option(name: str, value: Any, text: str) -> Part:
    """sorl-thumbnail's ``name=value`` (tag keyword or get_thumbnail() argument)."""
    if name == "crop":
        if value is VARIABLE or tag_takes(tag_crop_gravity, value):
            return Part("crop", text, {"crop": value})
        return Part("crop by pixels", text)
    if name == "format":
        if value is VARIABLE or tag_takes(output_format, value):
            return Part("format", text, {"format": value})
        return Part("other format", text)
    if name in ("upscale", "quality", "blur", "padding", "padding_color"):
        return Part(name, text, {name: value})
    if name == "orientation":
        return Part("orientation", text, {"options": "ar:0"} if value is False else {})
    if name == "cropbox":
        box = SORL_CROPBOX.fullmatch(str(value)) if value is not VARIABLE else None
        if box:
            x, y, x2, y2 = (int(n) for n in box.groups())
            return Part("cropbox", text, {"options": f"c:{x2 - x}:{y2 - y}:nowe:{x}:{y}"})
        return Part("cropbox", text)
    if (SORL, name) in SUPPORT:
        return Part(name, text)
    return Part("unknown keyword", text)


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


def easy_option(name: str, value: Any, text: str, *, flag: bool = False) -> Part:
    """easy-thumbnails' option ``name`` (``flag``: given without a value, meaning True)."""
    if name == "crop":
        if flag or value in (True, False, None):
            return Part("crop", text, {"crop": bool(flag or value)})
        if value is VARIABLE:
            return Part("crop from a variable", text, {"crop": value})
        crop = str(value)
        if crop == "smart":
            return Part('crop="smart"', text, {"crop": "smart"})
        if crop == "scale":
            return Part('crop="scale"', text)
        if EASY_EDGE_CROP.fullmatch(crop.replace(" ", "")):
            edges = easy_edge_crop(crop)
            if edges is None:
                return Part("crop with offsets", text)
            return Part("crop to edges", text, {"crop": edges})
        if tag_takes(tag_crop_gravity, crop) and crop_gravity(crop) == "ce":
            return Part("crop", text, {"crop": crop})
        return Part("crop with a word", text, {"crop": "center"})
    if name == "upscale":
        if flag:
            return Part("upscale", text, {"upscale": True})
        return Part("upscale=value", text, {"upscale": value})
    if name == "quality":
        return Part("quality", text, {"quality": value})
    if name == "sharpen":
        return Part("sharpen", text, {"sharpen": 0.5} if flag or value else {})
    if name == "replace_alpha":
        return Part("replace_alpha", text, {"background": hex_color(value), "format": "jpeg"})
    if name == "background":
        return Part("background", text, {"padding": True, "padding_color": hex_color(value)})
    if name == "zoom":
        if isinstance(value, int | float) and value > 0:
            fraction = _number(100 / (100 + value))
            return Part("zoom", text, {"options": f"c:{fraction}:{fraction}"})
        return Part("zoom", text)
    if name == "target":
        point = EASY_TARGET.fullmatch(_target_text(value)) if value is not VARIABLE else None
        if point:
            x, y = (int(n) if n else 50 for n in point.groups())
            return Part("target", text, {"crop": f"{x}% {y}%"})
        return Part("target", text)
    if name == "keep_icc_profile":
        return Part("keep_icc_profile", text, {"options": "scp:0"} if flag or value else {})
    if (EASY, name) in SUPPORT:
        return Part(name, text)
    return Part("unknown option", text)


def _target_text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join("" if n is None else str(n) for n in value)
    return str(value).replace(" ", "")


def easy_target(parts: list[Part]) -> list[Part]:
    """A focal point only matters with crop; with one, it decides the crop."""
    has_crop = any(part.feature.startswith("crop") for part in parts)
    for part in parts:
        if part.feature == "target" and not has_crop:
            part.feature, part.keywords = "target without crop", {}
    return parts


def easy_options(options: Mapping[str, Any]) -> tuple[str, list[Part]]:
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
    return geometry, easy_target(parts)


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
