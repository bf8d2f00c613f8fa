"""Fault injection: workers killed mid-render and mid-write, failing and hanging sources.

Bad input 47 (docs/security.md): a gunicorn worker is SIGKILLed at random points while it
renders or writes the result cache, 50 times (200 with ``pytest -m slow``).
Afterwards no final cache name holds a partial or undecodable file, the next
request regenerates the result, and the orphaned ``tmp-oximg-*`` files the
kills left are removed by ``manage.py oximg_clean`` (which takes temporary
files older than a minute: the test ages them rather than waiting).

gunicorn runs with ``--preload``, so a killed worker is replaced by a fork of
the master in milliseconds instead of a fresh Django start-up; the code that
renders and writes is the same.

What ``/health`` reports of failing dependencies (``core/serving/faults.py``) is
tested at the end; through gunicorn nodes, S3 and Redis in
tests/test_production_faults.py.

Row 48 (cache writes that fail) is covered by
test_thumbnailer.py::test_a_failing_cache_write_still_serves_from_memory
(read-only directory), test_views.py::test_a_read_only_cache_still_answers_200_from_memory
and test_s3.py::test_a_failing_putobject_still_answers_from_memory_and_caches_nothing
(S3 ``PutObject`` 500); S3 source errors and timeouts (404/502/504) by
test_s3.py::test_source_errors_map_to_404_502_and_504. Here: a local or
generic source storage that fails (502) or hangs.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import pyvips
from django.core.files.base import ContentFile
from django.core.files.storage import Storage

from django_oximg import conf
from django_oximg.core import defaults
from django_oximg.core.keys import source_directory
from django_oximg.core.limits.executor import Executor
from django_oximg.core.serving.faults import (
    FAULT_MEMORY,
    LOG_INTERVAL,
    MAX_REASON,
    RESULT_CACHE_WRITE,
    Fault,
    Faults,
    source_dependency,
)
from django_oximg.core.serving.handler import (
    DEFAULT_SOURCE_READS,
    Thumbnailer,
    ThumbnailerConfig,
)
from django_oximg.core.stores import disk as stores
from django_oximg.core.stores.disk import FileSystemSourceStore
from django_oximg.core.stores.protocols import TEMP_PREFIX
from django_oximg.core.stores.reads import SourceReads
from django_oximg.storage import StorageSourceStore
from tests import images
from tests.constants import JOIN_TIMEOUT, MIB, SIGNER
from tests.servers import REPO_ROOT, Fetched, Server, gunicorn, imgproxy_url, request
from tests.test_executor import wait_until
from tests.test_thumbnailer import (  # noqa: F401 (fixtures: the counting cache)
    CONTROL,
    CountingCacheStore,
    cache,
    cached_files,
    get,
    header,
)

#: The subject of the kill loop is gunicorn replacing killed worker processes and the
#: result cache they leave: run on one Django. The storage faults below run in process,
#: through Django's storage API, on both.
worker_kills = pytest.mark.one_django(
    reason="the subject is gunicorn worker processes killed mid-write, not Django"
)

#: The killed request: a 1200x900 noisy photo fitted to about 1100 px and
#: encoded at q100 (~1 MB), so both the render (~0.1 s) and the atomic write
#: (temp file, fsync, rename) are long enough to be hit.
SOURCE = "photos/big.jpg"

#: Bound on waiting for gunicorn to replace a killed worker.
RESPAWN_TIMEOUT = 30.0


def url_path(width: int) -> str:
    return f"/rs:fit:{width}:{width}/q:100/plain/{SOURCE}@jpeg"


def expected_size(width: int) -> tuple[int, int]:
    return width, width * 3 // 4  # widths are multiples of 4: no rounding


@dataclass
class KillReport:
    """What the kills hit: counted, so the test can show it hit writes too."""

    kills: int = 0
    during_write: int = 0
    orphans: set[str] = field(default_factory=set)


class Killer:
    """Kills the one worker of ``server`` during a request, at a random point."""

    def __init__(self, server: Server, rng: random.Random, request_time: float) -> None:
        self.server = server
        self.rng = rng
        self.request_time = request_time
        self.directory = server.media / "oximg" / source_directory(SOURCE)
        self.report = KillReport()

    def temp_files(self) -> set[str]:
        if not self.directory.exists():
            return set()
        return {name for name in os.listdir(self.directory) if name.startswith(TEMP_PREFIX)}

    def kill_during(self, url: str, in_write: bool) -> None:
        """Start ``url``, kill the worker in its render or cache write; wait for a new one."""
        [worker] = self.server.worker_pids()
        before = self.temp_files()
        client = threading.Thread(target=self.fetch_ignoring_errors, args=(url,), daemon=True)
        client.start()
        if in_write:
            # A new temporary file means the atomic write has begun: kill within it.
            while client.is_alive() and not (self.temp_files() - before):
                pass
            time.sleep(self.rng.uniform(0, 0.002))
        else:
            time.sleep(self.rng.uniform(0, self.request_time))
        os.kill(worker, signal.SIGKILL)
        self.report.kills += 1
        self.wait_for_new_worker(worker)
        client.join(RESPAWN_TIMEOUT)
        left = self.temp_files() - before
        self.report.during_write += bool(left)
        self.report.orphans |= left

    def fetch_ignoring_errors(self, url: str) -> None:
        # The connection dies with the worker (reset, or a body cut short): expected.
        with contextlib.suppress(OSError, http.client.HTTPException):
            request(url, timeout=RESPAWN_TIMEOUT)

    def wait_for_new_worker(self, killed: int) -> None:
        deadline = time.monotonic() + RESPAWN_TIMEOUT
        while True:
            workers = self.server.worker_pids()
            if workers and killed not in workers:
                return
            assert time.monotonic() < deadline, "gunicorn did not replace the killed worker"
            time.sleep(0.005)


def assert_whole_result(path: Path, size: tuple[int, int]) -> None:
    """``path`` is a complete JPEG of ``size``: every pixel decodes, nothing is missing."""
    image = pyvips.Image.new_from_file(str(path), fail_on="truncated", access="sequential")
    assert (image.width, image.height) == size, path
    image.avg()  # decodes every pixel; raises on a truncated file


def final_files(directory: Path) -> set[Path]:
    if not directory.exists():
        return set()
    return {path for path in directory.iterdir() if not path.name.startswith(TEMP_PREFIX)}


def run_clean(media: Path) -> str:
    """``manage.py oximg_clean`` against the test server's settings and media root."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.e2e_settings",
        OXIMG_E2E_MEDIA_ROOT=str(media),
        PYTHONPATH=str(REPO_ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-m", "django", "oximg_clean"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def result_name(width: int) -> str:
    """The cache file name of ``url_path(width)``: its ETag, computed without a request."""
    executor = Executor(1, 1, 1.0, MIB)
    try:
        # The server runs with the default output settings.
        fingerprint = conf.output_fingerprint(conf.OximgSettings())
        thumbnailer = Thumbnailer(
            ThumbnailerConfig(fingerprint=fingerprint),
            SIGNER,
            {"": FileSystemSourceStore("/nonexistent")},
            stores.FileSystemCacheStore("/nonexistent"),
            executor,
        )
        job = thumbnailer.job_for(SIGNER.signed_path(url_path(width)), "")
    finally:
        executor.shutdown()
    return job.etag.strip('"') + ".jpeg"


def kill_workers_repeatedly(media: Path, iterations: int, seed: int) -> KillReport:
    """Row 47: ``iterations`` kills, half timed into the render, half into the write."""
    rng = random.Random(seed)
    (media / "photos").mkdir(parents=True)
    (media / "photos" / "big.jpg").write_bytes(images.jpeg(1200, 900))
    widths = [1196 - 4 * index for index in range(iterations + 1)]
    width_of = {result_name(width): width for width in widths}
    env = {"GUNICORN_CMD_ARGS": "--preload"}
    with gunicorn(media, workers=1, threads=4, env=env, oximg={"WORKERS": 1}) as server:
        started = time.monotonic()
        calibration = request(imgproxy_url(server.base, url_path(widths.pop())))
        assert calibration.status == 200
        killer = Killer(server, rng, time.monotonic() - started)
        checked: set[Path] = set()
        for index, width in enumerate(widths):
            url = imgproxy_url(server.base, url_path(width))
            killer.kill_during(url, in_write=index % 2 == 1)
            # Nothing partial under a final name, whatever the kill hit.
            for path in final_files(killer.directory) - checked:
                assert_whole_result(path, expected_size(width_of[path.name]))
                checked.add(path)
            # The next request for the killed URL regenerates it (or finds it whole).
            again = request(url)
            assert again.status == 200
            stored = killer.directory / (again.headers["etag"].strip('"') + ".jpeg")
            assert stored.read_bytes() == again.body
            assert_whole_result(stored, expected_size(width))
        report = killer.report
        assert report.kills == iterations
        assert report.during_write >= 1, "no kill landed inside a cache write"
        assert report.orphans <= killer.temp_files()  # orphans stay until cleaned
        assert not {Path(name).name for name in report.orphans} & {
            path.name for path in final_files(killer.directory)
        }
    results = final_files(killer.directory)
    assert len(results) == iterations + 1  # one whole result per URL, calibration included
    # Orphans are removed by the clean command once older than a minute.
    aged = time.time() - 120
    for name in killer.temp_files():
        os.utime(killer.directory / name, (aged, aged))
    output = run_clean(media)
    assert f"and {len(report.orphans)} orphan temporary file(s)" in output
    assert killer.temp_files() == set()
    assert final_files(killer.directory) == results
    return report


@worker_kills
@pytest.mark.parametrize(
    "iterations", [50, pytest.param(200, marks=pytest.mark.slow)], ids=["50-kills", "200-kills"]
)
def test_row_47_killed_workers_leave_no_partial_result_and_clean_removes_orphans(
    tmp_path: Path, iterations: int
) -> None:
    kill_workers_repeatedly(tmp_path / "media", iterations, seed=iterations)


# -- source storage failures -------------------------------------------------------


class FailingStorage(Storage):
    """A Django storage whose reads fail as a broken disk or network mount does."""

    def size(self, name: str) -> int:
        return 1000

    def _open(self, name: str, mode: str = "rb") -> Any:
        raise OSError(errno.EIO, "Input/output error")


class HangingStorage(Storage):
    """Files from a dict; reads of names under ``slow/`` block until released."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.blocked = threading.Event()
        self.release = threading.Event()

    def size(self, name: str) -> int:
        return len(self.files[name])

    def _open(self, name: str, mode: str = "rb") -> IO[bytes]:
        if name.startswith("slow/"):
            self.blocked.set()
            assert self.release.wait(JOIN_TIMEOUT), "the test never released the read"
        return ContentFile(self.files[name], name=name)


def thumbnailer_over(
    storage: Storage,
    cache: CountingCacheStore,
    executors: list[Executor],
    workers: int = 1,
    source_reads: int = DEFAULT_SOURCE_READS,
    source_timeout: float = defaults.SOURCE_TIMEOUT,
) -> Thumbnailer:
    executor = Executor(workers, 1, 5.0, 256 * MIB)
    executors.append(executor)
    sources = {"": StorageSourceStore(storage)}
    reads = SourceReads(source_reads, source_timeout)
    return Thumbnailer(ThumbnailerConfig(), SIGNER, sources, cache, executor, reads=reads)


def test_a_source_storage_that_raises_oserror_is_502_and_nothing_is_cached(
    cache: CountingCacheStore, cache_dir: Path, executors: list[Executor]
) -> None:
    thumbnailer = thumbnailer_over(FailingStorage(), cache, executors)
    reply = get(thumbnailer, CONTROL)
    assert (reply.status, reply.body) == (502, b"Source unavailable\n")
    assert header(reply, "Cache-Control") == "no-store"
    assert cache.puts == 0 and cached_files(cache_dir) == []
    assert thumbnailer.executor.stats().running == 0


def test_a_local_disk_read_error_is_502(
    tmp_path: Path,
    cache: CountingCacheStore,
    cache_dir: Path,
    executors: list[Executor],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "landscape.jpg").write_bytes(images.jpeg(64, 48))
    executor = Executor(1, 1, 5.0, 256 * MIB)
    executors.append(executor)
    sources = {"": FileSystemSourceStore(tmp_path)}
    thumbnailer = Thumbnailer(ThumbnailerConfig(), SIGNER, sources, cache, executor)

    def failing_fstat(fd: int) -> os.stat_result:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fstat", failing_fstat)  # the store's fstat after open()
        reply = get(thumbnailer, CONTROL)
    assert reply.status == 502
    assert header(reply, "Cache-Control") == "no-store"
    assert cached_files(cache_dir) == []


def test_a_hanging_source_read_times_out_and_keeps_only_its_read_slot(
    cache: CountingCacheStore, executors: list[Executor]
) -> None:
    """A generic storage is read in a read slot on a thread of its own, for at most
    ``SOURCE_TIMEOUT``.

    While the read hangs, its request holds its place (one of workers + queue)
    and the bytes it reserved, but no render slot: other sources are served.
    At the timeout it answers 504 and gives both back. Python cannot stop the
    read, so its thread keeps its read slot until the storage returns, and
    the health check counts that slot as stuck.
    """
    photo = images.jpeg(64, 48)
    storage = HangingStorage({"slow/x.jpg": photo, "photos/landscape.jpg": photo})
    thumbnailer = thumbnailer_over(
        storage, cache, executors, workers=1, source_timeout=1.0, source_reads=2
    )
    replies: list[Fetched | Any] = []
    hung = threading.Thread(
        target=lambda: replies.append(get(thumbnailer, "/rs:fit:32:32/plain/slow/x.jpg@jpeg"))
    )
    hung.start()
    try:
        assert storage.blocked.wait(JOIN_TIMEOUT)
        stats = thumbnailer.executor.stats()
        assert (stats.admitted, stats.running, stats.queued) == (1, 0, 0)
        assert stats.reserved_bytes == len(photo)
        for width in (40, 41, 42):  # one place is left: each is served in it
            path = f"/rs:fit:{width}:{width}/plain/photos/landscape.jpg@jpeg"
            assert get(thumbnailer, path).status == 200
        hung.join(JOIN_TIMEOUT)
        assert [reply.status for reply in replies] == [504]
        stats = thumbnailer.executor.stats()
        assert (stats.admitted, stats.reserved_bytes) == (0, 0)
        assert (thumbnailer.reads.in_use(), thumbnailer.reads.stuck()) == (1, 1)
    finally:
        storage.release.set()
    wait_until(lambda: thumbnailer.reads.in_use() == 0)
    assert cache.puts == 3


# -- what /health reports: the record of recent failures ---------------------------------


def test_a_dependency_is_failing_from_a_failed_call_until_one_works() -> None:
    now = [100.0]
    faults = Faults(clock=lambda: now[0])
    faults.succeeded(RESULT_CACHE_WRITE)
    assert faults.failing() == {}
    assert faults.failure_counts() == {RESULT_CACHE_WRITE: 0}
    faults.failed(RESULT_CACHE_WRITE, "[Errno 28] No space\nleft on device")
    now[0] += 3
    faults.failed(RESULT_CACHE_WRITE, "[Errno 28] No space left on device")
    assert faults.failing()[RESULT_CACHE_WRITE] == Fault(
        "[Errno 28] No space left on device", since=100.0, last=103.0, failures=2
    )
    assert faults.problems() == [
        "result_cache_write failing for 3 s (2 failed in a row): [Errno 28] No space left on device"
    ]
    faults.succeeded(RESULT_CACHE_WRITE)
    assert faults.problems() == []
    assert faults.failure_counts() == {RESULT_CACHE_WRITE: 2}


def test_a_failure_nothing_has_called_since_is_forgotten_after_a_while() -> None:
    now = [100.0]
    faults = Faults(clock=lambda: now[0])
    faults.failed(source_dependency("archive"), "S3 500 " + "x" * 500)
    assert list(faults.failing()) == ["source:archive"]
    assert len(faults.failing()["source:archive"].reason) == MAX_REASON
    now[0] += FAULT_MEMORY - 1
    assert list(faults.failing()) == ["source:archive"]
    now[0] += 1
    assert faults.failing() == {}
    assert source_dependency("") == "source"


def test_a_failing_source_storage_is_named_by_health(
    cache: CountingCacheStore, executors: list[Executor]
) -> None:
    thumbnailer = thumbnailer_over(FailingStorage(), cache, executors)
    assert get(thumbnailer, CONTROL).status == 502
    problems = thumbnailer.health_problems()
    assert len(problems) == 1
    assert problems[0].startswith("source failing for ")
    assert "Input/output error" in problems[0]


def test_a_failing_dependency_is_logged_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    faults = Faults(clock=lambda: now[0])
    for _ in range(3):
        faults.failed(RESULT_CACHE_WRITE, "[Errno 28] No space", "result cache write failed")
    faults.failed(source_dependency(""), "EIO")  # nothing to log: not asked to
    now[0] += LOG_INTERVAL
    faults.failed(RESULT_CACHE_WRITE, "[Errno 28] No space", "result cache write failed")
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["result cache write failed: [Errno 28] No space"] * 2
