"""A tiny app for the model hooks tests (django_oximg.purge.purge_on_change)."""

from __future__ import annotations
