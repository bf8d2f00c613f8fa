"""storage.py: Django storages as source stores (S3 has its own tests, against moto)."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import InMemoryStorage

from django_oximg.core.errors import SourceNotFound
from django_oximg.storage import StorageSourceStore, source_store


def test_any_storage_gives_a_header_read_of_its_first_bytes() -> None:
    storage = InMemoryStorage()
    storage.save("photos/x.jpg", ContentFile(b"0123456789"))
    store = source_store(storage)
    assert isinstance(store, StorageSourceStore)
    assert store.read_header("photos/x.jpg", 4) == b"0123"
    assert store.read_header("photos/x.jpg", 100) == b"0123456789"
    with pytest.raises(SourceNotFound):
        store.read_header("photos/missing.jpg", 4)
    with pytest.raises(SourceNotFound):
        store.read_header("../x.jpg", 4)
