"""Deprecated: ``purge_on_change`` is :func:`django_oximg.purge.purge_on_change`.

Importing this module warns; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from django_oximg.purge import purge_on_change

__all__ = ["purge_on_change"]

warnings.warn(
    "django_oximg.signals is deprecated: import purge_on_change from django_oximg.purge",
    DeprecationWarning,
    stacklevel=2,
)
