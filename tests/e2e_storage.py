"""A source storage that appends a line to a log file for every file it opens.

Counts source reads across gunicorn worker processes (an in-memory counter
would be per process), optionally slowly. Deliberately not a FileSystemStorage subclass, so
django_oximg reads through ``Storage.open`` like any remote storage.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage


class ReadLoggingStorage(Storage):
    def __init__(self, location: str, log: str, delay: float = 0.0) -> None:
        self.inner = FileSystemStorage(location=location)
        self.log = log
        self.delay = delay

    def _open(self, name: str, mode: str = "rb") -> File[Any]:
        with open(self.log, "a") as handle:
            handle.write(f"{os.getpid()} {name}\n")
        # A slow remote storage: keeps the reading process busy long enough
        # for concurrent requests to reach the other worker processes.
        time.sleep(self.delay)
        return self.inner.open(name, mode)

    def _save(self, name: str, content: IO[Any]) -> str:
        return self.inner.save(name, content)

    def exists(self, name: str) -> bool:
        return self.inner.exists(name)

    def size(self, name: str) -> int:
        return self.inner.size(name)

    def get_modified_time(self, name: str) -> datetime:
        return self.inner.get_modified_time(name)

    def delete(self, name: str) -> None:
        self.inner.delete(name)

    def url(self, name: str | None) -> str:
        return self.inner.url(name)
