"""Seeded synthetic Themis apps for the demo, the benchmarks and property tests.

Each app is a single-job app priced by Equation 1 (:func:`arbiter.fairness.rho_single_job`)
with the 4-level :class:`~arbiter.placement.LocalityModel`; its parameters are drawn from
ranges shaped like the Philly trace the Themis paper uses (T:806-812): mostly small gangs
(max demand 1, 2, 4 or 8 GPUs), hours-long jobs, some locality-insensitive models. An
instance is then a random offer on a shipped cluster and one bid per app, produced by the real
bid generator (:func:`arbiter.bids.generate_bid`), so benchmarks time what the arbiter sees.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from arbiter.auction import Bid
from arbiter.bids import generate_bid
from arbiter.cluster import Cluster
from arbiter.fairness import iter_time, rho_single_job, t_id
from arbiter.placement import LocalityModel, Placement

__all__ = ["SyntheticApp", "random_apps", "random_instance"]


@dataclass(frozen=True)
class SyntheticApp:
    app_id: str
    demand_max: int
    iter_time_serial: float
    iters_total: int
    iters_left: int
    elapsed: float
    n_avg: float
    locality: LocalityModel

    def rho(self, cluster_gpus: int):
        """The app's ρ estimator (Eq. 1) for a cluster of ``cluster_gpus`` GPUs."""
        tid = t_id(
            self.iters_total * self.iter_time_serial, cluster_gpus, self.demand_max, self.n_avg
        )

        def estimate(gpus: frozenset[str], placement: Placement) -> float:
            return rho_single_job(
                elapsed=self.elapsed,
                iters_left=self.iters_left,
                iter_time_serial=self.iter_time_serial,
                slowdown=self.locality.slowdown(placement),
                gpus=len(gpus),
                demand_max=self.demand_max,
                t_id=tid,
            )

        return estimate

    def advance(self, dt: float, gpus: int, slowdown: float) -> SyntheticApp:
        """The app ``dt`` seconds later, having run on ``gpus`` GPUs with slowdown S."""
        done = (
            0
            if gpus == 0
            else int(dt / iter_time(self.iter_time_serial, slowdown, gpus, self.demand_max))
        )
        return replace(self, elapsed=self.elapsed + dt, iters_left=max(0, self.iters_left - done))


def random_apps(n: int, rng: random.Random, prefix: str = "app") -> list[SyntheticApp]:
    apps = []
    for k in range(n):
        demand = rng.choice((1, 2, 2, 4, 4, 8))
        total = rng.randint(1_000, 20_000)
        sensitive = rng.random() < 0.6  # network-intensive share of the model mix
        apps.append(
            SyntheticApp(
                app_id=f"{prefix}-{k:03d}",
                demand_max=demand,
                iter_time_serial=rng.uniform(0.2, 2.0),
                iters_total=total,
                iters_left=rng.randint(total // 10, total),
                elapsed=rng.uniform(0, 3_600),
                n_avg=rng.uniform(1.5, 8.0),
                locality=LocalityModel(1.0, 1.0, 1.3, 1.6)
                if sensitive
                else LocalityModel(1.0, 1.0, 1.02, 1.05),
            )
        )
    return apps


def random_instance(
    cluster: Cluster, apps: int, gpus: int, rows: int, seed: int, held_share: float = 0.5
) -> tuple[list[Bid], frozenset[str]]:
    """``apps`` bids of at most ``rows`` rows for a random offer of ``gpus`` GPUs of ``cluster``.

    Like a Themis round after some leases expired: each app already holds, with probability
    ``held_share``, a few GPUs outside the offer (fewer than its max demand; its ρ_old is then
    finite), the others hold nothing (ρ_old = ∞).
    """
    rng = random.Random(seed)
    if gpus > cluster.num_gpus:
        raise ValueError(
            f"offer of {gpus} GPUs exceeds cluster {cluster.name!r} ({cluster.num_gpus})"
        )
    everything = sorted(cluster.gpu_ids)
    offered = frozenset(rng.sample(everything, gpus))
    free = [g for g in everything if g not in offered]
    rng.shuffle(free)
    bids = []
    for app in random_apps(apps, rng):
        held: frozenset[str] = frozenset()
        if app.demand_max > 1 and free and rng.random() < held_share:
            take = rng.randint(1, min(app.demand_max - 1, len(free)))
            held, free = frozenset(free[:take]), free[take:]
        bids.append(
            generate_bid(
                app.app_id,
                cluster,
                offered,
                app.rho(cluster.num_gpus),
                demand_max=app.demand_max,
                held=held,
                max_rows=rows,
            )
        )
    return bids, offered
