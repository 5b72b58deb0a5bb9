"""``afs-l`` / ``afs-p`` (:mod:`arbiter.policies.afs`): the pairwise rule (3), Algorithm 1's
GPU-by-GPU hand-out, AFS-P's counters, App. E's network packing, the spec's toy examples with
their numbers, and invariants in the simulator.

Throughput curves are given as tuples, ``curve[n - 1]`` = iterations/s on n GPUs (``Curve``
perf model below: the rate depends on the GPU count only). Every expected number is derived by
hand in the docstring or comment next to it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sim import SPANS, Invariants, random_trace

from arbiter.cluster import Cluster, shorthand_cluster
from arbiter.placement import Placement, placement_of
from arbiter.policies import make_policy
from arbiter.policies.afs import (
    AfsL,
    AfsP,
    AfsState,
    Candidate,
    afs_shares,
    packing_size,
    peak,
    place_packed,
    regulate,
    rule3,
    throughput_curve,
)
from arbiter.policies.base import Decision, JobView, Snapshot, check_decision, rated_per_gang
from arbiter.sim.engine import simulate
from arbiter.sim.perf import SimJob, SlowdownPerf

FAST = settings(
    deadline=None, max_examples=120, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True)
class Curve:
    """A perf model whose rate depends on the GPU count only (flat beyond the curve)."""

    values: tuple[float, ...]

    def rate(self, placement: Placement) -> float:
        n = placement.num_gpus
        return self.values[min(n, len(self.values)) - 1] if n else 0.0


def cand(job_id: str, curve: tuple[float, ...], remaining: float | None = None, **kw) -> Candidate:
    return Candidate(job_id, curve, kw.pop("cap", len(curve)), remaining, **kw)


# --- (3), the pairwise rule ------------------------------------------------------------------


def test_rule3_hand_computed() -> None:
    a, b = (1.0, 1.2, 1.3, 1.35), (1.0, 2.0, 3.0, 4.0)  # spec §10.4, first case
    assert rule3(a, 1, b, 1)  # LHS (2 - 1) / 2 = 0.5 > RHS (1.2 - 1) / 1 = 0.2
    assert rule3(a, 1, b, 2)  # (3 - 2) / 3 = 0.333 > 0.2
    assert not rule3(a, 1, b, 4)  # b at its end: no gain, LHS 0
    c, d = (1.0, 1.9, 2.7, 3.4), (1.0, 1.3, 1.5, 1.6)  # spec §10.4, second case
    assert not rule3(c, 1, d, 1)  # (1.3 - 1) / 1.3 = 0.231 < (1.9 - 1) / 1 = 0.9
    assert not rule3(c, 2, d, 1)  # 0.231 < (2.7 - 1.9) / 1.9 = 0.421
    # Jobs without GPUs: as j_b the left side is (p' - 0) / p' = 1, as j_a the right side is inf.
    assert rule3(a, 1, d, 0) and not rule3(d, 0, a, 1)
    # Exactly linear 1 -> 2 scaling: RHS = 1 = LHS of an unallocated rival; strict ">" is False,
    # so the literal rule would give the linear job its 2nd GPU first (spec §4 edge).
    assert not rule3((1.0, 2.0), 1, d, 0)


@FAST
@given(
    w=st.tuples(st.floats(0.5, 100.0), st.floats(0.5, 100.0)),
    pa=st.floats(0.5, 10.0),
    fa=st.floats(1.01, 2.0),
    pb=st.floats(0.5, 10.0),
    fb=st.floats(1.01, 2.0),
)
def test_rule3_is_eqs_1_and_2_under_the_afs_assumption(w, pa, fa, pb, fb) -> None:
    """(1) and (2) (L160-162) with p'_b2 = p'_b1 and p'_a2 = p_a1 (L187) both reduce to
    (w_a / 2p'_a1) · (LHS(3) - RHS(3)) (spec §3.3, checked with sympy there)."""
    wa, wb = w
    pa1, pb1 = pa * fa, pb * fb  # p'_a1, p'_b1 with 1 < f <= 2 (App. B)
    pb2, pa2 = pb1, pa  # the AFS assumption
    eq1 = wa / pa1 - wa / pa + wa / (2 * pb2) * (pb1 / pa - pb / pa1)
    eq2 = (
        wa / pa1 - wb / pb1
        + pb / (2 * pb2) * (wb / pb - wa / pa1)
        - pa / (2 * pa2) * (wa / pa - wb / pb1)
    )  # fmt: skip
    lhs, rhs = (pb1 - pb) / pb1, (pa1 - pa) / pa
    reduced = wa / (2 * pa1) * (lhs - rhs)
    assert eq1 == pytest.approx(reduced, abs=1e-9) and eq2 == pytest.approx(reduced, abs=1e-9)
    if abs(lhs - rhs) > 1e-12:
        assert rule3((pa, pa1), 1, (pb, pb1), 1) == (eq1 > 0) == (eq2 > 0)


def concave_curves(n: int = 4):
    """Increasing curves with gains that do not grow (1 < f <= 2)."""
    return st.lists(st.floats(0.05, 1.0), min_size=n - 1, max_size=n - 1).map(
        lambda fs: tuple(_integrate(sorted(fs, reverse=True)))
    )


def _integrate(gains: list[float]) -> list[float]:
    out = [1.0]
    for g in gains:
        out.append(out[-1] + g)
    return out


@FAST
@given(
    curves=st.lists(concave_curves(), min_size=3, max_size=3),
    cnts=st.lists(st.integers(1, 3), min_size=3, max_size=3),
    scale=st.floats(0.1, 50.0),
)
def test_rule3_properties(curves, cnts, scale) -> None:
    (a, b, c), (ka, kb, kc) = curves, cnts
    # Never true in both orderings (L240).
    assert not (rule3(a, ka, b, kb) and rule3(b, kb, a, ka))
    # Each side is a ratio of one job's own throughputs: scaling a curve changes nothing.
    scaled = tuple(scale * p for p in a)
    assert rule3(a, ka, b, kb) == rule3(scaled, ka, b, kb)
    assert rule3(b, kb, a, ka) == rule3(b, kb, scaled, ka)
    # Transitivity (App. C): b beats a and c beats b => c beats a.
    if rule3(a, ka, b, kb) and rule3(b, kb, c, kc):
        assert rule3(a, ka, c, kc)


# --- Algorithm 1 -----------------------------------------------------------------------------


def test_long_efficient_job_beats_short_inefficient_one() -> None:
    """Spec §10.4, M = 4. a: 2 iterations left, [1, 1.2, 1.3, 1.35]; b: 8 left, [1, 2, 3, 4].
    Stage one: a (len 2) then b (len 8). GPU 3: a shorter (2 < 8), LHS_b 0.5 > RHS_a 0.2 -> b.
    GPU 4: a shorter (2 < 8/2), 0.333 > 0.2 -> b. AFS-P: (3) holds for (a, b) only -> same."""
    a = cand("a", (1.0, 1.2, 1.3, 1.35), 2.0)
    b = cand("b", (1.0, 2.0, 3.0, 4.0), 8.0)
    assert afs_shares([a, b], 4) == ({"a": 1, "b": 3}, ("a", "b", "b", "b"))
    assert afs_shares([a, b], 4, length_aware=False) == ({"a": 1, "b": 3}, ("a", "b", "b", "b"))


def test_short_efficient_job_keeps_its_gpus() -> None:
    """Spec §10.4: c: 2 left, [1, 1.9, 2.7, 3.4]; d: 8 left, [1, 1.3, 1.5, 1.6] -> {c: 3, d: 1}
    (GPU 3: 0.231 < 0.9 -> c; GPU 4: c shorter (2/1.9 < 8), 0.231 < 0.421 -> c)."""
    c = cand("c", (1.0, 1.9, 2.7, 3.4), 2.0)
    d = cand("d", (1.0, 1.3, 1.5, 1.6), 8.0)
    assert afs_shares([d, c], 4) == ({"c": 3, "d": 1}, ("c", "d", "c", "c"))


def test_gpu_by_gpu_order_three_jobs() -> None:
    """M = 8; x: 4 left, [1, 1.8, 2.3, 2.6]; y: 8 left, [1, 1.9, 2.7, 3.4]; z: 30 left, linear.

    AFS-L. Stage one by len(1): x, y, z. Scan order x, y, z:
    GPU 4: x vs y: a = x (4 < 8), LHS_y 0.474 > RHS_x 0.8? no -> x; x vs z: 0.5 > 0.8? no -> x.
    GPU 5: x vs y: x(2) = 2.22 < 8, 0.474 > 0.278 -> y; y vs z: a = y, 0.5 > 0.9? no -> y.
    GPU 6: x vs y: 2.22 < 4.21, 0.296 > 0.278 -> y; y vs z: a = y (4.21 < 30), 0.5 > 0.421 -> z.
    GPU 7: x vs y -> y as before; y vs z: a = y (4.21 < 15), 0.333 > 0.421? no -> y.
    GPU 8: x vs y: a = x (2.22 < 2.96), 0.206 > 0.278? no -> x; x vs z: 0.333 > 0.278 -> z.
    The long, linear z ends with as many GPUs as y.

    AFS-P (ties to fewer GPUs, then arrival): stage one x, y, z. GPU 4: x-y and x-z tie ((3) in
    neither order) -> x (arrival). GPU 5: (3)(x, y) -> y; y-z tie, equal GPUs -> y. GPU 6:
    (3)(x, y) -> y; (3)(y, z): 0.5 > 0.421 -> z. GPU 7: y; y-z tie (0.333 < 0.421, 0.296 < 0.5),
    equal -> y. GPU 8: x-y tie (0.206 < 0.278, 0.217 < 0.259) -> x (2 < 3); (3)(x, z) -> z.
    """
    x = cand("x", (1.0, 1.8, 2.3, 2.6), 4.0, arrival_s=0.0)
    y = cand("y", (1.0, 1.9, 2.7, 3.4), 8.0, arrival_s=1.0)
    z = cand("z", (1.0, 2.0, 3.0, 4.0), 30.0, arrival_s=2.0)
    order = ("x", "y", "z", "x", "y", "z", "y", "z")
    assert afs_shares([x, y, z], 8) == ({"x": 2, "y": 3, "z": 3}, order)
    assert afs_shares([x, y, z], 8, length_aware=False) == ({"x": 2, "y": 3, "z": 3}, order)
    # Fewer GPUs than jobs: stage one only, the M shortest get one each (SRTF-like).
    assert afs_shares([z, y, x], 2) == ({"x": 1, "y": 1, "z": 0}, ("x", "y"))


def test_stage_one_before_any_second_gpu() -> None:
    """a: 1 left, linear [1, 2, 3]; b: 10 left, [1, 1.5, 1.75]. M = 2: literal (3) would give a
    its 2nd GPU before b gets one (RHS_a = 1 = LHS_b); stage one is explicit: one each.
    M = 3: GPU 3: a shorter (1 < 10), LHS_b 0.333 > RHS_a 1? no -> a."""
    a = cand("a", (1.0, 2.0, 3.0), 1.0)
    b = cand("b", (1.0, 1.5, 1.75), 10.0)
    assert afs_shares([a, b], 2)[0] == {"a": 1, "b": 1}
    assert afs_shares([a, b], 3)[0] == {"a": 2, "b": 1}


def test_caps_and_leftovers() -> None:
    # Throughput peaks at 2 GPUs: more would slow the job down, so the rest idles.
    assert peak((1.0, 1.5, 1.4)) == 2 and peak((0.0, 0.0)) == 0 and peak((2.0, 2.0)) == 1
    a = cand("a", (1.0, 1.5, 1.4), 3.0, cap=2)
    assert afs_shares([a], 8) == ({"a": 2}, ("a", "a"))
    assert afs_shares([cand("z", (0.0,), 1.0, cap=0)], 4) == ({"z": 0}, ())


def test_random_ties_are_seeded_and_split_evenly() -> None:
    """Two identical linear jobs tie at equal counts; random picks must still leave them within
    one GPU (at 2 vs 0 extra, (3) favours the job with fewer) and repeat for the same seed."""
    a, b = cand("a", (1.0, 2.0, 3.0, 4.0)), cand("b", (1.0, 2.0, 3.0, 4.0))
    runs = [afs_shares([a, b], 7, length_aware=False, rng=random.Random(s)) for s in range(6)]
    assert all(sorted(r[0].values()) == [3, 4] for r in runs)
    assert runs[0] == afs_shares([a, b], 7, length_aware=False, rng=random.Random(0))


# --- network packing (App. E) ---------------------------------------------------------------


def test_regulation_floors_and_top_ups() -> None:
    """Spec §10.3 floors with 4 GPUs a machine: 3->2, 5->4, 7->4, 9->8, 1->1, 4->4 (alone, no
    legal top-up fits the few idle GPUs). Together (sum 32 = 8 machines): floors 2 4 4 8 1 4 2,
    d = 7. c is furthest below its share (7 - 4) -> +4 (d = 3); a, g 1 below, steps of 2 -> a
    (name) (d = 1); only e's doubling (1) fits -> e = 2. Sum is 32 again."""
    for s, r in ((3, 2), (5, 4), (7, 4), (9, 8), (1, 1), (4, 4), (0, 0)):
        assert regulate({"j": s}, 4) == {"j": r}
    shares = {"a": 3, "b": 5, "c": 7, "d": 9, "e": 1, "f": 4, "g": 3}
    assert regulate(shares, 4) == {"a": 4, "b": 4, "c": 8, "d": 8, "e": 2, "f": 4, "g": 2}
    # Caps bound the top-ups: b cannot double past its cap of 1, a cannot double with d = 1.
    assert regulate({"a": 3, "b": 1}, 4, caps={"a": 3, "b": 1}) == {"a": 2, "b": 1}
    assert regulate({"a": 3, "b": 1}, 4) == {"a": 2, "b": 2}
    # Ties go to the job earlier in ``order`` (it got its first GPU earlier).
    assert regulate({"a": 3, "g": 3}, 4, order=("g", "a")) == {"a": 2, "g": 4}
    with pytest.raises(ValueError, match="2\\^k"):
        regulate({"a": 3}, 3)


def _machines(cluster: Cluster, gpus: frozenset[str]) -> set[str]:
    return {cluster.gpu(g).machine for g in gpus}


def test_prop1_placement_whole_machines_then_first_fit_decreasing() -> None:
    """nodes:4:4, shares big 8, m 4, s 2, t 1, u 1 (16 GPUs): big takes two whole machines,
    m one, and s, t, u share the last one (FFD: 2, 1, 1)."""
    c = shorthand_cluster("nodes:4:4")
    out = place_packed(c, {"big": 8, "m": 4, "s": 2, "t": 1, "u": 1}, {}, ("big", "m", "s"))
    assert {j: len(g) for j, g in out.items()} == {"big": 8, "m": 4, "s": 2, "t": 1, "u": 1}
    assert _machines(c, out["big"]) == {"node-000", "node-001"}
    assert _machines(c, out["m"]) == {"node-002"}
    assert all(_machines(c, out[j]) == {"node-003"} for j in "stu")
    with pytest.raises(ValueError, match="not legal"):
        place_packed(c, {"x": 3}, {}, ())


def test_placement_reuses_gpus() -> None:
    """nodes:4:4. Before: big held node-002 and node-003, s held 2 GPUs of node-000. After: big
    8, s 2, x 4, y 1. big keeps its machines; x takes node-001, not node-000 (which s wants
    back); s keeps its exact GPUs; y goes with s."""
    c = shorthand_cluster("nodes:4:4")
    ids = sorted(c.gpu_ids, key=c.index)
    held = {"big": frozenset(ids[8:16]), "s": frozenset(ids[1:3])}
    out = place_packed(c, {"big": 8, "s": 2, "x": 4, "y": 1}, held, ("big", "s", "x", "y"))
    assert out["big"] == held["big"] and out["s"] == held["s"]
    assert _machines(c, out["x"]) == {"node-001"}
    assert _machines(c, out["y"]) == {"node-000"}
    # s held 2 GPUs of node-001, node-000 is empty: s goes back to node-001 (first fit would
    # pick node-000), and y, z best-fit next to it, leaving node-000 whole.
    held = {"big": frozenset(ids[8:16]), "s": frozenset(ids[5:7])}
    out = place_packed(c, {"big": 8, "s": 2, "y": 1, "z": 1}, held, ("big", "s", "y", "z"))
    assert out["s"] == held["s"]
    assert _machines(c, out["y"] | out["z"]) == {"node-001"}


# --- the policies on snapshots ---------------------------------------------------------------


def view(job_id: str, gang: int, perf, remaining: float | None, arrival: float = 0.0,
         held: frozenset[str] = frozenset()) -> JobView:  # fmt: skip
    return JobView(
        job_id, job_id, "default", arrival, gang, held=held, remaining_work=remaining,
        work=remaining, perf=perf,
    )  # fmt: skip


def test_live_arbiter_fallback_is_linear() -> None:
    """No perf model and no lengths (the live arbiter): curves are linear; AFS-L compares the
    pair as AFS-P does. nodes:1:4, two gang-4 jobs: one GPU each; GPU 3: (3) in neither order
    (LHS 0.5 vs RHS 1) -> tie -> x (arrival); GPU 4: x at 2, y at 1: LHS_y 0.5 > RHS_x 0.5? no,
    LHS_x 0.333 > RHS_y 1? no -> tie -> y (fewer). Legal shares 2 + 2."""
    c = shorthand_cluster("nodes:1:4")
    assert throughput_curve(c, view("x", 4, None, None)) == (1.0, 2.0, 3.0, 4.0)
    jobs = (view("x", 4, None, None, 0.0), view("y", 4, None, None, 1.0))
    for policy in (AfsL(elastic=True, tie_break="fewest"), AfsP(elastic=True, tie_break="fewest")):
        d = policy.decide(Snapshot(0.0, c, jobs))
        assert {j: len(g) for j, g in d.allocation.items()} == {"x": 2, "y": 2}
        assert d.wake_at is None


def test_decisions_are_pure_functions_of_the_snapshot() -> None:
    c = shorthand_cluster("nodes:2:4")
    jobs = tuple(
        view(f"j{k}", 4, Curve((1.0, 1.9, 2.6, 3.0)), 10.0 + k, float(k)) for k in range(3)
    )
    for policy in (AfsL(elastic=True), AfsP(elastic=True), AfsL(), AfsP()):
        first, again = policy.decide(Snapshot(5.0, c, jobs)), policy.decide(Snapshot(5.0, c, jobs))
        assert first.allocation == again.allocation and first.wake_at == again.wake_at


def test_registry_and_knobs() -> None:
    assert isinstance(make_policy("afs-l"), AfsL) and isinstance(make_policy("afs-p"), AfsP)
    p = make_policy("afs-p", quantum_s=60.0, elastic=True)
    assert (p.name, p.quantum_s, p.elastic, p.round_s) == ("afs-p", 60.0, True, None)
    assert make_policy("afs-l").elastic is True and make_policy("afs-p").quantum_s == 7200.0
    with pytest.raises(ValueError, match="tie_break"):
        AfsL(tie_break="coin")
    with pytest.raises(ValueError, match="quantum_s"):
        AfsP(quantum_s=0.0)
    with pytest.raises(ValueError, match="afs-l"):
        make_policy("afs-l", quantum_s=5.0)  # AFS-L has no counters


# --- elastic replays: the engine semantics AFS assumes ---------------------------------------


def replay(policy, jobs: list[tuple[str, float, int, float, Curve]], cluster: Cluster):
    """A fluid replay in which a job runs on any non-empty share at ``perf.rate(placement)``:
    the elastic engine semantics of AFS in fluid form (no placement checks). ``jobs`` are
    (id, arrival, max GPUs, work, perf). Returns JCTs."""
    rem = {j[0]: j[3] for j in jobs}
    held = {j[0]: frozenset() for j in jobs}
    jct: dict[str, float] = {}
    t, state, wake = 0.0, None, None
    while len(jct) < len(jobs):
        active = [j for j in jobs if j[1] <= t + 1e-12 and j[0] not in jct]
        views = tuple(
            JobView(i, i, "q", a, g, held=held[i], remaining_work=rem[i], work=w, perf=p)
            for i, a, g, w, p in active
        )
        if views:
            d = policy.decide(Snapshot(t, cluster, views, state))
            check_decision(Snapshot(t, cluster, views, state), d)
            state, wake = d.policy_state, d.wake_at
            held = {i: d.allocation.get(i, frozenset()) for i in held}
        rate = {i: p.rate(placement_of(cluster, held[i])) if held[i] else 0.0
                for i, _, _, _, p in active}  # fmt: skip
        events = [t + rem[i] / r for i, r in rate.items() if r > 0]
        events += [a for _, a, *_ in jobs if a > t + 1e-12]
        events += [wake] if wake is not None and wake > t else []
        t_next = min(events)
        for i, r in rate.items():
            rem[i] -= r * (t_next - t)
            if rem[i] <= 1e-9:
                jct[i] = t_next - next(a for j, a, *_ in jobs if j == i)
                held[i] = frozenset()
        t = t_next
    return jct


class Sequential:
    """Baseline: the first active job of ``order`` takes every GPU it can use (SRTF-all when
    ``order`` is shortest first)."""

    name, round_s = "sequential", None

    def __init__(self, order: tuple[str, ...]) -> None:
        self.order = order

    def decide(self, snap: Snapshot) -> Decision:
        job = min(snap.jobs, key=lambda j: self.order.index(j.job_id))
        ids = sorted(snap.cluster.gpu_ids, key=snap.cluster.index)[: job.gang]
        return Decision({job.job_id: frozenset(ids)})


def test_spec_toy_afs_l_jcts() -> None:
    """Spec §10.4 on nodes:1:4. Without packing AFS-L runs {a: 1, b: 3}: a finishes at 2 / 1 = 2;
    b does 3 x 2 = 6 of 8, then alone on 4 GPUs finishes the last 2 at rate 4: 2.5. Average 2.25.
    App. E regulates 1 + 3 to 2 + 2 (3 floors to 2; a's doubling is the only legal top-up):
    a at 1.2 finishes at 5/3; b does 2 x 5/3 = 10/3, then 14/3 at rate 4: 5/3 + 7/6 = 17/6.
    Average also 2.25, the tie the spec notes. SRTF-all: a on 4 GPUs 2 / 1.35 = 1.481, then b
    8 / 4 = 2: 3.481; average 2.481."""
    c = shorthand_cluster("nodes:1:4")
    jobs = [("a", 0.0, 4, 2.0, Curve((1.0, 1.2, 1.3, 1.35))),
            ("b", 0.0, 4, 8.0, Curve((1.0, 2.0, 3.0, 4.0)))]  # fmt: skip
    for policy in (AfsL, AfsP):
        plain = replay(policy(elastic=True, network_packing=False), jobs, c)
        assert plain == pytest.approx({"a": 2.0, "b": 2.5})
        packed = replay(policy(elastic=True), jobs, c)
        assert packed == pytest.approx({"a": 5 / 3, "b": 17 / 6})
    srtf = replay(Sequential(("a", "b")), jobs, c)
    assert srtf == pytest.approx({"a": 2 / 1.35, "b": 2 / 1.35 + 2.0})
    assert sum(srtf.values()) / 2 == pytest.approx(2.4815, abs=1e-4)


def test_appendix_a_toy_and_its_erratum() -> None:
    """App. A (L480): A and B on 2 GPUs take 2 h on 1 GPU; on 2 GPUs A takes 1 h, B 1.5 h (work 2,
    curves [1, 2] and [1, 4/3]). SRTF (A first on both GPUs, then B) averages (1 + 2.5) / 2 =
    1.75 h, not the paper's 1.25 (spec §12.1). AFS (n = M: one GPU each) is the equal split,
    2 h; B first is (1.5 + 2.5) / 2 = 2 h too."""
    c = shorthand_cluster("nodes:1:2")
    jobs = [("A", 0.0, 2, 2.0, Curve((1.0, 2.0))), ("B", 0.0, 2, 2.0, Curve((1.0, 4 / 3)))]
    assert replay(Sequential(("A", "B")), jobs, c) == pytest.approx({"A": 1.0, "B": 2.5})
    assert replay(Sequential(("B", "A")), jobs, c) == pytest.approx({"A": 2.5, "B": 1.5})
    for policy in (AfsL(elastic=True), AfsP(elastic=True)):
        assert replay(policy, jobs, c) == pytest.approx({"A": 2.0, "B": 2.0})


class SrtfAll:
    """SRTF as App. A runs it: the job with the least remaining time on every GPU takes all of
    them (ties by arrival)."""

    name, round_s = "srtf-all", None

    def decide(self, snap: Snapshot) -> Decision:
        ids = frozenset(snap.cluster.gpu_ids)
        job = min(
            snap.jobs,
            key=lambda j: (j.remaining_work / j.perf.rate(placement_of(snap.cluster, ids)),
                           j.arrival_s, j.job_id),
        )  # fmt: skip
        return Decision({job.job_id: ids})


@pytest.mark.parametrize("x", [1.25, 1.75])
def test_appendix_a_future_jobs_fig_12(x: float) -> None:
    """App. A's future-job extension (L482, Fig. 12; spec §10.1): A and B as above, then six
    identical jobs (2 h on 1 GPU, x h on 2) arriving at 1, 1 + x, 1 + 2x, ... The paper's claim:
    for any 1 < x < 2 the equal split beats SRTF. SRTF (hand-derived):
    x = 1.75 (Fig. 12b): A 0-1, B 1-2.5, then each F waits a constant 1.5 h backlog:
      JCT A 1, B 2.5, every F 3.25; average 23/8 = 2.875.
    x = 1.25 (Fig. 12c): each F (1.25 on 2 GPUs) beats B's 1.5 left, so B starves until the last
      F is done: B 1 + 6 x 1.25 + 1.5 = 10, every F 1.25; average 18.5/8 = 2.3125.
    AFS (n >= M: one GPU each to the two shortest) is the equal split here: A and B 2 h each;
    F1 waits to 2, runs alone on 2 GPUs until F2 arrives, then on one GPU:
      x = 1.75: 0.75 h at 8/7 leaves 8/7, JCT 1.75 + 8/7 = 2.8929; x = 1.25: 0.25 h at 1.6
      leaves 1.6, JCT 1.25 + 1.6 = 2.85. AFS's average is below SRTF's for both x."""
    c = shorthand_cluster("nodes:1:2")
    jobs = [("A", 0.0, 2, 2.0, Curve((1.0, 2.0))), ("B", 0.0, 2, 2.0, Curve((1.0, 4 / 3)))]
    jobs += [(f"F{k}", 1.0 + x * (k - 1), 2, 2.0, Curve((1.0, 2.0 / x))) for k in range(1, 7)]
    srtf = replay(SrtfAll(), jobs, c)
    if x > 1.5:
        want = {"A": 1.0, "B": 2.5, **{f"F{k}": 3.25 for k in range(1, 7)}}
    else:
        want = {"A": 1.0, "B": 10.0, **{f"F{k}": 1.25 for k in range(1, 7)}}
    assert srtf == pytest.approx(want)
    for policy in (AfsL(), AfsP()):
        afs = replay(policy, jobs, c)
        assert (afs["A"], afs["B"]) == pytest.approx((2.0, 2.0))
        assert afs["F1"] == pytest.approx(1.75 + 8 / 7 if x > 1.5 else 2.85)
        assert sum(afs.values()) / len(afs) < sum(srtf.values()) / len(srtf) - 0.3


# --- in the simulator -------------------------------------------------------------------------

PERF = SlowdownPerf()


def J(job_id: str, arrival: float, gang: int, work: float) -> SimJob:
    return SimJob(job_id, arrival, gang, work, PERF)


def _log_run(policy, jobs, cluster: str):
    log: list[tuple[float, dict[str, int], float | None]] = []

    def hook(snap: Snapshot, d: Decision) -> None:
        check_decision(snap, d)
        log.append((snap.now, {j: len(g) for j, g in d.allocation.items()}, d.wake_at))

    res = simulate(jobs, shorthand_cluster(cluster), policy, on_decision=hook)
    return {r.job_id: r for r in res.jobs}, log


@pytest.mark.parametrize("elastic", [False, True])
def test_one_gpu_two_jobs_shorter_first(elastic: bool) -> None:
    """§3.2 (L146): one GPU, the shorter job first: a = 10, b = 4 -> (r_a1, r_a2, r_b1, r_b2) =
    (0, 1, 1, 0): b done at 4, a at 14. With a = 3: (1, 0, 0, 1)."""
    res, log = _log_run(AfsL(elastic=elastic), [J("a", 0, 1, 10), J("b", 0, 1, 4)], "nodes:1:1")
    assert {j: r.jct_s for j, r in res.items()} == {"a": 14.0, "b": 4.0}
    assert [e[1] for e in log] == [{"b": 1}, {"a": 1}]
    res, _ = _log_run(AfsL(elastic=elastic), [J("a", 0, 1, 3), J("b", 0, 1, 4)], "nodes:1:1")
    assert {j: r.jct_s for j, r in res.items()} == {"a": 3.0, "b": 7.0}


def test_afs_l_gang_mode_is_preemptive_srtf_with_backfill() -> None:
    """nodes:1:4, a = (0, 4, 100), b = (10, 2, 30), c = (20, 2, 50).
    t=0: a runs. t=10: remaining times a 90, b 30: b first; a (4) no longer fits: preempted.
    t=20: b 20, c 50, a 90: b and c run (2 + 2). t=40: b done; c 30 < a 90, a does not fit the
    2 free GPUs. t=70: c done, a runs its 90: done at 160. JCT a 160, b 30, c 50."""
    res, log = _log_run(AfsL(), [J("a", 0, 4, 100), J("b", 10, 2, 30), J("c", 20, 2, 50)],
                        "nodes:1:4")  # fmt: skip
    assert {j: r.jct_s for j, r in res.items()} == {"a": 160.0, "b": 30.0, "c": 50.0}
    assert [e[1] for e in log] == [{"a": 4}, {"b": 2}, {"b": 2, "c": 2}, {"c": 2}, {"a": 4}]
    assert res["a"].preemptions == 1


@pytest.mark.parametrize("elastic", [False, True])
def test_afs_p_counters_quantum_and_evictions(elastic: bool) -> None:
    """nodes:1:2, quantum 10 s, gang-1 jobs a = (0, 25), b = (0, 15), c = (0, 10), d = (12, 4).
    t=0: 3 jobs > 2 GPUs: counters all 0 -> a, b (arrival, id); wake at 10.
    t=10: a and b ran one unit (counter 1), their stints end: c (0), a (1, id) run, b evicted;
          a's new stint starts; wake 20.
    t=12: d arrives; c and a are 2 s into their stints: kept (non-preemptive); wake still 20.
    t=20: c done (10 from 10). a's stint ends: counters d 0, b 1, a 2 -> d, b; wake 30.
    t=24: d done; 2 jobs on 2 GPUs: counters ignored, a and b run. t=25: b done (1 left at 24).
    t=29: a done (5 left at 20). JCT a 29, b 25, c 20, d 12."""
    jobs = [J("a", 0, 1, 25), J("b", 0, 1, 15), J("c", 0, 1, 10), J("d", 12, 1, 4)]
    res, log = _log_run(AfsP(quantum_s=10.0, elastic=elastic), jobs, "nodes:1:2")
    assert {j: r.jct_s for j, r in res.items()} == {"a": 29.0, "b": 25.0, "c": 20.0, "d": 12.0}
    assert [(t, sorted(a), w) for t, a, w in log] == [
        (0.0, ["a", "b"], 10.0), (10.0, ["a", "c"], 20.0), (12.0, ["a", "c"], 20.0),
        (20.0, ["b", "d"], 30.0), (24.0, ["a", "b"], None), (25.0, ["a"], None),
    ]  # fmt: skip
    assert {j: r.preemptions for j, r in res.items()} == {"a": 1, "b": 1, "c": 0, "d": 0}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", ["afs-l", "afs-p"])
def test_gang_mode_invariants_and_work_conservation(name: str, seed: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(300 + seed, 30, (1, 1, 2, 3, 4, 8), SPANS[seed % 3])
    inv = Invariants(cluster, jobs, partial=False, conserving=True)
    policy = make_policy(name, **({"quantum_s": 40.0} if name == "afs-p" else {}))
    res = simulate(jobs, cluster, policy, on_decision=inv)
    inv.check_result(jobs, res)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cluster_spec", ["nodes:2:2", "gavel:2:1:1"])
@pytest.mark.parametrize("name", ["afs-l", "afs-p"])
def test_elastic_mode_invariants_on_single_gpu_jobs(name: str, cluster_spec: str, seed: int):
    """Gang-1 jobs run the same in elastic mode on today's engine; ``gavel:2:1:1`` mixes GPU
    types, so placement takes the non-packing path."""
    cluster = shorthand_cluster(cluster_spec)
    jobs = random_trace(400 + seed, 25, (1,), SPANS[seed % 3])
    inv = Invariants(cluster, jobs, partial=False, conserving=True)
    knobs = {"elastic": True, **({"quantum_s": 30.0} if name == "afs-p" else {})}
    res = simulate(jobs, cluster, make_policy(name, **knobs), on_decision=inv)
    inv.check_result(jobs, res)


def test_elastic_shares_run_on_the_elastic_engine() -> None:
    """Two gang-2 jobs of 10 units on 2 GPUs, each scaling linearly (rate 1 on one GPU, 2 on
    two). Elastic AFS gives one GPU each (stage one): both run side by side at rate 1 and end
    at t = 10, each having used 10 GPU-seconds. (Rigid, one would run on both GPUs at rate 2
    and end at 5, the other at 10: the same average here; what matters is that the engine runs
    a job on fewer GPUs than its gang when the policy is elastic.)"""
    linear = Curve((1.0, 2.0))
    jobs = [SimJob("a", 0, 2, 10, linear), SimJob("b", 0, 2, 10, linear)]
    for policy in (AfsL(), make_policy("afs-l"), AfsL(elastic=True)):  # elastic by default
        res = simulate(jobs, shorthand_cluster("nodes:1:2"), policy, max_decisions=10)
        assert {r.job_id: r.finish_s for r in res.jobs} == {"a": 10.0, "b": 10.0}
        assert all(r.busy_gpu_s == pytest.approx(10.0) for r in res.jobs)
    rigid = simulate(jobs, shorthand_cluster("nodes:1:2"), AfsL(elastic=False), max_decisions=10)
    assert sorted(r.finish_s for r in rigid.jobs) == [5.0, 10.0]


def test_jobs_rated_per_gang_are_scheduled_as_gangs() -> None:
    """SlowdownPerf jobs (Philly, Tiresias, Synergy durations) have no throughput curve: elastic
    AFS decides in gang mode whenever a snapshot holds one, so two gang-2 jobs of 10 s (rate 1 on
    their gang) run one after the other on both GPUs (done at 10 and 20) instead of side by side
    on one GPU each at their whole-gang rate (both done at 10 on half the GPU-seconds)."""
    assert rated_per_gang(PERF) and not rated_per_gang(Curve((1.0, 2.0)))
    assert not rated_per_gang(None)  # the live arbiter: linear curves
    jobs = [SimJob("a", 0, 2, 10, PERF), SimJob("b", 0, 2, 10, PERF)]
    for policy in (AfsL(), AfsP()):
        res, log = _log_run(policy, jobs, "nodes:1:2")
        assert sorted(r.finish_s for r in res.values()) == [10.0, 20.0]
        assert all(n == 2 for _, alloc, _ in log for n in alloc.values())
    # One rigid job in a snapshot puts the whole decision in gang mode.
    c = shorthand_cluster("nodes:1:4")
    mixed = (view("x", 4, Curve((1.0, 2.0, 3.0, 4.0)), 10.0), view("y", 4, PERF, 20.0, 1.0))
    d = AfsL().decide(Snapshot(0.0, c, mixed))
    assert {j: len(g) for j, g in d.allocation.items()} == {"x": 4}
    d = AfsL().decide(Snapshot(0.0, c, (mixed[0], view("z", 4, Curve((1.0, 2.0)), 9.0))))
    assert {j: len(g) for j, g in d.allocation.items()} == {"x": 2, "z": 2}


def test_live_driver_sees_partial_shares_only_when_elastic() -> None:
    """``holds_partial_gangs`` tells the live arbiter to show an app the partial share it holds
    (arbiter/core.py), so elastic AFS keeps shares instead of re-placing them every round."""
    assert AfsL().holds_partial_gangs and AfsP().holds_partial_gangs
    assert not AfsL(elastic=False).holds_partial_gangs


# --- hypothesis: decisions never break gang or capacity ---------------------------------------

CLUSTERS = ("nodes:2:4", "nodes:3:2", "nodes:1:8", "gavel:2:1:1")


@st.composite
def snapshots(draw):
    cluster = shorthand_cluster(draw(st.sampled_from(CLUSTERS)))
    free = sorted(cluster.gpu_ids, key=cluster.index)
    draw(st.randoms(use_true_random=False)).shuffle(free)
    jobs = []
    for k in range(draw(st.integers(1, 9))):
        gang = draw(st.integers(1, min(6, cluster.num_gpus)))
        curve = draw(concave_curves(gang)) if gang > 1 else (1.0,)
        if draw(st.booleans()):  # a dip after the peak
            curve = (*curve[:-1], curve[-1] * 0.5) if gang > 2 else curve
        n_held = draw(st.integers(0, min(gang, len(free))))
        held, free = frozenset(free[:n_held]), free[n_held:]
        remaining = draw(st.one_of(st.none(), st.floats(0.5, 500.0)))
        jobs.append(view(f"j{k}", gang, Curve(curve), remaining, float(k), held))
    return Snapshot(draw(st.floats(0.0, 1e4)), cluster, tuple(jobs))


@FAST
@given(
    snap=snapshots(),
    cls=st.sampled_from([AfsL, AfsP]),
    elastic=st.booleans(),
    packing=st.booleans(),
    tie=st.sampled_from(["random", "fewest"]),
    dt=st.floats(0.0, 20000.0),
)
def test_decisions_never_violate_gang_or_capacity(snap, cls, elastic, packing, tie, dt) -> None:
    policy = cls(elastic=elastic, network_packing=packing, tie_break=tie)
    d = policy.decide(snap)
    _check(snap, d, elastic, packing)
    # A second call on the new state, later, with the allocation applied.
    jobs = tuple(
        JobView(j.job_id, j.app_id, j.queue, j.arrival_s, j.gang,
                held=d.allocation.get(j.job_id, frozenset()), remaining_work=j.remaining_work,
                work=j.work, perf=j.perf)
        for j in snap.jobs
    )  # fmt: skip
    snap2 = Snapshot(snap.now + dt, snap.cluster, jobs, d.policy_state)
    _check(snap2, policy.decide(snap2), elastic, packing)


def _check(snap: Snapshot, d: Decision, elastic: bool, packing: bool) -> None:
    check_decision(snap, d)
    assert isinstance(d.policy_state, AfsState)
    assert sum(len(g) for g in d.allocation.values()) <= snap.cluster.num_gpus
    assert d.wake_at is None or d.wake_at > snap.now
    for j in snap.jobs:
        n = len(d.allocation.get(j.job_id, ()))
        if not elastic:
            assert n in (0, j.gang)  # gang semantics
        else:
            assert n <= peak(throughput_curve(snap.cluster, j))
    size = packing_size(snap.cluster)
    if elastic and packing and size is not None:  # Prop. 1: no network sharing
        multi: dict[str, str] = {}
        for job_id, gpus in d.allocation.items():
            n, machines = len(gpus), _machines(snap.cluster, gpus)
            assert n % size == 0 or (n < size and n & (n - 1) == 0), (job_id, n)
            assert len(machines) == math.ceil(n / size)
            if len(machines) > 1:
                multi.update(dict.fromkeys(machines, job_id))
        for job_id, gpus in d.allocation.items():
            for m in _machines(snap.cluster, gpus):
                assert multi.get(m, job_id) == job_id  # a multi-machine job's machines are its
