"""A tiny app for the model hooks tests (django_oximg.signals)."""

from __future__ import annotations
