"""Example ML application master: successive halving over real small training jobs (CPU).

A Hyperband bracket (successive halving, T:1113-1127) tunes the learning rate of a logistic
regression trained by mini-batch SGD with numpy on a synthetic classification problem. Every
iteration is a real gradient step whose wall time is measured; the AM reports real iteration
times and validation losses, and keeps the better half of its configurations after each phase
(early stopping by loss).

GPUs are *virtual devices*: the machine has none, so a leased GPU id is a permit to run one
job's steps at a time (a job on g GPUs takes g steps per tick, the linear speedup of Eq. 1).
The AM bids through :class:`arbiter.agent.Agent` with the Eq. 2 estimator built from its own
bracket, whose per-iteration times are the measured ones.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from arbiter.agent import Agent, estimator_from_scheduler
from arbiter.fairness import SuccessiveHalving, t_id
from arbiter.placement import EMPTY as _EMPTY

__all__ = ["HyperbandAM", "TrainingJob"]


@dataclass
class TrainingJob:
    """Logistic regression on a fixed synthetic problem, trained by mini-batch SGD."""

    lr: float
    seed: int
    w: np.ndarray = field(init=False)
    iters: int = 0
    step_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.x = rng.normal(size=(2048, 32))
        true_w = rng.normal(size=32)
        self.y = (self.x @ true_w + rng.normal(scale=2.0, size=2048) > 0).astype(float)
        self.w = np.zeros(32)
        self.rng = rng

    def step(self) -> float:
        t = time.perf_counter()
        idx = self.rng.integers(0, 1536, size=128)
        xb, yb = self.x[idx], self.y[idx]
        p = 1.0 / (1.0 + np.exp(-(xb @ self.w)))
        self.w -= self.lr * xb.T @ (p - yb) / len(idx)
        self.iters += 1
        self.step_times.append(time.perf_counter() - t)
        return self.step_times[-1]

    def val_loss(self) -> float:
        xv, yv = self.x[1536:], self.y[1536:]
        p = np.clip(1.0 / (1.0 + np.exp(-(xv @ self.w))), 1e-9, 1 - 1e-9)
        return float(-np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p)))

    @property
    def iter_time(self) -> float:
        return statistics.median(self.step_times[-50:]) if self.step_times else 1e-3


class HyperbandAM:
    """One successive-halving bracket driven by the GPUs its Agent holds."""

    def __init__(
        self,
        target: str,
        *,
        name: str,
        configs: int = 4,
        iters_per_phase: tuple[int, ...] = (40, 80, 160),
        max_gpu_demand: int = 4,
        cluster_gpus: int = 64,
        n_avg: float = 4.0,
        time_scale: float = 1500.0,
        seed: int = 0,
        **agent_kwargs,
    ) -> None:
        """``agent_kwargs`` (``app_id``, ``token``, ``credentials``) go to the Agent: an AM
        submitted by ``yarn-arbiter submit`` is registered already."""
        self.name = name
        self.iters_per_phase = iters_per_phase
        self.jobs = [TrainingJob(lr=0.02 * 3**k, seed=seed) for k in range(configs)]
        self.phase = 0
        self.done_in_phase = [0] * configs
        self.started = time.time()
        self.finished_at: float | None = None
        self.best_loss: float | None = None
        self.final_rho: float | None = None  # elapsed / T_id at completion: realised ρ
        self.time_scale = time_scale  # a real step of ~0.05 ms stands for ~75 ms of GPU work
        self._lock = threading.RLock()
        for job in self.jobs:  # measure real iteration times before pricing anything
            for _ in range(5):
                job.step()
        scheduler = self._scheduler()
        self.agent = Agent(
            target,
            estimator=estimator_from_scheduler(
                _Live(self),
                t_id=t_id(scheduler.budget, cluster_gpus, max_gpu_demand, n_avg),
                job_demand_max=max_gpu_demand,
                elapsed=lambda: time.time() - self.started,
            ),
            max_gpu_demand=max_gpu_demand,
            app_name=name,
            heartbeat_seconds=0.5,
            **agent_kwargs,
        )

    def _scheduler(self) -> SuccessiveHalving:
        times = tuple(j.iter_time * self.time_scale for j in self.jobs)
        return SuccessiveHalving(
            self.iters_per_phase,
            times,
            current_phase=self.phase,
            done_in_current=tuple(self.done_in_phase),
        )

    def start(self) -> HyperbandAM:
        self.agent.start()
        threading.Thread(target=self._train, name=f"am-{self.name}", daemon=True).start()
        return self

    def stop(self) -> None:
        self.agent.stop()

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def _train(self) -> None:
        tick = 0.05
        while not self.finished and not self.agent.stopped:
            gpus = len(self.agent.held())
            if gpus:
                with self._lock:
                    self._advance(gpus, tick)
            time.sleep(tick)

    def _advance(self, gpus: int, tick: float) -> None:
        """Run the current phase's unfinished jobs on ``gpus`` virtual GPUs for one tick."""
        target = self.iters_per_phase[self.phase]
        active = [k for k in range(len(self.jobs)) if self.done_in_phase[k] < target]
        per_job = max(1, gpus // max(1, len(active)))
        for k in active[:gpus]:
            budget = tick * per_job
            spent = 0.0
            while spent < budget and self.done_in_phase[k] < target:
                spent += self.jobs[k].step() * self.time_scale
                self.done_in_phase[k] += 1
        if all(d >= target for d in self.done_in_phase):
            losses = [j.val_loss() for j in self.jobs]
            self.best_loss = min(losses)
            if self.phase + 1 == len(self.iters_per_phase) or len(self.jobs) == 1:
                self.finished_at = time.time()
                self.final_rho = self.agent.estimator(frozenset(), _EMPTY)
                self.agent.release_all()
                self.agent.stop_async()
                return
            keep = sorted(range(len(self.jobs)), key=lambda k: losses[k])[
                : max(1, len(self.jobs) // 2)
            ]
            self.jobs = [self.jobs[k] for k in keep]  # early stopping by loss
            self.phase += 1
            self.done_in_phase = [0] * len(self.jobs)


class _Live:
    """The AM's current bracket as an App-Scheduler (Fig. 8), rebuilt at each call."""

    def __init__(self, am: HyperbandAM) -> None:
        self.am = am

    def _now(self) -> SuccessiveHalving:
        with self.am._lock:
            return self.am._scheduler()

    def get_num_phases(self) -> int:
        return self._now().get_num_phases()

    def get_jobs_in_phase(self, phase, gpu_alloc):
        return self._now().get_jobs_in_phase(phase, gpu_alloc)

    def get_jobs_remaining(self, gpu_alloc):
        return self._now().get_jobs_remaining(gpu_alloc)


def main(argv: list[str] | None = None) -> int:
    """Run one bracket as a YARN application master (``yarn-arbiter submit --command
    'python -m arbiter.examples.hyperband_am --gpus 4'``) or by hand (``--arbiter HOST:PORT``)."""
    import argparse

    from arbiter.agent import agent_kwargs_from_env

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--arbiter", help="host:port (default $YARN_ARBITER_ADDRESS)")
    ap.add_argument("--gpus", type=int, default=4, help="max GPU demand (default 4)")
    ap.add_argument("--configs", type=int, default=4, help="configurations (default 4)")
    ap.add_argument("--name", default="hyperband", help="app name")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    args = ap.parse_args(argv)
    kwargs = agent_kwargs_from_env()
    target = args.arbiter or kwargs.pop("target", None)
    kwargs.pop("target", None)
    if not target:
        ap.error("no arbiter: pass --arbiter or set YARN_ARBITER_ADDRESS")
    am = HyperbandAM(
        str(target), name=args.name, configs=args.configs, max_gpu_demand=args.gpus, **kwargs
    ).start()
    deadline = time.time() + args.timeout
    while not am.finished and time.time() < deadline:
        time.sleep(0.2)
    am.stop()
    if not am.finished:
        print(f"{args.name}: not finished after {args.timeout:.0f} s")
        return 1
    print(f"{args.name}: finished; best validation loss {am.best_loss:.3f}, rho {am.final_rho:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
