"""The demo's one model: a photo with an ImageField, as most sites have one."""

from __future__ import annotations

from django.db import models

from django_oximg.fields import FocalPointField
from django_oximg.validators import validate_servable_image


class Photo(models.Model):
    """An uploaded image (or one of the drawn samples) with a title.

    ``image`` is a plain ``ImageField`` in the default storage, which refuses
    an upload the image server would refuse (``validate_servable_image``:
    over 50 megapixels, say) with the limit named; beside it,
    ``focal_point`` (set in the admin by clicking the preview) is where crops
    that name no place of their own centre (docs/focal-point.md).
    """

    title = models.CharField(max_length=100)
    image = models.ImageField(upload_to="photos/", validators=[validate_servable_image])
    focal_point = FocalPointField(image_field="image")
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-uploaded_at", "-pk")

    def __str__(self) -> str:
        return self.title
