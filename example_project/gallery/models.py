"""The demo's one model: a photo with an ImageField, as most sites have one."""

from __future__ import annotations

from django.db import models


class Photo(models.Model):
    """An uploaded image (or one of the drawn samples) with a title.

    Nothing here is django-oximg's: the templates and the admin thumbnail
    ``image`` as it is, a plain ``ImageField`` in the default storage.
    """

    title = models.CharField(max_length=100)
    image = models.ImageField(upload_to="photos/")
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-uploaded_at", "-pk")

    def __str__(self) -> str:
        return self.title
