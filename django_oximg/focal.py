"""A focal point: the place in an image a crop keeps, as fractions of its width and height.

``FocalPoint(0.3, 0.6)`` is 30 % from the left and 60 % from the top of the
image as shown (EXIF orientation applied), which is imgproxy's ``g:fp:0.3:0.6``.
This module is the value alone: parsing it from what editors, databases and
other packages write, and finding the one stored beside a model's image. The
model field, its form field and the admin widget are in
:mod:`django_oximg.fields`; this module imports no models, so the tags'
argument checks (:mod:`django_oximg.arguments`) can use it cheaply.

Other packages' spellings convert with :func:`from_filer` /
:func:`to_filer` (django-filer's ``subject_location``, "x,y" in pixels)
and :func:`from_ppoi` / :func:`to_ppoi` (django-versatileimagefield's
PPOI, "0.5x0.5").
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("django_oximg")

#: Decimal places kept: a ten-thousandth of the width is under a pixel for
#: images up to 10,000 px, and the stored text stays short.
PRECISION = 4

#: "x,y" as the field stores it; whitespace around either number is allowed.
POINT_TEXT = re.compile(r"\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*")


class InvalidFocalPoint(ValueError):
    """A value that is not a point inside the image (outside 0..1, or not numbers)."""


@dataclass(frozen=True)
class FocalPoint:
    """A point of an image as fractions 0..1 of its width (``x``) and height (``y``).

    Frozen and hashable: the tags keep what they computed per arguments, and
    a focal point is one of them. ``str()`` is the stored text, "0.3,0.6".
    """

    x: float
    y: float

    def __post_init__(self) -> None:
        for name, value in (("x", self.x), ("y", self.y)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidFocalPoint(f"focal point {name} {value!r} is not a number")
            if not (math.isfinite(value) and 0 <= value <= 1):
                raise InvalidFocalPoint(f"focal point {name} {value!r} is outside 0..1")
        # Rounded once here, so equal points from any spelling are one URL.
        object.__setattr__(self, "x", round(float(self.x), PRECISION))
        object.__setattr__(self, "y", round(float(self.y), PRECISION))

    def __str__(self) -> str:
        return f"{self.x:g},{self.y:g}"

    @property
    def crop(self) -> str:
        """The point as a ``crop`` value the tags also take (``"30% 60%"``, rounded)."""
        return f"{round(self.x * 100)}% {round(self.y * 100)}%"


def parse_focal_point(value: Any) -> FocalPoint | None:
    """A :class:`FocalPoint` from ``value``, or None for no point.

    Takes a ``FocalPoint``, an ``(x, y)`` pair of numbers, or the text
    "x,y"; ``None`` and "" (and ``False``, which the tags' keyword uses to
    turn the point off) are no point. Anything else, or a coordinate outside
    0..1, raises :class:`InvalidFocalPoint` saying which.
    """
    if value is None or value is False or value == "":
        return None
    if isinstance(value, FocalPoint):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        return FocalPoint(*value)
    if isinstance(value, str):
        match = POINT_TEXT.fullmatch(value)
        if match:
            try:
                x, y = float(match[1]), float(match[2])
            except ValueError:
                pass
            else:
                return FocalPoint(x, y)
    raise InvalidFocalPoint(f"bad focal point {value!r}: use 'x,y' with x and y between 0 and 1")


# -- other packages' spellings ---------------------------------------------------------


def from_filer(subject_location: str, width: int, height: int) -> FocalPoint | None:
    """django-filer's ``subject_location`` ("x,y" in pixels of the image) as a point.

    ``width`` and ``height`` are the image's, as filer records them
    (``image.width``, ``image.height``). "" (filer's "no subject") is None.
    A location outside the image raises :class:`InvalidFocalPoint`.
    """
    if not str(subject_location or "").strip():
        return None
    if width <= 0 or height <= 0:
        raise InvalidFocalPoint(f"bad image size {width}x{height} for a subject location")
    match = POINT_TEXT.fullmatch(str(subject_location))
    if not match:
        raise InvalidFocalPoint(f"bad subject location {subject_location!r}: use 'x,y' in pixels")
    try:
        x, y = float(match[1]), float(match[2])
    except ValueError as exc:
        raise InvalidFocalPoint(f"bad subject location {subject_location!r}") from exc
    if not (0 <= x <= width and 0 <= y <= height):
        raise InvalidFocalPoint(
            f"subject location {subject_location!r} is outside the {width}x{height} image"
        )
    return FocalPoint(x / width, y / height)


def to_filer(point: FocalPoint, width: int, height: int) -> str:
    """``point`` as django-filer's ``subject_location``: "x,y" in whole pixels."""
    return f"{round(point.x * width)},{round(point.y * height)}"


def from_ppoi(ppoi: str) -> FocalPoint:
    """django-versatileimagefield's PPOI ("0.5x0.5": x, then y, 0..1) as a point.

    The same fractions, so only the separator differs.
    """
    x, separator, y = str(ppoi).strip().partition("x")
    if not separator:
        raise InvalidFocalPoint(f"bad PPOI {ppoi!r}: use '0.5x0.5'")
    return _point_of_text(x, y, f"PPOI {ppoi!r}")


def to_ppoi(point: FocalPoint) -> str:
    """``point`` as django-versatileimagefield's PPOI, "0.3x0.6"."""
    return f"{point.x:g}x{point.y:g}"


def _point_of_text(x: str, y: str, what: str) -> FocalPoint:
    try:
        return FocalPoint(float(x), float(y))
    except ValueError as exc:  # float() failing, or InvalidFocalPoint (a ValueError)
        raise InvalidFocalPoint(f"bad {what}: {exc}") from exc


# -- the point stored beside an image ----------------------------------------------------

#: The attribute, set on a model class by ``FocalPointField``, that maps an
#: image field's name to the focal point field's attribute name.
MODEL_ATTRIBUTE = "_oximg_focal_points"


def stored_focal_point(source: Any) -> FocalPoint | None:
    """The focal point stored beside ``source``, a model's ``FieldFile``; else None.

    Looks for a ``FocalPointField(image_field=...)`` naming ``source``'s
    field on ``source``'s model instance. A stored value that is not a point
    (a row written around the form's validation) is logged as one WARNING
    and ignored: the thumbnail falls back to the crop's own default, never
    an error page.
    """
    instance = getattr(source, "instance", None)
    field = getattr(source, "field", None)
    if instance is None or field is None:
        return None
    attributes: dict[str, str] = getattr(type(instance), MODEL_ATTRIBUTE, {})
    attname = attributes.get(getattr(field, "name", ""))
    if attname is None:
        return None
    value = getattr(instance, attname, None)
    try:
        return parse_focal_point(value)
    except InvalidFocalPoint as exc:
        meta = type(instance)._meta
        logger.warning(
            "focal point of %s.%s pk=%r ignored: %s",
            meta.label,
            attname,
            getattr(instance, "pk", None),
            exc,
        )
        return None
