"""The per-rank enforcer (thesis §4.4.4, Pseudocode 5, T:1617-1691; spec §4.1-4.3).

The app submits comm-ops one at a time (``submit`` returns a Future). ``ENFORCEEXECPLAN`` cuts
each into the installed plan's motifs; the progress thread (``ENFORCEORDER``) issues motifs
strictly by sequence number, busy-waiting until the expected motif has been submitted, so the
issue order is identical on every rank whatever the submission order or timing (T:1670); the
counter resets every iteration. Issued motifs go onto their channel's FIFO worker thread
(Gap 4.1b: issue is asynchronous, same-channel motifs serialise in issue order), which runs
the motif's rounds over the mesh; when a comm-op's last motif is done its output is repacked
into the Future (T:1664).

Before the first commit, and under plan version 0, comm-ops run "as-is, one-at-a-time and
in-order" (FIFO, T:1674). Plans change only at iteration boundaries by two-phase commit
(:class:`~syndicate.dataplane.protocol.TwoPhase`); if the coordinator vanishes while this rank
is prepared and undecided, it asks its peers: any COMMIT commits, otherwise all abort
(Gap 4.7b). Busy-wait time is accounted per iteration for the 5 % re-plan trigger (T:1672),
and each motif's execution time, for the cost model's refinement (T:1494, spec §3.4).

Prefetch (Gap 3.12, Gap 4.3, T:1771): the app may submit a comm-op of the next iteration
(one extra batch, no more). A plan's δ = +1 ops are issued in iteration k's sequence for
iteration k+1 (logged ``id@+1``), and each op is cut by the plan of the iteration that issues
it; :func:`~syndicate.dataplane.protocol.iteration_sequence` gives the prologue when the
previous iteration did not prefetch (the first iteration, a switch into prefetch) and skips
what it did (a switch out, also into FIFO).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from syndicate.dataplane.mesh import Mesh, MeshClosed
from syndicate.dataplane.protocol import (
    InstalledPlan,
    TwoPhase,
    carried,
    issued_ids,
    iteration_sequence,
    motif_key,
    rank_rounds,
)
from syndicate.motifs import CommOp, ExecOption, Motif

__all__ = ["KEEP_ITERATIONS", "Enforcer"]

KEEP_ITERATIONS = 64  # iterations of motif timings a rank keeps for the coordinator


@dataclass
class _OpRun:
    k: int
    op: CommOp
    buf: np.ndarray
    out: np.ndarray | None
    motifs: list[Motif] = field(default_factory=list)  # cut when first issued
    opt: ExecOption | None = None  # the option of the plan that issues it
    future: Future = field(default_factory=Future)
    left: int = 0

    def cut(self, plan: InstalledPlan) -> None:
        """ENFORCEEXECPLAN under the plan of the iteration that issues it (a prefetched op
        is submitted before the plan of its own iteration is known). A comm-op with no motifs
        (an all-reduce on one rank) is its own result: its Future completes here."""
        if not self.motifs:
            self.opt = plan.options[self.op.name]
            self.motifs = plan.motifs(self.op)
            self.left = len(self.motifs)
            if not self.motifs and not self.future.done():
                self.future.set_result(self.result())  # REPACK of nothing

    def result(self) -> np.ndarray:
        return self.out if self.out is not None else self.buf


class Enforcer:
    def __init__(
        self,
        rank: int,
        mesh: Mesh,
        ops: Sequence[CommOp],
        plan: InstalledPlan,
        *,
        on_issue: Callable[[int, str], None] | None = None,
    ) -> None:
        self.rank, self.mesh = rank, mesh
        self.ops = {op.name: op for op in ops}
        self.n_ops = len(ops)
        self.on_issue = on_issue
        self.tpc = TwoPhase(plan)
        self._cv = threading.Condition()
        self._iter_plan: dict[int, InstalledPlan] = {}
        self._submitted: dict[int, dict[str, _OpRun]] = {}
        self._fifo: dict[int, list[str]] = {}
        self.issue_log: dict[int, list[str]] = {}
        self.wait_s: dict[int, float] = {}
        self.began: dict[int, float] = {}  # iteration -> when the app began it
        # iteration -> motif key -> seconds it took on this rank (the last KEEP iterations)
        self.motif_s: dict[int, dict[str, float]] = {}
        self.current_iteration = -1
        self._stop = False
        self.error: BaseException | None = None
        self._workers: dict[str, queue.Queue[tuple[_OpRun, Motif] | None]] = {}
        self._threads: list[threading.Thread] = []
        for ch in ("gpu", "cpu"):
            q: queue.Queue[tuple[_OpRun, Motif] | None] = queue.Queue()
            self._workers[ch] = q
            t = threading.Thread(
                target=self._worker, args=(ch, q), daemon=True, name=f"enforcer-{rank}-{ch}"
            )
            self._threads.append(t)
            t.start()
        t = threading.Thread(target=self._progress, daemon=True, name=f"enforcer-{rank}")
        self._threads.append(t)
        t.start()

    # ---- the app's side ------------------------------------------------------------------
    def begin_iteration(self, k: int, timeout: float = 120.0) -> InstalledPlan:
        """The plan iteration ``k`` runs under; waits at the boundary while a prepared plan is
        undecided (2PC, Gap 4.7b)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                plan = self.tpc.boundary(k)
                if plan is not None:
                    self._iter_plan[k] = plan
                    self.current_iteration = k
                    self.began[k] = time.monotonic()
                    self._cv.notify_all()
                    return plan
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"rank {self.rank}: no 2PC decision at iteration {k}")
                self._cv.wait(min(left, 0.5))

    def submit(self, k: int, op_name: str, tensor: np.ndarray) -> Future:
        """Comm-op ``op_name`` of iteration ``k``: of a begun iteration or, for the app's
        input pipeline, of the next one (prefetch, Gap 4.3: one extra batch at most). Its
        motifs are cut by the plan that issues it."""
        with self._cv:
            if k not in self._iter_plan and k != self.current_iteration + 1:
                raise RuntimeError(
                    f"iteration {k} is neither begun nor next on rank {self.rank} "
                    f"(at {self.current_iteration}; prefetch holds one extra batch)"
                )
            op = self.ops[op_name]
            if op_name in self._submitted.get(k, {}):
                raise ValueError(f"{op_name} submitted twice in iteration {k}")
            out = np.zeros_like(tensor) if op.kind == "AA" else None
            run = _OpRun(k, op, np.array(tensor, copy=True), out)
            if not self.tpc.current.motifs(op):
                # No motifs under any option (an all-reduce on one rank): no plan's sequence
                # names it, so nothing would ever issue it; it completes at submission.
                run.cut(self.tpc.current)
            self._submitted.setdefault(k, {})[op_name] = run
            self._fifo.setdefault(k, []).append(op_name)
            self._cv.notify_all()
        return run.future

    # ---- 2PC participant ------------------------------------------------------------------
    def prepare(self, plan: InstalledPlan, sha: str) -> tuple[bool, int]:
        with self._cv:
            try:
                plan.validate(list(self.ops.values()))
                ok = True
            except ValueError:
                ok = False
            k = max(self.current_iteration, 0)
            return self.tpc.prepare(plan, sha, k, ok), k

    def commit(self, version: int, activate_at: int) -> None:
        with self._cv:
            self.tpc.commit(version, activate_at)
            self._cv.notify_all()

    def abort(self, version: int) -> None:
        with self._cv:
            self.tpc.abort(version)
            self._cv.notify_all()

    def decision(self, version: int) -> dict[str, Any]:
        """This rank's knowledge of ``version`` (answered to a peer resolving a dead
        coordinator)."""
        with self._cv:
            if self.tpc.current.version >= version:
                return {"state": "committed"}
            p = self.tpc.pending
            if p is not None and p.version == version:
                if self.tpc.activate_at is not None:
                    return {"state": "commit", "activate_at": self.tpc.activate_at}
                return {"state": "undecided"}
            return {"state": "none"}

    def stats(self) -> dict[int, tuple[float, float]]:
        """Iteration -> (busy-wait seconds, iteration seconds), for finished iterations (the
        enforcer statistics the optimizer receives, T:1494)."""
        with self._cv:
            return {
                k: (self.wait_s[k], self.began[k + 1] - self.began[k])
                for k in self.wait_s
                if k + 1 in self.began
            }

    def motif_times(self) -> dict[int, dict[str, float]]:
        """Iteration -> :func:`~syndicate.dataplane.protocol.motif_key` -> seconds, for the
        finished iterations still kept (the motif timings of T:1494)."""
        with self._cv:
            return {k: dict(v) for k, v in self.motif_s.items() if k + 1 in self.began}

    @property
    def undecided(self) -> int | None:
        with self._cv:
            p = self.tpc.pending
            return p.version if p is not None and self.tpc.activate_at is None else None

    # ---- ENFORCEORDER ---------------------------------------------------------------------
    def _wait_for(self, pred: Callable[[], bool]) -> float:
        t0 = time.perf_counter()
        with self._cv:
            while not pred():
                if self._stop:
                    raise MeshClosed("enforcer stopped")
                self._cv.wait(0.5)
        return time.perf_counter() - t0

    def _has_plan(self, k: int) -> bool:
        return k in self._iter_plan

    def _fifo_has(self, k: int, idx: int) -> bool:
        return len(self._fifo.get(k, ())) > idx

    def _has_op(self, k: int, name: str) -> bool:
        return name in self._submitted.get(k, {})

    def _progress(self) -> None:
        k = 0
        prev: InstalledPlan | None = None
        try:
            while not self._stop:
                self._wait_for(partial(self._has_plan, k))
                plan = self._iter_plan[k]
                done = carried(prev)  # issued in iteration k-1 (its plan's δ = +1 ops)
                self.issue_log[k] = []
                waited = 0.0
                if plan.fifo:
                    for idx in range(self.n_ops):
                        self._wait_for(partial(self._fifo_has, k, idx))
                        run = self._submitted[k][self._fifo[k][idx]]
                        if run.op.name in done:
                            continue
                        run.cut(plan)
                        for m in run.motifs:
                            self._issue(k, run, m)
                        self._wait_for(run.future.done)  # one at a time
                else:
                    motif_of = {
                        (op.name, m.id): m for op in self.ops.values() for m in plan.motifs(op)
                    }
                    seq = iteration_sequence(plan, list(self.ops.values()), done)
                    for (name, d, mid), logged in zip(seq, issued_ids(seq), strict=True):
                        waited += self._wait_for(partial(self._has_op, k + d, name))
                        run = self._submitted[k + d][name]
                        run.cut(plan)
                        self._issue(k, run, motif_of[(name, mid)], logged)
                self.wait_s[k] = waited
                prev = plan
                k += 1
        except MeshClosed:
            return
        except BaseException as exc:  # surfaced to the app through error
            self.error = exc
            with self._cv:
                for runs in self._submitted.values():
                    for run in runs.values():
                        if not run.future.done():
                            run.future.set_exception(exc)

    def _issue(self, k: int, run: _OpRun, m: Motif, logged: str | None = None) -> None:
        """Issue ``m`` of ``run`` in iteration ``k``'s sequence (``run.k`` is ``k + 1`` for
        a prefetched op)."""
        name = m.id if logged is None else logged
        self.issue_log[k].append(name)
        if self.on_issue is not None:
            self.on_issue(k, name)
        self._workers[m.channel].put((run, m))

    def _worker(self, channel: str, q: queue.Queue[tuple[_OpRun, Motif] | None]) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            run, m = item
            try:
                t0 = time.perf_counter()
                self._execute(run, m)
                self._timed(run, m, time.perf_counter() - t0)
            except BaseException as exc:
                if not run.future.done():
                    run.future.set_exception(exc)
                with self._cv:
                    self._cv.notify_all()
                if isinstance(exc, MeshClosed):
                    return
                continue
            run.left -= 1
            if run.left == 0:
                run.future.set_result(run.result())  # REPACK
                with self._cv:  # FIFO issues the next comm-op when this one is done
                    self._cv.notify_all()

    def _timed(self, run: _OpRun, m: Motif, seconds: float) -> None:
        opt = run.opt
        assert opt is not None
        with self._cv:
            self.motif_s.setdefault(run.k, {})[motif_key(run.op.name, opt, m.id)] = seconds
            for old in [k for k in self.motif_s if k < run.k - KEEP_ITERATIONS]:
                del self.motif_s[old]

    def _execute(self, run: _OpRun, m: Motif) -> None:
        r = self.rank
        for rnd, (sends, recvs) in enumerate(rank_rounds(m, r)):
            local: dict[tuple[int, int], np.ndarray] = {}
            for t in sends:
                data = run.buf[t.dst, t.lo : t.hi] if run.out is not None else run.buf[t.lo : t.hi]
                if t.dst == r:
                    local[(t.lo, t.hi)] = data.copy()
                else:
                    self.mesh.send(t.dst, f"{run.k}/{m.id}/{rnd}/{t.lo}", data, m.channel)
            for t in recvs:
                data = (
                    local[(t.lo, t.hi)]
                    if t.src == r
                    else self.mesh.recv(t.src, f"{run.k}/{m.id}/{rnd}/{t.lo}", timeout=120)
                )
                if run.out is not None:
                    run.out[t.src, t.lo : t.hi] = data
                elif m.reduces:
                    run.buf[t.lo : t.hi] += data
                else:
                    run.buf[t.lo : t.hi] = data

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        for q in self._workers.values():
            q.put(None)
