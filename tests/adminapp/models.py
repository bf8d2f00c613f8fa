"""A model with a plain FileField, which the admin is told to thumbnail by name.

(No ImageField model here: it needs Pillow, which django-oximg does not.)
"""

from __future__ import annotations

from django.db import models


class Artwork(models.Model):
    title = models.CharField(max_length=100)
    image = models.FileField(upload_to="photos/", blank=True)

    def __str__(self) -> str:
        return self.title
