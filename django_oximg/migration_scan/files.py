"""The files a migration scan reads: regular files inside the directories it walks.

A project tree can hold more than source files: a FIFO (opening one blocks
until something writes to it), a socket, a device, a symbolic link to
``/etc`` or to a directory above the project, files that are not text. The
scan opens only regular files, and only those whose real path is inside the
directory being walked; everything else it would have read is listed as
skipped, with the reason, never left out in silence.

Symbolic links to directories are never followed: one that leads inside the
walked directory adds nothing (its target is walked under its own name, and
no loop can form), one that leads outside is listed as skipped. A symbolic
link to a file is read when its target is inside.

Reading a file never blocks: it is opened only once ``lstat`` says it is a
regular file, with ``O_NONBLOCK`` and ``O_NOFOLLOW`` in case it was swapped
since, and ``fstat`` must agree before anything is read. The text is decoded
the way its reader does it: a template as UTF-8 (Django's default
``file_charset``), a Python module by its byte-order mark or coding cookie
(PEP 263).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django_oximg.migration_scan.findings import ScanError

#: Directories never read: version control, caches, installed packages.
SKIPPED_DIRECTORIES = frozenset(
    {".git", ".hg", "__pycache__", "node_modules", "site-packages", "dist-packages", ".tox"}
)

#: Opening a file: never a FIFO's wait for a writer, never through a link swapped in.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

#: What a file that is not a regular one is, in the report.
FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


@dataclass
class Walk:
    """The files under directories, with what was left out and what could not be listed.

    ``skipped`` holds what the scan leaves out on purpose (not a regular
    file, a link leading outside); ``unreadable`` the directories it meant
    to list and could not.
    """

    skipped: dict[Path, str] = field(default_factory=dict)
    unreadable: dict[Path, str] = field(default_factory=dict)
    #: How a reason names the directory walked.
    shown: Callable[[Path], str] = str

    def files(
        self, root: Path, wanted: Callable[[str], bool] = bool, *, recursive: bool = True
    ) -> Iterator[Path]:
        """The real paths of the regular files under ``root`` whose names are ``wanted``.

        Version control, caches and virtualenvs are not entered. The walk keeps
        its own list of directories to visit, so a tree however deep (os.walk
        recurses, before Python 3.12) costs no stack.
        """
        inside = Path(os.path.realpath(root))
        pending = [inside]
        while pending:
            directory = pending.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = sorted(listing, key=lambda entry: entry.name)
            except OSError as exc:
                self.unreadable[directory] = f"cannot be listed: {reason(exc)}"
                continue
            below = []
            for entry in entries:
                path = Path(entry.path)
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    self.unreadable[path] = f"cannot be read: {reason(exc)}"
                    continue
                if stat.S_ISDIR(status.st_mode):
                    if recursive and not is_skipped_directory(path):
                        below.append(path)
                elif stat.S_ISLNK(status.st_mode) and os.path.isdir(path):
                    # Never followed; one that leads inside adds nothing.
                    if recursive and not is_inside(path, inside):
                        where = self.shown(root)
                        self.skipped[path] = f"a symbolic link to a directory outside {where}"
                elif wanted(entry.name):
                    found = self._regular_file(path, status, inside, root)
                    if found is not None:
                        yield found
            pending.extend(reversed(below))

    def _regular_file(
        self, path: Path, status: os.stat_result, inside: Path, root: Path
    ) -> Path | None:
        """``path``'s real path if it is a regular file inside ``inside`` (else why not, kept)."""
        real = path
        if stat.S_ISLNK(status.st_mode):
            if not is_inside(path, inside):
                self.skipped[path] = f"a symbolic link to a file outside {self.shown(root)}"
                return None
            real = Path(os.path.realpath(path))
            try:
                status = os.stat(real)
            except OSError as exc:
                self.skipped[path] = f"a symbolic link that cannot be followed ({reason(exc)})"
                return None
        if not stat.S_ISREG(status.st_mode):
            self.skipped[path] = f"not a regular file: {file_kind(status.st_mode)}"
            return None
        return real


def is_inside(link: Path, directory: Path) -> bool:
    """Whether ``link`` leads to a place inside ``directory`` (a real path)."""
    return Path(os.path.realpath(link)).is_relative_to(directory)


def is_skipped_directory(path: Path) -> bool:
    """Version control, a cache, installed packages or a virtualenv."""
    return path.name in SKIPPED_DIRECTORIES or os.path.exists(path / "pyvenv.cfg")


def file_kind(mode: int) -> str:
    return next((kind for test, kind in FILE_KINDS if test(mode)), "of an unknown kind")


def reason(error: OSError) -> str:
    return error.strerror or str(error)


def read(path: Path) -> bytes:
    """The bytes of the regular file at ``path``; OSError for anything else.

    The file was a regular file when it was listed; ``O_NONBLOCK`` keeps a
    FIFO swapped in since from blocking the open, and ``fstat`` keeps it
    from being read.
    """
    descriptor = os.open(path, OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        with open(descriptor, "rb", closefd=False) as file:
            return file.read()
    finally:
        os.close(descriptor)


def is_binary(data: bytes) -> bool:
    """Whether ``data`` is not text: it holds a NUL byte, which no template or module has."""
    return b"\0" in data


def template_text(data: bytes) -> str:
    """A template's text, read as UTF-8 the way Django reads it by default."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScanError(f"not UTF-8 text: {undecodable(exc)}") from exc


def python_text(data: bytes) -> str:
    """A module's text, decoded as Python decodes it: a byte-order mark, a coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise ScanError(f"not valid Python: {exc.msg}") from exc
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ScanError(f"not {encoding} text: {undecodable(exc)}") from exc


def undecodable(error: UnicodeDecodeError) -> str:
    return f"byte 0x{error.object[error.start]:02x} at offset {error.start}"
