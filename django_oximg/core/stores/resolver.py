"""Which store holds a source, as written in a URL: one resolver for the server and the tags.

Part of step 3 of a request (the map: :mod:`django_oximg.core.serving`).

A source is written ``name`` (the default store), ``alias:name`` (a store
named in ``OXIMG["SOURCES"]``), ``:name`` (the default store, whatever the
name looks like) or ``http(s)://...`` (the HTTP store, when ``HTTP_SOURCES``
allows any). :func:`source_for` writes a store's name so that it reads back
as that store and name, never as another store's file or a URL. The
thumbnailer resolves a source before its cache lookup and the template tags
before they read a header, so both agree on every source, and a name a store
can never serve (outside its root, off the HTTP allowlist) is refused before
anything is looked up or read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from django_oximg.core import errors
from django_oximg.core.stores.protocols import SourceStore

#: The source alias under which the thumbnailer keeps the HTTP store. Not a
#: valid ``SOURCES`` alias (those are ``[A-Za-z0-9_.-]+``), so it cannot clash.
URL_ALIAS = "<url>"

#: A source that starts like this is a URL, never a storage name (a storage
#: name cannot contain an empty segment, so nothing valid is taken away).
URL_SOURCE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


#: A default-store name that starts like this could be read as ``alias:name``
#: (SOURCE_ALIAS_PATTERN in conf.py), whether or not that alias is configured now.
ALIAS_PREFIX = re.compile(r"[A-Za-z0-9_.-]*:")


def is_url(source: str) -> bool:
    """Whether ``source`` (from a request path) names a URL rather than a storage name.

    Here rather than with the HTTP store (core/stores/http.py), so that
    resolving a storage name never imports urllib3.
    """
    return URL_SOURCE.match(source) is not None


def source_for(alias: str, name: str) -> str:
    """How a URL writes ``name`` in the store ``alias`` ("" the default store).

    :meth:`SourceResolver.resolve` reads the result back as that store and
    name. A default-store name that could be read as another store's source
    or as a URL (``other:c.jpg``, ``http://host/x.jpg``, one starting with
    ``:``) is written after the empty alias (``:other:c.jpg``); every other
    name as it is, so ordinary URLs and their cache keys stay as they were.
    Judged by the name alone, not by the aliases configured now, so a URL
    keeps its meaning when ``SOURCES`` gains an alias. ``alias:name`` is
    never a URL the HTTP store takes: no alias is ``http`` or ``https``
    (conf.py refuses them).
    """
    if not alias and (ALIAS_PREFIX.match(name) or is_url(name)):
        return ":" + name
    return f"{alias}:{name}" if alias else name


class Resolved(NamedTuple):
    """A source split into its store and the name within it."""

    #: The source as written in the URL (``alias:name``, a name or a URL).
    source: str
    #: The store's alias ("" for the default store, :data:`URL_ALIAS` for HTTP).
    alias: str
    name: str
    store: SourceStore


class SourceResolver:
    """Splits sources into store and name; thread-safe (it holds no mutable state)."""

    def __init__(self, stores: Mapping[str, SourceStore]) -> None:
        if "" not in stores:
            raise ValueError("sources needs a default store under the alias ''")
        self.stores = dict(stores)

    def resolve(self, source: str) -> Resolved:
        """The store and name of ``source``, checked by the store (no I/O).

        A URL goes whole to the HTTP store, which checks it against its
        allowlist; without one (``HTTP_SOURCES`` empty) it is a 404. An
        ``alias:`` prefix that names no configured store is part of the name;
        the empty one (``:name``) is the default store's.
        Raises SourceNotFound for a name the store can never serve.
        """
        if is_url(source):
            if URL_ALIAS not in self.stores:
                raise errors.SourceNotFound("URL sources are off (OXIMG['HTTP_SOURCES'] is empty)")
            alias, name = URL_ALIAS, source
        else:
            prefix, sep, rest = source.partition(":")
            if sep and prefix != URL_ALIAS and prefix in self.stores:
                alias, name = prefix, rest
            else:
                alias, name = "", source
        store = self.stores[alias]
        store.check_name(name)
        return Resolved(source, alias, name, store)
