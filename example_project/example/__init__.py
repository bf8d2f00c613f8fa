"""The django-oximg demo project: settings, URLs and the WSGI entry point."""

from __future__ import annotations
