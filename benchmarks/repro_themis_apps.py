"""Themis's headline max-ρ claims, rerun over *apps* (finish-time fairness per app).

The paper (P:412, spec qoop-themis.md B.11): over hyper-parameter apps (Workload 1, Philly, the
64-GPU testbed, Fig. 9, and the 256-GPU simulator) Themis's max ρ is 2.2x / 2.25x / 1.75x
better than Gandiva / Tiresias / Optimus. ``sim_themis.py`` and ``repro_themis_baselines.py``
compare per *job*; this benchmark groups the jobs into apps and compares max ρ_app, the metric
the claim is about.

Workload (``sim_themis.py``'s): Philly ``philly/philly.csv`` jobs arriving in days 40-42
(``--quick``: 40-40.5), 30 min to 1 day long, 1-8 GPUs, sampled (seed 0) to an offered load of
1.0 on the part's cluster, grouped with ``group_into_apps(jobs, kind, (1, 15), seed)``
(:mod:`arbiter.sim.apps`). Each part computes the isolated run and the app denominator once and
shares them across its runs. Parts:

1. ``testbed``: ``themis-testbed`` (64 GPUs), kinds ``hyperparameter`` and
   ``successive-halving``: themis at f = 0.8 (the paper's), 0.9, 0.95 against las, fifo,
   gandiva, tiresias, optimus. Successive halving stops most trials early, which leaves about a
   quarter of the GPU-time; Workload 2 has "more tasks per job" (B.11), so its jobs' work is
   scaled back to Workload 1's total (offered load 1.0, same arrivals and apps).
2. ``simulator``: ``themis-sim-256``, kind ``hyperparameter``, the same policies (``--quick``:
   a 6-hour window, days 40-40.25).
3. ``sweeps``: testbed hyperparameter, themis only, f x lease_s.
4. ``stress``: kind ``single`` (every job its own app) on the testbed: themis vs las, gandiva,
   tiresias (target: never worse than LAS, ratio >= 1).
5. ``ablation``: testbed hyperparameter and single, themis f = 0.9 with ``rho_old="infinite"``
   (the lexicographic Gap 2 rule) and ``filter_over="wanting"`` against the default.

Ratios are baseline max ρ_app / Themis max ρ_app (> 1: Themis wins, as in the paper's 2.2 /
2.25 / 1.75). A run repeated by a later part (same cluster, window, kind, policy and knobs) is
taken from the earlier one (``reused: true`` in its record). Themis leases default to 10
minutes; las uses its 360 s rounds; the other baselines take no knobs.

Usage: ``python benchmarks/repro_themis_apps.py [--quick] [--parts testbed,simulator,sweeps,
stress,ablation] [--seed N] [--out PATH]``; results in ``benchmarks/results/repro_themis_apps.json``
(``repro_themis_apps_quick.json`` for ``--quick``). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from arbiter.cluster import Cluster, load_cluster
from arbiter.rounds import DEFAULT_LEASE_SECONDS
from arbiter.sim.apps import group_into_apps
from arbiter.sim.engine import isolated_run
from arbiter.sim.perf import SimJob
from arbiter.sim.run import app_denominator, load_jobs, run_policy
from arbiter.tables import format_table

RESULTS = Path(__file__).resolve().parent / "results"
PAPER = {"gandiva": 2.2, "tiresias": 2.25, "optimus": 1.75}  # max ρ gain of Themis, P:412
PAPER_F = 0.8
PARTS = ("testbed", "simulator", "sweeps", "stress", "ablation")
BASELINES = ("las", "fifo", "gandiva", "tiresias", "optimus")
SUMMARY_KEYS = (
    "max_rho_app", "avg_rho_app", "avg_act_s", "max_rho", "avg_jct_s", "gpu_time_s",
    "placement_score",
)  # fmt: skip
THEMIS_DEFAULTS = {"lease_s": DEFAULT_LEASE_SECONDS, "rho_old": "one-lease", "filter_over": "all"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Workload:
    cluster: Cluster
    kind: str
    window: tuple[float, float]
    jobs: list[SimJob]
    iso: dict[str, float] = field(repr=False)
    iso_apps: dict[str, float] = field(repr=False)

    @property
    def key(self) -> tuple:
        return (self.cluster.name, self.window, self.kind)


def workload(cluster_name: str, days: float, kind: str, seed: int) -> Workload:
    cluster = load_cluster(cluster_name)
    window = (40 * 86400.0, (40 + days) * 86400.0)
    jobs = load_jobs(
        "philly/philly.csv", cluster=cluster, time_window=window, target_load=1.0,
        max_gpus=8, min_duration_s=1800, max_duration_s=86400, seed=seed,
    )  # fmt: skip
    before = sum(j.gang * j.work for j in jobs)
    jobs = group_into_apps(jobs, kind, (1, 15), seed)
    if kind == "successive-halving":
        # Workload 2 is Workload 1's apps with "more tasks per job" (B.11): stopped trials cut
        # the GPU-time to about a quarter, so every job's work is scaled back up to Workload
        # 1's total, keeping the offered load at 1.0 (arrivals and app structure unchanged).
        scale = before / sum(j.gang * j.work for j in jobs)
        jobs = [replace(j, work=j.work * scale) for j in jobs]
    t0 = time.perf_counter()
    iso = isolated_run(jobs, cluster)
    iso_apps = app_denominator(jobs, cluster, iso)
    log(
        f"[{cluster.name} days 40-{40 + days:g} {kind}] {len(jobs)} jobs, {len(iso_apps)} apps "
        f"(denominators {time.perf_counter() - t0:.1f} s)"
    )
    return Workload(cluster, kind, window, jobs, iso, iso_apps)


def themis(f: float, **knobs) -> tuple[str, str, dict]:
    """(label, policy, knobs) of a themis run; the label names the knobs off the default."""
    full = {"fairness_knob": f, **THEMIS_DEFAULTS, **knobs}
    extra = [
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in full.items()
        if k != "fairness_knob" and v != THEMIS_DEFAULTS[k]
    ]
    return " ".join([f"themis f={f:g}", *extra]), "themis", full


def baseline(name: str) -> tuple[str, str, dict]:
    return name, name, {}


class Runner:
    """Runs (label, policy, knobs) on a workload; a repeat of an earlier run is reused."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.cache: dict[tuple, dict] = {}

    def run(self, wl: Workload, label: str, policy: str, knobs: dict) -> dict:
        key = (*wl.key, policy, tuple(sorted(knobs.items())))
        if key in self.cache:
            log(f"  {label}: reused")
            return {**self.cache[key], "label": label, "reused": True}
        t0 = time.perf_counter()
        run = run_policy(
            wl.jobs, wl.cluster, policy, isolated=wl.iso, isolated_apps=wl.iso_apps,
            seed=self.seed, **knobs,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        s = run.summary
        rec = {
            "label": label, "policy": policy, "knobs": knobs, "kind": wl.kind,
            "cluster": wl.cluster.name, "jobs": s["jobs"], "apps": s["apps"],
            "finished": s["finished"], "apps_finished": s["apps_finished"],
            **{k: s[k] for k in SUMMARY_KEYS}, "wall_s": round(wall, 2), "reused": False,
        }  # fmt: skip
        self.cache[key] = rec
        log(f"  {label}: max ρ_app {s['max_rho_app']:.2f}, max ρ {s['max_rho']:.2f} ({wall:.1f} s)")
        return rec


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


HEAD = ["label", "max ρ (app)", "avg ρ (app)", "avg ACT s", "max ρ (job)", "GPU time h",
        "placement", "wall s"]  # fmt: skip


def _cells(r: dict) -> list[str]:
    return [
        r["label"], _f(r["max_rho_app"]), _f(r["avg_rho_app"]), _f(r["avg_act_s"], ",.0f"),
        _f(r["max_rho"]), _f(r["gpu_time_s"] / 3600, ",.0f"), _f(r["placement_score"], ".3f"),
        _f(r["wall_s"], ".0f") + (" (reused)" if r["reused"] else ""),
    ]  # fmt: skip


def print_table(title: str, rows: list[dict], extra: dict[str, dict[str, str]] | None = None):
    """Rows plus extra columns: ``extra[column][label]`` (blank where missing)."""
    extra = extra or {}
    print(f"\n== {title}")
    print(format_table(
        HEAD + list(extra),
        [_cells(r) + [col.get(r["label"], "") for col in extra.values()] for r in rows],
    ))  # fmt: skip


def versus(rows: list[dict], fs: tuple[float, ...], kind: str, cluster: str) -> tuple[list, dict]:
    """Ratio records of a themis-vs-baselines table: baseline max ρ_app / themis max ρ_app per
    f, and themis avg ACT / the best baseline avg ACT; plus the table's extra columns."""
    by = {r["label"]: r for r in rows}
    base = [r for r in rows if r["policy"] != "themis"]
    ratios, extra = [], {}
    for f in fs:
        t = by[themis(f)[0]]
        col = extra.setdefault(f"÷ themis f={f:g}", {})
        for b in base:
            ratio = b["max_rho_app"] / t["max_rho_app"]
            ratios.append({
                "metric": "max_rho_app baseline / themis", "kind": kind, "cluster": cluster,
                "baseline": b["policy"], "themis_f": f, "baseline_max_rho_app": b["max_rho_app"],
                "themis_max_rho_app": t["max_rho_app"], "ratio": ratio,
                "paper_ratio": PAPER.get(b["policy"]),
            })  # fmt: skip
            col[b["label"]] = f"{ratio:.2f}"
    best = min(base, key=lambda b: b["avg_act_s"])
    col = extra.setdefault("ACT / best base", {})
    for f in fs:
        t = by[themis(f)[0]]
        ratio = t["avg_act_s"] / best["avg_act_s"]
        ratios.append({
            "metric": "avg_act_s themis / best baseline", "kind": kind, "cluster": cluster,
            "themis_f": f, "best_baseline": best["policy"], "themis_avg_act_s": t["avg_act_s"],
            "baseline_avg_act_s": best["avg_act_s"], "ratio": ratio,
        })  # fmt: skip
        col[t["label"]] = f"{ratio:.2f} ({best['policy']})"
    return ratios, extra


def part_versus(runner, cluster, days, kind, fs, seed, title) -> dict:
    wl = workload(cluster, days, kind, seed)
    rows = [runner.run(wl, *themis(f)) for f in fs]
    rows += [runner.run(wl, *baseline(b)) for b in BASELINES]
    ratios, extra = versus(rows, fs, kind, cluster)
    print_table(f"{title}: {cluster}, {kind}, {len(wl.jobs)} jobs, {len(wl.iso_apps)} apps",
                rows, extra)  # fmt: skip
    return {"window_s": wl.window, "runs": rows, "ratios": ratios}


def part_testbed(runner, quick, seed) -> dict:
    days = 0.5 if quick else 2.0
    return {
        kind: part_versus(runner, "themis-testbed", days, kind, (0.8, 0.9, 0.95), seed, "testbed")
        for kind in ("hyperparameter", "successive-halving")
    }


def part_simulator(runner, quick, seed) -> dict:
    days = 0.25 if quick else 2.0
    fs = (0.8, 0.9, 0.95)
    return {"hyperparameter": part_versus(runner, "themis-sim-256", days, "hyperparameter", fs,
                                          seed, "simulator")}  # fmt: skip


def part_sweeps(runner, quick, seed) -> dict:
    wl = workload("themis-testbed", 0.5 if quick else 2.0, "hyperparameter", seed)
    if quick:
        grid = [(f, 600.0) for f in (0.8, 0.9, 0.95)] + [(0.9, 300.0), (0.9, 1200.0)]
    else:
        grid = [(f, lease) for f in (0.7, 0.8, 0.9, 0.95) for lease in (300.0, 600.0, 1200.0)]
    rows = [
        runner.run(wl, f"themis f={f:g} lease={lease:g}", *themis(f, lease_s=lease)[1:])
        for f, lease in grid
    ]
    print_table(f"sweeps: themis-testbed, hyperparameter, {len(wl.jobs)} jobs, "
                f"{len(wl.iso_apps)} apps", rows)  # fmt: skip
    return {"hyperparameter": {"window_s": wl.window, "runs": rows, "ratios": []}}


def part_stress(runner, quick, seed) -> dict:
    wl = workload("themis-testbed", 0.5 if quick else 2.0, "single", seed)
    fs = (0.8, 0.9, 0.95)
    rows = [runner.run(wl, *themis(f)) for f in fs]
    rows += [runner.run(wl, *baseline(b)) for b in ("las", "gandiva", "tiresias")]
    las = next(r for r in rows if r["policy"] == "las")
    ratios, col = [], {}
    for f in fs:
        t = next(r for r in rows if r["label"] == themis(f)[0])
        ratio = las["max_rho_app"] / t["max_rho_app"]
        ratios.append({
            "metric": "max_rho_app las / themis", "kind": "single", "cluster": wl.cluster.name,
            "baseline": "las", "themis_f": f, "baseline_max_rho_app": las["max_rho_app"],
            "themis_max_rho_app": t["max_rho_app"], "ratio": ratio, "target": ">= 1",
        })  # fmt: skip
        col[t["label"]] = f"{ratio:.2f}"
    print_table(f"stress: themis-testbed, single, {len(wl.jobs)} jobs",
                rows, {"LAS max ρ / max ρ": col})  # fmt: skip
    return {"single": {"window_s": wl.window, "runs": rows, "ratios": ratios}}


def part_ablation(runner, quick, seed) -> dict:
    out = {}
    variants = [themis(0.9), themis(0.9, rho_old="infinite"), themis(0.9, filter_over="wanting")]
    for kind in ("hyperparameter", "single"):
        wl = workload("themis-testbed", 0.5 if quick else 2.0, kind, seed)
        rows = [runner.run(wl, *v) for v in variants]
        default = rows[0]
        ratios, col = [], {}
        for r in rows[1:]:
            ratio = r["max_rho_app"] / default["max_rho_app"]
            ratios.append({
                "metric": "max_rho_app variant / default", "kind": kind,
                "cluster": wl.cluster.name, "variant": r["label"], "default": default["label"],
                "ratio": ratio, "avg_act_ratio": r["avg_act_s"] / default["avg_act_s"],
            })  # fmt: skip
            col[r["label"]] = f"{ratio:.2f}"
        print_table(f"ablation: themis-testbed, {kind}, {len(wl.jobs)} jobs, "
                    f"{len(wl.iso_apps)} apps", rows, {"max ρ_app / default": col})  # fmt: skip
        out[kind] = {"window_s": wl.window, "runs": rows, "ratios": ratios}
    return out


PART_FUNCS = {
    "testbed": part_testbed, "simulator": part_simulator, "sweeps": part_sweeps,
    "stress": part_stress, "ablation": part_ablation,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="12-hour window (6 h for simulator)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of parts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown parts {unknown} (known: {', '.join(PARTS)})")
    out = args.out or RESULTS / (
        "repro_themis_apps_quick.json" if args.quick else "repro_themis_apps.json"
    )
    runner = Runner(args.seed)
    t0 = time.perf_counter()
    doc: dict = {
        "machine": platform.platform(),
        "quick": args.quick,
        "seed": args.seed,
        "window_days": {
            "start": 40,
            "days": 0.5 if args.quick else 2.0,
            "simulator_days": 0.25 if args.quick else 2.0,
        },
        "workload": "philly/philly.csv, 30 min-1 day, 1-8 GPUs, target_load 1.0 per cluster, "
        "group_into_apps(kind, (1, 15), seed)",
        "paper": {"max_rho_gain": PAPER, "themis_f": PAPER_F, "cite": "P:412"},
        "parts": {},
    }
    for part in parts:
        log(f"== part {part}")
        doc["parts"][part] = PART_FUNCS[part](runner, args.quick, args.seed)
        doc["total_wall_s"] = round(time.perf_counter() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")  # after every part: partial results
    print(
        f"\npaper (P:412): Themis max ρ_app {PAPER['gandiva']}x / {PAPER['tiresias']}x / "
        f"{PAPER['optimus']}x better than Gandiva / Tiresias / Optimus (f = {PAPER_F})"
    )
    log(f"wrote {out} ({doc.get('total_wall_s', 0):.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
