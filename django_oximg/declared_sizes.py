"""Sizes declared once for a model's file field: on the model, or in ``RENDER_AHEAD``.

A model declares the sizes its pages show of a field::

    class Photo(models.Model):
        image = models.ImageField(upload_to="photos/")

        oximg_render_ahead = {"image": {"card": "400x300 crop=center", "thumb": "thumb"}}

and ``OXIMG["RENDER_AHEAD"]`` may declare (or replace, per field) the same
for any model, a reusable app's included. Each size is written as the tag
takes it: a geometry, or a preset's name, then ``keyword=value`` words. The
declarations are what :mod:`django_oximg.render_ahead.hooks` renders when the
field gets a new file, and a named size is what the tag renders for that
name (``{% thumbnail photo.image "card" %}``), so a template and the
render ahead cannot drift apart.

Imports no image library (the template tags read it on every page).
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model

from django_oximg import conf
from django_oximg.arguments import FLAGS, is_geometry
from django_oximg.setting_values import size_pairs

#: The model attribute declaring sizes: ``{"field": [sizes]}`` or ``{"field": {name: size}}``.
MODEL_ATTRIBUTE = "oximg_render_ahead"


@dataclass(frozen=True)
class DeclaredSize:
    """One declared size: the tag's geometry and keywords, and its name ("" for none)."""

    name: str
    #: As written in the declaration.
    text: str
    geometry: str
    keywords: tuple[tuple[str, Any], ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.keywords)


def parse_size(text: str, name: str = "") -> DeclaredSize:
    """``"400x300 crop=center quality=70"`` (or a preset's name) as the tag's arguments.

    The first word is the geometry, or a preset's name when it is not a
    geometry; the others are ``keyword=value``, or a flag keyword alone
    (``crop``, ``upscale``) meaning True. An unnamed size that is only a
    preset's name is named after it. Raises ValueError for what cannot be
    split so; whether the tag takes the keywords is checked by the caller.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from exc
    if not words:
        raise ValueError("an empty size")
    first, *rest = words
    geometry, keywords = first, list[tuple[str, Any]]()
    if "=" in first:
        geometry, rest = "", words
    elif not is_geometry(first):
        geometry, keywords = "", [("preset", first)]
        name = name or (first if not rest else "")
    for word in rest:
        keyword, equals, value = word.partition("=")
        if equals:
            keywords.append((keyword, value))
        elif word in FLAGS:
            keywords.append((word, True))
        else:
            raise ValueError(f"{text!r}: {word!r} is not keyword=value")
    return DeclaredSize(name, text, geometry, tuple(keywords))


def model_declarations(model: type[Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    """The sizes ``model`` declares itself, by field name, as ``(name, size)`` pairs."""
    declared = getattr(model, MODEL_ATTRIBUTE, None)
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise ImproperlyConfigured(
            f"{model._meta.label}.{MODEL_ATTRIBUTE} must be a dict of field names to sizes"
        )
    try:
        return {str(field): size_pairs(sizes) for field, sizes in declared.items()}
    except ValueError as exc:
        raise ImproperlyConfigured(f"{model._meta.label}.{MODEL_ATTRIBUTE}: {exc}") from exc


def raw_declarations(settings: conf.OximgSettings) -> dict[str, tuple[tuple[str, str], ...]]:
    """Every declaration by ``app_label.Model.field``: the models', then ``RENDER_AHEAD``'s."""
    found: dict[str, tuple[tuple[str, str], ...]] = {}
    for model in apps.get_models():
        label = f"{model._meta.app_label}.{model._meta.object_name}"
        for field, pairs in model_declarations(model).items():
            found[f"{label}.{field}"] = pairs
    found.update(settings.RENDER_AHEAD)
    return found


def parse_declarations(
    raw: Mapping[str, tuple[tuple[str, str], ...]],
) -> dict[str, tuple[DeclaredSize, ...]]:
    """Each target's sizes parsed; ImproperlyConfigured names the first that is not."""
    parsed = {}
    for target, pairs in raw.items():
        try:
            parsed[target] = tuple(parse_size(size, name) for name, size in pairs)
        except ValueError as exc:
            raise ImproperlyConfigured(f"sizes of {target}: {exc}") from exc
    return parsed


_lock = threading.Lock()
_memo: tuple[conf.OximgSettings, dict[str, tuple[DeclaredSize, ...]]] | None = None


def declarations() -> dict[str, tuple[DeclaredSize, ...]]:
    """Every field's declared sizes by ``app_label.Model.field`` (kept until settings change)."""
    global _memo
    settings = conf.get_settings()
    memo = _memo
    if memo is not None and memo[0] is settings:
        return memo[1]
    with _lock:
        found = parse_declarations(raw_declarations(settings))
        _memo = (settings, found)
    return found


def valid_declarations() -> dict[str, tuple[DeclaredSize, ...]]:
    """:func:`declarations`, or none while they are invalid: pages and saves go on, and
    the system check ``oximg.E020`` says what is wrong."""
    try:
        return declarations()
    except ImproperlyConfigured:
        return {}


def target_of(model: type[Model], field: str) -> str:
    """The ``"app_label.Model.field"`` a declaration for ``model``'s ``field`` is found under."""
    meta = model._meta
    return f"{meta.app_label}.{meta.object_name}.{field}"


def sizes_of(target: str) -> tuple[DeclaredSize, ...]:
    """The sizes declared for ``target`` (``app_label.Model.field``); empty for none."""
    return valid_declarations().get(target, ())


def size_named(target: str, name: str) -> DeclaredSize | None:
    """``target``'s declared size called ``name``, if there is one."""
    return next((size for size in sizes_of(target) if size.name == name), None)


def declared_names() -> frozenset[str]:
    """The names of every declared size: a template may name any of them literally."""
    found = valid_declarations().values()
    return frozenset(size.name for sizes in found for size in sizes if size.name)
