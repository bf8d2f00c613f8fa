"""Models for the purge hook tests: one hooked (in apps.py), one not."""

from __future__ import annotations

from django.db import models


class Photo(models.Model):
    """Its ``image`` thumbnails are purged on change (connected in ``apps.py``)."""

    image = models.FileField(upload_to="photos/", blank=True)
    title = models.CharField(max_length=100, blank=True)


class Document(models.Model):
    """No hook: shows the purge is opt-in."""

    scan = models.FileField(upload_to="photos/", blank=True)
