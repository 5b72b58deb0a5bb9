"""Why QOOP does (not) switch in the profile replay: the share changes a query lives through and
the gain a switch offers at each of them (QOOP §2.6.2, T:650-691; the helper of
``qoop_profiles.py``).

The paper attributes its gains to queries that see resource changes during their lifetime:
"longer jobs receive more opportunities for switching query plans" (T:677) and gains grow with
the magnitude of the changes (T:671). This module measures exactly that for every QOOP run of the
replay:

* :func:`change_on_offer`: at one share change, its factor ``max(new, old) / min(new, old)``
  (vcores; 1.1 is a 10 % rise, or a fall of 9 %) and the gain
  a switch offers right then, with the query's progress: the estimate of the plan running now at
  the new share over the best estimate of any cached plan at the new share (credit for finished
  and shared stages included, as :func:`qoop_planner.replan.decide` sees it). 1.0: the running
  plan is still the best; a switch happens only above ``1 / (1 - h)`` (hysteresis h).
* :func:`diagnose`: per class, how many changes fall inside a query's lifetime, how big they are,
  and how much a switch could gain at them.
* :func:`lifetime_events`: Fig. 2.3b's statistic of a profile (how many 10 / 15 / 20 % events a
  job of a given lifetime sees, T:392-394), to check a generated profile against the paper's.
* :func:`cache_audit` and :func:`profile_ab`: what the plan cache offers between two shares, and
  how much of each plan's work is in stages wide enough to keep any share busy.
* :func:`scale_plans`: every task's duration times a factor (the time scale of the replay: the
  paper's shared-cluster jobs take about 500 s on average, T:392).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Sequence

from qoop_planner.diverse import switch_gain
from qoop_planner.model import Plan, Progress, Share
from qoop_planner.packing import estimate


def change_on_offer(
    plans: Sequence[Plan], current: Plan, progress: Progress, old: Share, new: Share
) -> tuple[float, float]:
    """``(change factor, est(current at new) / min est(any plan at new))`` with ``progress``."""
    lo, hi = sorted((old.vcores, new.vcores))
    size = hi / lo if lo > 0 else math.inf
    now = estimate(current, progress, new).finish_s
    best = min(estimate(p, progress, new).finish_s for p in plans)
    if not math.isfinite(best) or best <= 0:
        return size, 1.0
    return size, now / best


def scale_plans(plans: Sequence[Plan], factor: float) -> list[Plan]:
    """The same plans with every task ``factor`` times as long (work and estimates scale)."""
    if not (factor > 0) or math.isinf(factor):
        raise ValueError(f"time scale must be a finite number > 0, got {factor}")
    out = []
    for p in plans:
        stages = tuple(
            dataclasses.replace(s, cost=dataclasses.replace(s.cost, task_s=s.cost.task_s * factor))
            for s in p.stages
        )
        out.append(dataclasses.replace(p, stages=stages, total_cost=p.total_cost * factor))
    return out


def _q(xs: Sequence[float], q: float) -> float | None:
    s = sorted(xs)
    return s[int(q * (len(s) - 1))] if s else None


def diagnose(runs: Sequence[dict], hysteresis: float) -> dict:
    """Per class: share changes inside a QOOP run's lifetime, their size, the gain on offer.

    ``runs``: run records with ``["qoop"]["changes"]`` (pairs from :func:`change_on_offer`) and
    ``["qoop"]["jct_s"]``."""
    per_run = [len(r["qoop"]["changes"]) for r in runs]
    sizes = [c for r in runs for c, _ in r["qoop"]["changes"]]
    gains = [g for r in runs for _, g in r["qoop"]["changes"] if math.isfinite(g)]
    threshold = 1 / (1 - hysteresis) if hysteresis < 1 else math.inf
    best_per_run = [max((g for _, g in r["qoop"]["changes"]), default=1.0) for r in runs]
    return {
        "runs": len(runs),
        "median_jct_s": statistics.median(r["qoop"]["jct_s"] for r in runs) if runs else None,
        "changes_per_run": {
            "mean": statistics.fmean(per_run) if per_run else None,
            "median": statistics.median(per_run) if per_run else None,
            "p90": _q(per_run, 0.9),
            "runs_with_none": sum(n == 0 for n in per_run) / len(per_run) if per_run else None,
        },
        "change_factor": {
            "median": statistics.median(sizes) if sizes else None,
            "p90": _q(sizes, 0.9),
            "max": max(sizes, default=None),
            "share_at_least_1_2x": sum(c >= 1.2 for c in sizes) / len(sizes) if sizes else None,
            "share_at_least_2x": sum(c >= 2.0 for c in sizes) / len(sizes) if sizes else None,
        },
        "gain_on_offer": {
            "median": statistics.median(gains) if gains else None,
            "p90": _q(gains, 0.9),
            "p99": _q(gains, 0.99),
            "max": max(gains, default=None),
            "changes": len(gains),
            "changes_over_hysteresis": sum(g > threshold for g in gains),
            "runs_with_gain_over_hysteresis": sum(g > threshold for g in best_per_run),
        },
    }


def volatility_events(
    times: Sequence[float], vcores: Sequence[float], start: float, end: float, x: float
) -> int:
    """The x % resource volatility events (T:392) a job alive from ``start`` to ``end`` sees:
    the share moving at least ``x`` (relative) away from where the last event left it."""
    import bisect

    i = bisect.bisect_right(times, start) - 1
    ref = vcores[i]
    n = 0
    for j in range(i + 1, len(times)):
        if times[j] >= end:
            break
        if ref > 0 and abs(vcores[j] / ref - 1) >= x - 1e-12:
            n += 1
            ref = vcores[j]
    return n


def lifetime_events(
    times: Sequence[float], vcores: Sequence[float], lifetime_s: float, hours: float, seed: int
) -> dict[str, dict[str, float]]:
    """Fig. 2.3b's statistic for a profile (T:392-394: 78 % of jobs see at least one 10 % event
    in their lifetime, 20 % at least four): over 2,000 jobs of ``lifetime_s`` started at random,
    the share with >= 1 and >= 4 events of 10 / 15 / 20 %."""
    import random

    rng = random.Random(seed)
    starts = [rng.uniform(0, hours * 3600 - lifetime_s) for _ in range(2000)]
    out = {}
    for x in (0.10, 0.15, 0.20):
        ev = [volatility_events(times, vcores, s, s + lifetime_s, x) for s in starts]
        out[f"{round(x * 100)}%"] = {
            "at_least_1": sum(e >= 1 for e in ev) / len(ev),
            "at_least_4": sum(e >= 4 for e in ev) / len(ev),
            "mean": statistics.fmean(ev),
        }
    return out


def cache_audit(queries: dict[int, list[Plan]], mb_per_vcore: float) -> dict:
    """What a cache offers (the audit's measures): plan-to-plan spreads at a few shares, and
    the most a switch could gain between two shares (the estimate at b of the plan best at a
    over the best at b), medians over the queries."""
    out: dict = {"queries": len(queries)}
    sh = {v: Share(v, v * mb_per_vcore) for v in (4, 13, 16, 24, 32, 67, 160, 640)}
    for v in (16, 32, 160, 640):
        # share of a plan's work in stages with at least as many tasks as the share has vcores:
        # there, every plan keeps the whole share busy, so time ~ work / share whatever the plan
        wide = [
            sum(s.cost.work for s in p.stages if s.cost.tasks >= v)
            / max(1e-9, sum(s.cost.work for s in p.stages))
            for plans in queries.values()
            for p in plans
        ]
        out[f"work_in_stages_wider_than_{v}_vcores"] = {
            "median": statistics.median(wide) if wide else None,
            "p10": _q(wide, 0.1),
        }
    for v in (16, 24, 160):
        ratios_worst, ratios_second = [], []
        for plans in queries.values():
            est = sorted(estimate(p, Progress(), sh[v]).finish_s for p in plans)
            if math.isfinite(est[0]) and est[0] > 0 and math.isfinite(est[-1]):
                ratios_worst.append(est[-1] / est[0])
                ratios_second.append(est[1] / est[0])
        out[f"at_{v}_vcores"] = {
            "median_worst_over_best": statistics.median(ratios_worst) if ratios_worst else None,
            "median_second_over_best": statistics.median(ratios_second) if ratios_second else None,
            "queries_second_within_15pct": sum(r <= 1.15 for r in ratios_second),
        }
    for a, b in ((16, 32), (13, 67), (4, 640), (16, 160)):
        for x, y in ((a, b), (b, a)):
            g = [switch_gain(plans, sh[x], sh[y]) for plans in queries.values()]
            g = [v for v in g if math.isfinite(v)]
            out[f"switch_gain_{x}_to_{y}"] = {
                "median": statistics.median(g) if g else None,
                "p90": sorted(g)[int(0.9 * (len(g) - 1))] if g else None,
            }
    out["queries_with_bushy_plan"] = sum(
        any(_plan_is_bushy(p) for p in plans) for plans in queries.values()
    )
    out["physical_profiles"] = dict(
        Counter(p.physical or "default" for plans in queries.values() for p in plans)
    )
    return out


def profile_ab(queries: dict[int, list[Plan]], lo: Share, hi: Share) -> dict:
    """The static A/B of the cache in simulation: every plan of every query estimated from
    scratch at a low and a high share of a profile (its p5 and p95); which plan is best at
    each, and what running the plan best at one share costs at the other."""
    per_query = {}
    for n, plans in queries.items():
        est = {
            p.plan_id: (estimate(p, Progress(), lo).finish_s, estimate(p, Progress(), hi).finish_s)
            for p in plans
        }
        b_lo = min(est, key=lambda pid: (est[pid][0], pid))
        b_hi = min(est, key=lambda pid: (est[pid][1], pid))
        phys = {p.plan_id: p.physical for p in plans}
        per_query[str(n)] = {
            "best_at_low": f"{b_lo} ({phys[b_lo]})",
            "best_at_high": f"{b_hi} ({phys[b_hi]})",
            "low_plan_at_high_over_best": est[b_lo][1] / est[b_hi][1],
            "high_plan_at_low_over_best": est[b_hi][0] / est[b_lo][0],
            "estimates_s": {pid: [round(a, 2), round(b, 2)] for pid, (a, b) in est.items()},
        }
    changes = [q for q in per_query.values() if q["best_at_low"] != q["best_at_high"]]
    up = sorted(q["low_plan_at_high_over_best"] for q in per_query.values())
    down = sorted(q["high_plan_at_low_over_best"] for q in per_query.values())
    return {
        "low_vcores": lo.vcores,
        "high_vcores": hi.vcores,
        "queries": len(per_query),
        "queries_best_plan_changes": len(changes),
        "median_low_plan_at_high_over_best": statistics.median(up) if up else None,
        "median_high_plan_at_low_over_best": statistics.median(down) if down else None,
        "queries_gain_over_hysteresis": sum(
            max(q["low_plan_at_high_over_best"], q["high_plan_at_low_over_best"]) > 1 / 0.85
            for q in per_query.values()
        ),
        "per_query": per_query,
    }


def _plan_is_bushy(plan: Plan) -> bool:
    kinds = {s.stage_id: s.kind for s in plan.stages}
    return any(s.kind == "join" and all(kinds[i] == "join" for i in s.inputs) for s in plan.stages)
