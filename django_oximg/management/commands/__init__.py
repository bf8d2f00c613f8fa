"""``manage.py oximg_*`` commands."""

from __future__ import annotations
