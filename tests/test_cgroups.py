"""Tests for django_oximg.core.limits.cgroups: CPUs and memory from cgroup files.

Each test writes the cgroup files of one machine shape under ``tmp_path``
(v2 unified, v1 controllers, nested groups, no cgroup at all) and a
``/proc/self/cgroup`` naming the process's group in it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from django_oximg.core.limits.cgroups import (
    DEFAULT_MEMORY_BUDGET_CAP,
    cgroup_cpu_limit,
    cgroup_memory_limit,
    default_memory_budget,
    usable_cpus,
)

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

MIB = 1024 * 1024


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def proc_cgroup(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proc-self-cgroup"
    path.write_text(text)
    return path


def affinity() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("50000 100000", 0.5), ("250000 100000", 2.5), ("max 100000", None), ("junk", None)],
)
def test_cgroup_v2_cpu_max(tmp_path: Path, cpu_max: str, expected: float | None) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu.max", cpu_max)
    assert cgroup_cpu_limit(root, proc_cgroup(tmp_path, "0::/\n")) == expected


def test_usable_cpus_is_capped_by_the_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu.max", "50000 100000")
    assert usable_cpus(root, proc_cgroup(tmp_path, "0::/\n")) == 1


def test_usable_cpus_without_a_quota_is_the_affinity(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path / "missing", tmp_path / "missing-too") == affinity()


def test_cgroup_v2_tightest_ancestor_wins(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu.max", "max 100000")
    write(root / "system.slice" / "cpu.max", "150000 100000")
    write(root / "system.slice" / "app.service" / "cpu.max", "max 100000")
    write(root / "system.slice" / "memory.max", str(2048 * MIB))
    write(root / "system.slice" / "app.service" / "memory.max", str(1024 * MIB))
    proc = proc_cgroup(tmp_path, "0::/system.slice/app.service\n")

    assert cgroup_cpu_limit(root, proc) == 1.5
    assert cgroup_memory_limit(root, proc) == 1024 * MIB
    assert default_memory_budget(root, proc) == 256 * MIB


def test_cgroup_v1_cpu_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "200000")
    write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000")
    proc = proc_cgroup(tmp_path, "4:memory:/\n2:cpu,cpuacct:/\n0::/\n")
    assert cgroup_cpu_limit(root, proc) == 2.0


def test_cgroup_v1_unlimited_cpu_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu" / "cpu.cfs_quota_us", "-1")
    write(root / "cpu" / "cpu.cfs_period_us", "100000")
    assert cgroup_cpu_limit(root, proc_cgroup(tmp_path, "1:cpu:/\n")) is None


@pytest.mark.parametrize(
    ("memory_max", "budget"),
    [
        (str(1024 * MIB), 256 * MIB),
        (str(8192 * MIB), DEFAULT_MEMORY_BUDGET_CAP),
        ("max", DEFAULT_MEMORY_BUDGET_CAP),
    ],
)
def test_default_memory_budget_from_cgroup_v2(tmp_path: Path, memory_max: str, budget: int) -> None:
    root = tmp_path / "cgroup"
    write(root / "memory.max", memory_max)
    assert default_memory_budget(root, proc_cgroup(tmp_path, "0::/\n")) == budget


def test_default_memory_budget_from_cgroup_v1_group_path(tmp_path: Path) -> None:
    # The shape of a hybrid host: the v1 memory controller holds the process in a
    # nested group whose own file says "unlimited" and whose parent sets the limit.
    root = tmp_path / "cgroup"
    write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712")
    write(root / "memory" / "jobs" / "memory.limit_in_bytes", str(400 * MIB))
    write(root / "memory" / "jobs" / "job-1" / "memory.limit_in_bytes", "9223372036854771712")
    proc = proc_cgroup(tmp_path, "4:memory:/jobs/job-1\n1:cpu:/\n0::/\n")

    assert cgroup_memory_limit(root, proc) == 400 * MIB
    assert default_memory_budget(root, proc) == 100 * MIB


def test_no_cgroup_files_means_no_limits(tmp_path: Path) -> None:
    root, proc = tmp_path / "none", tmp_path / "none-either"
    assert cgroup_memory_limit(root, proc) is None
    assert default_memory_budget(root, proc) == DEFAULT_MEMORY_BUDGET_CAP
