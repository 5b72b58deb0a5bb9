"""QOOP's share-profile replay (QOOP §2.6, spec A.7) and its sweep cell.

The simulation core of ``qoop_profiles.py`` (whose docstring describes the experiment): the two
share profiles (a shared cluster split 1-over-n, a spot market), the TPC-DS plans, and the replay
of one query from a window start under QOOP and under every cached plan (:func:`run_window`).

:class:`QoopCell` makes one query's replays in one class of windows of one profile a sweep cell
(:class:`arbiter.sim.sweep.SweepCell`): the cell names the query, the profile's parameters and the
window starts (drawn by the benchmark, in its seeded order), its run rebuilds the profile and the
query's plans (cached per process, so a Spark Python worker builds each once) and returns the
runs as JSON (non-finite numbers as the strings ``inf`` / ``-inf`` / ``nan``, turned back by
:func:`decode`). The benchmark computes its tables from these rows, whichever engine ran them:
serially, or as Spark tasks with this module, ``qoop_diagnosis`` and ``qoop_planner`` shipped.
``arbiter`` does not import any of it (the packages' layering); the engine rebuilds the cell on
the executor from its class's import path.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import qoop_planner
from arbiter.shares import Resources as ClusterResources
from arbiter.shares import fair_share
from qoop_planner.cost import TableStats
from qoop_planner.model import Plan, Progress, Share
from qoop_planner.packing import advance, estimate
from qoop_planner.replan import decide
from qoop_planner.sqlplan import enumerate_plan_space, enumerate_plans
from qoop_planner.tpc import load_tpc

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import qoop_diagnosis
from qoop_diagnosis import change_on_offer, scale_plans

HYSTERESIS = 0.15

SCALED_TABLES = frozenset(
    {
        "store_sales",
        "store_returns",
        "catalog_sales",
        "catalog_returns",
        "web_sales",
        "web_returns",
        "inventory",
        "customer",
        "customer_address",
    }
)


# --------------------------------------------------------------------------------------------
# The share profile


def shared_cluster_profile(
    hours: float, vcores: float, mb_per_vcore: float, seed: int
) -> tuple[list[float], list[Share]]:
    """Change times (s, from 0) and the tagged query's share from each time on."""
    rng = random.Random(seed)
    capacity = ClusterResources(vcores=vcores, memory_mb=vcores * mb_per_vcore)
    warmup = 3600.0
    end = hours * 3600.0
    events: list[tuple[float, int]] = []  # (time, +1 arrival / -1 departure)
    t = -warmup
    while t < end:
        t += rng.expovariate(1 / 20.0)
        events.append((t, 1))
        events.append((t + rng.expovariate(1 / 500.0), -1))
    events.sort()
    n = 0
    times: list[float] = []
    shares: list[Share] = []
    for t, d in events:
        if t >= end:
            break
        if t >= 0 and not times:  # the share at time 0
            fs = fair_share(capacity, 1 + n)
            times.append(0.0)
            shares.append(Share(fs.vcores, fs.memory_mb))
        n += d
        if t < 0:
            continue
        fs = fair_share(capacity, 1 + n)  # the background jobs plus the tagged query
        s = Share(fs.vcores, fs.memory_mb)
        if s != shares[-1]:
            times.append(t)
            shares.append(s)
    return times, shares


# i3.2xlarge (T:399): 8 vCPUs, 61 GiB; the job's budget, bid margin and machine bounds (T:401)
SPOT_VCORES = 8.0
SPOT_MB = 61.0 * 1024
SPOT_BUDGET = 5.0  # $ / h
SPOT_MARGIN = 0.05  # bid 5 % over the current price
SPOT_MAX, SPOT_ADD = 20, 2
# the synthetic price (the 2017 trace is not available): log-price mean-reverting around
# $0.20 / h with minute noise and upward spikes, capped at the on-demand price
SPOT_BASE, SPOT_ON_DEMAND = 0.20, 0.624
SPOT_REVERT, SPOT_SIGMA, SPOT_JUMP_P, SPOT_JUMP = 0.05, 0.06, 1 / 20, (0.1, 0.9)


def spot_market_profile(hours: float, seed: int) -> tuple[list[float], list[Share]]:
    """Change times (s) and the job's share on spot instances (the spot-market motivation,
    T:399-401): every minute the price moves; instances bid below it are revoked at once; then
    the job adds 2 instances bidding 5 % over the price if the held instances at that price fit
    the $5/h budget, up to 20 machines (the paper's job held 2 to 20)."""
    rng = random.Random(seed)
    y = 0.0
    bids: list[float] = []
    times: list[float] = []
    shares: list[Share] = []
    for minute in range(int(hours * 60) + 1):
        y = y * (1 - SPOT_REVERT) + rng.gauss(0.0, SPOT_SIGMA)
        if rng.random() < SPOT_JUMP_P:
            y += rng.uniform(*SPOT_JUMP)
        price = min(SPOT_ON_DEMAND, SPOT_BASE * math.exp(y))
        bids = [b for b in bids if b >= price]  # revoked immediately
        if len(bids) + SPOT_ADD <= SPOT_MAX and (len(bids) + SPOT_ADD) * price <= SPOT_BUDGET:
            bids += [price * (1 + SPOT_MARGIN)] * SPOT_ADD
        n = len(bids)
        s = Share(n * SPOT_VCORES, n * SPOT_MB)
        if not shares or s != shares[-1]:
            times.append(minute * 60.0)
            shares.append(s)
    return times, shares


# --------------------------------------------------------------------------------------------
# Queries and plans


@functools.lru_cache(maxsize=2)
def tpcds_stats(sf: float) -> tuple[Any, dict[str, TableStats], float]:
    """TPC-DS at sf=0.01 with its statistics scaled to ``sf`` (``qoop_profiles``' docstring);
    once per process (read only)."""
    data = load_tpc("tpcds", 0.01)
    factor = sf / 0.01
    stats = {}
    for t, st in data.stats.items():
        rows, ndv = st.rows, dict(st.ndv)
        if t in SCALED_TABLES:
            ndv = {c: v * factor if v > rows / 2 else v for c, v in ndv.items()}
            rows *= factor
        stats[t] = TableStats(rows=rows, ndv=ndv)
    return data, stats, factor


def tpcds_plans(sf: float, k: int = 8, cache: str = "space") -> tuple[dict[int, list[Plan]], float]:
    """Plans of the TPC-DS queries: the diverse plan space (``cache="space"``) or the ``k``
    cheapest join orders by work (``"topk"``, the cache before the plan space)."""
    data, _, factor = tpcds_stats(sf)
    return {n: list(query_plans(sf, n, k, cache)) for n in data.queries}, factor


@functools.cache
def query_plans(sf: float, n: int, k: int = 8, cache: str = "space") -> tuple[Plan, ...]:
    """The plans of TPC-DS query ``n`` (see :func:`tpcds_plans`); once per process."""
    data, stats, _ = tpcds_stats(sf)
    q = data.queries[n]
    if cache == "space":
        return tuple(enumerate_plan_space(q, data.schema, stats, query_id=f"tpcds{n}", max_plans=k))
    return tuple(enumerate_plans(q, data.schema, stats, k=k, query_id=f"tpcds{n}"))


# --------------------------------------------------------------------------------------------
# Replay


def replay(
    plans: list[Plan],
    planner: str,
    times: list[float],
    shares: list[Share],
    start: float,
    hysteresis: float = HYSTERESIS,
) -> dict:
    """Run one query from ``start`` under the profile; JCT, switches, backtrack depths.

    ``planner``: ``"qoop"`` (decide at the start and on every change) or a plan id (that plan,
    never switched)."""
    i = bisect.bisect_right(times, start) - 1
    t = start
    progress = Progress()
    share = shares[i]
    if planner == "qoop":
        plan = decide(plans, progress, share, hysteresis=math.inf, current_plan_id=None).plan
    else:
        plan = next(p for p in plans if p.plan_id == planner)
    const = estimate(plan, progress, share).finish_s
    switches = 0
    depths: list[int] = []
    first = True
    changes: list[tuple[float, float]] = []  # (relative share change, gain on offer)
    while True:
        share = shares[i]
        if planner == "qoop" and not first:
            changes.append(change_on_offer(plans, plan, progress, shares[i - 1], share))
            d = decide(plans, progress, share, hysteresis=hysteresis, current_plan_id=plan.plan_id)
            if d.switch:
                switches += 1
                depths.append(d.backtrack_depth)
                plan = d.plan
        first = False
        t_next = times[i + 1] if i + 1 < len(times) else math.inf
        left = estimate(plan, progress, share).finish_s
        if t + left <= t_next:
            jct = t + left - start
            break
        if math.isinf(t_next):  # the profile ended and the plan cannot finish: give up
            jct = math.inf
            break
        progress = advance(plan, progress, share, t_next - t, keep_in_flight=True)
        t = t_next
        i += 1
    return {
        "jct_s": jct,
        "const_s": const,
        "switches": switches,
        "depths": depths,
        "changes": changes,
    }


def run_window(
    plans: list[Plan], times: list[float], shares: list[Share], start: float, hysteresis: float
) -> dict:
    """QOOP and every cached plan run statically from ``start``; Clarinet's, Volcano's and the
    best static plan's JCT among the static runs."""  # fmt: skip
    share0 = shares[bisect.bisect_right(times, start) - 1]
    static = {p.plan_id: replay(plans, p.plan_id, times, shares, start) for p in plans}
    clarinet = decide(plans, Progress(), share0, hysteresis=math.inf, current_plan_id=None).plan
    volcano = min(plans, key=lambda p: (p.total_cost, p.plan_id))
    best = min(static, key=lambda pid: (static[pid]["jct_s"], pid))
    return {
        "qoop": replay(plans, "qoop", times, shares, start, hysteresis),
        "clarinet": static[clarinet.plan_id],
        "volcano": static[volcano.plan_id],
        "best_static": static[best],
        "best_static_plan": best,
        "clarinet_plan": clarinet.plan_id,
    }


# --------------------------------------------------------------------------------------------
# The sweep cell

PROFILES = ("cluster", "spot")


@functools.lru_cache(maxsize=4)
def profile(
    name: str, hours: float, vcores: float, mb_per_vcore: float, seed: int
) -> tuple[list[float], list[Share]]:
    """A profile by name (``cluster`` or ``spot``), once per process (read only)."""
    if name == "cluster":
        return shared_cluster_profile(hours, vcores, mb_per_vcore, seed)
    if name == "spot":
        return spot_market_profile(hours, seed)
    raise ValueError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")


@functools.lru_cache(maxsize=128)
def scaled_plans(sf: float, n: int, cache: str, time_scale: float) -> list[Plan]:
    """Query ``n``'s plans on the benchmark's time scale, as the benchmark keeps them."""
    plans = list(query_plans(sf, n, 8, cache))
    return scale_plans(plans, time_scale) if time_scale != 1.0 else plans


def encode(value: Any) -> Any:
    """JSON-safe: non-finite floats as strings, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    """:func:`encode` undone (the pairs of ``changes`` come back as lists)."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


@dataclass(frozen=True)
class QoopCell:
    """Query ``query`` replayed from each of ``starts`` (windows of class ``klass``) under
    profile ``profile`` generated with ``hours``, ``vcores``, ``mb_per_vcore`` and ``seed``; its
    plans from ``sf`` and ``cache`` scaled by ``time_scale``; QOOP's ``hysteresis``."""

    profile: str
    klass: str
    query: int
    starts: tuple[float, ...]
    sf: float
    cache: str
    time_scale: float
    hours: float
    vcores: float
    mb_per_vcore: float
    seed: int
    hysteresis: float

    SUMMARY_HEADERS: ClassVar[tuple[str, ...]] = (
        "profile", "class", "query", "status", "runs_count", "qoop_switches",
        "wall_s", "key", "error",
    )  # fmt: skip

    @property
    def key(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["starts"] = list(self.starts)
        doc["kind"] = "qoop-profile-replay"
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> QoopCell:
        return cls(
            profile=str(doc["profile"]), klass=str(doc["klass"]), query=int(doc["query"]),
            starts=tuple(float(s) for s in doc["starts"]), sf=float(doc["sf"]),
            cache=str(doc["cache"]), time_scale=float(doc["time_scale"]),
            hours=float(doc["hours"]), vcores=float(doc["vcores"]),
            mb_per_vcore=float(doc["mb_per_vcore"]), seed=int(doc["seed"]),
            hysteresis=float(doc["hysteresis"]),
        )  # fmt: skip

    def describe(self) -> str:
        return f"TPC-DS q{self.query} in {self.klass} windows of the {self.profile} profile"

    def header(self) -> dict[str, Any]:
        return {"key": self.key, "profile": self.profile, "class": self.klass,
                "query": self.query, "cell": self.to_json()}  # fmt: skip

    def inputs(self) -> list[str]:
        return []

    def ship(self) -> list[Path]:
        return [Path(qoop_planner.__file__).parent, Path(__file__),
                Path(qoop_diagnosis.__file__)]  # fmt: skip

    def run(self, inputs: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The row: ``runs``, one :func:`run_window` result per start (encoded), in order."""
        t0 = time.perf_counter()
        row = self.header()
        try:
            times, shares = profile(self.profile, self.hours, self.vcores, self.mb_per_vcore,
                                    self.seed)  # fmt: skip
            plans = scaled_plans(self.sf, self.query, self.cache, self.time_scale)
            runs = [run_window(plans, times, shares, s, self.hysteresis) for s in self.starts]
        except Exception as exc:  # broad: any failure of one cell is that cell's row
            row.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        else:
            row.update(status="ok", runs=encode(runs), runs_count=len(runs),
                       qoop_switches=sum(r["qoop"]["switches"] for r in runs))  # fmt: skip
        row["wall_s"] = time.perf_counter() - t0
        return row


def cell_runs(row: Mapping[str, Any]) -> list[dict]:
    """A finished cell's runs, as :func:`run_window` returned them (pairs as lists)."""
    return [decode(r) for r in row["runs"]]
