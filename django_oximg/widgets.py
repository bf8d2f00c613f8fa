"""A file input that shows the current image's thumbnail: for change forms.

    class PhotoForm(forms.ModelForm):
        class Meta:
            model = Photo
            fields = ["image"]
            widgets = {"image": ThumbnailFileWidget(geometry="200x200")}

The admin gets it from :class:`django_oximg.admin.ThumbnailAdminMixin`.
"""

from __future__ import annotations

from typing import Any

from django.forms.renderers import BaseRenderer
from django.forms.widgets import ClearableFileInput
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_oximg.tag_functions import THUMBNAIL_ERRORS, log_failure
from django_oximg.thumbnails import Thumbnail, get_thumbnail


def thumbnail_or_log(source: Any, geometry: str, kwargs: dict[str, Any]) -> Thumbnail | None:
    """The thumbnail, or None for an empty source or a failure, which is logged.

    Unlike the template tags this never raises, even with
    ``RAISE_TEMPLATE_ERRORS``: a form or change list must stay usable to
    replace a file that is not an image (a PDF in a FileField) or has gone
    missing. The failure is logged as the tags log it, in one WARNING line.
    Only the errors a bad source or argument can cause are caught; anything
    else propagates.
    """
    if not source:
        return None
    try:
        return get_thumbnail(source, geometry, **kwargs)
    except THUMBNAIL_ERRORS as exc:
        log_failure(source, exc)
        return None


class ThumbnailFileWidget(ClearableFileInput):
    """A ``ClearableFileInput`` with a thumbnail of the current file above it.

    ``geometry`` and the other keywords are ``{% thumbnail %}``'s (default
    "200x200", fitted). No thumbnail for a new upload, an empty field, or a
    file that cannot be thumbnailed: then it is the plain input.
    """

    def __init__(
        self, attrs: dict[str, Any] | None = None, geometry: str = "200x200", **options: Any
    ) -> None:
        super().__init__(attrs)
        self.geometry = geometry
        self.thumbnail_options = options

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: BaseRenderer | None = None,
    ) -> SafeString:
        field = super().render(name, value, attrs, renderer)
        if not self.is_initial(value):
            return field
        thumbnail = thumbnail_or_log(value, self.geometry, dict(self.thumbnail_options))
        if thumbnail is None:
            return field
        return format_html(
            '<div class="oximg-preview"><img src="{}" width="{}" height="{}" alt=""></div>{}',
            thumbnail.url,
            thumbnail.width,
            thumbnail.height,
            field,
        )
