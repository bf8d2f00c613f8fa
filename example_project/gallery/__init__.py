"""The demo's one app: a page of thumbnails of generated sample images."""

from __future__ import annotations
