"""Where sources come from and where results go: protocols plus a plain-disk store.

The thumbnailer only sees these protocols, so a Django storage (``storage.py``),
a plain directory (this module) or anything else can stand behind it.

Two rules hold for every store:

* A name is jailed before it touches the store (:func:`jail_name`): no ``..``
  segment, no absolute path, no NUL, no backslash. On disk, the resolved real
  path must also stay inside the root, so a symlink cannot lead out of it.
* A result is written atomically: to a temporary file in the destination
  directory, flushed and fsynced, then ``os.replace``-d onto its final name. A
  crash at any point leaves either nothing or the whole file under the final
  name, never a partial one. Orphaned temporary files carry :data:`TEMP_PREFIX`
  so that they can be found and removed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from django_oximg.core.errors import SourceNotFound, SourceTooLarge, SourceUnavailable

#: Temporary files of unfinished cache writes start with this, so a cleaner can
#: tell them from results.
TEMP_PREFIX = "tmp-oximg-"


@dataclass(frozen=True)
class CachedResult:
    """A result found in the cache: on local disk (``path``) or as bytes."""

    size: int
    path: str | None = None
    data: bytes | None = None


class SourceStore(Protocol):
    """Reads source images by jailed name."""

    def read(self, name: str, max_bytes: int) -> bytes:
        """Return the source's bytes.

        Raise SourceNotFound when it does not exist or is not allowed,
        SourceTooLarge when it is bigger than ``max_bytes`` (checked before
        reading where the store knows the size), SourceUnavailable on failure.
        """
        ...

    def version(self, name: str) -> str:
        """A short token that changes whenever the source's content changes."""
        ...


class CacheStore(Protocol):
    """Holds encoded results under keys made by the thumbnailer."""

    def get(self, key: str) -> CachedResult | None:
        """Return the cached result, or None on a miss."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (all or nothing)."""
        ...

    def writable(self) -> bool:
        """Whether a ``put`` can be expected to succeed now (the health check asks).

        Must be cheap and free of side effects: load balancers call it every
        few seconds. A store that cannot tell without writing should answer
        from what it has seen (e.g. a recent failed ``put``).
        """
        ...


def jail_name(name: str) -> str:
    """Return ``name`` as a safe relative storage name, or raise SourceNotFound.

    The name has already been percent-decoded exactly once by the options
    parser; it is not decoded again here, so ``%2e%2e`` stays a literal name.
    """
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        raise SourceNotFound(f"rejected source name {name!r}")
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise SourceNotFound(f"rejected source name {name!r}")
    if len(name) > 1024:
        raise SourceNotFound("source name too long")
    return name


def path_inside(root: Path, name: str) -> Path:
    """Resolve ``name`` under ``root``, following symlinks, or raise SourceNotFound.

    ``realpath`` containment rather than Django's ``safe_join`` (which only
    normalises), so a symlink inside the root that points outside is refused,
    and so is a sibling directory that merely shares the root as a prefix.
    """
    real_root = root.resolve()
    target = (real_root / jail_name(name)).resolve()
    if real_root != target and real_root not in target.parents:
        raise SourceNotFound(f"{name!r} resolves outside the source root")
    return target


class FileSystemSourceStore:
    """Sources read from a directory on local disk."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def read(self, name: str, max_bytes: int) -> bytes:
        path = path_inside(self.root, name)
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > max_bytes:
                    raise SourceTooLarge(f"{name!r} has {size} bytes, limit {max_bytes}")
                data = handle.read(max_bytes + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise SourceNotFound(str(exc)) from exc
        except PermissionError as exc:
            raise SourceNotFound(str(exc)) from exc
        except OSError as exc:
            raise SourceUnavailable(str(exc)) from exc
        if len(data) > max_bytes:
            raise SourceTooLarge(f"{name!r} grew past the limit of {max_bytes} bytes")
        return data

    def version(self, name: str) -> str:
        path = path_inside(self.root, name)
        try:
            stat = path.stat()
        except OSError as exc:
            raise SourceNotFound(str(exc)) from exc
        return f"{stat.st_mtime_ns:x}{stat.st_size:x}"


class FileSystemCacheStore:
    """Results kept as files under a directory; ``get`` hands out the path.

    Handing out the path lets the WSGI layer serve hits with
    ``wsgi.file_wrapper`` (sendfile) and whitenoise's conditional and range
    handling, without reading the file into Python.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / jail_name(key)

    def get(self, key: str) -> CachedResult | None:
        path = self._path(key)
        try:
            size = path.stat().st_size
        except OSError:
            return None
        return CachedResult(size=size, path=str(path))

    def put(self, key: str, data: bytes) -> None:
        write_atomically(self._path(key), data)

    def writable(self) -> bool:
        return directory_is_writable(self.root)


def directory_is_writable(root: Path) -> bool:
    """Whether ``root`` is, or could be created as, a directory this process can write.

    When ``root`` does not exist yet (the first write creates it), its nearest
    existing ancestor is checked instead; nothing is created here.
    """
    path = root
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or nothing.

    Temp file in the same directory (so ``os.replace`` is a rename on one file
    system), fsync before the rename so a power cut cannot leave a named but
    empty file, and the temp file removed if anything fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, 0o644)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
