"""What the focal point widget previews: the crops of an image that follow its point.

The widget (:class:`django_oximg.fields.FocalPointWidget`) shows, beside
the image to click, one small preview per size that centres on the focal
point: the sizes the model declares for the image field
(:mod:`django_oximg.declared_sizes`) and any the widget is given. A preview
is the widget's own fitted image cut in the browser to the size's aspect
ratio around the point (CSS ``object-fit: cover`` and ``object-position``,
``focal_point.js``), so moving the point moves every preview at once with
no request: the URLs are signed, and a page cannot sign one for a point it
has not saved yet. The cut is the server's (imgproxy's ``g:fp``: the box
centred on the point and kept inside the image), up to a pixel of rounding.

Which sizes follow the point, and their aspect ratio, are asked of the
thumbnail machinery itself rather than worked out again here: a size
follows the point when its URL changes with the point, and its aspect
ratio is that of the thumbnail it makes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django_oximg.declared_sizes import DeclaredSize, parse_size, sizes_of, target_of
from django_oximg.focal import FocalPoint
from django_oximg.setting_values import size_pairs
from django_oximg.widgets import thumbnail_or_log

#: The point a size is tried with, to tell whether its URL carries the
#: point: a corner, so its crop differs from the centred one a size that
#: follows the point makes without it.
PROBE = FocalPoint(0, 0)


@dataclass(frozen=True)
class CropPreview:
    """One size that follows the point: its label and the size it is served at."""

    label: str
    width: int
    height: int


def declared_sizes_of(image: Any) -> tuple[DeclaredSize, ...]:
    """The sizes declared for ``image``'s field (a model's ``FieldFile``); none otherwise."""
    instance = getattr(image, "instance", None)
    field = getattr(image, "field", None)
    if instance is None or field is None:
        return ()
    return sizes_of(target_of(type(instance), field.name))


def given_sizes(sizes: Any) -> tuple[DeclaredSize, ...]:
    """A widget's ``sizes`` (a list of sizes, or a dict of names to sizes) parsed.

    Written as declarations are (``"320x240 crop"``); ValueError says which
    is not one.
    """
    return tuple(parse_size(text, name) for name, text in size_pairs(sizes))


def crop_previews(image: Any, sizes: Iterable[DeclaredSize]) -> list[CropPreview]:
    """The ``sizes`` of ``image`` whose crop follows its focal point, in order.

    A size that fits rather than crops, names its own place (``crop="top"``,
    a preset with ``g:sm``), gives a point of its own (``focal_point=``),
    or cannot be made of this image (logged) is left out: the stored point
    does not change it.
    """
    previews, seen = [], set[str]()
    for size in sizes:
        kwargs = size.kwargs
        if "focal_point" in kwargs:
            continue
        pointed = thumbnail_or_log(image, size.geometry, {**kwargs, "focal_point": PROBE})
        plain = thumbnail_or_log(image, size.geometry, {**kwargs, "focal_point": None})
        if pointed is None or plain is None or pointed.url == plain.url:
            continue
        label = size.name or size.text
        if label in seen:  # declared and given again: one preview
            continue
        seen.add(label)
        previews.append(CropPreview(label, pointed.width, pointed.height))
    return previews
