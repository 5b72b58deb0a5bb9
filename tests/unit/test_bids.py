"""Bid-table generation by an Agent (spec qoop-themis.md B.4, Table 1 T:906-919, T:1129).

A bid is a set of rows (G, rho_new(G)) over the offered GPUs plus the empty row rho_old. The
expected numbers come from Eq. 1 worked by hand in this file (``eq1``), not from the code.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arbiter.bids import candidate_sets, generate_bid
from arbiter.cluster import Cluster, load_cluster, parse_cluster
from arbiter.datasets import data_root
from arbiter.fairness import rho_single_job
from arbiter.placement import Locality, LocalityModel, Placement, ProfileModel, placement_of
from arbiter.synthetic import SyntheticApp, random_apps, random_instance

DATA = data_root()

TESTBED = load_cluster("themis-testbed")
SIM256 = load_cluster("themis-sim-256")


def machine_gpus(cluster: Cluster, machine: str) -> frozenset[str]:
    return frozenset(g.id for g in cluster.gpus if g.machine == machine)


def eq1(
    *,
    iters_left: float = 1000,
    demand: int = 4,
    t_id: float = 1000,
    elapsed: float = 0.0,
    model: LocalityModel | ProfileModel | None = None,
):
    """An Eq. 1 estimator, serial iteration 1 s: rho = (elapsed + iters * S / min(n, d)) / T_id."""
    model = model or LocalityModel()

    def estimate(gpus: frozenset[str], placement: Placement) -> float:
        if not gpus:
            return math.inf
        s = model.slowdown(placement)
        return (elapsed + iters_left * s / min(len(gpus), demand)) / t_id

    return estimate


class Counting:
    """Wraps an estimator and records the placement shape of every call."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.shapes: Counter[Placement] = Counter()

    def __call__(self, gpus: frozenset[str], placement: Placement) -> float:
        self.shapes[placement] += 1
        return self.inner(gpus, placement)


def by_size(rows) -> dict[int, dict[frozenset[str], float]]:
    out: dict[int, dict[frozenset[str], float]] = defaultdict(dict)
    for key, value in rows.items():
        out[len(key)][key] = value
    return out


# --- Table 1 -----------------------------------------------------------------------------------


def test_table1_bid_on_one_machine() -> None:
    """Table 1 (T:907): T_id 400, 2-GPU offer on one machine -> 1 GPU 200/400, 2 GPUs 100/400."""
    offer = machine_gpus(TESTBED, "nc12-a-00")
    assert len(offer) == 2

    def table1(gpus: frozenset[str], placement: Placement) -> float:
        return rho_single_job(
            elapsed=0,
            iters_left=200,
            iter_time_serial=1.0,
            slowdown=1.0,
            gpus=len(gpus),
            demand_max=2,
            t_id=400,
        )

    bid = generate_bid("table1", TESTBED, offer, table1, demand_max=2)
    rows = by_size(bid.rows)
    assert bid.rho_old == math.inf  # nothing held: no progress (T:1013)
    assert set(rows) == {0, 1, 2}
    assert 1 <= len(rows[1]) <= 2  # [0,1] = [1,0]: one or both equivalent rows
    assert set(rows[1].values()) == {0.5}
    assert rows[2] == {offer: 0.25}


# --- Structural invariants ----------------------------------------------------------------


@pytest.mark.parametrize("max_rows", [2, 5, 32])
def test_rows_within_offer_demand_and_cap(max_rows: int) -> None:
    """B.4: rows are subsets of the offer, sized <= demand_max - |held|, at most max_rows rows."""
    held = frozenset({"nc24-a-00/s0/g0"})
    offer = TESTBED.gpu_ids - held
    estimator = eq1(demand=4)
    bid = generate_bid("a", TESTBED, offer, estimator, demand_max=4, held=held, max_rows=max_rows)
    assert len(bid.rows) <= max_rows
    assert frozenset() in bid.rows
    for key in bid.rows:
        assert key <= offer
        assert len(key) <= 4 - len(held)


def test_empty_row_is_rho_of_held() -> None:
    """B.4 (T:910): the row G = 0 carries rho_old, the app's rho with what it already holds."""
    held = frozenset({"nc24-a-00/s0/g0", "nc24-a-00/s0/g1"})
    offer = machine_gpus(TESTBED, "nc24-a-00") - held
    bid = generate_bid("a", TESTBED, offer, eq1(demand=4), demand_max=4, held=held)
    assert bid.rho_old == pytest.approx(1000 / 2 / 1000)  # 2 GPUs on one slot, S = 1
    # the whole machine: 4 GPUs, 2 slots of one machine (S = 1) -> 1000 / 4 / 1000
    assert bid.rows[offer] == pytest.approx(0.25)


def test_no_row_worse_than_rho_old() -> None:
    """B.4: a row with rho >= rho_old buys nothing; only improving rows are bid."""
    held = frozenset({"nc24-a-00/s0/g0", "nc24-a-00/s0/g1"})  # 2 GPUs, one slot: rho_old 0.5
    offer = frozenset({"nc12-b-00/s0/g0", "nc12-b-00/s0/g1", "nc12-b-01/s0/g0"})  # other rack
    model = LocalityModel(cross_rack=1.6)
    # demand 3: one more GPU across racks -> 1000 x 1.6 / 3 / 1000 = 0.533 >= 0.5: no rows
    bid = generate_bid("a", TESTBED, offer, eq1(demand=3, model=model), demand_max=3, held=held)
    assert dict(bid.rows) == {frozenset(): pytest.approx(0.5)}
    # demand 4: +1 GPU is still 0.533 (dropped), +2 GPUs is 1.6 / 4 = 0.4 (kept)
    bid4 = generate_bid("a", TESTBED, offer, eq1(demand=4, model=model), demand_max=4, held=held)
    assert {len(k) for k in bid4.rows} == {0, 2}
    for key, value in bid4.rows.items():
        if key:
            assert value == pytest.approx(0.4) and value < bid4.rho_old


def test_holding_full_demand_bids_only_the_empty_row() -> None:
    """B.4: the size is capped at demand_max; an app already at its demand asks for nothing."""
    held = machine_gpus(TESTBED, "nc24-a-00")
    bid = generate_bid("a", TESTBED, TESTBED.gpu_ids - held, eq1(), demand_max=4, held=held)
    assert list(bid.rows) == [frozenset()]


def test_same_shape_rows_carry_the_same_rho() -> None:
    """B.4 [ASSUMPTION]: subsets equivalent under the topology are priced identically."""
    held = frozenset({"m4-a-00/s0/g0"})
    bid = generate_bid(
        "a", SIM256, SIM256.gpu_ids - held, eq1(demand=6), demand_max=6, held=held, max_rows=64
    )
    values: dict[Placement, set[float]] = defaultdict(set)
    for key, value in bid.rows.items():
        values[placement_of(SIM256, held | key)].add(value)
    assert len(bid.rows) > len(values)  # several realisations of some shape are present
    assert all(len(v) == 1 for v in values.values())


def test_estimator_called_once_per_shape() -> None:
    """B.4 [ASSUMPTION]: rho is evaluated once per distinct placement shape, not once per row."""
    counting = Counting(eq1(demand=4))
    offer = TESTBED.gpu_ids
    bid = generate_bid("a", TESTBED, offer, counting, demand_max=4, max_rows=64)
    sets = [s for group in candidate_sets(TESTBED, offer, 4).values() for s in group]
    shapes = {placement_of(TESTBED, s) for s in sets}
    assert set(counting.shapes.values()) == {1}
    assert sum(counting.shapes.values()) == 1 + len(shapes)  # + the held (empty) set
    assert len(sets) > len(shapes)  # collapsing happened
    assert len(bid.rows) > sum(counting.shapes.values())  # more rows than evaluations


def test_sim256_full_offer_collapses() -> None:
    """T:1269: enumerating all subsets of 256 GPUs is hopeless; shapes keep it to a handful."""
    counting = Counting(eq1(demand=4))
    bid = generate_bid("a", SIM256, SIM256.gpu_ids, counting, demand_max=4)
    assert len(counting.shapes) < 20
    best = min((k for k in bid.rows if k), key=lambda k: bid.rows[k])
    assert len(best) == 4
    assert placement_of(SIM256, best).locality in (Locality.SLOT, Locality.MACHINE)
    assert bid.rows[best] == pytest.approx(0.25)


# --- Dense candidates ------------------------------------------------------------------------


def test_dense_four_gpu_row() -> None:
    """B.3/T:1103: one machine (S 1) beats spreading; a full 4-GPU machine yields a 4-GPU row."""
    full = machine_gpus(TESTBED, "nc24-a-03")
    scattered = frozenset({"nc12-a-00/s0/g0", "nc12-b-01/s0/g1", "nc24-a-01/s1/g0"})
    bid = generate_bid("a", TESTBED, full | scattered, eq1(demand=4), demand_max=4)
    assert bid.rows[full] == pytest.approx(0.25)
    assert min(bid.rows.values()) == pytest.approx(0.25)


def test_candidates_fill_fullest_slot_first() -> None:
    """B.11: 2 GPUs from an NC24 go on one K80 board (slot), not across its two boards."""
    offer = machine_gpus(TESTBED, "nc24-a-00")
    pairs = candidate_sets(TESTBED, offer, 4)[2]
    assert len(pairs) == 1
    assert placement_of(TESTBED, pairs[0]).locality is Locality.SLOT
    # Which board depends on the app (salt): two 2-GPU apps can name different boards and
    # share the NC24 instead of colliding on the first one.
    boards = {candidate_sets(TESTBED, offer, 4, salt=s)[2][0] for s in range(4)}
    assert len(boards) == 2
    assert all(placement_of(TESTBED, p).locality is Locality.SLOT for p in boards)


def test_candidates_prefer_one_rack() -> None:
    """T:1103: cross-machine (1.1) beats cross-rack (1.3); 4 GPUs from two NC12s of one rack."""
    offer = (
        machine_gpus(TESTBED, "nc12-a-00")
        | machine_gpus(TESTBED, "nc12-a-01")
        | frozenset({"nc12-b-00/s0/g0"})
    )
    fours = candidate_sets(TESTBED, offer, 4)[4]
    # The 2 + 2 split fits in rack a; only the 2 + 1 + 1 split has to cross racks.
    assert [placement_of(TESTBED, s).locality for s in fours] == [
        Locality.CROSS_MACHINE,
        Locality.CROSS_RACK,
    ]
    bid = generate_bid("a", TESTBED, offer, eq1(demand=4), demand_max=4)
    best = min((k for k in bid.rows if len(k) == 4), key=lambda k: bid.rows[k])
    assert placement_of(TESTBED, best).locality is Locality.CROSS_MACHINE
    fives = candidate_sets(TESTBED, offer, 5)[5]
    assert [placement_of(TESTBED, s).locality for s in fives] == [Locality.CROSS_RACK]


# --- Bad input ----------------------------------------------------------------------------------


def test_bad_demand_rejected() -> None:
    """An app must demand at least one GPU."""
    with pytest.raises(ValueError, match="demand_max"):
        generate_bid("a", TESTBED, TESTBED.gpu_ids, eq1(), demand_max=0)


def test_unknown_gpus_rejected() -> None:
    """Offers and holdings name GPUs of this cluster only."""
    with pytest.raises(ValueError, match="ghost"):
        generate_bid("a", TESTBED, frozenset({"ghost/s0/g0"}), eq1(), demand_max=2)
    with pytest.raises(ValueError, match="ghost"):
        generate_bid(
            "a",
            TESTBED,
            frozenset({"nc12-a-00/s0/g0"}),
            eq1(),
            demand_max=2,
            held=frozenset({"ghost/s0/g0"}),
        )


def test_offer_overlapping_held_rejected() -> None:
    """An offer cannot contain GPUs the app already holds (allocations are exclusive, T:1070)."""
    gpu = "nc12-a-00/s0/g0"
    with pytest.raises(ValueError, match="already held"):
        generate_bid("a", TESTBED, frozenset({gpu}), eq1(), demand_max=2, held=frozenset({gpu}))


@pytest.mark.parametrize("bad", [math.nan, 0.0, -1.0])
def test_bad_estimator_value_rejected(bad: float) -> None:
    """rho is a positive ratio of durations; NaN, 0 or negative from the estimator is an error."""

    def broken(gpus: frozenset[str], placement: Placement) -> float:
        return bad if gpus else math.inf

    with pytest.raises(ValueError, match="rho"):
        generate_bid("a", TESTBED, machine_gpus(TESTBED, "nc12-a-00"), broken, demand_max=2)


# --- The bid must contain the app's best achievable row (product bugs) ----------------------------


def test_held_gpus_considered_when_picking_dense_sets() -> None:
    """B.4: collapsing equivalent subsets must not lose the best one. Holding x (rack ra), an
    offer of y, w (ra) and 2 GPUs on z (rb) with demand 3: {y, w} keeps the app in one rack
    (3 GPUs at S 1.1 -> 100 x 1.1 / 3 = 36.7) and beats {z, z} (3 GPUs at S 1.3 -> 43.3)."""
    cluster = parse_cluster(
        {
            "name": "c",
            "racks": [
                {
                    "name": "ra",
                    "machines": [{"name": n, "gpus_per_slot": 1} for n in ("x", "y", "w")],
                },
                {"name": "rb", "machines": [{"name": "z", "gpus_per_slot": 2}]},
            ],
        }
    )
    held = frozenset({"x/s0/g0"})
    offer = frozenset({"y/s0/g0", "w/s0/g0", "z/s0/g0", "z/s0/g1"})
    estimator = eq1(iters_left=100, demand=3, t_id=1)
    bid = generate_bid("a", cluster, offer, estimator, demand_max=3, held=held)
    assert bid.rho_old == pytest.approx(100)
    assert min(bid.rows.values()) == pytest.approx(100 * 1.1 / 3)


def bert_steps() -> dict[tuple[int, ...], float]:
    """bert step times at its reference local_bsz (most placements measured; ties -> largest)."""
    by_bsz: dict[int, dict[str, float]] = defaultdict(dict)
    path = DATA / "pollux" / "profiles" / "bert" / "placements.csv"
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            by_bsz[int(row["local_bsz"])][row["placement"]] = float(row["step_time"])
    bsz = max(by_bsz, key=lambda b: (len(by_bsz[b]), b))
    return {tuple(sorted(map(int, p), reverse=True)): t for p, t in by_bsz[bsz].items()}


def test_profiled_bid_contains_best_spread() -> None:
    """placement.py/bids.py claim 'a denser placement of the same size is never slower', but
    bert measures '111' faster than '12'. Offer 1 + 1 + 2 free GPUs on 3 machines, demand 3:
    the best row is 3 GPUs as (1,1,1), S = t(111)/t(3), rho = S/3 < 1/2 (2 GPUs on one machine)."""
    steps = bert_steps()
    s_111 = max(1.0, steps[(1, 1, 1)] / steps[(3,)])
    s_21 = max(1.0, steps[(2, 1)] / steps[(3,)])
    s_11 = max(1.0, steps[(1, 1)] / steps[(2,)])
    expected = min(1.0, 1 / 2, s_11 / 2, s_21 / 3, s_111 / 3)
    assert expected == pytest.approx(s_111 / 3)
    profile = ProfileModel.from_pollux_csv(DATA / "pollux" / "profiles" / "bert" / "placements.csv")
    offer = frozenset({"m4-a-01/s0/g0", "m4-a-02/s0/g0", "m4-a-03/s0/g0", "m4-a-03/s1/g0"})
    estimator = eq1(iters_left=100, demand=3, t_id=100, model=profile)
    bid = generate_bid("a", SIM256, offer, estimator, demand_max=3)
    assert min(bid.rows.values()) == pytest.approx(expected)


# --- Seeded property checks on synthetic apps ----------------------------------------------


def expected_rho(app: SyntheticApp, cluster: Cluster, gpus: frozenset[str]) -> float:
    """Eq. 1 by hand for a synthetic app: S from the widest level the set spans (T:1103)."""
    if not gpus:
        return math.inf
    info = [cluster.gpu(g) for g in gpus]
    if len({g.rack for g in info}) > 1:
        s = app.locality.cross_rack
    elif len({g.machine for g in info}) > 1:
        s = app.locality.cross_machine
    elif len({g.slot for g in info}) > 1:
        s = app.locality.machine
    else:
        s = app.locality.slot
    t_cluster = app.iters_total * app.iter_time_serial / min(cluster.num_gpus, app.demand_max)
    t_sh = app.elapsed + app.iters_left * app.iter_time_serial * s / min(len(gpus), app.demand_max)
    return t_sh / (t_cluster * app.n_avg)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 8), n_held=st.integers(0, 2))
def test_synthetic_bids_match_eq1(seed: int, size: int, n_held: int) -> None:
    """B.4 + Eq. 1: every row's rho is Eq. 1 of held + row; rows improve on rho_old; with
    nothing held the bid contains the best subset of the offer (brute force over all subsets)."""
    rng = random.Random(seed)
    pool = sorted(TESTBED.gpu_ids)
    picked = rng.sample(pool, size + n_held)
    offer, held = frozenset(picked[:size]), frozenset(picked[size:])
    for app in random_apps(3, rng):
        bid = generate_bid(
            app.app_id,
            TESTBED,
            offer,
            app.rho(TESTBED.num_gpus),
            demand_max=app.demand_max,
            held=held,
        )
        room = app.demand_max - len(held)
        assert bid.rho_old == pytest.approx(expected_rho(app, TESTBED, held))
        for key, value in bid.rows.items():
            if not key:
                continue
            assert key <= offer
            assert len(key) <= room
            assert value < bid.rho_old
            assert value == pytest.approx(expected_rho(app, TESTBED, held | key))
        if not held:
            best = min(
                expected_rho(app, TESTBED, frozenset(sub))
                for n in range(1, min(room, size) + 1)
                for sub in itertools.combinations(sorted(offer), n)
            )
            assert min(bid.rows.values()) == pytest.approx(best)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), apps=st.integers(1, 6), gpus=st.integers(1, 64))
def test_random_instance_is_seeded_and_well_formed(seed: int, apps: int, gpus: int) -> None:
    """synthetic.py: an instance is one bid per app over one random offer, reproducible by seed."""
    bids, offered = random_instance(TESTBED, apps=apps, gpus=gpus, rows=8, seed=seed)
    again, offered_again = random_instance(TESTBED, apps=apps, gpus=gpus, rows=8, seed=seed)
    assert offered == offered_again and len(offered) == gpus and offered <= TESTBED.gpu_ids
    assert [dict(b.rows) for b in bids] == [dict(b.rows) for b in again]
    assert len({b.app_id for b in bids}) == len(bids) == apps
    full = random_instance(TESTBED, apps=apps, gpus=64, rows=8, seed=seed)[0]
    assert all(b.rho_old == math.inf for b in full)  # a full offer leaves nothing to hold
    for bid in bids:
        assert len(bid.rows) <= 8
        # Apps that hold nothing make no progress (T:1013); holders have a finite rho_old.
        assert bid.rho_old == math.inf or bid.rho_old > 0
        assert all(key <= offered for key in bid.rows)


def test_random_instance_rejects_oversized_offer() -> None:
    """An offer cannot exceed the cluster (64 GPUs on the testbed, P:384)."""
    with pytest.raises(ValueError):
        random_instance(TESTBED, apps=2, gpus=65, rows=8, seed=0)
