"""A memo of values computed from the settings, kept until the settings change.

Used by :mod:`django_oximg.thumbnails` and :mod:`django_oximg.source_metadata`;
nothing here knows what is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from django_oximg import conf

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class SettingsMemo(Generic[Key, Value]):
    """Values computed from the settings, kept until the settings change.

    The template tags compute the same things for every tag of every page
    (the options a tag's arguments expand to, the mount point, the URL of
    a source at a size). Kept here, each is computed once per process; a
    new settings object (a changed setting, a test) empties the memo.
    Bounded: when ``size`` entries are held it starts again, so arguments
    that vary without end (a geometry from a query string) cannot grow it.
    Thread-safe as Python's dict operations are; two threads may compute
    the same value, and both get an equal one.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[Key, Value] = {}
        self._settings: conf.OximgSettings | None = None
        self._lock = threading.Lock()

    def peek(self, key: Key) -> Value | None:
        settings = conf.get_settings()
        if self._settings is not settings:
            with self._lock:
                self._values, self._settings = {}, settings
        return self._values.get(key)

    def put(self, key: Key, value: Value) -> None:
        if len(self._values) >= self.size:
            self._values = {}
        self._values[key] = value

    def discard(self, key: Key) -> None:
        self._values.pop(key, None)

    def get(self, key: Key, compute: Callable[[], Value]) -> Value:
        found = self.peek(key)
        if found is None:
            found = compute()
            self.put(key, found)
        return found
