"""Management commands of django-oximg, with the helpers they share."""

from __future__ import annotations
