"""One model, never saved: its instances give the template real ``ImageFieldFile`` objects."""

from __future__ import annotations

from django.db import models


class Photo(models.Model):
    image = models.ImageField(upload_to="photos")

    class Meta:
        app_label = "page_app"
