"""Management commands of the gallery app."""

from __future__ import annotations
