"""Themis replays give exactly the results they gave before the simulator's speed work.

The speed work (memoised rates, offers and holdings, ρ computed only when Themis reads it, the
app scheduler's and the leftover draw's fast paths; README "Speed") must not change a single
decision. The reference numbers below were computed with the code as it was at commit
``e0a4189`` (before any of that work; ``git archive e0a4189 arbiter`` and the same calls), on
small fixed replays chosen to exercise what the work touched: contention and preemptions
(150 Philly jobs on 32 GPUs), apps of many jobs (hyper-parameter and successive-halving apps,
so the app scheduler places several jobs per lease), and measured placement profiles with
multi-GPU gangs (Pollux workload-6 on ``nodes:16:4``, so bids enumerate splits over machines).
A digest of every job's (id, start, finish, preemptions) pins each job, not just the averages.
"""

from __future__ import annotations

import hashlib

import pytest

from arbiter.cluster import load_cluster
from arbiter.sim.apps import group_into_apps
from arbiter.sim.run import load_jobs, run_policy

DAY_40 = (40 * 86400.0, 41 * 86400.0)

# (trace, cluster, app kind) -> (decisions, avg JCT, preemptions, makespan, per-job digest)
REFERENCE = {
    ("philly", "nodes:4:8", "single"): (
        1767,
        10050.148339727264,
        664,
        448608.6976341636,
        "330d35e053841e9d",
    ),
    ("philly", "nodes:4:8", "hyperparameter"): (
        1124,
        9648.115148877314,
        381,
        446376.07531371305,
        "4d22fc3c11e47d46",
    ),
    ("philly", "nodes:4:8", "successive-halving"): (
        333,
        1471.3866287878789,
        49,
        56767.93181818182,
        "460b072cc8889f9c",
    ),
    ("pollux", "nodes:16:4", "single"): (
        700,
        3806.6113700828573,
        125,
        103407.79460631807,
        "d2718e527ae30c23",
    ),
    ("pollux", "nodes:16:4", "hyperparameter"): (
        679,
        5228.063979349243,
        266,
        100641.46356351912,
        "6663c367dac92323",
    ),
}


def _replay(trace: str, spec: str, kind: str) -> tuple:
    cluster = load_cluster(spec)
    if trace == "philly":  # the first 150 jobs of day 40
        jobs = load_jobs("philly/philly.csv", cluster=cluster, time_window=DAY_40, max_jobs=150)
    else:
        jobs = load_jobs("pollux/workloads/workload-6.csv", cluster=cluster)
    if kind != "single":
        jobs = group_into_apps(jobs, kind, (1, 15), seed=0)
    run = run_policy(jobs, cluster, "themis")
    rows = sorted((j.job_id, j.start_s, j.finish_s, j.preemptions) for j in run.result.jobs)
    s = run.summary
    digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:16]
    return s["decisions"], s["avg_jct_s"], s["preemptions"], s["makespan_s"], digest


@pytest.mark.parametrize("key", sorted(REFERENCE), ids=lambda k: "-".join(k))
def test_themis_replay_matches_the_reference(key: tuple[str, str, str]) -> None:
    assert _replay(*key) == REFERENCE[key]
