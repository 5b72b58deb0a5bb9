"""App workloads for the simulator: trace jobs grouped into Themis's hyper-parameter apps.

Themis measures finish-time fairness over *apps* (Themis §5 / the thesis evaluation, spec
B.11): an app is a hyper-parameter search of many jobs, and ρ of the app is its completion time
over its completion time alone on a 1/N share of the cluster
(:func:`arbiter.sim.engine.isolated_app_run`). A trace gives jobs, so :func:`group_into_apps`
builds the apps:

* ``single``: every job is its own app (the trace as it is).
* ``hyperparameter`` (**Workload 1**, Hyperdrive-like): the jobs, in arrival order, are cut into
  consecutive groups of k jobs, k uniform in [A, B] (``jobs_per_app``, default 1-15) drawn with
  ``random.Random(seed)``. A group is one app ``app-<n>`` (zero-padded, so ids sort in arrival
  order) and every job of it arrives at the group's first arrival: a hyper-parameter app submits
  all its configurations at once. Job ids, work, gang and perf model are kept.
* ``successive-halving`` (**Workload 2**, asynchronous successive halving / ASHA, reduction
  factor 2): the same groups; within an app the k jobs are ranked by a seeded random quality and,
  with r = ceil(log2 k) rungs, a job that survives i rungs runs work x 2^(i - r) of its trace
  work: the best survives all r and runs its whole trace work, the worst half stop after the
  first rung (2^-r of it), and ceil(k / 2^i) jobs survive rung i.

Choices the papers leave open (spec B.11 gives the distributions only as figures):

* Workload 2 keeps Workload 1's gangs; the thesis's "more tasks per job" is not modelled.
* Promotion is *asynchronous*: a job's work is fixed up front (its rung budget), so no job waits
  at a rung barrier for the others to finish the rung. A synchronous successive halving would
  also idle the survivors until the rung completes; here they keep running.
* Qualities are drawn independently of the trace (a job's trace duration says nothing about its
  accuracy), and group sizes are drawn before any quality, so both kinds make the same apps.

>>> from arbiter.sim.perf import SimJob, SlowdownPerf
>>> jobs = [SimJob(f"j{i}", 10.0 * i, 1, 800.0, SlowdownPerf()) for i in range(6)]
>>> apps = group_into_apps(jobs, "hyperparameter", (3, 3))
>>> [(j.job_id, j.app_id, j.arrival_s) for j in apps]  # doctest: +NORMALIZE_WHITESPACE
[('j0', 'app-0', 0.0), ('j1', 'app-0', 0.0), ('j2', 'app-0', 0.0),
 ('j3', 'app-1', 30.0), ('j4', 'app-1', 30.0), ('j5', 'app-1', 30.0)]
>>> sorted(j.work for j in group_into_apps(jobs, "successive-halving", (3, 3)))
[200.0, 200.0, 400.0, 400.0, 800.0, 800.0]
>>> group_into_apps(jobs, "hyperparameter", (4, 2))
Traceback (most recent call last):
...
ValueError: jobs_per_app must be (A, B) with 1 <= A <= B, got (4, 2)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace

from arbiter.sim.perf import SimJob

__all__ = ["APP_KINDS", "asha_fractions", "group_into_apps", "group_sizes"]

APP_KINDS = ("single", "hyperparameter", "successive-halving")


def _check(kind: str, jobs_per_app: tuple[int, int]) -> None:
    if kind not in APP_KINDS:
        raise ValueError(f"unknown app kind {kind!r} (known: {', '.join(APP_KINDS)})")
    try:
        low, high = jobs_per_app
    except (TypeError, ValueError):
        raise ValueError(f"jobs_per_app must be a pair (A, B), got {jobs_per_app!r}") from None
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        raise ValueError(f"jobs_per_app must be (A, B) with 1 <= A <= B, got {jobs_per_app!r}")


def group_sizes(n: int, jobs_per_app: tuple[int, int], rng: random.Random) -> list[int]:
    """Sizes of consecutive groups covering ``n`` jobs, each uniform in [A, B] (the last one
    cut short to what is left).

    >>> group_sizes(10, (3, 3), random.Random(0))
    [3, 3, 3, 1]
    """
    low, high = jobs_per_app
    sizes: list[int] = []
    left = n
    while left > 0:
        k = min(rng.randint(low, high), left)
        sizes.append(k)
        left -= k
    return sizes


def asha_fractions(k: int) -> list[float]:
    """Fraction of its trace work the job of quality rank p (0 = best) of a k-job app runs
    under successive halving with reduction factor 2 (module docstring).

    >>> asha_fractions(1), asha_fractions(2), asha_fractions(5)
    ([1.0], [1.0, 0.5], [1.0, 0.5, 0.25, 0.125, 0.125])
    """
    if k < 1:
        raise ValueError(f"an app has at least one job, got {k}")
    rungs = math.ceil(math.log2(k)) if k > 1 else 0
    out = []
    for p in range(k):
        survived = max(i for i in range(rungs + 1) if p < math.ceil(k / 2**i))
        out.append(2.0 ** (survived - rungs))
    return out


def group_into_apps(
    jobs: Sequence[SimJob],
    kind: str,
    jobs_per_app: tuple[int, int] = (1, 15),
    seed: int = 0,
) -> list[SimJob]:
    """The jobs of a trace as apps of ``kind`` (module docstring), in arrival order.

    ``single`` returns the jobs unchanged. Raises ValueError for an unknown kind or a bad
    ``jobs_per_app`` range.
    """
    _check(kind, jobs_per_app)
    if kind == "single":
        return list(jobs)
    order = sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
    rng = random.Random(seed)
    sizes = group_sizes(len(order), jobs_per_app, rng)  # all drawn first: same apps per kind
    width = len(str(max(len(sizes) - 1, 0)))
    out: list[SimJob] = []
    start = 0
    for n, k in enumerate(sizes):
        group = order[start : start + k]
        start += k
        app_id, arrival = f"app-{n:0{width}d}", group[0].arrival_s
        fraction = [1.0] * k
        if kind == "successive-halving":
            ranks = list(range(k))
            rng.shuffle(ranks)  # ranks[i]: quality rank of the group's i-th job (0 = best)
            by_rank = asha_fractions(k)
            fraction = [by_rank[r] for r in ranks]
        out.extend(
            replace(job, app_id=app_id, arrival_s=arrival, work=job.work * f)
            for job, f in zip(group, fraction, strict=True)
        )
    return out
