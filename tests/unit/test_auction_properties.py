"""Property tests (hypothesis) for the partial-allocation auction, ``arbiter.auction``.

Instances are small enough for the exhaustive references ``brute_force_pf`` and
``brute_force_payments`` (2-4 apps, 2-6 GPUs, 1-6 random rows each), and large enough that
some conflict components exceed the enumeration limit and go through HiGHS.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.auction import (
    PAYMENT_GAP,
    Bid,
    PAResult,
    Rounding,
    brute_force_payments,
    brute_force_pf,
    partial_allocation,
)

INF = math.inf
EMPTY: frozenset[str] = frozenset()

FAST = settings(
    deadline=None,
    max_examples=150,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

# rho values: continuous, plus a few round values so that ties in the argmax are common.
RHO = st.one_of(st.floats(0.1, 10.0), st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]))


@st.composite
def instances(
    draw: st.DrawFn,
    *,
    min_apps: int = 2,
    max_apps: int = 4,
    min_gpus: int = 2,
    max_gpus: int = 6,
    min_rows: int = 1,
    max_rows: int = 6,
    max_set: int | None = None,
    finite_old: bool = False,
) -> tuple[list[Bid], frozenset[str]]:
    k = draw(st.integers(min_gpus, max_gpus))
    gpus = [f"g{i}" for i in range(k)]
    n = draw(st.integers(min_apps, max_apps))
    bids = []
    for a in range(n):
        old = draw(RHO) if finite_old else draw(st.one_of(st.just(INF), RHO))
        rows: dict[frozenset[str], float] = {EMPTY: old}
        for _ in range(draw(st.integers(min_rows, max_rows))):
            subset = draw(st.sets(st.sampled_from(gpus), min_size=1, max_size=max_set or k))
            rows[frozenset(subset)] = draw(RHO)
        bids.append(Bid(f"a{a}", rows))
    return bids, frozenset(gpus)


def lex_value(r: PAResult) -> tuple[int, float]:
    finite = [rho for rho in r.pf_rho.values() if math.isfinite(rho)]
    return len(finite), -sum(math.log(rho) for rho in finite)


def feasible_combinations(bids: list[Bid], offered: frozenset[str]):
    """Every choice of one row per app whose GPU sets are disjoint and inside the offer."""
    for combo in itertools.product(*(list(b.rows.items()) for b in bids)):
        sets = [k for k, _ in combo]
        union = frozenset().union(*sets)
        if union <= offered and sum(len(s) for s in sets) == len(union):
            yield combo


def check_accounting(r: PAResult, offered: frozenset[str]) -> None:
    """Lease-time accounting (D.17): Σ_i c_i |G_i,pf| + Σ leftover fractions = |offered|."""
    assert r.rounding is Rounding.LEASE_TIME
    held = 0.0
    seen: set[str] = set()
    for app, gpus in r.pf_allocation.items():
        assert gpus <= offered and not (gpus & seen)
        seen |= gpus
        assert 0.0 < r.c[app] <= 1.0
        assert r.lease_fraction[app] == r.c[app]
        held += r.c[app] * len(gpus)
        for g in gpus:
            assert r.leftover.get(g, 0.0) == pytest.approx(1.0 - r.c[app], abs=1e-12)
    for g in offered - seen:
        assert r.leftover[g] == 1.0
    assert set(r.leftover) <= offered
    assert held + sum(r.leftover.values()) == pytest.approx(len(offered), abs=1e-9)


# ------------------------------------------------------------------------------------------
# PF optimality and payments against the exhaustive reference


@settings(FAST, max_examples=300)
@given(instances(), st.booleans())
def test_pf_value_and_payments_match_brute_force(instance, naive: bool) -> None:
    bids, offered = instance
    r = partial_allocation(bids, offered, naive=naive)
    (n_finite, log_value), _ = brute_force_pf(bids, offered)
    got_n, got_value = lex_value(r)
    assert got_n == n_finite
    assert got_value == pytest.approx(log_value, abs=1e-6)
    for b in bids:  # the reported rho is the bid's rho for the PF set
        assert r.pf_rho[b.app_id] == b.rows[r.pf_allocation[b.app_id]]
    reference = brute_force_payments(bids, offered, r.pf_allocation)
    assert set(r.c) == set(reference)
    for app, c in reference.items():
        assert r.c[app] == pytest.approx(c, abs=1e-6), app


# Markets whose row combinations exceed the enumeration limit (256), so the LP / branch and
# bound / MILP path is exercised: 3-5 apps, 4-8 GPUs, 3-7 small rows each.
LARGER = instances(
    min_apps=3, max_apps=5, min_gpus=4, max_gpus=8, min_rows=3, max_rows=7, max_set=3
)


@settings(FAST, max_examples=150)
@given(LARGER)
def test_larger_markets_match_brute_force(instance) -> None:
    bids, offered = instance
    r = partial_allocation(bids, offered)
    (n_finite, log_value), _ = brute_force_pf(bids, offered)
    assert lex_value(r)[0] == n_finite
    assert lex_value(r)[1] == pytest.approx(log_value, abs=1e-6)
    reference = brute_force_payments(bids, offered, r.pf_allocation)
    for app, c in reference.items():
        assert r.c[app] == pytest.approx(c, abs=1e-6), app
    check_accounting(r, offered)


@settings(FAST, max_examples=60)
@given(LARGER)
def test_naive_and_default_agree(instance) -> None:
    """Both formulations reach the same PF value; with the same PF rho they charge the same c."""
    bids, offered = instance
    fast = partial_allocation(bids, offered)
    slow = partial_allocation(bids, offered, naive=True)
    assert lex_value(fast)[0] == lex_value(slow)[0]
    assert lex_value(fast)[1] == pytest.approx(lex_value(slow)[1], abs=1e-6)

    # The optimum without each app does not depend on how PF ties were broken, as long as the
    # tie did not change the market itself (Gap 2: the apps left at rho = inf are out of it).
    def market(r: PAResult) -> set[str]:
        return {a for a, rho in r.pf_rho.items() if math.isfinite(rho)}

    if market(fast) == market(slow):
        assert fast.value_without == pytest.approx(slow.value_without, abs=2 * PAYMENT_GAP)
    if fast.pf_rho == slow.pf_rho:
        assert fast.c == pytest.approx(slow.c, rel=2 * PAYMENT_GAP)


# ------------------------------------------------------------------------------------------
# Pareto efficiency of G_pf over the bid rows (D.17)


def _strictly_better(a: float, b: float) -> bool:
    return a < b and not math.isclose(a, b, rel_tol=1e-12)


def _weakly_better(a: float, b: float) -> bool:
    return a <= b or math.isclose(a, b, rel_tol=1e-12)


@settings(FAST, max_examples=200)
@given(instances())
def test_pf_allocation_is_pareto_efficient(instance) -> None:
    """No feasible combination of bid rows is weakly better (lower rho) for every app and
    strictly better for one (rho = inf -> finite counts as strictly better)."""
    bids, offered = instance
    r = partial_allocation(bids, offered)
    current = [r.pf_rho[b.app_id] for b in bids]
    for combo in feasible_combinations(bids, offered):
        rhos = [rho for _, rho in combo]
        dominates = all(map(_weakly_better, rhos, current)) and any(
            map(_strictly_better, rhos, current)
        )
        assert not dominates, (combo, r.pf_allocation)


# ------------------------------------------------------------------------------------------
# Envy-freeness for homogeneous linear valuations


def _max_product(total: int, parts: int) -> int:
    """max Π g_j over positive integers g_1..g_parts with Σ g_j <= total (the balanced split)."""
    q, rem = divmod(total, parts)
    return (q + 1) ** rem * q ** (parts - rem)


@settings(FAST, max_examples=60)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.integers(n, 6),
            st.lists(st.floats(0.25, 8.0), min_size=n, max_size=n),
        )
    )
)
def test_envy_free_for_homogeneous_linear_valuations(case) -> None:
    """EF statement that does hold for this discrete mechanism.

    With indivisible GPUs, EF does not hold for the PF allocation in general: e.g. two apps
    with linear valuations and k = 3 GPUs get 2 and 1, and the 1-GPU app prefers the other
    bundle; with placement-dependent valuations the PF can also leave an app preferring
    another's placement. What does hold, for homogeneous linear valuations rho_i(G) = s_i/|G|
    over all subsets of the offer with rho_old = inf (so v_i(∅) = 0) and k >= n:

    * PF maximises Π_i |G_i| / s_i, i.e. Π |G_i| (the s_i are constants): the balanced split,
      all k GPUs used, sizes differing by at most 1, and exactly k/n each when n | k;
    * c_i |G_i| = Π_j |G_j| / M(k, n-1) with M(k, n-1) the best product of n-1 sizes (the
      market without i; again independent of the s_j), the same for every i.

    So under the lease-time reading (app i values a PA outcome (c, G) at c/rho_i(G) =
    c |G| / s_i) every app's outcome is worth exactly as much to it as any other app's:
    nobody strictly envies anybody, whatever the s_i.
    """
    k, scales = case
    n = len(scales)
    gpus = [f"g{i}" for i in range(k)]
    offered = frozenset(gpus)
    bids = []
    for a, s in enumerate(scales):
        rows: dict[frozenset[str], float] = {EMPTY: INF}
        for size in range(1, k + 1):
            for combo in itertools.combinations(gpus, size):
                rows[frozenset(combo)] = s / size
        bids.append(Bid(f"a{a}", rows))
    r = partial_allocation(bids, offered)

    sizes = {a: len(g) for a, g in r.pf_allocation.items()}
    assert sum(sizes.values()) == k
    assert max(sizes.values()) - min(sizes.values()) <= 1
    if k % n == 0:
        assert set(sizes.values()) == {k // n}

    share = math.prod(sizes.values()) / _max_product(k, n - 1)
    for a in r.c:
        assert r.c[a] * sizes[a] == pytest.approx(share, rel=1e-9)
    for i, bi in enumerate(bids):
        own = r.c[bi.app_id] * sizes[bi.app_id] / scales[i]
        for bj in bids:
            other = r.c[bj.app_id] * sizes[bj.app_id] / scales[i]
            assert other <= own * (1 + 1e-9)


# ------------------------------------------------------------------------------------------
# Strategy-proofness with whole-GPU bid rows (spec B.5)


def true_value(bid: Bid, gpus: frozenset[str]) -> float:
    """The truthful app's value 1/rho for receiving ``gpus``: its best true row inside the set.

    A misreport can win a GPU set that is not a row of the true bid (an invented row); the
    app can then use its best true row inside that set (free disposal). The SP argument still
    holds: that row uses a subset of the GPUs, so the truthful market could have chosen it
    alongside the same allocation of the others.
    """
    return max(1.0 / rho for key, rho in bid.rows.items() if key <= gpus)


@st.composite
def misreports(draw: st.DrawFn):
    bids, offered = draw(instances(finite_old=True))
    liar = draw(st.integers(0, len(bids) - 1))
    truth = bids[liar]
    rows = dict(truth.rows)
    keys = list(rows)
    kind = draw(st.sampled_from(["scale", "drop", "invent", "reorder", "set-rho", "several"]))
    edits = draw(st.integers(2, 4)) if kind == "several" else 1
    for _ in range(edits):
        action = kind if kind != "several" else draw(st.sampled_from(["scale", "drop", "invent"]))
        keys = list(rows)
        if action == "scale":
            key = draw(st.sampled_from(keys))
            rows[key] *= draw(st.sampled_from([0.01, 0.1, 0.5, 0.9, 1.1, 2.0, 10.0, 100.0]))
        elif action == "drop" and len(keys) > 1:
            del rows[draw(st.sampled_from(keys[1:]))]  # the empty row is mandatory
        elif action == "invent":
            subset = draw(st.sets(st.sampled_from(sorted(offered)), min_size=1))
            rows[frozenset(subset)] = draw(st.floats(0.01, 20.0))
        elif action == "set-rho":
            rows[draw(st.sampled_from(keys))] = draw(st.floats(0.01, 20.0))
        elif action == "reorder":
            rows = dict(reversed(list(rows.items())))
    lie = [*bids[:liar], Bid(truth.app_id, rows), *bids[liar + 1 :]]
    return bids, lie, liar, offered, kind


@settings(FAST, max_examples=400)
@given(misreports())
def test_strategy_proof_with_whole_gpu_rows(case) -> None:
    """utility_i = c_i v_i(G_i,pf) (v = 1/rho_true, finite rho_old everywhere): lying never pays.

    utility_i = Π_all v_j(G_pf) / Π_{j≠i} v_j(G_pf^-i); the denominator does not depend on i's
    report and the truthful PF maximises the numerator, so a misreport can only tie or lose.
    """
    bids, lie, liar, offered, kind = case
    app = bids[liar].app_id
    truthful = partial_allocation(bids, offered)
    lying = partial_allocation(lie, offered)
    u_truth = truthful.c[app] * true_value(bids[liar], truthful.pf_allocation[app])
    u_lie = lying.c[app] * true_value(bids[liar], lying.pf_allocation[app])
    assert u_lie <= u_truth * (1 + 1e-9), (kind, u_truth, u_lie)
    if kind == "reorder":  # a no-op misreport: exactly the truthful utility
        assert u_lie == pytest.approx(u_truth, rel=1e-9)


# ------------------------------------------------------------------------------------------
# Leftover accounting


@settings(FAST, max_examples=200)
@given(instances(max_apps=5, max_gpus=7))
def test_lease_time_leftover_accounting(instance) -> None:
    bids, offered = instance
    check_accounting(partial_allocation(bids, offered), offered)


@settings(FAST, max_examples=200)
@given(instances(max_apps=5, max_gpus=7))
def test_count_rounding_invariants(instance) -> None:
    """COUNT: allocation ⊆ G_pf, |G_i| <= floor(c_i |G_pf|), whole lease, leftover = the rest."""
    bids, offered = instance
    lease = partial_allocation(bids, offered)
    r = partial_allocation(bids, offered, rounding=Rounding.COUNT)
    assert r.pf_allocation == lease.pf_allocation
    assert r.c == lease.c
    by_app = {b.app_id: b for b in bids}
    kept: set[str] = set()
    for app, gpus in r.allocation.items():
        pf = r.pf_allocation[app]
        assert gpus <= pf
        assert len(gpus) <= math.floor(r.c[app] * len(pf) + 1e-9)
        assert gpus in by_app[app].rows
        assert r.lease_fraction[app] == 1.0
        assert not (gpus & kept)
        kept |= gpus
    assert r.leftover == dict.fromkeys(offered - kept, 1.0)
