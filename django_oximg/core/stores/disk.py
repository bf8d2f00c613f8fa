"""Sources and results on local disk: reads through the descriptor, atomic writes,
a jail that follows symlinks.

Part of step 8 of a request, for local disk (the map: :mod:`django_oximg.core.serving`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django_oximg.core.errors import SourceNotFound, SourceTooLarge, SourceUnavailable
from django_oximg.core.keys import QUALITY_SUFFIX
from django_oximg.core.stores.protocols import (
    TEMP_PREFIX,
    CachedResult,
    CacheEntry,
    Reserve,
    jail_name,
)


def path_inside(root: Path, name: str) -> Path:
    """Resolve ``name`` under ``root``, following symlinks, or raise SourceNotFound.

    ``realpath`` containment rather than Django's ``safe_join`` (which only
    normalises), so a symlink inside the root that points outside is refused,
    and so is a sibling directory that merely shares the root as a prefix.
    """
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, jail_name(name)))
    if target != real_root and not target.startswith(real_root.rstrip(os.sep) + os.sep):
        raise SourceNotFound(f"{name!r} resolves outside the source root")
    return Path(target)


class FileSystemSourceStore:
    """Sources read from a directory on local disk."""

    #: A read costs about a memory copy, so the thumbnailer reads on the render
    #: worker, when the render's turn has come (see ``core.making.Maker.make``).
    read_on_worker = True

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._root_text = os.fspath(root)

    def check_name(self, name: str) -> None:
        jail_name(name)

    def read(self, name: str, max_bytes: int, reserve: Reserve | None = None) -> bytes:
        """The whole file, in four system calls (open, fstat, read, close).

        Through the descriptor rather than a file object: Python's buffered
        ``open`` adds an ``isatty`` ioctl, an ``lseek``, a second ``fstat``
        and reads in pieces, each a call that gives up the GIL and, on a
        busy server, waits to take it back from the render threads.
        """
        with self._opened(name) as fd:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):  # which open() would have refused
                raise SourceNotFound(f"{name!r} is a directory")
            size = status.st_size
            if size > max_bytes:
                raise SourceTooLarge(f"{name!r} has {size} bytes, limit {max_bytes}")
            if reserve is not None:
                reserve(size)
            # Read the size fstat gave, not the limit: a read of the limit
            # allocates that much first (50 MiB by default, 8x slower for
            # a 1 MB file). A file that grew since is read on to the limit.
            data = read_up_to(fd, size + 1, enough=size)
            if len(data) > size:
                data += read_up_to(fd, max_bytes + 1 - len(data))
        if len(data) > max_bytes:
            raise SourceTooLarge(f"{name!r} grew past the limit of {max_bytes} bytes")
        return data

    def read_header(self, name: str, limit: int) -> bytes:
        with self._opened(name) as fd:
            return read_up_to(fd, limit)  # a directory: IsADirectoryError

    @contextlib.contextmanager
    def _opened(self, name: str) -> Iterator[int]:
        """A descriptor of ``name`` inside the root, closed after; OS errors as the core's."""
        path = path_inside(self.root, name)
        with file_errors():
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                yield fd
            finally:
                os.close(fd)

    def version(self, name: str) -> str:
        """The file's modification time and size, from one ``stat``.

        The template tags ask this of every source on every render, so it
        skips :func:`path_inside`'s ``realpath`` (a dozen ``lstat`` calls):
        the name is jailed, and a symlink leading out of the root yields
        only a token that can match nothing read, because every read of a
        source's bytes (:meth:`read`, :meth:`read_header`) is contained.
        """
        try:
            stat = os.stat(os.path.join(self._root_text, jail_name(name)))
        except OSError as exc:
            raise SourceNotFound(str(exc)) from exc
        return f"{stat.st_mtime_ns:x}{stat.st_size:x}"


def read_up_to(fd: int, count: int, enough: int | None = None) -> bytes:
    """Up to ``count`` bytes from ``fd``, fewer only at the end of the file.

    With ``enough`` (the size ``fstat`` gave), a read that brings that many
    is taken as the whole file: no second ``read`` to see the end, while a
    file that grew since still shows as ``count`` bytes. One ``read`` for a
    regular file; more only if the kernel returns less than asked (a
    signal, a file system that reads in pieces).
    """
    goal = count if enough is None else enough
    data = os.read(fd, count)
    while data and len(data) < goal:
        more = os.read(fd, count - len(data))
        if not more:
            break
        data += more
    return data


@contextlib.contextmanager
def file_errors() -> Iterator[None]:
    """OS errors of a source read as the core's: missing or unreadable is a 404."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        raise SourceNotFound(str(exc)) from exc
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # the root and the name together: still no file
            raise SourceNotFound(str(exc)) from exc
        raise SourceUnavailable(str(exc)) from exc


class FileSystemCacheStore:
    """Results kept as files under a directory; ``get`` hands out the path.

    Handing out the path lets the WSGI layer serve hits with
    ``wsgi.file_wrapper`` (sendfile) and whitenoise's conditional and range
    handling, without reading the file into Python.
    """

    def __init__(self, root: str | os.PathLike[str], fsync: bool = True) -> None:
        self.root = Path(root)
        #: Make each result durable before it gets its name (``CACHE_FSYNC``).
        self.fsync = fsync

    def _path(self, key: str) -> Path:
        return self.root / jail_name(key)

    def get(self, key: str) -> CachedResult | None:
        # Strings, not pathlib: this runs on every request, hit or miss.
        path = os.path.join(self.root, jail_name(key))
        try:
            size = os.stat(path).st_size
        except OSError:
            return None
        return CachedResult(size=size, path=path)

    def put(self, key: str, data: bytes) -> None:
        write_atomically(self._path(key), data, fsync=self.fsync)

    def writable(self) -> bool:
        return directory_is_writable(self.root)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def delete_prefix(self, prefix: str) -> int:
        """Remove the results under ``prefix``, then the directories left empty.

        Quality sidecars go with them, uncounted: the count is of results.

        Temporary files are left alone: one may belong to a write in progress
        (removing it would fail that write); :meth:`remove_orphans` takes them
        once they are old. A directory that is not empty then stays.
        """
        directory = self._path(prefix.rstrip("/"))
        removed = 0
        for dirpath, _dirnames, filenames in os.walk(
            directory, topdown=False, onerror=raise_unless_gone
        ):
            for filename in filenames:
                if filename.startswith(TEMP_PREFIX):
                    continue
                with contextlib.suppress(FileNotFoundError):  # a concurrent purge won
                    os.unlink(os.path.join(dirpath, filename))
                    removed += not filename.endswith(QUALITY_SUFFIX)
            remove_empty_directory(dirpath)
        return removed

    def iter_entries(self) -> Iterator[CacheEntry]:
        for path, info in self._regular_files():
            if not path.name.startswith(TEMP_PREFIX):
                yield self._entry(path, info)

    def orphans(self, older_than: float) -> list[CacheEntry]:
        """Temporary files last modified more than ``older_than`` seconds ago.

        A write takes milliseconds, so a temporary file a minute old belongs
        to a process that died between creating it and renaming it.
        """
        cutoff = time.time() - older_than
        return [
            self._entry(path, info)
            for path, info in self._regular_files()
            if path.name.startswith(TEMP_PREFIX) and info.st_mtime < cutoff
        ]

    def remove_orphans(self, older_than: float) -> int:
        """Remove :meth:`orphans`; return how many were removed."""
        removed = 0
        for orphan in self.orphans(older_than):
            with contextlib.suppress(FileNotFoundError):
                (self.root / orphan.key).unlink()
                removed += 1
        return removed

    def _entry(self, path: Path, info: os.stat_result) -> CacheEntry:
        return CacheEntry(path.relative_to(self.root).as_posix(), info.st_size, info.st_mtime)

    def _regular_files(self) -> Iterator[tuple[Path, os.stat_result]]:
        """Regular files under the root with their ``lstat`` (symlinks are skipped).

        Files and directories removed while the walk runs (a concurrent purge
        or clean) are skipped; any other error is raised, so a clean never
        reports success over a directory it could not read.
        """
        for dirpath, _dirnames, filenames in os.walk(self.root, onerror=raise_unless_gone):
            for filename in filenames:
                path = Path(dirpath, filename)
                try:
                    info = path.lstat()
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    yield path, info


def raise_unless_gone(error: OSError) -> None:
    """``os.walk`` error handler: a directory that vanished is fine, others are not."""
    if not isinstance(error, FileNotFoundError):
        raise error


def remove_empty_directory(path: str) -> None:
    """``rmdir`` that ignores a directory already gone or not empty (a write raced us)."""
    try:
        os.rmdir(path)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            raise


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


#: Bytes the write probe writes: a page, so a full disk refuses it (an empty file
#: needs only an inode).
PROBE_BYTES = 4096


def write_problem(root: Path) -> str | None:
    """Why a result cannot be written under ``root`` now, or None when one can.

    A real write, not a permission bit (which says nothing of a read-only
    mount or a full disk): a temporary file of :data:`PROBE_BYTES` is made in
    ``root``, or, while ``root`` does not exist yet (the first write creates
    it), in its nearest existing ancestor, then removed. It is named as a
    write in progress is, so an interrupted probe is an orphan the cache's
    cleaning removes. Nothing else is created.
    """
    path = root
    while not path.exists():
        if path.parent == path:
            return f"no part of {root} exists"
        path = path.parent
    if not path.is_dir():
        return f"{path} is not a directory"
    try:
        with tempfile.NamedTemporaryFile(prefix=TEMP_PREFIX, dir=path) as probe:
            probe.write(bytes(PROBE_BYTES))
            probe.flush()
    except OSError as exc:
        return str(exc)
    return None


def write_atomically(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` so that readers see all of it or nothing.

    Temp file in the same directory (so ``os.replace`` is a rename on one file
    system), fsync before the rename so a power cut cannot leave a named but
    empty file (with ``fsync`` False, readers still never see a partial file,
    but the disk may after a power cut), and the temp file removed if
    anything fails. Written through the descriptor, as :meth:`FileSystemSourceStore.read`
    reads: six system calls, where a file object added three.
    """
    try:
        fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    except FileNotFoundError:  # the first result under this directory
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
            os.fchmod(fd, 0o644)  # mkstemp's 0600, whatever the umask
        finally:
            os.close(fd)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
