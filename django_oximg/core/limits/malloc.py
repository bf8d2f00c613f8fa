"""glibc's malloc told to keep freed render memory, and to return large blocks at once.

A miss allocates a few large blocks and frees them when it is done: the
JPEG decode (2.7 MB for a 2000x1333 photo at 1/2), the packed copy handed
to libvips, libvips' strips. glibc's defaults trim such memory from the
top of each thread's arena and give it back to the kernel, and the next
render's decode touches it afresh, one page fault per 4 KiB, hundreds per
medium miss. And after the
first large block freed, glibc raises its mmap threshold to that block's
size (up to 32 MiB), so the buffers of large renders stay in its arenas
too, where fragmentation keeps them long after.

Fixing both thresholds at :data:`~django_oximg.conf.OximgSettings.MALLOC_THRESHOLD`
(8 MiB) does the opposite on both counts: blocks up to that size are
reused from one render to the next, larger ones are mapped for each render
and unmapped as soon as they are freed: fewer faults per miss, and less
memory kept after large renders (measured in docs/BENCHMARKS.md, "Freed
memory kept for the next render").

Nothing is done where the C library is not glibc, or where the operator
has already chosen through glibc's own environment variables. This module
imports no pyvips and no Django.
"""

from __future__ import annotations

import os
from collections.abc import Callable

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2: 32 MiB on 64-bit.
MAX_MMAP_THRESHOLD = 32 * 1024 * 1024

#: ``mallopt`` takes a C int.
MAX_THRESHOLD = 2**31 - 1

#: Environment variables with which an operator tunes glibc's malloc (read
#: at process start): when one is set, that choice stands.
OPERATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_applied: int | None = None


def keep_freed_memory(threshold: int) -> bool:
    """Keep freed blocks up to ``threshold`` bytes in the process; True if glibc was told.

    ``threshold`` is glibc's trim threshold, and its mmap threshold up to
    :data:`MAX_MMAP_THRESHOLD`. 0 leaves glibc's defaults. Once per process
    and value: a second thumbnailer in the same process repeats nothing.
    """
    global _applied
    if threshold <= 0 or _applied == threshold or operator_chose():
        return False
    mallopt = glibc_mallopt()
    if mallopt is None:
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, min(threshold, MAX_MMAP_THRESHOLD)))
    ok = bool(mallopt(M_TRIM_THRESHOLD, min(threshold, MAX_THRESHOLD))) and ok
    _applied = threshold
    return ok


def operator_chose() -> bool:
    """Whether glibc's malloc was tuned through the environment this process started with."""
    if any(name in os.environ for name in OPERATOR_VARIABLES):
        return True
    return "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None on another C library (musl, macOS)."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError):  # the name is unknown outside glibc
        return None
    import ctypes  # only here: about 1 ms of a new process, needed once

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
