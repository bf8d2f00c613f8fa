"""The ASGI project uvicorn serves in tests/test_asgi.py.

Django's ASGI handler with ``django_oximg.urls_async`` mounted at ``img/``,
an async ``ping`` view that touches no thread (to show the event loop is
free), and :class:`GatedStorage`, whose ``gated/`` sources open only once the
test creates their gate file: a render the test holds in flight.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO, Any

from django.core.asgi import get_asgi_application
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.asgi_settings")

#: Sources under this directory wait for their gate.
GATED = "gated/"

#: A gate that is never opened lets the read go on after this many seconds,
#: so a broken test cannot hang the server; tests/test_asgi.py's HTTP
#: timeout is longer, so a blocked loop shows as a wrong order, not a timeout.
GATE_TIMEOUT = 20.0

#: Pause between two looks for a gate file.
GATE_POLL = 0.01


async def ping(request: HttpRequest) -> HttpResponse:
    """Answered on the event loop itself: only a blocked loop can delay it."""
    return HttpResponse(b"pong", content_type="text/plain")


urlpatterns = [
    path("img/", include("django_oximg.urls_async")),
    path("ping", ping),
]


class GatedStorage(Storage):
    """Local files; opening ``gated/<name>`` waits for ``<gates>/<name>.open``.

    Writes ``<name>.waiting`` when the read starts and ``<name>.done`` when
    it goes on, so the test sees from outside what the server is doing.
    Not a FileSystemStorage subclass, so django_oximg reads through
    ``Storage.open`` like any remote storage.
    """

    def __init__(self, location: str, gates: str) -> None:
        self.inner = FileSystemStorage(location=location)
        self.gates = Path(gates)

    def _open(self, name: str, mode: str = "rb") -> File[Any]:
        if name.startswith(GATED):
            self.wait_for_gate(name.removeprefix(GATED))
        return self.inner.open(name, mode)

    def wait_for_gate(self, name: str) -> None:
        (self.gates / f"{name}.waiting").touch()
        gate = self.gates / f"{name}.open"
        give_up = time.monotonic() + GATE_TIMEOUT
        while not gate.exists() and time.monotonic() < give_up:
            time.sleep(GATE_POLL)
        (self.gates / f"{name}.done").touch()

    def _save(self, name: str, content: IO[Any]) -> str:
        return self.inner.save(name, content)

    def exists(self, name: str) -> bool:
        return self.inner.exists(name)

    def size(self, name: str) -> int:
        return self.inner.size(name)

    def url(self, name: str | None) -> str:
        return self.inner.url(name)


application = get_asgi_application()
