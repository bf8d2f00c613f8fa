"""Tests for django_oximg.core.stores: the name jail and atomic cache writes.

No Django: these are the plain-disk stores a WSGI-only user wires directly.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from django_oximg.core.errors import SourceNotFound, SourceTooLarge
from django_oximg.core.stores.disk import (
    FileSystemCacheStore,
    FileSystemSourceStore,
    path_inside,
    read_up_to,
    write_atomically,
)
from django_oximg.core.stores.protocols import TEMP_PREFIX, jail_name

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

# -- the jail --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "",
        "..",
        "../x.jpg",
        "a/../../x.jpg",
        "a/./x.jpg",
        "./x.jpg",
        "a//x.jpg",
        "a/",
        "/etc/passwd",
        "..\\..\\windows\\win.ini",
        "a\\x.jpg",
        "x.jpg\x00.png",
        "a/" * 600 + "x.jpg",
        # No file system holds these: not a storage failure, a name that names nothing.
        "a" * 256 + ".jpg",
        "photos/" + "é" * 128,  # 256 bytes in UTF-8
        "/".join(["b" * 200] * 6),  # every part short enough, 1205 bytes in all
    ],
)
def test_jail_refuses_names_that_could_leave_the_root(name: str) -> None:
    with pytest.raises(SourceNotFound):
        jail_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "x.jpg",
        "photos/2024/x.jpg",
        "%2e%2e/x.jpg",
        "...",
        "a..b/c.jpg",
        "é/ü.jpg",
        "a" * 251 + ".jpg",  # 255 bytes: the longest a component may be
    ],
)
def test_jail_keeps_plain_relative_names_as_they_are(name: str) -> None:
    """Names are decoded once by the options parser: ``%2e%2e`` stays a literal name."""
    assert jail_name(name) == name


@pytest.fixture
def root(tmp_path: Path) -> Path:
    media = tmp_path / "media"
    (media / "photos").mkdir(parents=True)
    (media / "photos" / "x.jpg").write_bytes(b"inside")
    secret = tmp_path / "media-secret"
    secret.mkdir()
    (secret / "x.jpg").write_bytes(b"secret")
    return media


def test_path_inside_resolves_a_name_under_the_root(root: Path) -> None:
    assert path_inside(root, "photos/x.jpg") == (root / "photos" / "x.jpg").resolve()


def test_path_inside_refuses_a_symlink_that_leads_out(root: Path) -> None:
    (root / "photos" / "link.jpg").symlink_to(root.parent / "media-secret" / "x.jpg")
    (root / "etc").symlink_to("/etc")
    with pytest.raises(SourceNotFound):
        path_inside(root, "photos/link.jpg")
    with pytest.raises(SourceNotFound):
        path_inside(root, "etc/passwd")


def test_path_inside_allows_a_symlink_within_the_root(root: Path) -> None:
    (root / "alias.jpg").symlink_to(root / "photos" / "x.jpg")
    assert path_inside(root, "alias.jpg") == (root / "photos" / "x.jpg").resolve()


def test_a_root_reached_through_a_symlink_still_works(root: Path, tmp_path: Path) -> None:
    linked_root = tmp_path / "linked-media"
    linked_root.symlink_to(root)
    assert FileSystemSourceStore(linked_root).read("photos/x.jpg", 100) == b"inside"


# -- source reads ----------------------------------------------------------------------


def test_source_store_reads_bytes(root: Path) -> None:
    assert FileSystemSourceStore(root).read("photos/x.jpg", 1000) == b"inside"


@pytest.mark.parametrize(
    "name",
    [
        "photos/missing.jpg",
        "photos",
        "photos/x.jpg/more",
        "../media-secret/x.jpg",
        "photos/link.jpg",
        "/etc/passwd",
    ],
)
def test_source_store_answers_not_found_for_missing_or_outside_names(root: Path, name: str) -> None:
    (root / "photos" / "link.jpg").symlink_to(root.parent / "media-secret" / "x.jpg")
    with pytest.raises(SourceNotFound):
        FileSystemSourceStore(root).read(name, 1000)


def test_a_name_too_long_for_the_file_system_is_not_found(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENAMETOOLONG (the root and the name together) is a missing source, not a 502."""

    def too_long(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENAMETOOLONG, "File name too long")

    monkeypatch.setattr("django_oximg.core.stores.disk.os.open", too_long)
    with pytest.raises(SourceNotFound):
        FileSystemSourceStore(root).read("photos/x.jpg", 1000)


def test_a_source_that_grew_after_its_fstat_is_read_on_to_the_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read trusts a read of fstat's size as the whole file, but not one that brings more."""
    (root / "photos" / "x.jpg").write_bytes(b"grown well past")
    real_fstat = os.fstat

    def stale(fd: int) -> os.stat_result:  # the size before the file grew
        status = real_fstat(fd)
        return os.stat_result((*status[:6], 5, *status[7:]))

    monkeypatch.setattr("django_oximg.core.stores.disk.os.fstat", stale)
    store = FileSystemSourceStore(root)
    assert store.read("photos/x.jpg", 1000) == b"grown well past"
    with pytest.raises(SourceTooLarge, match="grew past"):
        store.read("photos/x.jpg", 10)


def test_read_up_to_reads_on_through_short_reads() -> None:
    """A pipe hands over what was written so far: the reads go on to the count or the end."""
    reader, writer = os.pipe()
    later = threading.Timer(0.05, lambda: (os.write(writer, b"defgh"), os.close(writer)))
    try:
        os.write(writer, b"abc")
        later.start()  # the first read gets "abc" alone, the next waits for the rest
        assert read_up_to(reader, 6) == b"abcdef"
        later.join(5)
        assert read_up_to(reader, 6) == b"gh"  # the end comes first
        assert read_up_to(reader, 6) == b""
    finally:
        later.join(5)
        os.close(reader)


def test_read_up_to_stops_at_enough_without_reading_the_end() -> None:
    """``enough`` bytes in: no further read (one would wait on a writer that holds the pipe)."""
    reader, writer = os.pipe()
    os.set_blocking(reader, False)  # a read with nothing to give fails rather than waits
    try:
        os.write(writer, b"abcd")
        assert read_up_to(reader, 5, enough=4) == b"abcd"
        os.write(writer, b"efgh")
        with pytest.raises(BlockingIOError):  # without it, a read for the fifth byte
            read_up_to(reader, 5)
    finally:
        os.close(reader)
        os.close(writer)


def test_source_store_reserves_the_size_before_reading(root: Path) -> None:
    reserved: list[int] = []
    assert FileSystemSourceStore(root).read("photos/x.jpg", 1000, reserved.append) == b"inside"
    assert reserved == [len(b"inside")]


def test_source_store_refuses_a_file_over_the_limit_and_allows_one_at_it(root: Path) -> None:
    store = FileSystemSourceStore(root)
    assert store.read("photos/x.jpg", len(b"inside")) == b"inside"
    with pytest.raises(SourceTooLarge):
        store.read("photos/x.jpg", len(b"inside") - 1)


def test_source_version_changes_with_the_content(root: Path) -> None:
    store = FileSystemSourceStore(root)
    path = root / "photos" / "x.jpg"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = store.version("photos/x.jpg")
    assert store.version("photos/x.jpg") == before
    path.write_bytes(b"changed content")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert store.version("photos/x.jpg") != before
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert store.version("photos/x.jpg") != before
    with pytest.raises(SourceNotFound):
        store.version("photos/missing.jpg")


def test_a_header_read_gives_the_first_bytes_and_no_more(root: Path) -> None:
    store = FileSystemSourceStore(root)
    assert store.read_header("photos/x.jpg", 3) == b"ins"
    assert store.read_header("photos/x.jpg", 1000) == b"inside"


@pytest.mark.parametrize(
    "name", ["photos/missing.jpg", "photos", "../media-secret/x.jpg", "photos/link.jpg"]
)
def test_a_header_read_is_contained_like_a_read(root: Path, name: str) -> None:
    (root / "photos" / "link.jpg").symlink_to(root.parent / "media-secret" / "x.jpg")
    with pytest.raises(SourceNotFound):
        FileSystemSourceStore(root).read_header(name, 1000)


def test_a_version_through_a_symlink_leading_out_reveals_no_bytes(root: Path) -> None:
    """``version`` is one stat (the tags ask it per tag); reads stay contained.

    A symlink to a file outside the root has a version (its stat), but
    nothing that reads the file's bytes accepts it, so the tags refuse it
    when they come to read its header.
    """
    (root / "photos" / "link.jpg").symlink_to(root.parent / "media-secret" / "x.jpg")
    store = FileSystemSourceStore(root)
    assert store.version("photos/link.jpg")
    with pytest.raises(SourceNotFound):
        store.read_header("photos/link.jpg", 1000)
    with pytest.raises(SourceNotFound):
        store.version("../media-secret/x.jpg")  # the name itself is still jailed


# -- the result cache ------------------------------------------------------------------

KEY = "ab/abcdef/0123456789.jpeg"


def leftovers(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.startswith(TEMP_PREFIX)]


def test_cache_store_misses_then_hands_out_the_path(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path / "cache")
    assert store.get(KEY) is None
    store.put(KEY, b"result bytes")
    found = store.get(KEY)
    assert found is not None
    assert found.size == len(b"result bytes")
    assert found.path == str(tmp_path / "cache" / KEY)
    assert Path(found.path).read_bytes() == b"result bytes"
    assert stat.S_IMODE(os.stat(found.path).st_mode) == 0o644
    assert leftovers(tmp_path) == []


def test_cache_store_refuses_keys_that_leave_its_root(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path / "cache")
    with pytest.raises(SourceNotFound):
        store.put("../escaped.jpeg", b"x")
    assert not (tmp_path / "escaped.jpeg").exists()


def test_overwriting_a_result_replaces_it_whole(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path)
    store.put(KEY, b"first")
    store.put(KEY, b"second, longer")
    assert (tmp_path / KEY).read_bytes() == b"second, longer"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("fsync", [True, False])
def test_cache_store_fsyncs_each_result_before_naming_it_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    """``CACHE_FSYNC``: the whole temporary file is synced while the final name is unused."""
    synced: list[tuple[int, bool]] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append((os.fstat(fd).st_size, (tmp_path / KEY).exists()))
        real_fsync(fd)

    monkeypatch.setattr("django_oximg.core.stores.disk.os.fsync", spy)
    FileSystemCacheStore(tmp_path, fsync=fsync).put(KEY, b"result bytes")
    assert synced == ([(len(b"result bytes"), False)] if fsync else [])
    assert (tmp_path / KEY).read_bytes() == b"result bytes"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("failing", ["write", "fsync", "fchmod", "replace"])
def test_a_write_failing_midway_leaves_no_temp_file_and_no_final_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(f"django_oximg.core.stores.disk.os.{failing}", fail)
    target = tmp_path / "ab" / "result.jpeg"
    with pytest.raises(OSError, match="No space left"):
        write_atomically(target, b"x" * 100_000)
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_a_failed_overwrite_keeps_the_previous_result_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "result.jpeg"
    write_atomically(target, b"complete old result")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("django_oximg.core.stores.disk.os.replace", fail)
    with pytest.raises(OSError):
        write_atomically(target, b"new")
    assert target.read_bytes() == b"complete old result"
    assert leftovers(tmp_path) == []


def test_an_interrupted_write_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only OSError: a KeyboardInterrupt mid-write also cleans up."""

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("django_oximg.core.stores.disk.os.fsync", interrupt)
    target = tmp_path / "result.jpeg"
    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, b"data")
    assert list(tmp_path.iterdir()) == []


def test_cache_store_put_raises_oserror_when_its_root_is_unusable(tmp_path: Path) -> None:
    """The thumbnailer catches OSError from put (and serves from memory)."""
    blocker = tmp_path / "file-not-dir"
    blocker.write_bytes(b"")
    with pytest.raises(OSError):
        FileSystemCacheStore(blocker).put(KEY, b"data")
    assert FileSystemCacheStore(blocker).get(KEY) is None
