"""A tiny app with an admin site for the admin mixin and widget tests."""

from __future__ import annotations
