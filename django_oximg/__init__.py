"""django-oximg: signed, cached, on-the-fly image thumbnails for Django, served by pyvips."""

from __future__ import annotations

__version__ = "0.1.0"
