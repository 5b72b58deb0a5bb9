"""The shells of the CPU data plane (spec §6.5): a rank process (an app emulator driving an
:class:`~syndicate.dataplane.enforcer.Enforcer`, with a control socket for the coordinator) and
the central coordinator's two-phase commit (thesis T:1678, T:1689).

A rank runs ``iterations`` training iterations: at each boundary it asks the enforcer which
plan to run, "computes" (a sleep with seeded jitter), submits the job's comm-ops in program
order (or, with ``permute``, in a rank-specific shuffled order once a plan is installed: the
enforcer must still issue identically), checks every result against the reference collective
computed from all ranks' seeded inputs (integers exact, floats within 1e-6), and reports its
issue log, its plan version per iteration and the busy-wait per iteration. With ``rates`` its
channels are paced (:mod:`syndicate.dataplane.pacing`). The comm-ops named in ``prefetch`` are
the input pipeline's (data-prep): as a real loader would, the app submits iteration k+1's at the
start of iteration k (and iteration 0's first), whatever the plan, so a plan that prefetches
them (δ = +1, Gap 4.3, T:1771) finds them submitted; the batch after the last iteration is
submitted too and, if the last plan prefetched it, checked. With ``data_wait`` the app waits for
iteration k's batch before its compute (a forward pass needs its input): a plan must then issue
the data ops first, and prefetching them takes their time off the iteration.

Control messages are JSON lines: ``prepare {version, plan, sha256}`` -> ``vote {version, yes,
iter}``; ``commit {version, activate_at}``; ``abort {version}``; ``status`` -> ``{iter}``;
``stats`` -> busy-wait and iteration seconds per finished iteration, which
:meth:`Coordinator.replan_when_waiting` feeds to the 5 % trigger.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from syndicate.dataplane.enforcer import Enforcer
from syndicate.dataplane.mesh import Mesh
from syndicate.dataplane.protocol import InstalledPlan, ReplanTrigger, fifo_plan
from syndicate.motifs import CommOp, reference

__all__ = ["Coordinator", "RankConfig", "inputs_of", "run_rank"]


@dataclass(frozen=True)
class RankConfig:
    ops: tuple[CommOp, ...]
    iterations: int
    compute_s: float = 0.01
    jitter_s: float = 0.005
    permute: bool = False
    seed: int = 0
    floats: bool = False
    rates: Mapping[str, float] | None = None  # channel -> bytes/s (None: loopback speed)
    prefetch: tuple[str, ...] = ()  # input-pipeline ops submitted one iteration ahead
    data_wait: bool = False  # the compute of iteration k needs its batch (the prefetch ops' result)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefetch", tuple(self.prefetch))
        unknown = set(self.prefetch) - {op.name for op in self.ops}
        if unknown:
            raise ValueError(f"prefetch names {sorted(unknown)}: not comm-ops of the job")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"] = [asdict(op) for op in self.ops]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankConfig:
        ops = tuple(CommOp(**o) for o in d["ops"])
        return cls(ops, **{k: v for k, v in d.items() if k != "ops"})


def inputs_of(cfg: RankConfig, op: CommOp, k: int, rank: int) -> np.ndarray:
    """Rank ``rank``'s input to ``op`` in iteration ``k`` (seeded, so every rank can compute
    every other rank's and so the reference)."""
    rng = np.random.default_rng([cfg.seed, k, rank, sum(map(ord, op.name))])
    shape = (op.n_ranks, op.size) if op.kind == "AA" else (op.size,)
    if cfg.floats:
        return rng.standard_normal(shape)
    return rng.integers(-1000, 1000, shape)


def _control(enf: Enforcer, mesh: Mesh, listener: socket.socket, done: threading.Event) -> None:
    """Serve the coordinator; on its disappearance while prepared, resolve with the peers."""
    listener.settimeout(0.5)
    while not done.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:  # the listener closed under us at shutdown
            if done.is_set():
                return
            raise
        with conn, conn.makefile("rw") as f:
            for line in f:
                msg = json.loads(line)
                kind = msg["type"]
                if kind == "prepare":
                    plan = InstalledPlan.from_json(msg["plan"])
                    yes, k = enf.prepare(plan, msg["sha256"])
                    reply: dict[str, Any] = {
                        "type": "vote",
                        "version": plan.version,
                        "yes": yes,
                        "iter": k,
                    }
                elif kind == "commit":
                    enf.commit(int(msg["version"]), int(msg["activate_at"]))
                    reply = {"type": "ack"}
                elif kind == "abort":
                    enf.abort(int(msg["version"]))
                    reply = {"type": "ack"}
                elif kind == "stats":
                    reply = {
                        "type": "stats",
                        "stats": {str(k): v for k, v in enf.stats().items()},
                        "motifs": {str(k): v for k, v in enf.motif_times().items()},
                    }
                else:
                    reply = {"type": "status", "iter": enf.current_iteration}
                f.write(json.dumps(reply) + "\n")
                f.flush()
        pending = enf.undecided
        if pending is not None:
            _resolve_with_peers(enf, mesh, pending)


_ANSWERS: dict[int, dict[int, dict[str, Any]]] = {}
_ANSWERS_CV = threading.Condition()


def _on_ctl(enf_box: list[Enforcer]) -> Any:
    def handle(peer: int, msg: dict[str, Any]) -> None:
        if msg["type"] == "ask" and enf_box:
            enf = enf_box[0]
            ans = enf.decision(int(msg["version"]))
            enf.mesh.send_ctl(peer, {"type": "answer", "version": msg["version"], **ans})
        elif msg["type"] == "answer":
            with _ANSWERS_CV:
                _ANSWERS.setdefault(int(msg["version"]), {})[peer] = msg
                _ANSWERS_CV.notify_all()

    return handle


def _resolve_with_peers(enf: Enforcer, mesh: Mesh, version: int) -> None:
    """Gap 4.7b: the coordinator is gone and this rank is prepared for ``version``: any peer
    that saw COMMIT decides commit; if none did, every rank aborts."""
    peers = [p for p in range(mesh.n) if p != mesh.rank]
    for p in peers:
        mesh.send_ctl(p, {"type": "ask", "version": version})
    with _ANSWERS_CV:
        _ANSWERS_CV.wait_for(lambda: len(_ANSWERS.get(version, {})) == len(peers), timeout=30)
        answers = list(_ANSWERS.get(version, {}).values())
    commits = [a for a in answers if a["state"] == "commit"]
    if commits:
        enf.commit(version, int(commits[0]["activate_at"]))
    elif any(a["state"] == "committed" for a in answers):
        raise RuntimeError("a peer switched without a recorded activate_at")
    else:
        enf.abort(version)


def run_rank(rank: int, ports: Sequence[int], ctl_port: int, cfg_dict: dict, out: Any) -> None:
    """A rank process's main: run the iterations and put a report on ``out``."""
    cfg = RankConfig.from_dict(cfg_dict)
    n = len(ports)
    listener = socket.create_server(("127.0.0.1", ctl_port))
    box: list[Enforcer] = []
    mesh = Mesh(rank, ports, on_ctl=_on_ctl(box), rates=cfg.rates)
    enf = Enforcer(rank, mesh, cfg.ops, fifo_plan(cfg.ops))
    box.append(enf)
    done = threading.Event()
    ctl = threading.Thread(target=_control, args=(enf, mesh, listener, done), daemon=True)
    ctl.start()
    rng = random.Random(cfg.seed * 1000 + rank)
    report: dict[str, Any] = {"rank": rank, "ok": True, "errors": [], "iter_s": []}
    early = [op for op in cfg.ops if op.name in cfg.prefetch]
    futures: dict[tuple[int, str], Future] = {}

    def check(k: int, op: CommOp) -> None:
        got = futures.pop((k, op.name)).result(timeout=120)
        want = reference(op, [inputs_of(cfg, op, k, r) for r in range(n)])[rank]
        same = (
            np.allclose(got, want, rtol=0, atol=1e-6) if cfg.floats else np.array_equal(got, want)
        )
        if not same:
            report["ok"] = False
            report["errors"].append(f"iteration {k}: {op.name} differs")

    try:
        plan = fifo_plan(cfg.ops)
        for k in range(cfg.iterations):
            t0 = time.perf_counter()
            plan = enf.begin_iteration(k)
            for j in [k, k + 1] if k == 0 else [k + 1]:  # the input pipeline runs ahead
                for op in early:
                    futures[(j, op.name)] = enf.submit(j, op.name, inputs_of(cfg, op, j, rank))
            if cfg.data_wait:  # e.g. the embedding lookup needs the batch
                for op in early:
                    check(k, op)
            order = [op for op in cfg.ops if op.name not in cfg.prefetch]
            if cfg.permute and not plan.fifo:
                rng.shuffle(order)
            for op in order:
                time.sleep(cfg.compute_s / max(1, len(order)) + rng.uniform(0, cfg.jitter_s))
                futures[(k, op.name)] = enf.submit(k, op.name, inputs_of(cfg, op, k, rank))
            for op in cfg.ops:
                if not (cfg.data_wait and op.name in cfg.prefetch):  # checked above
                    check(k, op)
            report["iter_s"].append(time.perf_counter() - t0)
        for op in early:  # the batch after the last: issued iff the last plan prefetched it
            if op.name in plan.prefetch:
                check(cfg.iterations, op)
    except Exception as exc:  # reported to the parent, which fails the test
        report["ok"] = False
        report["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        time.sleep(0.2)  # let peers finish their last receives before the mesh closes
        report["issue_log"] = {str(k): v for k, v in enf.issue_log.items()}
        report["versions"] = enf.tpc.history
        report["wait_s"] = {str(k): v for k, v in enf.wait_s.items()}
        done.set()
        enf.close()
        mesh.close()
        listener.close()
        out.put(report)


class Coordinator:
    """The central side of 2PC: one control connection per rank."""

    def __init__(self, ctl_ports: Sequence[int], timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._conns = []
        for port in ctl_ports:
            deadline = time.monotonic() + 30
            while True:
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            self._conns.append((s, s.makefile("rw")))

    def _ask(self, i: int, msg: dict[str, Any]) -> dict[str, Any] | None:
        _, f = self._conns[i]
        try:
            f.write(json.dumps(msg) + "\n")
            f.flush()
            line = f.readline()
        except (OSError, TimeoutError):
            return None
        return json.loads(line) if line else None

    def status(self) -> list[int]:
        return [
            int((self._ask(i, {"type": "status"}) or {"iter": -1})["iter"])
            for i in range(len(self._conns))
        ]

    def prepare(
        self, plan: InstalledPlan, *, corrupt: Sequence[int] = ()
    ) -> list[dict[str, Any] | None]:
        """Phase 1; ``corrupt`` names ranks sent a wrong hash (fault injection)."""
        sha = plan.sha256()
        return [
            self._ask(
                i,
                {
                    "type": "prepare",
                    "plan": plan.to_json(),
                    "sha256": "0" * 64 if i in corrupt else sha,
                },
            )
            for i in range(len(self._conns))
        ]

    def propose(self, plan: InstalledPlan, *, corrupt: Sequence[int] = ()) -> int | None:
        """Both phases: the iteration the plan activates at, or None if aborted."""
        votes = self.prepare(plan, corrupt=corrupt)
        if all(v is not None and v["yes"] for v in votes):
            activate_at = max(int(v["iter"]) for v in votes if v is not None) + 2
            for i in range(len(self._conns)):
                self._ask(
                    i, {"type": "commit", "version": plan.version, "activate_at": activate_at}
                )
            return activate_at
        for i in range(len(self._conns)):
            self._ask(i, {"type": "abort", "version": plan.version})
        return None

    def stats(self) -> dict[int, tuple[float, float]]:
        """Per finished iteration, the largest busy-wait over the ranks and the iteration
        time."""
        return self.poll()[0]

    def poll(self) -> tuple[dict[int, tuple[float, float]], dict[int, dict[str, float]]]:
        """:meth:`stats`, and per finished iteration each motif's time: the slowest rank's
        (a collective's motif is done when its last rank is), by motif key."""
        merged: dict[int, tuple[float, float]] = {}
        motifs: dict[int, dict[str, float]] = {}
        for i in range(len(self._conns)):
            reply = self._ask(i, {"type": "stats"}) or {"stats": {}}
            for k_text, (wait, it) in reply["stats"].items():
                k = int(k_text)
                w0, t0 = merged.get(k, (0.0, 0.0))
                merged[k] = (max(w0, wait), max(t0, it))
            for k_text, times in reply.get("motifs", {}).items():
                slowest = motifs.setdefault(int(k_text), {})
                for key, sec in times.items():
                    slowest[key] = max(slowest.get(key, 0.0), float(sec))
        return merged, motifs

    def replan_when_waiting(
        self,
        trigger: ReplanTrigger,
        make_plan: Callable[[int], InstalledPlan],
        *,
        until: Callable[[], bool],
        every: float = 0.02,
        observe: Callable[[Mapping[str, float]], None] | None = None,
    ) -> list[tuple[int, int | None]]:
        """The re-plan loop (T:1672): feed every finished iteration's waits to ``trigger``
        (iterations complete on every rank only) and its motif times to ``observe`` (the cost
        model's refinement, T:1494: e.g. :func:`refine`); when the trigger fires, propose
        ``make_plan(version)`` by 2PC. Returns (version, activate_at or None) per proposal."""
        seen = -1
        version = 0
        out: list[tuple[int, int | None]] = []
        while not until():
            stats, motifs = self.poll()
            for k in sorted(k for k in stats if k > seen):
                seen = k
                if observe is not None and k in motifs:
                    observe(motifs[k])
                if trigger.feed(*stats[k]):
                    version += 1
                    out.append((version, self.propose(make_plan(version))))
            time.sleep(every)
        return out

    def close(self) -> None:
        for s, f in self._conns:
            f.close()
            s.close()
