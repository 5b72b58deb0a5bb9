"""The hidden payments' solves shared with a forked child (Themis §3.3, Pseudocode 1; spec B.5).

After the proportional-fair solve, the n solves without one app (``-i``) are independent of
each other; on the benchmark's 64 x 256 x 32 tail about 50 of them need a warm LP solve of a
2,048-column model each (1-3 ms, 40 % of it Python, so threads would not run them in
parallel). :func:`share` forks the process once: the child starts with a copy of everything
the parent built (the warm HiGHS model, its basis and every cut found so far), and parent and
child take the next solve from one queue until it is empty, so neither waits while the other
has a long solve. The queue is a pipe written once before the fork: each task is a 4-byte
index and a read of 4 bytes from a pipe takes 4 contiguous bytes, so each task goes to exactly
one process. The child sends its answers back pickled over a second pipe and exits with
``os._exit`` (it never returns into the caller's code).

Exactness does not depend on the child: every task the child took but did not answer (it
died, or sent nothing readable: a child that dies while writing leaves a truncated pickle)
is solved again by the parent. The child is killed if the parent dies (Linux
``PR_SET_PDEATHSIG``), and by the parent if the parent's own tasks fail. The child's CPU time
shows up in the parent's ``RUSAGE_CHILDREN`` once it is reaped (the benchmark adds it).

Forking is opt-in, per process (:func:`enable`): the arbiter's auction worker
(``arbiter.decider``, a spawned, niced process that only solves rounds) turns it on, and so
does the latency benchmark. Elsewhere (the simulator, replays, tests, the in-thread fallback)
the auction stays in one process: which process solves which ``-i`` market depends on timing,
and a solve's answer (within the payment gap) on the warm LP it starts from, so with the child
the c_i of a market can differ from run to run within ``e^PAYMENT_GAP`` (as they differ between
solvers), while a replay must give the same leases every time. Forking is also only safe when
no other thread runs (a lock held by another thread at the fork stays held in the child):
:func:`can_fork` checks that this is the main thread and the only one, so the worker's child
shares the machine's cores with the arbiter's own process (gRPC event loop, lease book) at the
worker's niceness, and a process with threads solves sequentially.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["can_fork", "enable", "idle_core", "share"]

Mine = TypeVar("Mine")
Theirs = TypeVar("Theirs")
Tally = TypeVar("Tally")

# prctl option: the signal a child gets when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
# Bytes per task index in the queue pipe.
_INDEX = 4
# The queue is written before the fork, in one go: it must fit in the pipe (64 KiB on Linux).
_MAX_TASKS = 60_000 // _INDEX


_enabled = False
_when_idle = True
# Forks made by :func:`share` in this process (the benchmark reports how many auctions forked).
forks = 0


def enable(on: bool = True, *, when_idle: bool = True) -> None:
    """Let this process share ``-i`` solves with a forked child (see the module docstring);
    with ``when_idle``, only while the machine's load leaves a core idle (:func:`idle_core`)."""
    global _enabled, _when_idle
    _enabled, _when_idle = on, when_idle


def idle_core() -> bool:
    """Whether the 1-minute load average (this process included) leaves at least half a core
    idle. On a busy machine the child only adds work: measured on this 2-core machine at load
    9-11 on the 8 slowest 64 x 256 x 32 instances (best of 3, one process and forked taking
    turns), forked took 1.31 s of CPU against 1.07 and its wall times were longer (p50 155
    against 131 ms): the child's duplicated cut search and copy-on-write faults, and no idle
    core to run on."""
    return os.getloadavg()[0] < (os.cpu_count() or 1) - 0.5


def can_fork() -> bool:
    """Whether :func:`share` may fork here: :func:`enable` was called, POSIX, at least two
    CPUs, a core idle (unless enabled with ``when_idle=False``), and this is the main thread
    and the only one (fork copies only the calling thread; a
    lock another thread holds would stay held in the child)."""
    return (
        _enabled
        and hasattr(os, "fork")
        and (not _when_idle or idle_core())
        and sys.platform != "win32"
        and (os.cpu_count() or 1) > 1
        and threading.current_thread() is threading.main_thread()
        and threading.active_count() == 1
    )


def _take(fd: int) -> list[int]:
    """The next task index from the queue pipe, or [] once it is empty."""
    data = os.read(fd, _INDEX)
    return [int.from_bytes(data, "little")] if len(data) == _INDEX else []


class Shared(Generic[Mine, Theirs, Tally]):
    """What :func:`share` returns: the answers of each process by task index, and the child's
    ``tally`` (None when the child's answers were lost and the parent redid its tasks)."""

    def __init__(
        self, here: dict[int, Mine], there: dict[int, Theirs], tally: Tally | None
    ) -> None:
        self.here = here
        self.there = there
        self.tally = tally


def share(
    count: int,
    here: Callable[[int], Mine],
    there: Callable[[int], Theirs],
    tally: Callable[[], Tally],
) -> Shared[Mine, Theirs, Tally]:
    """Run tasks ``0 .. count-1``, each once, on this process (``here(n)``) and a forked child
    (``there(n)``, whose answer must pickle), both taking the next task from one queue; the
    child also sends ``tally()`` after its last task (e.g. counters it kept). Tasks the child
    took but did not answer are run ``here`` after it exits. Call only when :func:`can_fork`.
    """
    if not 0 < count <= _MAX_TASKS:
        raise ValueError(f"share: 1 to {_MAX_TASKS} tasks, got {count}")
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(n.to_bytes(_INDEX, "little") for n in range(count)))
    os.close(queue_w)
    out_r, out_w = os.pipe()
    parent = os.getpid()
    global forks
    forks += 1
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            _die_with(parent)
            os.close(out_r)
            done: dict[int, Theirs] = {}
            while task := _take(queue_r):
                done[task[0]] = there(task[0])
            payload = pickle.dumps((done, tally()), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(payload)
            while view:
                view = view[os.write(out_w, view) :]
            code = 0
        except BaseException:  # the parent redoes this child's tasks
            pass
        finally:
            os._exit(code)
    os.close(out_w)
    mine: dict[int, Mine] = {}
    reaped = False
    try:
        while task := _take(queue_r):
            mine[task[0]] = here(task[0])
        chunks = []
        while chunk := os.read(out_r, 1 << 16):
            chunks.append(chunk)
        with contextlib.suppress(ChildProcessError):  # (reaped already: SIGCHLD ignored)
            os.waitpid(pid, 0)
        reaped = True
        theirs: dict[int, Theirs] = {}
        child_tally: Tally | None = None
        try:  # a child that died while writing leaves a truncated pickle: no answer
            theirs, child_tally = pickle.loads(b"".join(chunks))
        except Exception:
            theirs, child_tally = {}, None
        for n in range(count):
            if n not in mine and n not in theirs:
                mine[n] = here(n)
        return Shared(mine, theirs, child_tally)
    finally:
        os.close(queue_r)
        os.close(out_r)
        if not reaped:  # the parent failed: the child's work is of no use
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _die_with(parent: int) -> None:
    """In the child: be killed when the parent dies (Linux ``PR_SET_PDEATHSIG``), so that an
    auction worker stopped mid-solve leaves no child solving on."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before that
        os._exit(1)
