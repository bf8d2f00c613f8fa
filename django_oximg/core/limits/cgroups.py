"""How many CPUs and how much memory this process may really use, from its cgroup.

``os.cpu_count()`` and the host's memory say nothing about a container's
limits: a pool sized from them over-subscribes the CPU quota, and a memory
budget sized from them gets the process killed. The runtime sizes the
render pool (``WORKERS``) and the default ``MEMORY_BUDGET`` from here.

Both cgroup versions are read: v2's unified hierarchy (``cpu.max``,
``memory.max``) and, failing that, v1's controllers (``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``, ``memory.limit_in_bytes``), in the process's own
group and every enclosing one, since the kernel enforces all of them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

N = TypeVar("N", int, float)

# Never reserve more than this by default: libvips streams most work, so half a GiB
# is plenty for dozens of concurrent thumbnails, and a larger default would hide a
# mis-sized container rather than protect it.
DEFAULT_MEMORY_BUDGET_CAP = 512 * 1024 * 1024

# A quarter of the container's memory: the rest is left for the Python heap, the
# result bytes in flight, other worker processes and the page cache.
MEMORY_LIMIT_SHARE = 4

# cgroup v1 reports "no limit" as a huge page-aligned number (about 2**63); anything
# above this is treated as unlimited.
UNLIMITED_THRESHOLD = 1 << 60

CGROUP_ROOT = "/sys/fs/cgroup"
PROC_SELF_CGROUP = "/proc/self/cgroup"


def usable_cpus(
    cgroup_root: str | os.PathLike[str] = CGROUP_ROOT,
    proc_cgroup: str | os.PathLike[str] = PROC_SELF_CGROUP,
) -> int:
    """The number of CPUs this process may really use: affinity, capped by cgroup quota.

    ``os.cpu_count()`` reports the host's CPUs, which in a container can be many
    times what the CPU quota allows; sizing the pool from it over-subscribes.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not available on macOS / Windows
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def default_memory_budget(
    cgroup_root: str | os.PathLike[str] = CGROUP_ROOT,
    proc_cgroup: str | os.PathLike[str] = PROC_SELF_CGROUP,
) -> int:
    """The default per-process budget: 512 MiB, or a quarter of the cgroup limit if lower."""
    limit = cgroup_memory_limit(cgroup_root, proc_cgroup)
    if limit is None:
        return DEFAULT_MEMORY_BUDGET_CAP
    return max(1, min(DEFAULT_MEMORY_BUDGET_CAP, limit // MEMORY_LIMIT_SHARE))


def cgroup_cpu_limit(
    cgroup_root: str | os.PathLike[str] = CGROUP_ROOT,
    proc_cgroup: str | os.PathLike[str] = PROC_SELF_CGROUP,
) -> float | None:
    """The CPU quota in CPUs (quota / period) for this process's cgroup, or None.

    Reads cgroup v2 ``cpu.max`` and, failing that, v1 ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us``, in the process's cgroup and its ancestors (the tightest
    wins, as the kernel enforces all of them).
    """
    root = Path(cgroup_root)
    v2 = _smallest(_read_cpu_max(d / "cpu.max") for d in _v2_dirs(root, proc_cgroup))
    if v2 is not None:
        return v2
    v1_dirs = _v1_dirs(root, proc_cgroup, "cpu", ("cpu", "cpu,cpuacct", "cpuacct,cpu"))
    return _smallest(_read_cfs_quota(d) for d in v1_dirs)


def cgroup_memory_limit(
    cgroup_root: str | os.PathLike[str] = CGROUP_ROOT,
    proc_cgroup: str | os.PathLike[str] = PROC_SELF_CGROUP,
) -> int | None:
    """The memory limit in bytes for this process's cgroup, or None when unlimited.

    Reads cgroup v2 ``memory.max`` and, failing that, v1 ``memory.limit_in_bytes``,
    in the process's cgroup and its ancestors (the tightest wins).
    """
    root = Path(cgroup_root)
    v2 = _smallest(_read_bytes_limit(d / "memory.max") for d in _v2_dirs(root, proc_cgroup))
    if v2 is not None:
        return v2
    v1_dirs = _v1_dirs(root, proc_cgroup, "memory", ("memory",))
    return _smallest(_read_bytes_limit(d / "memory.limit_in_bytes") for d in v1_dirs)


def _smallest(values: Iterable[N | None]) -> N | None:
    """The least of the values that are not None, or None if there are none."""
    present = [value for value in values if value is not None]
    return min(present) if present else None


def _cgroup_paths(proc_cgroup: str | os.PathLike[str]) -> dict[str, str]:
    """Map each controller (and "" for the v2 unified hierarchy) to this process's path.

    Lines of ``/proc/self/cgroup`` read ``id:controller[,controller]:/path``.
    """
    try:
        text = Path(proc_cgroup).read_text()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _dir_and_ancestors(mount: Path, relative: str) -> Iterator[Path]:
    """``mount/relative`` and each parent up to and including ``mount``.

    In a container with its own cgroup namespace the relative path is "/" and only
    the mount is read; on a host (or without a namespace) the process's own group
    and every enclosing group are read, since each may carry a limit.
    """
    parts = [part for part in relative.split("/") if part and part not in (".", "..")]
    for depth in range(len(parts), -1, -1):
        yield mount.joinpath(*parts[:depth])


def _v2_dirs(root: Path, proc_cgroup: str | os.PathLike[str]) -> Iterator[Path]:
    return _dir_and_ancestors(root, _cgroup_paths(proc_cgroup).get("", "/"))


def _v1_dirs(
    root: Path, proc_cgroup: str | os.PathLike[str], controller: str, mounts: tuple[str, ...]
) -> Iterator[Path]:
    relative = _cgroup_paths(proc_cgroup).get(controller, "/")
    for mount in mounts:
        if (root / mount).is_dir():
            yield from _dir_and_ancestors(root / mount, relative)
            return


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_cpu_max(path: Path) -> float | None:
    """Parse cgroup v2 ``cpu.max``: "<quota> <period>" or "max <period>"."""
    text = _read_text(path)
    if text is None:
        return None
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    try:
        quota = int(fields[0])
        period = int(fields[1]) if len(fields) > 1 else 100_000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _read_cfs_quota(directory: Path) -> float | None:
    """Parse cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 is unlimited)."""
    quota_text = _read_text(directory / "cpu.cfs_quota_us")
    period_text = _read_text(directory / "cpu.cfs_period_us")
    if quota_text is None or period_text is None:
        return None
    try:
        quota, period = int(quota_text), int(period_text)
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _read_bytes_limit(path: Path) -> int | None:
    """Parse a memory limit file: a byte count, or "max" / a huge number for none."""
    text = _read_text(path)
    if text is None or text == "max":
        return None
    try:
        limit = int(text)
    except ValueError:
        return None
    return limit if 0 < limit < UNLIMITED_THRESHOLD else None
