"""The demo's one app: a Photo model, its gallery page, upload form and admin."""

from __future__ import annotations
