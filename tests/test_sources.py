"""How sources are written in URLs and read back: core/stores/resolver.py."""

from __future__ import annotations

from typing import Any, cast

import pytest

from django_oximg.core.stores.protocols import SourceStore
from django_oximg.core.stores.resolver import URL_ALIAS, SourceResolver, source_for

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free


class AnyName:
    """A store that would serve any name, so only the resolver's split is tested."""

    def check_name(self, name: str) -> None:
        pass


def resolver() -> SourceResolver:
    stores = {"": AnyName(), "other": AnyName(), URL_ALIAS: AnyName()}
    return SourceResolver(cast(dict[str, SourceStore], stores))


@pytest.mark.parametrize(
    "name",
    [
        "photos/a.jpg",
        "a b.jpg",
        "dir/other:c.jpg",  # a colon after the first "/" cannot start an alias
        "ünï/çödé.jpg",
        "x@2x.jpg",
    ],
)
def test_an_ordinary_default_name_is_written_as_it_is(name: str) -> None:
    """The URLs (and cache keys) of ordinary names are what they always were."""
    assert source_for("", name) == name
    assert resolver().resolve(name)[1:3] == ("", name)


@pytest.mark.parametrize(
    ("alias", "name", "written"),
    [
        ("", "other:c.jpg", ":other:c.jpg"),  # a configured alias
        ("", "archive:c.jpg", ":archive:c.jpg"),  # one that may be configured later
        ("", "http://127.0.0.1:1/x.jpg", ":http://127.0.0.1:1/x.jpg"),
        ("", "svn+ssh://host/x.jpg", ":svn+ssh://host/x.jpg"),
        ("", ":c.jpg", "::c.jpg"),
        ("", ":", "::"),
        ("other", "c.jpg", "other:c.jpg"),
        ("other", "other:c.jpg", "other:other:c.jpg"),
        ("other", "http://host/x.jpg", "other:http://host/x.jpg"),
        ("other", ":c.jpg", "other::c.jpg"),
    ],
)
def test_a_name_reads_back_as_its_own_store_and_name(alias: str, name: str, written: str) -> None:
    assert source_for(alias, name) == written
    resolved: Any = resolver().resolve(written)
    assert (resolved.alias, resolved.name) == (alias, name)


def test_the_empty_alias_names_the_default_store() -> None:
    resolved = resolver().resolve(":other:c.jpg")
    assert (resolved.alias, resolved.name) == ("", "other:c.jpg")
    # Without it, the same text is the other store's file.
    assert resolver().resolve("other:c.jpg")[1:3] == ("other", "c.jpg")
