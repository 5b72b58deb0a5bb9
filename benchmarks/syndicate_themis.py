"""Themis with locality-model bids against Themis with Syndicate-priced bids (spec §6.3; thesis
Eq. 3.1, T:1084-1103, and ch. 4).

A round-based replay of Themis's auction on 8 HGX-2-like nodes of 8 GPUs (64 GPUs): DLRM-like
apps (A1, A2, A3 of Table 4.2, the compute scale of ``syndicate_ranking.json``'s calibration)
arrive every 5 minutes, each wanting 16 GPUs for a fixed number of iterations. Every 10-minute
lease all GPUs are offered to the active apps; each app answers with the real bid generator
(:func:`arbiter.bids.generate_bid`) and the real PA mechanism
(:func:`arbiter.auction.partial_allocation`) decides; an app then runs the lease on the GPUs of
its PF allocation (hidden payments and leftover not modelled: the same for both variants).

Truth: an app's iteration time on a GPU set is Syndicate's prediction for its placement class
(:class:`syndicate.bridge.SyndicatePredictor`, the planner's steady-state period). The two
variants differ only in how the app prices GPU sets in its bids:

* ``locality``: T(dense |G|) x S(G) with the 1 / 1.1 / 1.3 locality model (T:1103), the app
  knowing its own dense scaling;
* ``syndicate``: T(class of G), through :class:`arbiter.placement.PredictedSlowdown`.

Reported: average JCT, max and mean ρ (JCT over the isolated time on 16 dense GPUs).

Usage: ``python benchmarks/syndicate_themis.py [--apps N ...] [--out PATH]`` (6 and 9 apps by
default).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from arbiter.auction import Bid, partial_allocation
from arbiter.bids import generate_bid
from arbiter.cluster import load_cluster
from arbiter.placement import LocalityModel, Placement, PredictedSlowdown, placement_of
from arbiter.tables import format_table
from syndicate.bridge import SyndicatePredictor
from syndicate.dag import dlrm
from syndicate.topology import hgx2

RESULTS = Path(__file__).resolve().parent / "results"
LEASE_S = 600.0
DEMAND = 16


@dataclass
class App:
    """Work is in GPU-iterations (samples / per-GPU batch): n GPUs do n per iteration."""

    name: str
    workload: str
    arrival: float
    work: float
    left: float
    finish: float | None = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, nargs="+", default=[6, 9])
    ap.add_argument("--budget", type=int, default=20, help="planner proposals per class")
    ap.add_argument("--out", type=Path, default=RESULTS / "syndicate_themis.json")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    ranking = json.loads((RESULTS / "syndicate_ranking.json").read_text())
    scale = ranking["calibration"]["compute_scale"]
    kappa = ranking["calibration"]["incast_kappa"]
    cluster = load_cluster("nodes:8:8")
    base = hgx2(8, 8, incast_kappa=kappa)
    predictors = {
        w: SyndicatePredictor(lambda n, w=w: dlrm(w, n).scaled(scale), base, budget=args.budget)
        for w in ("A1", "A2", "A3")
    }
    models = {w: PredictedSlowdown(p, gpus_per_machine=8) for w, p in predictors.items()}
    locality = LocalityModel()

    def true_time(w: str, placement: Placement) -> float:
        return models[w].iter_time(placement.per_machine)

    def dense_time(w: str, n: int) -> float:
        return models[w].iter_time(models[w].dense(n))

    def run(variant: str, n_apps: int) -> dict:
        apps = []
        for i in range(n_apps):
            w = ("A1", "A2", "A3")[i % 3]
            work = 2 * 3600.0 * DEMAND / dense_time(w, DEMAND)  # two hours on 16 dense GPUs
            apps.append(App(f"{w}-{i}", w, 300.0 * i, work, work))
        t = 0.0
        offered = frozenset(g.id for g in cluster.gpus)
        dense16 = frozenset(g.id for g in cluster.gpus if g.machine in ("node-000", "node-001"))
        rounds = 0
        while any(a.finish is None for a in apps):
            active = [a for a in apps if a.arrival <= t and a.finish is None]
            if not active:
                t = min(a.arrival for a in apps if a.finish is None)
                continue
            bids: list[Bid] = []
            for a in active:
                t_iso = a.work * dense_time(a.workload, DEMAND) / DEMAND
                elapsed = t - a.arrival

                def rho(
                    gpus: frozenset[str],
                    pl: Placement,
                    a: App = a,
                    t_iso: float = t_iso,
                    elapsed: float = elapsed,
                ) -> float:
                    if not gpus:  # nothing for one more lease, then 16 dense GPUs
                        gpus, pl = dense16, placement_of(cluster, dense16)
                        wait = LEASE_S
                    else:
                        wait = 0.0
                    if variant == "syndicate":
                        it = true_time(a.workload, pl)
                    else:
                        it = dense_time(a.workload, len(gpus)) * locality.slowdown(pl)
                    return (elapsed + wait + a.left * it / len(gpus)) / t_iso

                bids.append(generate_bid(a.name, cluster, offered, rho, demand_max=DEMAND))
            result = partial_allocation(bids, offered)
            rounds += 1
            for a in active:
                gpus = result.pf_allocation.get(a.name, frozenset())
                if not gpus:
                    continue
                it = true_time(a.workload, placement_of(cluster, gpus))
                done = LEASE_S * len(gpus) / it
                if done >= a.left:
                    a.finish = t + a.left * it / len(gpus)
                    a.left = 0.0
                else:
                    a.left -= done
            t += LEASE_S
        jct = [a.finish - a.arrival for a in apps if a.finish is not None]
        rhos = [
            (a.finish - a.arrival) / (a.work * dense_time(a.workload, DEMAND) / DEMAND)
            for a in apps
            if a.finish is not None
        ]
        return {
            "avg_jct_s": sum(jct) / len(jct),
            "max_rho": max(rhos),
            "avg_rho": sum(rhos) / len(rhos),
            "rounds": rounds,
        }

    out = {str(n): {v: run(v, n) for v in ("locality", "syndicate")} for n in args.apps}
    rows = [
        [
            n,
            v,
            f"{r['avg_jct_s']:,.0f}",
            f"{r['avg_rho']:.3f}",
            f"{r['max_rho']:.3f}",
            str(r["rounds"]),
        ]
        for n, by_variant in out.items()
        for v, r in by_variant.items()
    ]
    print(
        format_table(
            ["apps", "bids", "avg JCT s", "avg ρ", "max ρ", "rounds"], rows, align=">>>>>>"
        )
    )
    classes = {w: len(p.cache) for w, p in predictors.items()}
    total = time.perf_counter() - t_start
    print(f"placement classes planned: {classes}; total {total:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "syndicate_themis",
                "machine": platform.platform(),
                "python": sys.version.split()[0],
                "apps": args.apps,
                "lease_s": LEASE_S,
                "demand": DEMAND,
                "planner_budget": args.budget,
                "variants": out,
                "classes_planned": classes,
                "slowdowns": {
                    w: {
                        "/".join(map(str, c)): models[w].iter_time(c) / dense_time(w, sum(c))
                        for c in sorted(p.cache)
                    }
                    for w, p in predictors.items()
                },
                "total_s": total,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    print(f"wrote {args.out}")
    finite = all(math.isfinite(r["max_rho"]) for b in out.values() for r in b.values())
    return 0 if finite else 1


if __name__ == "__main__":
    raise SystemExit(main())
