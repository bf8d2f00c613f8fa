"""Tests for glibc's malloc keeping freed render memory (core/limits/malloc.py).

The promise: with the setting, memory a render frees is there for the next
one, with no page fault to bring it back; an operator's own malloc tuning,
and a 0, leave glibc as it is; and a process starting to render applies it.
The page faults are counted in fresh interpreters, as the setting is
process-wide and cannot be undone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from django_oximg import conf, runtime
from django_oximg.core.limits import malloc

REPO_ROOT = Path(__file__).resolve().parent.parent

on_glibc = pytest.mark.skipif(
    malloc.glibc_mallopt() is None, reason="glibc's malloc only (this is another C library)"
)

#: A render's pattern of large blocks, allocated and freed 20 times, first
#: on a thread (as the executor's render threads do), then counted on the
#: main thread: the pages faulted in per round.
ROUNDS = """
import resource, sys, threading
from django_oximg.core.limits import malloc
print(malloc.keep_freed_memory(int(sys.argv[1])))
MiB = 1024 * 1024
def rounds(count):
    for _ in range(count):
        blocks = [bytearray(size * MiB) for size in (3, 2, 1)]
        del blocks
threading.Thread(target=rounds, args=(3,)).start()
rounds(3)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(20)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""

#: Pages of the 6 MiB a round allocates.
ROUND_PAGES = 6 * 1024 * 1024 // os.sysconf("SC_PAGE_SIZE")


def page_faults_per_round(threshold: int, **env: str) -> tuple[bool, float]:
    """(whether glibc was told, page faults per round) in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS, str(threshold)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    applied, faults = done.stdout.split()
    return applied == "True", float(faults)


@on_glibc
def test_freed_memory_is_reused_without_page_faults() -> None:
    told, kept = page_faults_per_round(conf.OximgSettings.MALLOC_THRESHOLD)
    untold, default = page_faults_per_round(0)
    assert told and not untold
    # glibc's own thresholds give the freed pages back and fault them in again.
    assert default > ROUND_PAGES / 2
    assert kept < ROUND_PAGES / 20


@on_glibc
@pytest.mark.parametrize(
    "variable, value",
    [
        ("MALLOC_TRIM_THRESHOLD_", "1048576"),
        ("MALLOC_MMAP_THRESHOLD_", "1048576"),
        ("MALLOC_TOP_PAD_", "0"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576"),
    ],
)
def test_an_operator_s_own_malloc_tuning_stands(variable: str, value: str) -> None:
    told, faults = page_faults_per_round(32 * 1024 * 1024, **{variable: value})
    assert not told
    assert faults > ROUND_PAGES / 2


class Recorder:
    """Stands for glibc's ``mallopt``: remembers its calls, succeeds."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return 1


@pytest.fixture
def mallopt(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(malloc, "glibc_mallopt", lambda: recorder)
    monkeypatch.setattr(malloc, "_applied", None)
    for name in malloc.OPERATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    return recorder


MiB = 1024 * 1024


@pytest.mark.parametrize(
    "threshold, calls",
    [
        (32 * MiB, [(malloc.M_MMAP_THRESHOLD, 32 * MiB), (malloc.M_TRIM_THRESHOLD, 32 * MiB)]),
        # glibc takes no mmap threshold above 32 MiB; the trim one has no such cap.
        (64 * MiB, [(malloc.M_MMAP_THRESHOLD, 32 * MiB), (malloc.M_TRIM_THRESHOLD, 64 * MiB)]),
        (2 * MiB, [(malloc.M_MMAP_THRESHOLD, 2 * MiB), (malloc.M_TRIM_THRESHOLD, 2 * MiB)]),
        (2**40, [(malloc.M_MMAP_THRESHOLD, 32 * MiB), (malloc.M_TRIM_THRESHOLD, 2**31 - 1)]),
        (0, []),
    ],
)
def test_both_thresholds_are_set_once(
    mallopt: Recorder, threshold: int, calls: list[tuple[int, int]]
) -> None:
    assert malloc.keep_freed_memory(threshold) is bool(calls)
    assert not malloc.keep_freed_memory(threshold)  # a second thumbnailer repeats nothing
    assert mallopt.calls == calls


def test_a_process_starting_to_render_keeps_freed_memory(
    mallopt: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_libvips_ready", False)
    settings = conf.OximgSettings(MALLOC_THRESHOLD=8 * MiB)
    runtime.prepare_libvips(settings)
    assert mallopt.calls == [(malloc.M_MMAP_THRESHOLD, 8 * MiB), (malloc.M_TRIM_THRESHOLD, 8 * MiB)]
