"""A query's vcore share enforced on a local engine's JVM by a CPU quota (QOOP §2.3, spec A.7).

QOOP's micro-benchmarks give a query "as much resources ... as dictated by the resource
profile": on an increase the job gets more containers, on a decrease containers are revoked at
once (T:628). The local engine (:class:`hive_hooks.engine.LocalHiveServer`) is one JVM with a
fixed number of task threads, so a share cannot be containers there; :class:`CpuQuotaEnforcer`
makes it CPU time instead: the JVM is moved into its own cgroup (v1 ``cpu`` controller) and every
share change sets the group's CFS quota to ``share.vcores x cores_per_vcore`` cores (a quota of
0.2 cores lets the JVM's threads run 20 ms per 100 ms period, together). The change takes effect
within one period, mid-task, whatever the query is doing: a decrease slows the tasks in flight
instead of failing them.

It is a :class:`hive_hooks.share.ShareEnforcer`: the executor calls :meth:`apply_share` when a run
starts and on every share change, :meth:`release_share` when it ends (the quota is lifted).

Limits: it needs a writable cgroup v1 ``cpu`` hierarchy (root; ``root=`` elsewhere) and raises a
clear :class:`PermissionError` / :class:`FileNotFoundError` otherwise. A quota caps the cores; it
cannot give more than the machine's cores or the JVM's task threads, nor take memory: the JVM's
heap is fixed at start (a memory limit below it would kill the JVM, not shrink its share).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from qoop_planner.model import Share

__all__ = ["CGROUP_CPU_ROOT", "CpuQuotaEnforcer"]

CGROUP_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
MIN_QUOTA_US = 1000  # the kernel's smallest CFS quota


class CpuQuotaEnforcer:
    """The vcores of a share as a CFS CPU quota on process ``pid`` (module docstring).

    ``cores_per_vcore``: cores per vcore of the share (1.0: a share of 0.5 vcores is half a
    core). ``applied`` records ``(monotonic time, cores)`` of every quota set, ``None`` cores for
    "no quota"."""

    def __init__(
        self,
        pid: int,
        *,
        cores_per_vcore: float = 1.0,
        period_us: int = 100_000,
        root: Path = CGROUP_CPU_ROOT,
        name: str | None = None,
    ) -> None:
        if pid <= 0:
            raise ValueError(f"pid must be > 0, got {pid}")
        if not cores_per_vcore > 0:
            raise ValueError(f"cores_per_vcore must be > 0, got {cores_per_vcore}")
        if not 1000 <= period_us <= 1_000_000:
            raise ValueError(f"period_us must be in [1000, 1000000], got {period_us}")
        if not (root / "cgroup.procs").exists():
            raise FileNotFoundError(f"{root} is not a cgroup v1 cpu hierarchy (no cgroup.procs)")
        self.pid = pid
        self.cores_per_vcore = cores_per_vcore
        self.period_us = period_us
        self.root = root
        self.group = root / (name or f"yarn-arbiter-share-{pid}")
        self.applied: list[tuple[float, float | None]] = []
        self._lock = threading.Lock()
        self._closed = False
        try:
            self.group.mkdir(exist_ok=True)
            (self.group / "cpu.cfs_period_us").write_text(str(period_us))
            (self.group / "cpu.cfs_quota_us").write_text("-1")
            (self.group / "cgroup.procs").write_text(str(pid))  # every thread of the process
        except PermissionError as e:
            self._remove_group()
            raise PermissionError(
                f"cannot create or join the cgroup {self.group} ({e.strerror}): enforcing a CPU "
                "share needs write access to the cgroup v1 cpu hierarchy (root)"
            ) from e

    def cores(self, share: Share) -> float:
        """The cores a share gets (the quota)."""
        return max(0.0, share.vcores) * self.cores_per_vcore

    def set_cores(self, cores: float | None) -> None:
        """Cap the process at ``cores`` (``None``: no cap)."""
        with self._lock:
            if self._closed:
                return
            quota = -1 if cores is None else max(MIN_QUOTA_US, round(cores * self.period_us))
            (self.group / "cpu.cfs_quota_us").write_text(str(quota))
            self.applied.append((time.monotonic(), cores))

    # -- ShareEnforcer ------------------------------------------------------------------------

    def apply_share(self, query_id: str, share: Share) -> None:
        self.set_cores(self.cores(share))

    def release_share(self, query_id: str) -> None:
        self.set_cores(None)

    def session_settings(self, query_id: str) -> dict[str, str]:
        return {}

    def session_defaults(self) -> dict[str, str]:
        return {}

    # -- life cycle ---------------------------------------------------------------------------

    def throttled_s(self) -> float:
        """Seconds the group's threads were held back by the quota so far (``cpu.stat``)."""
        for line in (self.group / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "throttled_time":
                return int(value) / 1e9
        return 0.0

    def close(self) -> None:
        """Lift the quota, move the process back to the root group and remove the group."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            (self.group / "cpu.cfs_quota_us").write_text("-1")
        self._remove_group()

    def _remove_group(self) -> None:
        procs = self.group / "cgroup.procs"
        try:
            pids = procs.read_text().split()
        except OSError:
            pids = []
        for line in pids:
            with contextlib.suppress(OSError):  # the process ended meanwhile
                (self.root / "cgroup.procs").write_text(line)
        with contextlib.suppress(OSError):
            os.rmdir(self.group)

    def __enter__(self) -> CpuQuotaEnforcer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
