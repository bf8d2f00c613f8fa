"""Migrations of the test app."""

from __future__ import annotations
