"""Where the auction is solved: in the scheduler thread, or in a worker process (Themis §4.3).

Themis's arbiter separates the *decision* cycle (solving the partial-allocation auction) from
the *binding* cycle (granting leases) so that a long solve never holds up the protocol
(T:1058-1070). :class:`arbiter.core.ArbiterCore` already solves outside its lock; but a solve is
CPU-bound Python and HiGHS work that keeps the GIL, so in one process it still starves the gRPC
event loop: with 1,000 Agents a round of ~200 bidders (n + 1 MILPs for the hidden payments)
pushed heartbeat p99 to 300-800 ms and no round finished in 8 s.

:class:`ProcessDecider` (the default of ``yarn-arbiter serve``) runs each round's pure
mechanism (:func:`arbiter.rounds.run_round`) in one worker process, started with ``spawn`` (the
parent has gRPC threads, so ``fork`` is unsafe) and niced, so that RPCs keep priority on a busy
machine. Only plain data crosses the boundary (GPU set, leases, round counter, round arguments);
the outcome comes back and is bound by the core as before, so a worker crash loses only that
round: the worker is restarted and the round is solved in-thread instead. :func:`decide_inline`
is the in-thread decider (tests with an injected clock, tools).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable

from arbiter.auction import Bid
from arbiter.rounds import ArbiterState, Lease, RoundOutcome, run_round

__all__ = ["Decider", "ProcessDecider", "decide_inline"]

log = logging.getLogger("yarn_arbiter.decider")

Decider = Callable[[ArbiterState, dict], tuple[RoundOutcome, list[Bid]]]


def decide_inline(state: ArbiterState, kwargs: dict) -> tuple[RoundOutcome, list[Bid]]:
    """Solve one round in the calling thread."""
    _, outcome = run_round(state, **kwargs)
    return outcome, kwargs["bids"]


def _solve(gpus: frozenset[str], leases: tuple[Lease, ...], rnd: int, kwargs: dict) -> RoundOutcome:
    """The worker's entry point: rebuild the state (its bid memory is not needed) and solve."""
    _, outcome = run_round(ArbiterState(gpus, leases, rnd), **kwargs)
    return outcome


def _worker_main(conn, niceness: int) -> None:
    """The worker process: solve rounds sent over ``conn`` until it closes (the parent exited,
    even by SIGKILL: the pipe then reads EOF)."""
    with contextlib.suppress(OSError):  # not permitted: run at normal priority
        os.nice(niceness)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            gpus, leases, rnd, kwargs = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        try:
            _, outcome = run_round(ArbiterState(gpus, leases, rnd), **kwargs)
            reply = ("ok", outcome)
        except Exception as exc:  # a bad round: the parent raises it as the inline call would
            reply = ("error", exc)
        conn.send(reply)


class ProcessDecider:
    """Solve rounds in one niced worker process (see the module docstring)."""

    def __init__(self, niceness: int = 5, start_timeout: float = 60.0) -> None:
        self._niceness = niceness
        self._start_timeout = start_timeout
        self._lock = threading.Lock()  # one round at a time over the pipe
        self._proc = None
        self._conn = None
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

    def __call__(self, state: ArbiterState, kwargs: dict) -> tuple[RoundOutcome, list[Bid]]:
        with self._lock:
            if self._conn is None:
                return decide_inline(state, kwargs)
            try:
                self._conn.send((state.gpus, state.leases, state.round, kwargs))
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
                return decide_inline(state, kwargs)
        if kind == "error":
            raise value
        return value, kwargs["bids"]

    def close(self) -> None:
        """Stop the worker at once (a solve in progress is abandoned: its round is lost, the
        GPUs stay free and are offered again after a restart)."""
        self._closed = True
        proc = self._proc
        if proc is not None:
            proc.terminate()  # unblocks a round waiting on the pipe
        with self._lock:
            self._stop_worker()
