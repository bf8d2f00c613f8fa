"""A focal point stored beside an image field, its form field, and a widget to click it.

    from django.db import models
    from django_oximg.fields import FocalPointField

    class Photo(models.Model):
        image = models.ImageField(upload_to="photos/")
        focal_point = FocalPointField(image_field="image")

The column is text, "x,y" with x and y fractions 0..1 of the image as shown
("" for no point): one column that reads well in a database shell and holds
what django-filer's ``subject_location`` holds, in a size-free form. On the
model the value is a :class:`~django_oximg.focal.FocalPoint` or None. Every
tag, filter, ``get_thumbnail`` and the DRF field that crops ``photo.image``
without saying where (``crop``, ``crop=True``, or a preset that fills
without a gravity) then centres the crop on it (``g:fp:x:y``).

In forms the field is a labelled text input (it works without JavaScript)
below a preview of the image; clicking the preview sets the point, which a
marker shows, and previews of the crops that follow the point move with it
(``django_oximg/focal_point.js``, plain JavaScript, no build step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.core import checks
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models.base import Model
from django.forms.renderers import BaseRenderer
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from django_oximg.focal import MODEL_ATTRIBUTE, FocalPoint, InvalidFocalPoint, parse_focal_point

if TYPE_CHECKING:
    from django_oximg.focal_previews import CropPreview

#: Longest stored text: "0.1234,0.1234" is 13 characters; the rest is room.
MAX_LENGTH = 32

#: The message of a value that is not a point in the image.
INVALID_MESSAGE = "Enter a point as x,y, with x and y between 0 and 1 (e.g. 0.5,0.4)."


class FocalPointField(models.CharField):  # type: ignore[type-arg]
    """The focal point of the model's ``image_field``, stored as "x,y" text.

    Blank by default (no point: crops keep their own default). ``full_clean``
    and model forms refuse a point outside 0..1 or text that is not one.
    A bad value that reached the database by another way is ignored, with a
    WARNING, when a thumbnail is made: the page still renders.
    """

    description = "A focal point (x,y fractions of the image)"

    def __init__(self, *args: Any, image_field: str = "image", **kwargs: Any) -> None:
        self.image_field = image_field
        kwargs.setdefault("max_length", MAX_LENGTH)
        kwargs.setdefault("blank", True)
        kwargs.setdefault("default", "")
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["image_field"] = self.image_field
        for key, default in (("max_length", MAX_LENGTH), ("blank", True), ("default", "")):
            if kwargs.get(key) == default:
                del kwargs[key]
        return name, path, args, kwargs

    def contribute_to_class(self, cls: type[Model], name: str, private_only: bool = False) -> None:
        super().contribute_to_class(cls, name, private_only)
        # A dict of the class's own (not a parent's) so subclasses do not share one.
        points = dict(cls.__dict__.get(MODEL_ATTRIBUTE, {}))
        points[self.image_field] = self.attname
        setattr(cls, MODEL_ATTRIBUTE, points)

    def check(self, **kwargs: Any) -> list[Any]:
        errors = list(super().check(**kwargs))
        model = getattr(self, "model", None)
        if model is None:
            return errors
        try:
            image: Any = model._meta.get_field(self.image_field)
        except FieldDoesNotExist:
            image = None
        if not isinstance(image, models.FileField):
            errors.append(
                checks.Error(
                    f"FocalPointField.image_field {self.image_field!r} is not a file field "
                    f"of {model._meta.label}.",
                    obj=self,
                    id="oximg.E101",
                )
            )
        return errors

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        """The stored point; text that is no point stays text (ignored by thumbnails,
        refused by ``full_clean``), so a bad row never stops a page loading."""
        try:
            return parse_focal_point(value)
        except InvalidFocalPoint:
            return value

    def to_python(self, value: Any) -> FocalPoint | None:
        try:
            return parse_focal_point(value)
        except InvalidFocalPoint as exc:
            raise ValidationError(INVALID_MESSAGE, code="invalid", params={"value": value}) from exc

    def get_prep_value(self, value: Any) -> Any:
        """The text stored: "x,y", "" for no point; other text as it is (``full_clean``
        refuses it; a save without it stores what it was given, as a CharField does)."""
        try:
            point = parse_focal_point(value)
        except InvalidFocalPoint:
            return str(value)
        return "" if point is None else str(point)

    def value_to_string(self, obj: Model) -> str:
        return str(self.get_prep_value(self.value_from_object(obj)))

    def clean(self, value: Any, model_instance: Model | None) -> Any:
        point = self.to_python(value)
        self.validate(point, model_instance)
        self.run_validators("" if point is None else str(point))
        return point

    def formfield(self, **kwargs: Any) -> Any:
        defaults: dict[str, Any] = {
            "form_class": FocalPointFormField,
            "image_field": self.image_field,
        }
        defaults.update(kwargs)
        # The admin passes its text-input widget for a CharField; the point has its own.
        if defaults.get("widget") is not None and not isinstance(
            defaults["widget"], FocalPointWidget
        ):
            defaults.pop("widget")
        return super().formfield(**defaults)


class FocalPointWidget(forms.TextInput):
    """A labelled text input for "x,y" beside a preview of the image: a click sets the point.

    ``image`` (the form's current ``FieldFile``) is set by
    :class:`FocalPointFormField` when it is bound to a model form; without an
    image (a new object, a missing file) only the labelled text input is
    shown. ``geometry`` is the preview's size, fitted, as in
    ``{% thumbnail %}``. A marker shows the point on the preview, and below
    it one small preview per size that follows the point (the sizes the
    model declares for the image field, then ``sizes``: a list of sizes, or
    a dict of names to sizes, written as declarations are, e.g.
    ``{"card": "320x240 crop"}``), cut in the browser as the server will
    cut it (:mod:`django_oximg.focal_previews`).
    """

    class Media:
        js: ClassVar = ("django_oximg/focal_point.js",)
        css: ClassVar = {"all": ("django_oximg/focal_point.css",)}

    def __init__(
        self,
        attrs: dict[str, Any] | None = None,
        geometry: str = "400x400",
        sizes: Mapping[str, str] | Sequence[str] = (),
    ) -> None:
        from django_oximg.focal_previews import given_sizes

        super().__init__({"class": "oximg-focal-input", "size": 14, **(attrs or {})})
        self.geometry = geometry
        # Parsed now, so a size that is not one fails where the widget is made.
        self.sizes = given_sizes(sizes)
        self.image: Any = None

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, FocalPoint):
            return str(value)
        return None if value in (None, "") else str(value)

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: BaseRenderer | None = None,
    ) -> SafeString:
        from django_oximg.focal_previews import crop_previews, declared_sizes_of
        from django_oximg.widgets import thumbnail_or_log

        attrs = dict(attrs or {})
        input_id = attrs.get("id") or self.attrs.get("id") or f"id_{name}"
        help_id = f"{input_id}_helptext_focal"
        described = " ".join(filter(None, (attrs.get("aria-describedby"), help_id)))
        attrs.update({"id": input_id, "aria-describedby": described})
        field = format_html(
            '<div class="oximg-focal-controls">'
            '<label class="oximg-focal-label" for="{}">{}</label> {}'
            '<p class="oximg-focal-help" id="{}">{}</p></div>',
            input_id,
            LABEL,
            super().render(name, value, attrs, renderer),
            help_id,
            HELP,
        )
        # The whole image, fitted, whatever point is stored: the editor clicks on it.
        preview = thumbnail_or_log(self.image, self.geometry, {"focal_point": None})
        if preview is None:
            return format_html('<div class="oximg-focal">{}</div>', field)
        marker = {"class": "oximg-focal-marker", "hidden": True}
        crops = crop_previews(self.image, (*declared_sizes_of(self.image), *self.sizes))
        return format_html(
            '<div class="oximg-focal" data-oximg-focal>'
            '<div class="oximg-focal-frame">'
            '<img class="oximg-focal-image" src="{}" width="{}" height="{}" alt="" '
            'title="Click the point that crops should keep">'
            "<span{}></span></div>{}{}</div>",
            preview.url,
            preview.width,
            preview.height,
            flatatt(marker),
            field,
            crop_figures(preview.url, crops),
        )


#: The visible label beside the text input.
LABEL = "Focal point (x,y)"

#: What the point is and how to set it, below the input.
HELP = (
    "Click the image where crops should centre, or type x,y: fractions from 0 to 1 of "
    "its width and height, from the top left. Empty: crops keep their own default."
)


def crop_figures(url: str, crops: Sequence[CropPreview]) -> SafeString:
    """The previews of the sizes that follow the point: ``url`` (the widget's fitted
    image) in a box of each size's aspect ratio, which the script crops around the point.

    Hidden until the script shows them: without it they would not be cut.
    """
    if not crops:
        return SafeString("")
    figures = format_html_join(
        "",
        '<figure class="oximg-focal-size" data-width="{}" data-height="{}">'
        '<div class="oximg-focal-crop"><img src="{}" alt=""></div>'
        "<figcaption>{} <span>{}\u00d7{}</span></figcaption></figure>",
        ((crop.width, crop.height, url, crop.label, crop.width, crop.height) for crop in crops),
    )
    return format_html(
        '<div class="oximg-focal-sizes" hidden><p class="oximg-focal-sizes-title">{}</p>{}</div>',
        SIZES_TITLE,
        figures,
    )


#: Above the previews of the sizes.
SIZES_TITLE = "What each size keeps around the point"


class FocalPointFormField(forms.CharField):
    """A focal point in a form: "x,y" text, cleaned to a :class:`FocalPoint` or None."""

    widget = FocalPointWidget
    default_error_messages: ClassVar = {"invalid": INVALID_MESSAGE}

    def __init__(self, *, image_field: str = "image", **kwargs: Any) -> None:
        self.image_field = image_field
        kwargs.setdefault("required", False)
        # The cleaned value is a point, not text: no length validators, no empty text.
        for text_only in ("max_length", "min_length", "empty_value"):
            kwargs.pop(text_only, None)
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        return str(value) if isinstance(value, FocalPoint) else value

    def to_python(self, value: Any) -> FocalPoint | None:  # type: ignore[override]
        text = super().to_python(value)
        try:
            return parse_focal_point(text)
        except InvalidFocalPoint as exc:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from exc

    def get_bound_field(self, form: forms.BaseForm, field_name: str) -> forms.BoundField:
        """Bound to a model form, the widget previews that form's image.

        The form's fields (and their widgets) are copies made for this form,
        so setting the image here is one form's business.
        """
        instance = getattr(form, "instance", None)
        if isinstance(self.widget, FocalPointWidget) and instance is not None:
            self.widget.image = getattr(instance, self.image_field, None)
        return super().get_bound_field(form, field_name)
