"""CpuQuotaEnforcer on the real cgroup v1 cpu hierarchy: a share caps a busy process's CPU time,
and is lifted, and the group goes away (hive_hooks.cpu_share; QOOP §2.3, spec A.7)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_hooks.cpu_share import CGROUP_CPU_ROOT, CpuQuotaEnforcer
from qoop_planner.model import Share

SPIN = "import time\nwhile True:\n    pass\n"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _cpu_over(pid: int, wall_s: float) -> float:
    c0, t0 = _cpu_s(pid), time.monotonic()
    while time.monotonic() - t0 < wall_s:
        time.sleep(0.05)
    return (_cpu_s(pid) - c0) / (time.monotonic() - t0)


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[bytes]]:
    if not (CGROUP_CPU_ROOT / "cgroup.procs").exists():
        # a cgroup v2-only host: the enforcer supports the v1 cpu controller only
        pytest.skip(f"no cgroup v1 cpu hierarchy at {CGROUP_CPU_ROOT}")
    if not os.access(CGROUP_CPU_ROOT, os.W_OK):
        assert os.geteuid() != 0, f"{CGROUP_CPU_ROOT} not writable as root"
        pytest.skip(f"{CGROUP_CPU_ROOT} needs root (euid {os.geteuid()})")
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_share_caps_cpu_then_lifts_and_group_is_removed(
    spinner: subprocess.Popen[bytes],
) -> None:
    enf = CpuQuotaEnforcer(spinner.pid, cores_per_vcore=0.5, name=f"test-cpu-share-{os.getpid()}")
    try:
        assert str(spinner.pid) in (enf.group / "cgroup.procs").read_text().split()
        enf.apply_share("q", Share(0.2, 0))  # 0.1 cores
        assert (enf.group / "cpu.cfs_quota_us").read_text().strip() == "10000"
        capped = _cpu_over(spinner.pid, 1.5)
        assert capped < 0.3, f"capped at 0.1 cores, used {capped:.2f}"
        assert enf.throttled_s() > 0
        enf.release_share("q")
        assert (enf.group / "cpu.cfs_quota_us").read_text().strip() == "-1"
        # lifted: the kernel throttles the group no more (its own count, not a wall-clock
        # share of a loaded machine's CPU)
        held = enf.throttled_s()
        _cpu_over(spinner.pid, 0.5)
        assert enf.throttled_s() == held
        assert [c for _, c in enf.applied] == [0.1, None]
    finally:
        enf.close()
    assert not enf.group.exists()
    assert str(spinner.pid) in (CGROUP_CPU_ROOT / "cgroup.procs").read_text().split()
    enf.apply_share("q", Share(1, 0))  # after close: a no-op, not an error


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pid"):
        CpuQuotaEnforcer(0)
    with pytest.raises(ValueError, match="cores_per_vcore"):
        CpuQuotaEnforcer(os.getpid(), cores_per_vcore=0)
    with pytest.raises(ValueError, match="period_us"):
        CpuQuotaEnforcer(os.getpid(), period_us=10)
    with pytest.raises(FileNotFoundError, match="cgroup v1 cpu"):
        CpuQuotaEnforcer(os.getpid(), root=tmp_path)
