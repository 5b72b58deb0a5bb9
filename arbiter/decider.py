"""Where the auction is solved: in the scheduler thread, or in a worker process (Themis §4.3).

Themis's arbiter separates the *decision* cycle (solving the partial-allocation auction) from
the *binding* cycle (granting leases) so that a long solve never holds up the protocol
(T:1058-1070). :class:`arbiter.core.ArbiterCore` already decides outside its lock (the auction
step of the two-phase policy, ``policy.decide(snapshot)`` with the bids in; the policy and the
snapshot are plain immutable data); but a solve is
CPU-bound Python and HiGHS work that keeps the GIL, so in one process it still starves the gRPC
event loop: with 1,000 Agents a round of ~200 bidders (n + 1 MILPs for the hidden payments)
pushed heartbeat p99 to 300-800 ms and no round finished in 8 s.

:class:`ProcessDecider` (the default of ``yarn-arbiter serve``) runs each such decision in one
worker process, started with ``spawn`` (the parent has gRPC threads, so ``fork`` is unsafe) and
niced, so that RPCs keep priority on a busy machine. Only plain data crosses the boundary (the
policy object, the snapshot); the decision comes back and is bound by the core as before, so a
worker crash loses only that round: the worker is restarted and the round is decided in-thread
instead. :func:`decide_inline` is the in-thread decider (tests with an injected clock, tools).
"""

from __future__ import annotations

import contextlib
import copyreg
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import MappingProxyType

from arbiter.policies.base import Decision, Policy, Snapshot

__all__ = ["Decider", "ProcessDecider", "decide_inline"]

log = logging.getLogger("yarn_arbiter.decider")

Decider = Callable[[Policy, Snapshot], Decision]


def _proxy(d: Mapping) -> MappingProxyType:
    return MappingProxyType(dict(d))


# Read-only mappings (lease books, bids, decisions) cross the process boundary as dicts.
copyreg.pickle(MappingProxyType, lambda m: (_proxy, (dict(m),)))


def decide_inline(policy: Policy, snapshot: Snapshot) -> Decision:
    """Decide in the calling thread."""
    return policy.decide(snapshot)


def _worker_main(conn, niceness: int) -> None:
    """The worker process: decide what is sent over ``conn`` until it closes (the parent
    exited, even by SIGKILL: the pipe then reads EOF)."""
    with contextlib.suppress(OSError):  # not permitted: run at normal priority
        os.nice(niceness)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            policy, snapshot = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        try:
            reply = ("ok", policy.decide(snapshot))
        except Exception as exc:  # a bad round: the parent raises it as the inline call would
            reply = ("error", exc)
        conn.send(reply)


class ProcessDecider:
    """Solve rounds in one niced worker process (see the module docstring)."""

    def __init__(self, niceness: int = 5, start_timeout: float = 60.0) -> None:
        self._niceness = niceness
        self._start_timeout = start_timeout
        self._lock = threading.Lock()  # one round at a time over the pipe
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None
        self.worker_pid: int | None = None
        self.restarts = 0
        self._closed = False
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # the parent has gRPC threads: no fork
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker_main, args=(child, self._niceness), name="auction-worker", daemon=True
        )
        proc.start()
        child.close()
        if not parent.poll(self._start_timeout):
            proc.kill()
            raise RuntimeError("the auction worker process did not start")
        _, self.worker_pid = parent.recv()
        self._proc, self._conn = proc, parent

    def _stop_worker(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            proc.terminate()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)

    def __call__(self, policy: Policy, snapshot: Snapshot) -> Decision:
        with self._lock:
            if self._conn is None:
                return decide_inline(policy, snapshot)
            try:
                self._conn.send((policy, snapshot))
                kind, value = self._conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                if self._closed:
                    raise RuntimeError("the auction worker was stopped") from None
                log.error("auction worker died; restarting it, this round is solved in-thread")
                self._stop_worker()
                self.restarts += 1
                try:
                    self._start()
                except Exception:  # no worker: every round is solved in-thread from now on
                    log.exception("auction worker could not be restarted")
                return decide_inline(policy, snapshot)
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """Stop the worker at once (a solve in progress is abandoned: its round is lost, the
        GPUs stay free and are offered again after a restart)."""
        self._closed = True
        proc = self._proc
        if proc is not None:
            proc.terminate()  # unblocks a round waiting on the pipe
        with self._lock:
            self._stop_worker()
