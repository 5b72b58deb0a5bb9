"""The lease AM's sidecar: GPU leases from the arbiter become YARN containers
(``python -m yarn_bridge.lease_am --gpus N --work-gpu-seconds W --command CMD``).

The Java ApplicationMaster (``java/am``, :mod:`yarn_bridge.am_protocol`) starts this process and
executes what it asks for. Here:

* an :class:`arbiter.agent.Agent` holds the app's session (target, app id and token from
  :func:`~arbiter.agent.agent_kwargs_from_env`, i.e. what ``yarn-arbiter submit`` put in the AM's
  environment) and bids with a simple estimator: one job with ``--work-gpu-seconds`` of serial
  work in ``--iter-seconds`` iterations, ρ from Eq. 2 (:func:`arbiter.agent.
  estimator_from_scheduler` over a one-phase :class:`arbiter.fairness.SuccessiveHalving`), the
  work done so far counted from the GPU-seconds its containers have run;
* every lease is mapped to machines with the Agent's topology (GPU -> machine; the bridge names
  a machine by its YARN node id ``host:port`` when NodeManagers share a host, else by host, which
  the AM resolves), and each (lease, machine) part becomes one container: ``ACQUIRE`` with that
  machine's GPU count and indices (the ``g<k>`` of ``<machine>/s<slot>/g<k>``), running the
  user's ``--command``;
* the job is done when the command exits 0 in any container: every lease is given back
  (``Agent.release_all``), then ``FINISH SUCCEEDED``. More than ``--max-failures`` other exits
  (or ``--timeout``) end the app FAILED.

Decisions:

* **Reconciliation rather than event replay.** What the app should hold is recomputed from the
  live leases every half second and on every event; containers are matched to it by (machine,
  GPU set). So a renewal -- the same GPUs in a new lease, whether from ``RenewLease`` or won
  again in an auction -- keeps the running container, and lost or crossed messages heal on
  the next pass.
* **Revocations by GPU id.** The arbiter revokes a *cut* of a lease (a drain, a lost node, a
  policy decision) under a lease id of its own; the Agent books the cut and the remainder
  (:meth:`arbiter.agent.Agent._revoked`) and reports the cut GPUs, so the sidecar reads the
  revoked GPU ids off the message itself; a revoked container is released at once (the generic
  job cannot checkpoint, so the grace period is given back to the next holder).
* **Renewal ahead of the end.** With a quarter of a lease (at least 1 s) left the sidecar asks
  ``RenewLease``; the arbiter grants it only while no other app waits for GPUs, so fairness is
  the arbiter's call. A lease that ends anyway keeps its container ``--hold-seconds`` (default
  2, well under the enforcer's 10 s slack) in case the next auction gives the same GPUs back.
* **Wire keys.** The protocol's lease field is ``<lease id>@<machine>``: one key per container,
  so a drained machine releases one container of a multi-machine lease.
* **stdout is the protocol.** File descriptor 1 is kept for the protocol and then pointed at
  stderr, so a stray ``print`` in a library cannot corrupt it.
"""

from __future__ import annotations

import argparse
import base64
import logging
import math
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from arbiter.agent import Agent, HeldLease, agent_kwargs_from_env, estimator_from_scheduler
from arbiter.fairness import JobInfo, SuccessiveHalving, t_id
from yarn_bridge.am_protocol import Allocated, Completed, LeaseContainers, NodeLost, Started

__all__ = ["LeaseAgent", "LeaseSidecar", "gpu_index", "main", "parse_args"]

log = logging.getLogger("yarn_arbiter.lease_am")

_GPU_ID = re.compile(r"^(?P<machine>.+)/s(?P<slot>\d+)/g(?P<index>\d+)$")
# Exits that are YARN's doing, not the job's: ABORTED (node lost, released), PREEMPTED,
# KILLED_BY_RESOURCEMANAGER, KILLED_AFTER_APP_COMPLETION, KILLED_BY_APPMASTER.
_NOT_THE_JOBS_FAULT = frozenset({-100, -102, -105, -106, -107})


def gpu_index(gpu_id: str) -> int:
    """The device index of a GPU on its machine: ``k`` of ``<machine>/s<slot>/g<k>`` (the
    bridge's clusters have one slot per machine).

    >>> gpu_index("localhost:18041/s0/g3")
    3
    """
    m = _GPU_ID.match(gpu_id)
    if m is None:
        raise ValueError(f"GPU id {gpu_id!r} is not <machine>/s<slot>/g<index>")
    return int(m["index"])


class LeaseAgent(Agent):
    """An :class:`~arbiter.agent.Agent` that says whether the arbiter refused it."""

    @property
    def gave_up(self) -> bool:
        """The session thread ended without stop(): the arbiter refused the app."""
        return self._thread is not None and not self._thread.is_alive() and not self.stopped


@dataclass(eq=False)
class _Container:
    """One (lease, machine) part the app holds or asked for."""

    key: str  # the protocol's lease field
    machine: str
    gpus: frozenset[str]
    asked_at: float  # when the lease part was seen (ACQUIRE sent)
    container_id: str = ""
    started_at: float | None = None
    hold_until: float | None = None  # lease ended: kept this long for a re-grant


@dataclass
class _Work:
    """The estimator's one job: ``work_s`` serial GPU-seconds in ``iter_s`` iterations."""

    work_s: float
    iter_s: float
    done_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def scheduler(self) -> SuccessiveHalving:
        iters = max(1, math.ceil(self.work_s / self.iter_s))
        with self.lock:
            done = min(iters, int(self.done_s / self.iter_s))
        return SuccessiveHalving((iters,), (self.iter_s,), done_in_current=(done,))

    # the AppScheduler API (Fig. 8), read fresh each time
    def get_num_phases(self) -> int:
        return 1

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return self.scheduler().get_jobs_in_phase(phase, gpu_alloc)

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return self.scheduler().get_jobs_remaining(gpu_alloc)


@dataclass
class Bracket:
    """A Hyperband bracket run as containers (``--hyperband N:SAMPLES``, Themis's example app,
    T:1113-1127): ``N`` trials of :mod:`arbiter.examples.train_job` with learning rates spread
    over a log grid; phase ``p`` trains every surviving trial to ``SAMPLES * 2**p`` samples
    (each trial resumes its own checkpoint), then keeps the better half by training loss, down
    to one. A free lease part gets the next trial of the phase still to run; a trial whose job
    exits 0 is done for the phase; the app is done when the last phase is. The estimator is
    Eq. 2 over the bracket (:class:`arbiter.fairness.SuccessiveHalving`), the serial time of an
    iteration (128 samples) taken as ``iter_s``.

    >>> b = Bracket(4, 1000, Path("/w"), python="py")
    >>> b.phases, [t for t, _ in b.trials]
    ((1000, 2000, 4000), [0, 1, 2, 3])
    >>> b.next_command("k1").split("--samples ")[1].split()[0]
    '1000'
    """

    n_trials: int
    samples: int
    workdir: Path
    python: str = sys.executable
    iter_s: float = 0.5
    phase: int = 0
    trials: list[tuple[int, float]] = field(default_factory=list)  # (trial, learning rate)
    running: dict[str, int] = field(default_factory=dict)  # container key -> trial
    done: set[int] = field(default_factory=set)  # trials done in this phase
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.n_trials < 1 or self.samples < 1:
            raise ValueError("--hyperband needs N >= 1 trials and SAMPLES >= 1")
        if not self.trials:
            self.trials = [(k, 0.01 * 10 ** (2 * k / max(1, self.n_trials - 1)))
                           for k in range(self.n_trials)]  # fmt: skip
        n, phases = self.n_trials, []
        while True:
            phases.append(self.samples * 2 ** len(phases))
            if n <= 1:
                break
            n = (n + 1) // 2
        self.phases = tuple(phases)

    def checkpoint(self, trial: int) -> Path:
        return self.workdir / f"trial-{trial}.npz"

    def next_command(self, key: str) -> str | None:
        """The command of the next trial of this phase not running or done, for container
        ``key``; ``None`` when every trial of the phase is taken."""
        with self.lock:
            busy = set(self.running.values()) | self.done
            todo = [(k, lr) for k, lr in self.trials if k not in busy]
            if not todo or self.phase >= len(self.phases):
                return None
            k, lr = todo[0]
            self.running[key] = k
            return (f"{shlex.quote(self.python)} -m arbiter.examples.train_job --checkpoint "
                    f"{shlex.quote(str(self.checkpoint(k)))} --samples {self.phases[self.phase]} "
                    f"--lr {lr:.6g} --seed {k}")  # fmt: skip

    def exited(self, key: str, status: int) -> bool:
        """Container ``key``'s job ended; True when the bracket is over."""
        from arbiter.examples.train_job import checkpoint_loss

        with self.lock:
            trial = self.running.pop(key, None)
            if trial is None or status != 0:
                return False  # not ours, or it runs again in the next free container
            self.done.add(trial)
            if self.done < {k for k, _ in self.trials}:
                return False
            losses = {k: checkpoint_loss(self.checkpoint(k)) for k, _ in self.trials}
            self.phase += 1
            if self.phase >= len(self.phases):
                best = min(losses, key=losses.__getitem__)
                log.info("bracket done: best trial %d (loss %.4f)", best, losses[best])
                return True
            keep = sorted(self.trials, key=lambda t: losses[t[0]])[: (len(self.trials) + 1) // 2]
            log.info("phase %d: keeping trials %s of %s by loss", self.phase,
                     [k for k, _ in keep], [k for k, _ in self.trials])  # fmt: skip
            self.trials, self.done = keep, set()
            return False

    def release(self, key: str) -> None:
        """Container ``key`` was released before its job ended: its trial is free again."""
        with self.lock:
            self.running.pop(key, None)

    # the AppScheduler API (Fig. 8) for the estimator
    def scheduler(self) -> SuccessiveHalving:
        with self.lock:
            iters = tuple(max(1, s // 128) for s in self.phases)
            phase = min(self.phase, len(self.phases) - 1)
            n = max(1, len(self.trials))
            return SuccessiveHalving(iters, (self.iter_s,) * n, current_phase=phase)

    def get_num_phases(self) -> int:
        return len(self.phases)

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return self.scheduler().get_jobs_in_phase(phase, gpu_alloc)

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return self.scheduler().get_jobs_remaining(gpu_alloc)


class LeaseSidecar:
    """Leases in, containers out (module docstring). :meth:`run` returns the exit code."""

    def __init__(self, args: argparse.Namespace, inbox: IO[str], outbox: IO[str]) -> None:
        self.args = args
        self.command = args.command
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.started = time.time()
        self.containers: dict[str, _Container] = {}  # key -> part
        self.granted_at: dict[str, float] = {}  # GPU -> latest allocation naming it
        self.revoked_at: dict[str, float] = {}  # GPU -> latest revocation naming it
        self.lost_at: dict[str, float] = {}  # node id -> NODE_LOST time
        self.renew_tried: set[str] = set()
        self.failures = 0
        self.outcome: tuple[str, str] | None = None  # (status, message) once decided
        self.latencies: list[float] = []  # lease seen -> container STARTED, seconds
        self._keys = 0
        self._accrued_at = time.time()
        self.work = _Work(args.work_gpu_seconds, args.iter_seconds)
        self.bracket: Bracket | None = None
        if args.hyperband:
            n, _, samples = args.hyperband.partition(":")
            self.bracket = Bracket(int(n), int(samples), Path(args.trials_dir).resolve(),
                                   python=args.python or sys.executable)  # fmt: skip
            self.bracket.workdir.mkdir(parents=True, exist_ok=True)
        self.am = LeaseContainers(
            inbox,
            outbox,
            on_allocated=self._allocated,
            on_started=self._started,
            on_completed=self._completed,
            on_node_lost=self._node_lost,
            on_shutdown=self._shutdown,
            on_closed=self._closed,
        )
        kwargs = agent_kwargs_from_env()
        if args.arbiter:
            kwargs["target"] = args.arbiter
        if "target" not in kwargs:
            raise SystemExit("lease_am: no arbiter: set YARN_ARBITER_ADDRESS or give --arbiter")
        work = max(args.work_gpu_seconds, args.iter_seconds)
        cluster_gpus = max(args.cluster_gpus or args.gpus, 1)
        self.agent = LeaseAgent(
            estimator=estimator_from_scheduler(
                self.bracket or self.work,
                t_id=t_id(work, cluster_gpus, args.gpus, args.n_avg),
                job_demand_max=args.gpus,
                elapsed=lambda: time.time() - self.started,
            ),
            max_gpu_demand=args.gpus,
            app_name=args.name,
            on_allocation=self._on_allocation,
            on_revocation=self._on_revocation,
            **kwargs,
        )

    # -- arbiter events (Agent thread) -------------------------------------------------------

    def _on_allocation(self, leases: Sequence[HeldLease]) -> None:
        now = time.time()
        with self.lock:
            for lease in leases:
                for g in lease.gpus:
                    self.granted_at[g] = now
                log.info("lease %s: %d GPU(s) %s until %.1f (%s)", lease.lease_id,
                         len(lease.gpus), sorted(lease.gpus), lease.end, lease.source)  # fmt: skip
        self.wake.set()

    def _on_revocation(self, cut: HeldLease, grace: float) -> None:
        gpus, now = cut.gpus, time.time()
        with self.lock:
            for g in gpus:
                self.revoked_at[g] = now
        log.info("revoked: %s (grace %.1f s); their containers go now", sorted(gpus), grace)
        self.wake.set()

    # -- AM events (protocol thread) -----------------------------------------------------------

    def _allocated(self, msg: Allocated) -> None:
        with self.lock:
            c = self.containers.get(msg.lease_id)
            if c is not None:
                c.container_id = msg.container_id
        log.info("%s: container %s allocated on %s", msg.lease_id, msg.container_id, msg.node_id)

    def _started(self, msg: Started) -> None:
        now = time.time()
        with self.lock:
            c = self.containers.get(msg.lease_id)
            if c is None:
                return
            c.started_at = now
            self.latencies.append(now - c.asked_at)
        log.info("%s: container %s running %.2f s after its lease arrived",
                 msg.lease_id, msg.container_id, now - c.asked_at)  # fmt: skip

    def _completed(self, msg: Completed) -> None:
        with self.lock:
            c = self.containers.get(msg.lease_id)
            if c is None or (c.container_id and c.container_id != msg.container_id):
                return  # one we released
            del self.containers[msg.lease_id]
            self._accrue(time.time(), [c])
            if self.bracket is not None and msg.exit_status != 0:
                self.bracket.release(msg.lease_id)  # the trial runs again elsewhere
            if self.bracket is not None and msg.exit_status == 0:
                if self.bracket.exited(msg.lease_id, 0):
                    self._decide("SUCCEEDED", "the Hyperband bracket is done")
                else:
                    log.info("%s: trial done in %s; the lease part takes the next one",
                             msg.lease_id, msg.container_id)  # fmt: skip
            elif msg.exit_status == 0:
                log.info("%s: the job exited 0 in %s: done", msg.lease_id, msg.container_id)
                self._decide("SUCCEEDED", f"the job exited 0 in {msg.container_id}")
            elif msg.exit_status not in _NOT_THE_JOBS_FAULT:
                self.failures += 1
                log.warning("%s: the job failed in %s (exit %d, %d of %d allowed): %s",
                            msg.lease_id, msg.container_id, msg.exit_status, self.failures,
                            self.args.max_failures, msg.diagnostics)  # fmt: skip
                if self.failures > self.args.max_failures:
                    self._decide("FAILED", f"the job failed {self.failures} times; last exit "
                                 f"{msg.exit_status} in {msg.container_id}")  # fmt: skip
            else:
                log.info("%s: container %s ended by YARN (exit %d); asked again if still leased",
                         msg.lease_id, msg.container_id, msg.exit_status)  # fmt: skip
        self.wake.set()

    def _node_lost(self, msg: NodeLost) -> None:
        with self.lock:
            self.lost_at[msg.node_id] = time.time()
        log.warning("node %s lost: no container there until a new lease names it", msg.node_id)
        self.wake.set()

    def _shutdown(self, _msg: object) -> None:
        log.warning("the RM asked the AM to shut down")
        self.stop.set()
        self.wake.set()

    def _closed(self) -> None:
        self.stop.set()
        self.wake.set()

    # -- the reconciliation (main thread) ------------------------------------------------------

    def _decide(self, status: str, message: str) -> None:
        if self.outcome is None:
            self.outcome = (status, message)

    def _machine(self, gpu: str) -> str:
        g = self.agent.topology.get(gpu)
        if g is not None:
            return g.machine
        m = _GPU_ID.match(gpu)
        return m["machine"] if m else gpu

    def wanted(self, now: float) -> dict[tuple[str, frozenset[str]], str]:
        """(machine, GPUs) -> the lease id first naming it: the containers the app should have."""
        with self.agent._lock:
            leases = [x for x in self.agent.leases.values() if x.start <= now < x.end]
        out: dict[tuple[str, frozenset[str]], str] = {}
        taken: set[str] = set()
        parts = []
        for lease in leases:
            by_machine: dict[str, set[str]] = {}
            for g in lease.gpus:
                if self.revoked_at.get(g, -1.0) > self.granted_at.get(g, 0.0):
                    continue
                by_machine.setdefault(self._machine(g), set()).add(g)
            for machine, gpus in by_machine.items():
                if self.lost_at.get(machine, -1.0) > min(self.granted_at.get(g, 0.0) for g in gpus):
                    continue
                parts.append((len(gpus), lease.start, machine, frozenset(gpus), lease.lease_id))
        for _, _, machine, gpus, lid in sorted(parts, key=lambda p: (-p[0], p[1])):
            if gpus & taken:
                continue  # an older lease's copy of the same GPUs (a renewal in flight)
            taken |= gpus
            out[(machine, gpus)] = lid
        return out

    def _accrue(self, now: float, containers: Sequence[_Container]) -> None:
        with self.work.lock:
            for c in containers:
                if c.started_at is not None:
                    self.work.done_s += len(c.gpus) * (now - max(c.started_at, self._accrued_at))

    def reconcile(self, now: float) -> None:
        """One pass: release what is no longer leased, ask for what is newly leased, renew."""
        with self.lock:
            self._accrue(now, list(self.containers.values()))
            self._accrued_at = now
            if self.outcome is not None:
                return
            want = self.wanted(now)
            have = {(c.machine, c.gpus): c for c in self.containers.values()}
            for part, c in have.items():
                if part in want:
                    c.hold_until = None
                    continue
                revoked = any(
                    self.revoked_at.get(g, -1.0) > self.granted_at.get(g, 0.0) for g in c.gpus
                )
                if not revoked and c.started_at is not None and self.args.hold_seconds > 0:
                    if c.hold_until is None:
                        c.hold_until = now + self.args.hold_seconds
                        log.info("%s: lease ended; holding the container %.1f s for a renewal",
                                 c.key, self.args.hold_seconds)  # fmt: skip
                    if now < c.hold_until:
                        continue
                del self.containers[c.key]
                log.info("%s: %s; releasing %s", c.key, "revoked" if revoked else "lease over",
                         c.container_id or "its request")  # fmt: skip
                self.am.release(c.key)
                if self.bracket is not None:
                    self.bracket.release(c.key)
            held_gpus = {g for c in self.containers.values() for g in c.gpus}
            for (machine, gpus), lid in want.items():
                if (machine, gpus) in have or gpus & held_gpus:
                    continue  # kept, or still held by a container being released/held
                self._keys += 1
                key = f"{lid}@{machine}#{self._keys}"
                command = self.command
                if self.bracket is not None:
                    command = self.bracket.next_command(key)
                    if command is None:
                        continue  # every trial of the phase is running: the part waits
                self.containers[key] = _Container(key, machine, gpus, now)
                indices = tuple(sorted(gpu_index(g) for g in gpus))
                log.info("%s: asking YARN for %d GPU(s) %s on %s", key, len(gpus),
                         list(indices), machine)  # fmt: skip
                self.am.acquire(
                    key,
                    machine,
                    indices,
                    command,
                    memory_mb=self.args.memory_mb_per_gpu * len(gpus),
                    vcores=self.args.vcores_per_gpu * len(gpus),
                )
        self._renew(now)

    def _renew(self, now: float) -> None:
        with self.agent._lock:
            leases = [x for x in self.agent.leases.values() if x.start <= now < x.end]
        for x in leases:
            ahead = max(1.0, 0.25 * (x.end - x.start))
            if x.end - now > ahead or x.lease_id in self.renew_tried:
                continue
            self.renew_tried.add(x.lease_id)
            new = self.agent.renew(x.lease_id)
            if new is not None:
                log.info("lease %s renewed as %s until %.1f", x.lease_id, new.lease_id, new.end)

    def run(self) -> int:
        self.am.start()
        self.agent.start()
        log.info("sidecar up: arbiter app %s, up to %d GPU(s), %.0f GPU-s of work, job: %s",
                 self.agent.app_id, self.args.gpus, self.args.work_gpu_seconds,
                 self.command)  # fmt: skip
        deadline = self.started + self.args.timeout if self.args.timeout else math.inf
        while not self.stop.is_set():
            now = time.time()
            if self.agent.gave_up:
                why = self.agent.errors[-1] if self.agent.errors else "no reason given"
                self._decide("FAILED", f"the arbiter refused the app: {why}")
            if now > deadline:
                self._decide("FAILED", f"not done after --timeout {self.args.timeout:g} s")
            self.reconcile(now)
            if self.outcome is not None:
                break
            self.wake.wait(0.5)
            self.wake.clear()
        return self._end()

    def _end(self) -> int:
        self.agent.stop_async()
        released = self.agent.release_all()
        log.info("gave back %d lease(s) to the arbiter", len(released))
        if self.latencies:
            log.info("lease -> container running: %s s",
                     ", ".join(f"{x:.2f}" for x in self.latencies))  # fmt: skip
        if self.outcome is None:  # the AM is going (SHUTDOWN, closed): nothing to tell it
            return 1
        status, message = self.outcome
        log.info("finishing %s: %s", status, message)
        self.am.finish(status, message)
        self.am.closed.wait(60)  # the AM closes our stdin once it has unregistered
        return 0 if status == "SUCCEEDED" else 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m yarn_bridge.lease_am",
        description="Sidecar of the lease ApplicationMaster: bids for GPU leases and runs "
        "--command in one YARN container per leased machine (stdin/stdout: the AM protocol).",
    )
    job = p.add_mutually_exclusive_group()
    job.add_argument("--command", help="the job, run by bash -c in each container")
    job.add_argument("--command-b64", help="the same, base64-encoded (what submit passes)")
    p.add_argument("--hyperband", metavar="N:SAMPLES",
                   help="instead of the job, a Hyperband bracket of N train_job trials "
                   "from SAMPLES samples (Bracket; a --command is then ignored)")  # fmt: skip
    p.add_argument(
        "--trials-dir",
        default="trials",
        help="--hyperband: where the trials' checkpoints go (shared by containers)",
    )
    p.add_argument("--python", help="--hyperband: the python the trials run with")
    p.add_argument("--gpus", type=int, required=True, help="the job's maximum GPU demand")
    p.add_argument(
        "--work-gpu-seconds",
        type=float,
        default=3600.0,
        help="serial GPU-seconds of work left, for the bids (default 3600)",
    )
    p.add_argument("--iter-seconds", type=float, default=1.0, help="serial time of an iteration")
    p.add_argument("--cluster-gpus", type=int, default=0, help="R_C for T_id (default --gpus)")
    p.add_argument("--n-avg", type=float, default=2.0, help="N_avg for T_id (default 2)")
    p.add_argument("--memory-mb-per-gpu", type=int, default=1024, help="container memory per GPU")
    p.add_argument("--vcores-per-gpu", type=int, default=1, help="container vcores per GPU")
    p.add_argument(
        "--hold-seconds",
        type=float,
        default=2.0,
        help="keep a container this long after its lease ends, for a re-grant",
    )
    p.add_argument("--max-failures", type=int, default=3, help="job failures tolerated")
    p.add_argument("--timeout", type=float, default=0.0, help="fail after this (0 = never)")
    p.add_argument("--name", default="lease-am", help="app name if the sidecar registers")
    p.add_argument("--arbiter", help="arbiter host:port (default $YARN_ARBITER_ADDRESS)")
    args = p.parse_args(argv)
    if args.command_b64:
        try:
            args.command = base64.b64decode(args.command_b64, validate=True).decode()
        except ValueError as exc:
            p.error(f"--command-b64 is not base64 of UTF-8 text: {exc}")
    if args.gpus < 1:
        p.error("--gpus must be >= 1")
    if not (args.work_gpu_seconds > 0 and args.iter_seconds > 0 and args.n_avg >= 1):
        p.error("--work-gpu-seconds and --iter-seconds must be > 0, --n-avg >= 1")
    if args.hyperband:
        n, sep, samples = args.hyperband.partition(":")
        if not (sep and n.isdigit() and samples.isdigit() and int(n) >= 1 and int(samples) >= 1):
            p.error(f"--hyperband {args.hyperband!r} is not N:SAMPLES (two positive integers)")
        args.command = f"hyperband {args.hyperband}"
    elif not args.command:
        p.error("one of --command, --command-b64 or --hyperband is required")
    if "\t" in args.command or "\n" in args.command:
        p.error("--command cannot hold tabs or line breaks (one protocol line)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    protocol_out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # anything printed from here on goes to the log, not the protocol
    sys.stdout = sys.stderr
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s sidecar %(message)s"
    )
    return LeaseSidecar(args, sys.stdin, protocol_out).run()


if __name__ == "__main__":
    sys.exit(main())
