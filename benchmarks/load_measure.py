"""What ``benchmarks/arbiter_load.py`` measures beside the round trips: the CPU time of the
arbiter's processes, the machine's CPU pressure, an idle process's timer lag, and a summary of
a py-spy profile of the served arbiter."""

from __future__ import annotations

import contextlib
import sys
from collections import defaultdict
from pathlib import Path

import psutil

__all__ = [
    "IDLE_PROBE",
    "PY_SPY",
    "cpu_pressure_us",
    "cpu_seconds",
    "own_cpu_seconds",
    "profile_summary",
]


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU seconds of ``pid`` and of its children (the auction worker)."""
    main = psutil.Process(pid)
    out = []
    for procs in ([main], main.children(recursive=True)):
        total = 0.0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        out.append(total)
    return out[0], out[1]


IDLE_PROBE = """
import sys, time
end = time.perf_counter() + float(sys.argv[1])
lag = []
while time.perf_counter() < end:
    t = time.perf_counter()
    time.sleep(0.005)
    lag.append((time.perf_counter() - t - 0.005) * 1e3)
print(*(f"{x:.3f}" for x in lag))
"""


def cpu_pressure_us() -> float:
    """The machine's CPU pressure so far (``/proc/pressure/cpu`` "some" total: microseconds
    some runnable task waited for a CPU), NaN where there is no PSI."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except OSError:
        return float("nan")
    return float(line.rpartition("total=")[2])


def own_cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


# py-spy (the test extra) beside this interpreter, else on the PATH
PY_SPY = str(next((p for p in [Path(sys.executable).parent / "py-spy"] if p.is_file()), "py-spy"))
# What a py-spy --native sample of the served arbiter is spending its time on, by its leaf frame
# (and for Python leaves, the module it is in); idle waits are left out.
_GROUPS = (
    ("gRPC transport (syscalls, gRPC core)", ("sendmsg", "recv", "write", "read", "syscall",
                                              "cygrpc", "libgrpc", "getpid", "madvise")),
    ("cyclic GC", ("gc_collect",)),
    ("protobuf", ("_message", "upb")),
    ("asyncio", ("asyncio/",)),
    ("scheduling loop, journal, telemetry", ("arbiter/scheduler", "arbiter/lease_book",
                                             "arbiter/journal", "arbiter/sqlite_store",
                                             "arbiter/telemetry", "arbiter/history",
                                             "arbiter/policies", "arbiter/share_hub",
                                             "arbiter/server", "_loop_ticks")),
    ("sessions: service and core per message", ("arbiter/",)),
)  # fmt: skip
_IDLE = ("epoll_wait", "Condition.wait", "Event.wait", "EpollSelector.select", "pthread_cond")


def profile_summary(raw: Path, top: int = 15) -> dict:
    """Shares of the busy samples of a py-spy raw file: by group, and the top leaf frames."""
    groups: dict[str, int] = defaultdict(int)
    leaves: dict[str, int] = defaultdict(int)
    busy = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        leaf, tail = frames[-1], ";".join(frames[-3:])
        if any(x in tail for x in _IDLE) or leaf.startswith("0x"):
            continue  # waiting (a futex or an epoll), or an unnamed libc frame
        busy += int(n)
        leaves[leaf] += int(n)
        name = next((g for g, keys in _GROUPS if any(k in leaf for k in keys)), "other")
        groups[name] += int(n)
    share = {k: round(v / max(1, busy), 3) for k, v in sorted(groups.items(), key=lambda x: -x[1])}
    leaf_share = sorted(leaves.items(), key=lambda x: -x[1])[:top]
    return {
        "busy_samples": busy,
        "groups": share,
        "top_frames": {k: round(v / max(1, busy), 3) for k, v in leaf_share},
    }
