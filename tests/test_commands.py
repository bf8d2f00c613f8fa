"""The operator commands (oximg_url, oximg_purge, oximg_clean, oximg_warm) and what they use.

Also covers the pieces these commands are built on: listing and pruning of
the cache stores (``CacheStore.iter_entries`` / ``delete_prefix`` /
``delete``, orphan removal), ``django_oximg.purge``, the progress bar and the
duration and size parsers. Thumbnails are real: rendered from the drawn
sources of the ``media`` fixture.
"""

from __future__ import annotations

import os
import time
from argparse import ArgumentTypeError
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.storage import InMemoryStorage
from django.core.management import call_command, find_commands, load_command_class
from django.core.management.base import CommandError
from django.test import Client

from django_oximg import management, runtime
from django_oximg.core.keys import quality_key, source_directory
from django_oximg.core.options import parse_path
from django_oximg.core.options.signing import split_signed_path
from django_oximg.core.stores.disk import FileSystemCacheStore
from django_oximg.core.stores.protocols import TEMP_PREFIX, CacheEntry
from django_oximg.management.units import format_size, parse_duration, parse_size
from django_oximg.progress import Progress
from django_oximg.purge import RESULT_KEY, purge_source, select_for_clean
from django_oximg.source_metadata import metadata_key
from django_oximg.storage import StorageCacheStore
from django_oximg.thumbnails import get_thumbnail

LANDSCAPE = "photos/landscape.jpg"
ALPHA = "photos/alpha.png"
ANIMATION = "photos/anim.gif"
SOURCES = [ALPHA, ANIMATION, LANDSCAPE]  # sorted, as the media fixture draws them

#: A modification time far in the past, for entries that must count as old.
LONG_AGO = time.time() - 400 * 86400


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    """Source metadata lives in Django's cache: no test may see another's."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def cache_root(media: Path) -> Path:
    """The default result cache: ``MEDIA_ROOT/oximg``."""
    return media / "oximg"


def run(*args: str) -> tuple[str, str]:
    """Call a command; return (stdout, stderr)."""
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def results_of(cache_root: Path, source: str) -> list[str]:
    directory = cache_root / source_directory(source)
    return sorted(path.name for path in directory.glob("*")) if directory.exists() else []


def result_key(source: str, index: int, fmt: str = "webp") -> str:
    return f"{source_directory(source)}/{index:040x}.{fmt}"


def put_result(root: Path, key: str, size: int, modified: float) -> None:
    """A result-shaped file with a chosen size and modification time."""
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (modified, modified))


def served_from_cache(url: str) -> bool:
    """Whether fetching ``url`` renders nothing (its result was already cached)."""
    thumbnailer = runtime.get_thumbnailer()
    before = thumbnailer.renders
    response = Client().get(url)
    response.close()
    assert response.status_code == 200
    return thumbnailer.renders == before


# -- stores: listing and pruning ---------------------------------------------------


def test_filesystem_entries_list_results_with_size_and_time_but_not_temp_files(
    tmp_path: Path,
) -> None:
    store = FileSystemCacheStore(tmp_path / "cache")
    store.put("ab/abc/one.webp", b"12345")
    put_result(tmp_path / "cache", "ab/abc/two.webp", 3, LONG_AGO)
    (tmp_path / "cache" / "ab" / "abc" / f"{TEMP_PREFIX}xyz").write_bytes(b"partial")

    entries = sorted(store.iter_entries(), key=lambda entry: entry.key)

    assert [(entry.key, entry.size) for entry in entries] == [
        ("ab/abc/one.webp", 5),
        ("ab/abc/two.webp", 3),
    ]
    assert entries[1].modified == pytest.approx(LONG_AGO)


def test_filesystem_entries_of_a_missing_root_are_none(tmp_path: Path) -> None:
    assert list(FileSystemCacheStore(tmp_path / "never-made").iter_entries()) == []


def test_filesystem_delete_prefix_removes_one_directory_only(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path)
    for key in ("ab/abc/1.webp", "ab/abc/2.png", "ab/abcd/3.webp", "cd/abc/4.webp"):
        store.put(key, b"data")

    assert store.delete_prefix("ab/abc") == 2

    assert not (tmp_path / "ab" / "abc").exists()  # emptied, so removed
    assert sorted(entry.key for entry in store.iter_entries()) == [
        "ab/abcd/3.webp",
        "cd/abc/4.webp",
    ]
    assert store.delete_prefix("ab/abc/") == 0


def test_filesystem_delete_prefix_leaves_a_write_in_progress(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path)
    store.put("ab/abc/1.webp", b"data")
    temp = tmp_path / "ab" / "abc" / f"{TEMP_PREFIX}in-flight"
    temp.write_bytes(b"half")

    assert store.delete_prefix("ab/abc") == 1
    assert temp.exists()


def test_filesystem_delete_prefix_refuses_names_outside_the_jail(tmp_path: Path) -> None:
    from django_oximg.core.errors import SourceNotFound

    with pytest.raises(SourceNotFound):
        FileSystemCacheStore(tmp_path / "cache").delete_prefix("../elsewhere")


def test_filesystem_delete_of_a_missing_key_is_quiet(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path)
    store.put("ab/abc/1.webp", b"data")
    store.delete("ab/abc/1.webp")
    store.delete("ab/abc/1.webp")
    assert store.get("ab/abc/1.webp") is None


def test_orphans_are_old_temp_files_only(tmp_path: Path) -> None:
    store = FileSystemCacheStore(tmp_path)
    store.put("ab/abc/1.webp", b"data")
    old = tmp_path / "ab" / "abc" / f"{TEMP_PREFIX}old"
    fresh = tmp_path / "ab" / "abc" / f"{TEMP_PREFIX}fresh"
    old.write_bytes(b"o")
    fresh.write_bytes(b"f")
    os.utime(old, (LONG_AGO, LONG_AGO))

    assert [orphan.key for orphan in store.orphans(60)] == [f"ab/abc/{TEMP_PREFIX}old"]
    assert store.remove_orphans(60) == 1
    assert not old.exists()
    assert fresh.exists()
    assert store.get("ab/abc/1.webp") is not None


def test_storage_store_lists_and_deletes_by_prefix() -> None:
    """Any Django storage that can list (here the in-memory one, as S3 would)."""
    storage = InMemoryStorage()
    store = StorageCacheStore(storage)
    for key in ("ab/abc/1.webp", "ab/abc/2.png", "ab/abcd/3.webp"):
        store.put(key, b"12345")

    entries = sorted(store.iter_entries(), key=lambda entry: entry.key)
    assert [(entry.key, entry.size) for entry in entries] == [
        ("ab/abc/1.webp", 5),
        ("ab/abc/2.png", 5),
        ("ab/abcd/3.webp", 5),
    ]
    assert all(entry.modified > 0 for entry in entries)

    assert store.delete_prefix("ab/abc") == 2
    assert [entry.key for entry in store.iter_entries()] == ["ab/abcd/3.webp"]
    store.delete("ab/abcd/3.webp")
    assert list(store.iter_entries()) == []
    assert store.delete_prefix("zz/none") == 0


@pytest.mark.parametrize("kind", ["disk", "storage"])
def test_delete_prefix_removes_quality_sidecars_and_counts_results_only(
    tmp_path: Path, kind: str
) -> None:
    store = (
        FileSystemCacheStore(tmp_path) if kind == "disk" else StorageCacheStore(InMemoryStorage())
    )
    result = result_key(LANDSCAPE, 1, "jpeg")
    store.put(quality_key(result), b"72")
    store.put(result, b"data")
    store.put(result_key(LANDSCAPE, 2), b"data")

    assert store.delete_prefix(source_directory(LANDSCAPE)) == 2
    assert list(store.iter_entries()) == []


# -- purge module: key form and selection ----------------------------------------------


def test_result_key_pattern_matches_the_thumbnailers_keys(media: Path) -> None:
    thumbnail = get_thumbnail(LANDSCAPE, "100x100", format="webp")
    _, path = thumbnail.url.split("/img", 1)
    key = runtime.get_thumbnailer().job_for(path, "").key
    assert RESULT_KEY.fullmatch(key)
    assert key.startswith(source_directory(LANDSCAPE) + "/")


def entry(name: str, size: int, modified: float) -> CacheEntry:
    return CacheEntry(name, size, modified)


def test_select_by_age_takes_only_older_entries() -> None:
    entries = [entry("new", 10, 1000), entry("old", 10, 100), entry("edge", 10, 500)]
    chosen = select_for_clean(entries, now=1000, older_than=500)
    assert [e.key for e in chosen] == ["old"]


def test_select_by_size_takes_least_recently_modified_until_under() -> None:
    entries = [entry("c", 40, 300), entry("a", 40, 100), entry("b", 40, 200), entry("d", 40, 400)]
    assert [e.key for e in select_for_clean(entries, now=1000, max_size=80)] == ["a", "b"]
    assert [e.key for e in select_for_clean(entries, now=1000, max_size=79)] == ["a", "b", "c"]
    assert select_for_clean(entries, now=1000, max_size=160) == []


def test_select_by_age_then_size() -> None:
    entries = [entry("a", 50, 100), entry("b", 50, 900), entry("c", 50, 950)]
    chosen = select_for_clean(entries, now=1000, older_than=500, max_size=50)
    assert [e.key for e in chosen] == ["a", "b"]


def test_select_with_no_limit_takes_nothing() -> None:
    assert select_for_clean([entry("a", 50, 100)], now=1000) == []


# -- units and progress ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 30 * 86400),
        ("12h", 43200),
        ("90m", 5400),
        ("45s", 45),
        ("1d12h", 129600),
        ("2w", 1209600),
        ("1.5h", 5400),
        ("0s", 0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "3x", "1d 2h", "-1d", "1dd"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ArgumentTypeError, match="bad duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("5G", 5 * 1024**3),
        ("500M", 500 * 1024**2),
        ("64k", 65536),
        ("1024", 1024),
        ("1.5GiB", int(1.5 * 1024**3)),
        ("2 MB", 2 * 1024**2),
        ("3T", 3 * 1024**4),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "5X", "-5G", "5 G B"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ArgumentTypeError, match="bad size"):
        parse_size(text)


def test_format_size() -> None:
    assert format_size(512) == "512 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(5 * 1024**3) == "5.0 GiB"


def test_progress_redraws_in_place_and_clears_its_line() -> None:
    written: list[str] = []
    ticks = iter(range(100))
    with Progress("work", 4, written.append, clock=lambda: float(next(ticks))) as progress:
        for _ in range(4):
            progress.advance()
    assert all(text.startswith("\r") for text in written)
    assert "work: 1/4" in written[0]
    assert "work: 4/4 [" in written[-2] and "100%" in written[-2]
    assert written[-1].strip() == ""  # the clearing write


def test_progress_without_total_counts() -> None:
    written: list[str] = []
    with Progress("scanning", None, written.append, clock=lambda: 0.0) as progress:
        progress.advance(3)
    assert written[0] == "\rscanning: 3"


def test_progress_draws_nothing_when_disabled() -> None:
    written: list[str] = []
    with Progress("work", 2, written.append, enabled=False) as progress:
        progress.advance(2)
    assert written == []


class Terminal(StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_progress_off_a_terminal_writes_a_plain_line_per_tenth() -> None:
    written: list[str] = []
    with Progress("work", 200, written.append, terminal=False) as progress:
        for _ in range(200):
            progress.advance()
    assert len(written) == 10
    assert all(text.endswith("\n") and "\r" not in text for text in written)
    assert written[0].startswith("work: 20/200 [")
    assert written[-1].startswith("work: 200/200 [") and "100%" in written[-1]


def test_progress_off_a_terminal_with_an_unknown_total_writes_its_count_once() -> None:
    written: list[str] = []
    with Progress("scanning", None, written.append, terminal=False) as progress:
        progress.advance(3)
        progress.advance(4)
        progress.finish()
    assert written == ["scanning: 7\n"]


def test_commands_draw_progress_on_a_terminal_unless_told_not_to(media: Path) -> None:
    err = Terminal()
    call_command("oximg_purge", LANDSCAPE, stdout=StringIO(), stderr=err)
    assert "\rpurging: 1/1" in err.getvalue()

    quiet = Terminal()
    call_command("oximg_purge", LANDSCAPE, "--no-progress", stdout=StringIO(), stderr=quiet)
    assert quiet.getvalue() == ""


def test_commands_write_plain_progress_lines_off_a_terminal(media: Path) -> None:
    err = StringIO()
    call_command("oximg_purge", LANDSCAPE, stdout=StringIO(), stderr=err)
    assert err.getvalue().startswith("purging: 1/1 [") and "\r" not in err.getvalue()
    assert err.getvalue().count("\n") == 1


# -- oximg_url ---------------------------------------------------------------------


def test_url_prints_a_signed_url_the_server_serves(media: Path) -> None:
    out, _ = run("oximg_url", LANDSCAPE, "rs:fill:300:200/q:70", "--format", "webp")
    url = out.strip()
    assert url.startswith("/img/")
    assert url.endswith("/rs:fill:300:200/q:70/plain/photos/landscape.jpg@webp")
    signature, rest = split_signed_path(url.removeprefix("/img"))
    runtime.get_signer().verify(signature, rest)
    options = parse_path(rest).options
    assert (options.width, options.height, options.quality, options.format) == (
        300,
        200,
        70,
        "webp",
    )

    response = Client().get(url)
    try:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "image/webp"
    finally:
        response.close()


def test_url_with_base_url_and_no_options(media: Path) -> None:
    out, _ = run("oximg_url", LANDSCAPE, "--base-url", "https://cdn.example.com/")
    url = out.strip()
    assert url.startswith("https://cdn.example.com/img/")
    assert url.endswith("/plain/photos/landscape.jpg")


def test_url_encodes_awkward_names_as_base64(media: Path) -> None:
    out, _ = run("oximg_url", "photos/with space.jpg", "w:100", "--format", "png")
    url = out.strip()
    assert " " not in url and "plain" not in url
    _, rest = split_signed_path(url.removeprefix("/img"))
    assert parse_path(rest).source == "photos/with space.jpg"


def test_url_accepts_presets(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "PRESETS": {"card": "rs:fill:40:30"}}
    out, _ = run("oximg_url", LANDSCAPE, "pr:card")
    assert "/pr:card/plain/" in out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("rs:fill:300:200/nonsense:1", "nonsense"),
        ("w:-3", "w"),
        ("rs:fill:300/oops", "not an option"),
        ("pr:missing", "missing"),
    ],
)
def test_url_refuses_bad_options(media: Path, options: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("oximg_url", LANDSCAPE, options)


def test_url_refuses_a_bad_format(media: Path) -> None:
    with pytest.raises(CommandError, match="unknown format"):
        run("oximg_url", LANDSCAPE, "w:100", "--format", "bmp")


# -- oximg_purge -------------------------------------------------------------------


def test_purge_removes_exactly_one_sources_variants_and_metadata(
    media: Path, cache_root: Path
) -> None:
    run("oximg_warm", "--source", "photos/*", "--geometry", "60x60", "--geometry", "30")
    assert len(results_of(cache_root, LANDSCAPE)) == 2
    assert len(results_of(cache_root, ALPHA)) == 2
    assert cache.get(metadata_key(LANDSCAPE)) is not None

    out, _ = run("oximg_purge", LANDSCAPE)

    assert results_of(cache_root, LANDSCAPE) == []
    assert len(results_of(cache_root, ALPHA)) == 2
    assert len(results_of(cache_root, ANIMATION)) == 2
    assert cache.get(metadata_key(LANDSCAPE)) is None
    assert cache.get(metadata_key(ALPHA)) is not None
    assert f"{LANDSCAPE}: 2 cached result(s), metadata deleted" in out
    assert "Purged 2 cached result(s) of 1 source(s)." in out


def test_purge_removes_the_quality_sidecars_autoquality_wrote(
    media: Path, cache_root: Path, settings: Any
) -> None:
    settings.OXIMG = {**settings.OXIMG, "AUTOQUALITY": {"METHOD": "size", "TARGET": 3000}}
    run("oximg_warm", "--source", LANDSCAPE, "--geometry", "60x60", "--geometry", "30")
    stored = results_of(cache_root, LANDSCAPE)
    assert len(stored) == 4  # rendered ahead: each result and its sidecar
    assert sum(name.endswith(".quality") for name in stored) == 2

    out, _ = run("oximg_purge", LANDSCAPE)

    assert results_of(cache_root, LANDSCAPE) == []
    assert "Purged 2 cached result(s) of 1 source(s)." in out


def test_purged_thumbnails_are_rendered_again(media: Path) -> None:
    url = get_thumbnail(LANDSCAPE, "50x50").url
    assert not served_from_cache(url)
    assert served_from_cache(url)
    run("oximg_purge", LANDSCAPE)
    assert not served_from_cache(url)


def test_purge_of_several_sources_and_of_an_unknown_one(media: Path, cache_root: Path) -> None:
    run("oximg_warm", "--source", "photos/*", "--geometry", "60x60")
    out, _ = run("oximg_purge", LANDSCAPE, ALPHA, "photos/never-there.jpg")
    assert "photos/never-there.jpg: 0 cached result(s), no cached metadata" in out
    assert "Purged 2 cached result(s) of 3 source(s)." in out
    assert results_of(cache_root, ANIMATION)


class BrokenCache(FileSystemCacheStore):
    """A result cache whose deletes fail for one source (a read-only mount, say)."""

    def delete_prefix(self, prefix: str) -> int:
        if prefix == source_directory(LANDSCAPE):
            raise PermissionError("read-only file system")
        return super().delete_prefix(prefix)


def test_purge_failure_is_reported_and_exits_non_zero(
    media: Path, cache_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("oximg_warm", "--source", "photos/*", "--geometry", "60x60")
    monkeypatch.setattr(
        "django_oximg.management.commands.oximg_purge.result_cache",
        lambda: BrokenCache(cache_root),
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 source"):
        call_command("oximg_purge", LANDSCAPE, ALPHA, stdout=out, stderr=err)
    assert f"failed: {LANDSCAPE}: read-only file system" in err.getvalue()
    assert f"{ALPHA}: 1 cached result(s)" in out.getvalue()  # the others are still purged
    assert results_of(cache_root, ALPHA) == []


def test_purge_needs_a_source(media: Path) -> None:
    with pytest.raises(CommandError):
        run("oximg_purge")


# -- oximg_clean -------------------------------------------------------------------


def test_clean_dry_run_lists_but_deletes_nothing(cache_root: Path) -> None:
    old = result_key(LANDSCAPE, 1)
    new = result_key(ALPHA, 2)
    put_result(cache_root, old, 100, LONG_AGO)
    put_result(cache_root, new, 100, time.time())
    orphan = cache_root / source_directory(ALPHA) / f"{TEMP_PREFIX}dead"
    orphan.write_bytes(b"x" * 7)
    os.utime(orphan, (LONG_AGO, LONG_AGO))

    out, _ = run("oximg_clean", "--older-than", "30d", "--dry-run")

    assert f"would delete {old} (100 B)" in out
    assert f"{TEMP_PREFIX}dead" in out
    assert new not in out
    assert "Would delete 1 result(s) and 1 orphan temporary file(s), 107 B;" in out
    assert (cache_root / old).exists() and orphan.exists()


def test_clean_older_than_deletes_old_results_and_orphans(cache_root: Path) -> None:
    old = result_key(LANDSCAPE, 1)
    new = result_key(LANDSCAPE, 2)
    put_result(cache_root, old, 100, LONG_AGO)
    put_result(cache_root, new, 50, time.time())
    dead = cache_root / source_directory(LANDSCAPE) / f"{TEMP_PREFIX}dead"
    live = cache_root / source_directory(LANDSCAPE) / f"{TEMP_PREFIX}live"
    dead.write_bytes(b"d")
    live.write_bytes(b"l")
    os.utime(dead, (LONG_AGO, LONG_AGO))

    out, _ = run("oximg_clean", "--older-than", "30d")

    assert not (cache_root / old).exists()
    assert (cache_root / new).exists()
    assert not dead.exists()
    assert live.exists()  # a write may still be finishing
    assert (
        "Deleted 1 result(s) and 1 orphan temporary file(s), 101 B; 1 result(s), 50 B remain."
        in out
    )
    assert old not in out  # listed only with -v 2


def test_clean_deletes_a_results_quality_sidecar_with_it_and_old_orphan_sidecars(
    cache_root: Path,
) -> None:
    old, new = result_key(LANDSCAPE, 1, "jpeg"), result_key(LANDSCAPE, 2, "jpeg")
    put_result(cache_root, quality_key(old), 2, LONG_AGO)
    put_result(cache_root, old, 100, LONG_AGO)
    put_result(cache_root, quality_key(new), 2, LONG_AGO)  # written before its result
    put_result(cache_root, new, 50, time.time())
    orphan = quality_key(result_key(ALPHA, 3, "webp"))  # its result's write failed
    put_result(cache_root, orphan, 2, LONG_AGO)
    young = quality_key(result_key(ALPHA, 4, "webp"))  # its result may be on its way
    put_result(cache_root, young, 2, time.time())

    out, _ = run("oximg_clean", "--older-than", "30d")

    assert not (cache_root / old).exists() and not (cache_root / quality_key(old)).exists()
    assert (cache_root / new).exists() and (cache_root / quality_key(new)).exists()
    assert not (cache_root / orphan).exists()
    assert (cache_root / young).exists()
    # Sidecars are not counted as results; their bytes as freed.
    assert "Deleted 1 result(s) and 0 orphan temporary file(s), 104 B; 1 result(s)" in out


def test_clean_lists_deletions_at_verbosity_2(cache_root: Path) -> None:
    old = result_key(LANDSCAPE, 1)
    put_result(cache_root, old, 10, LONG_AGO)
    out, _ = run("oximg_clean", "--older-than", "1d", "-v", "2")
    assert f"deleting {old} (10 B)" in out


def test_clean_max_size_deletes_least_recently_modified_first(cache_root: Path) -> None:
    now = time.time()
    keys = [result_key(LANDSCAPE, index) for index in range(4)]
    for age, key in zip((40, 30, 20, 10), keys, strict=True):  # keys[0] is the oldest
        put_result(cache_root, key, 1024, now - age * 60)

    out, _ = run("oximg_clean", "--max-size", "2K")

    assert [(cache_root / key).exists() for key in keys] == [False, False, True, True]
    assert "Deleted 2 result(s)" in out and "2 result(s), 2.0 KiB remain." in out


def test_clean_never_touches_names_the_cache_does_not_make(cache_root: Path) -> None:
    foreign = [cache_root / "README.txt", cache_root / "ab" / "notes.jpg"]
    for path in foreign:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"keep me")
        os.utime(path, (LONG_AGO, LONG_AGO))
    run("oximg_clean", "--older-than", "0s", "--max-size", "0")
    assert all(path.exists() for path in foreign)


def test_clean_removes_real_results(media: Path, cache_root: Path) -> None:
    run("oximg_warm", "--source", "photos/*", "--geometry", "60x60")
    out, _ = run("oximg_clean", "--max-size", "0")
    assert "Deleted 3 result(s)" in out
    assert not any(path.is_file() for path in cache_root.rglob("*"))


def test_clean_of_an_empty_cache(media: Path) -> None:
    out, _ = run("oximg_clean", "--older-than", "1d")
    assert (
        "Deleted 0 result(s) and 0 orphan temporary file(s), 0 B; 0 result(s), 0 B remain." in out
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--older-than", "soon"), "bad duration"), (("--max-size", "big"), "bad size")],
)
def test_clean_refuses_bad_limits(media: Path, args: tuple[str, str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("oximg_clean", *args)


# -- oximg_warm --------------------------------------------------------------------


def test_warm_renders_then_a_second_run_renders_nothing(media: Path, cache_root: Path) -> None:
    out, _ = run("oximg_warm", "--source", "photos/*", "--geometry", "80x60", "--crop", "center")
    assert "Rendered 3, already cached 0, failed 0; 3 source(s) x 1 variant(s)." in out
    renders = runtime.get_thumbnailer().renders

    out, _ = run("oximg_warm", "--source", "photos/*", "--geometry", "80x60", "--crop", "center")

    assert "Rendered 0, already cached 3, failed 0;" in out
    assert runtime.get_thumbnailer().renders == renders
    for source in SOURCES:
        assert len(results_of(cache_root, source)) == 1


def test_warm_makes_exactly_what_the_tag_asks_for(media: Path) -> None:
    run("oximg_warm", "--source", LANDSCAPE, "--geometry", "120x90", "--format", "webp")
    assert served_from_cache(get_thumbnail(LANDSCAPE, "120x90", format="webp").url)
    assert not served_from_cache(get_thumbnail(LANDSCAPE, "121x90", format="webp").url)


def test_warm_with_autoquality_makes_the_tags_searched_result(media: Path) -> None:
    aq = "size:3000:5:80"
    run("oximg_warm", "--source", LANDSCAPE, "--geometry", "120x90", "--autoquality", aq)
    assert served_from_cache(get_thumbnail(LANDSCAPE, "120x90", autoquality=aq).url)
    assert not served_from_cache(get_thumbnail(LANDSCAPE, "120x90").url)


def test_warm_with_auto_format_makes_every_negotiated_result(media: Path, cache_root: Path) -> None:
    out, _ = run("oximg_warm", "--source", LANDSCAPE, "--geometry", "64", "--format", "auto")
    assert "Rendered 3," in out
    suffixes = sorted(Path(name).suffix for name in results_of(cache_root, LANDSCAPE))
    assert suffixes == [".avif", ".jpeg", ".webp"]


def test_warm_with_auto_format_but_negotiation_off_renders_once(media: Path, settings: Any) -> None:
    settings.OXIMG = {**settings.OXIMG, "AUTO_FORMAT": False}
    out, _ = run("oximg_warm", "--source", LANDSCAPE, "--geometry", "64", "--format", "auto")
    assert "Rendered 1, already cached 0, failed 0;" in out


def test_warm_presets_alone_and_crossed_with_geometries(
    media: Path, cache_root: Path, settings: Any
) -> None:
    settings.OXIMG = {
        **settings.OXIMG,
        "PRESETS": {"card": "rs:fill:40:30/f:webp", "tiny": "rs:fit:16:16"},
    }
    out, _ = run("oximg_warm", "--source", LANDSCAPE, "--preset", "card", "--preset", "tiny")
    assert "Rendered 2, already cached 0, failed 0; 1 source(s) x 2 variant(s)." in out
    assert served_from_cache(get_thumbnail(LANDSCAPE, "", preset="card").url)

    out, _ = run("oximg_warm", "--source", LANDSCAPE, "--preset", "card", "--geometry", "20x20")
    assert "Rendered 1," in out
    assert served_from_cache(get_thumbnail(LANDSCAPE, "20x20", preset="card").url)


def test_warm_counts_failures_by_status_and_exits_non_zero(media: Path) -> None:
    (media / "photos" / "broken.jpg").write_bytes(b"this is not an image at all")
    with pytest.raises(CommandError) as raised:
        run("oximg_warm", "--source", "photos/*", "--geometry", "50x50")
    assert "Rendered 3, already cached 0, failed 1 (422: 1);" in str(raised.value)


def test_warm_reports_each_failure_on_stderr(media: Path) -> None:
    (media / "photos" / "broken.jpg").write_bytes(b"nope")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command(
            "oximg_warm",
            "--source",
            "photos/broken.jpg",
            "--geometry",
            "50",
            stdout=StringIO(),
            stderr=err,
        )
    assert "failed 422: photos/broken.jpg 50:" in err.getvalue()


def test_warm_of_a_named_source_that_does_not_exist_fails_as_404(media: Path) -> None:
    with pytest.raises(CommandError, match=r"failed 1 \(404: 1\)"):
        run("oximg_warm", "--source", "photos/missing.jpg", "--geometry", "50")


def test_warm_glob_does_not_cross_directories_without_double_star(media: Path) -> None:
    nested = media / "photos" / "2024"
    nested.mkdir()
    (nested / "deep.jpg").write_bytes((media / "photos" / "landscape.jpg").read_bytes())

    out, _ = run("oximg_warm", "--source", "photos/*.jpg", "--geometry", "30")
    assert "1 source(s)" in out
    out, _ = run("oximg_warm", "--source", "photos/**/*.jpg", "--geometry", "30")
    assert "Rendered 1, already cached 1, failed 0; 2 source(s)" in out


def test_warm_never_warms_the_result_cache_itself(media: Path) -> None:
    """The default cache lies inside MEDIA_ROOT; ``**`` must not pick up results."""
    run("oximg_warm", "--source", "**", "--geometry", "30", "--format", "webp")
    out, _ = run("oximg_warm", "--source", "**", "--geometry", "30", "--format", "webp")
    assert "Rendered 0, already cached 3, failed 0; 3 source(s)" in out


def test_warm_jobs_is_only_a_concurrency(media: Path) -> None:
    out, _ = run("oximg_warm", "--source", "photos/*", "--geometry", "30", "--jobs", "1")
    assert "Rendered 3," in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--source", "photos/*"), "--preset or --geometry"),
        (("--source", "nothing/*", "--geometry", "30"), "no source matched"),
        (("--source", "photos/*", "--geometry", "big"), "bad geometry"),
        (("--source", "photos/*", "--geometry", "30", "--crop", "sideways"), "bad crop"),
        (("--source", "photos/*", "--geometry", "30", "--format", "bmp"), "unknown format"),
        (("--source", "photos/*", "--preset", "nope"), "unknown preset"),
        (("--source", "photos/*", "--geometry", "30", "--jobs", "-1"), "--jobs"),
        (
            (
                "--geometry",
                "30",
            ),
            "--source",
        ),
    ],
)
def test_warm_refuses_bad_arguments_before_rendering(
    media: Path, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run("oximg_warm", *args)
    assert runtime.get_thumbnailer().renders == 0


def test_warm_with_a_source_alias(media: Path, settings: Any, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    (archive / "old").mkdir(parents=True)
    (archive / "old" / "a.jpg").write_bytes((media / "photos" / "landscape.jpg").read_bytes())
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(archive)},
        },
    }
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"archive": "archive"}}
    out, _ = run("oximg_warm", "--source", "archive:old/*.jpg", "--geometry", "30")
    assert "Rendered 1, already cached 0, failed 0; 1 source(s)" in out
    assert purge_source("archive:old/a.jpg").results == 1


def test_warm_writes_a_default_name_that_looks_like_another_source(
    media: Path, settings: Any, tmp_path: Path
) -> None:
    """A listed ``other:c.jpg`` of the default storage is warmed as that file, ``:other:c.jpg``."""
    (tmp_path / "archive").mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "archive")},
        },
    }
    settings.OXIMG = {**settings.OXIMG, "SOURCES": {"other": "archive"}}
    (media / "other:c.jpg").write_bytes((media / "photos" / "landscape.jpg").read_bytes())
    out, _ = run("oximg_warm", "--source", "other*", "--geometry", "30")
    assert "Rendered 1, already cached 0, failed 0; 1 source(s)" in out
    out, _ = run("oximg_warm", "--source", ":other:c*", "--geometry", "30")
    assert "Rendered 0, already cached 1, failed 0; 1 source(s)" in out
    assert purge_source(":other:c.jpg").results == 1


def test_warm_through_a_non_local_cache_store(media: Path, settings: Any) -> None:
    """The cache check and the render go through any CacheStore (here in memory)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "results": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    settings.OXIMG = {**settings.OXIMG, "CACHE_STORAGE": "results"}
    out, _ = run("oximg_warm", "--source", "photos/*", "--geometry", "30")
    assert "Rendered 3," in out
    out, _ = run("oximg_warm", "--source", "photos/*", "--geometry", "30")
    assert "Rendered 0, already cached 3," in out


# -- every command's --help ----------------------------------------------------------


def package_commands() -> list[str]:
    """The package's management commands, as Django finds them (no list to keep up)."""
    return sorted(find_commands(str(Path(management.__file__).parent)))


def test_the_package_has_commands_to_test() -> None:
    assert "oximg_bench" in package_commands() and len(package_commands()) >= 6


@pytest.mark.parametrize("name", package_commands())
def test_every_command_prints_its_help(name: str) -> None:
    # argparse %-formats each option's help when printing it: a bare "%" raises here.
    command = load_command_class("django_oximg", name)
    text = command.create_parser("manage.py", name).format_help()
    assert f"usage: manage.py {name}" in text
