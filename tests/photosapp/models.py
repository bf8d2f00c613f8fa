"""A photo with a focal point: docs/focal-point.md shows this module as it is.

(tests/test_focal_point.py checks that the page and this file agree.)
"""

from __future__ import annotations

from django.db import models

from django_oximg.fields import FocalPointField


class Photo(models.Model):
    title = models.CharField(max_length=100, blank=True)
    image = models.ImageField(upload_to="photos/", blank=True)
    # Where crops of `image` centre: "x,y", fractions of its width and height.
    focal_point = FocalPointField(image_field="image")
