"""Syndicate's flow-level simulator and its calibration (spec §6.4; facts F24-F26)."""

from __future__ import annotations

import numpy as np
import pytest

from syndicate.cost import MicrobenchCost
from syndicate.dag import dlrm, unroll
from syndicate.experiment import (
    bands_ordered,
    calibrate,
    fit_incast,
    incast_bands,
    periodic_order,
    run_mode,
    simulate_plan,
)
from syndicate.flowsim import maxmin, motif_time
from syndicate.motifs import CommOp, ExecOption, expand
from syndicate.optimizer import greedy_plan, plan
from syndicate.topology import GB, Topology, TopologyParams, hgx2


def test_maxmin_progressive_filling() -> None:
    caps = np.array([10.0, 4.0, 100.0])
    links = np.array([[0, 1], [0, -1], [0, 2], [2, -1]])
    rates = maxmin(links, caps)
    # Link 0 (10) is the tightest share (three flows at 10/3 each); flow 3 then gets what
    # link 2 leaves after flow 2.
    np.testing.assert_allclose(rates, [10 / 3, 10 / 3, 10 / 3, 100 - 10 / 3])
    # A flow alone on a slower link is held there, and the others share the rest.
    np.testing.assert_allclose(
        maxmin(np.array([[0, 1], [0, -1]]), np.array([10.0, 4.0])), [4.0, 6.0]
    )
    with pytest.raises(ValueError, match="no link"):
        maxmin(np.array([[-1]]), caps)


def _ideal(**changes: object) -> TopologyParams:
    base = {
        "alpha_nvlink": 0.0,
        "alpha_rdma": 0.0,
        "alpha_pcie": 0.0,
        "alpha_tcp": 0.0,
        "motif_overhead": 0.0,
        "incast_kappa": 0.0,
        "tcp_efficiency": 1.0,
        "pcie": 1e15,
    }
    base.update(changes)
    return TopologyParams(**base)  # type: ignore[arg-type]


def test_a_point_to_point_motif_is_alpha_plus_bytes_over_bandwidth() -> None:
    topo = Topology(2, 8, _ideal(alpha_rdma=8e-6, motif_overhead=20e-6, pcie=12 * GB))
    topo = topo.subgraph([0, 8])  # one GPU on each node
    op = CommOp("aa", "AA", 125_000_000, 2, 1)  # 125 MB rows
    (m,) = expand(op, ExecOption("aa"))
    # Each rank sends one 125 MB row to the other over its NIC, capped by PCIe at 12 GB/s.
    assert motif_time(topo, m) == pytest.approx(20e-6 + 8e-6 + 0.125 / 12, rel=1e-9)


def test_f26_better_together_example() -> None:
    """An all-to-all of 1 GB per GPU over 16 GPUs (spec §6.3): on ``gpu`` dense beats spread
    (40 vs 60 ms), on ``cpu`` spread beats dense (160 vs 120 ms)."""
    cluster = Topology(16, 8, _ideal())
    dense = cluster.subgraph(list(range(16)))
    spread = cluster.subgraph([n * 8 + g for n in range(4) for g in range(4)])
    assert dense.per_node == (8, 8) and spread.per_node == (4, 4, 4, 4)
    op = CommOp("aa", "AA", 1_000_000_000 // 16, 16, 1)
    times = {
        (name, ch): motif_time(topo, expand(op, ExecOption("aa", channel=ch))[0])
        for name, topo in (("dense", dense), ("spread", spread))
        for ch in ("gpu", "cpu")
    }
    assert times["dense", "gpu"] == pytest.approx(0.040)
    assert times["spread", "gpu"] == pytest.approx(0.060)
    assert times["dense", "cpu"] == pytest.approx(0.160)
    assert times["spread", "cpu"] == pytest.approx(0.120)


def test_rdma_via_pcie_makes_the_channels_share_links() -> None:
    topo = hgx2(nodes=2, gpus_per_node=4)
    on = topo.path(0, 4, "gpu").links
    off = topo.with_params(rdma_via_pcie=False).path(0, 4, "gpu").links
    cpu = topo.path(0, 4, "cpu").links
    assert set(on) & set(cpu) and not set(off) & set(cpu)
    assert topo.path(1, 1, "gpu").links == ()  # self copy: no link


@pytest.mark.slow  # about 45 s: the 1/2/4-way sweep on all 128 GPUs, twice
def test_incast_fit_gives_ordered_bands_and_is_the_weakest_on_the_grid() -> None:
    topo = hgx2()
    kappa = fit_incast(topo)
    assert kappa == topo.params.incast_kappa  # the default is the fitted value
    assert bands_ordered(incast_bands(topo))
    assert not bands_ordered(incast_bands(topo.with_params(incast_kappa=0.0)))


def test_tree_beats_ring_small_and_ring_beats_tree_large() -> None:
    """T:1790: tree best at small sizes, ring at large ones (shape only)."""
    topo = hgx2(nodes=4, gpus_per_node=8)

    def t(algo: str, size: int) -> float:
        op = CommOp("ar", "AR", size, topo.n_ranks, 1)
        return sum(motif_time(topo, m) for m in expand(op, ExecOption(algo)))

    assert t("tree", 10_000) < t("ring", 10_000)
    assert t("ring", 500_000_000) < t("tree", 500_000_000)


@pytest.fixture(scope="module")
def small() -> tuple[Topology, MicrobenchCost]:
    topo = hgx2(nodes=2, gpus_per_node=4)
    return topo, MicrobenchCost(topo)


def test_simulator_replays_a_serial_plan_exactly_like_the_model(small) -> None:
    """One comm stream, no overlap of motifs: the flow simulator and the channel-token model
    must agree (the motif times are the simulator's own microbenchmarks)."""
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks)
    m = run_mode(dag, topo, "fifo", cost=cost)
    two = simulate_plan(dag, topo, cost, m.result, iterations=2)
    assert two.period == pytest.approx(m.result.schedule.period, rel=1e-6)
    assert two.makespan == pytest.approx(m.result.schedule.makespan, rel=1e-6)
    assert 0.0 < m.sim.idle_fraction < 1.0


def test_calibration_hits_the_target_idle(small) -> None:
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks)
    scale = calibrate(dag, topo, target_idle=0.35, cost=cost, steps=20)
    idle = run_mode(dag.scaled(scale), topo, "fifo", cost=cost).sim.idle_fraction
    assert idle == pytest.approx(0.35, abs=0.01)
    with pytest.raises(ValueError, match="bracketed"):
        calibrate(dag, topo, target_idle=0.999, cost=cost, steps=2)


def test_syndicate_is_no_worse_than_fifo_greedy_in_the_model(small) -> None:
    topo, cost = small
    dag = dlrm("A1", topo.n_ranks)
    fifo = plan(dag, cost, mode="fifo", objective="period")
    syn = plan(
        dag, cost, mode="syndicate", budget=100, clock="proposals", warmup=50, objective="period"
    )
    assert syn.iter_time <= fifo.iter_time + 1e-12
    sim = simulate_plan(dag, topo, cost, syn, iterations=4)
    graph = unroll(dag, syn.plan, cost, prefetch=syn.prefetch, iterations=4)
    assert sim.period > 0 and len(sim.finish) == len(graph.nodes)
    order = periodic_order(dag, syn, 4)
    assert sorted(order) == sorted(n.id for n in graph.motifs)


def test_greedy_plan_is_the_least_standalone_time(small) -> None:
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks)
    g = greedy_plan(dag, cost)
    for c in dag.comms:
        chosen = sum(m.dur for m in cost.motifs(c.op, g[c.op.name]))
        for o in dag.options[c.op.name]:
            assert chosen <= sum(m.dur for m in cost.motifs(c.op, o)) + 1e-15


def test_bad_topologies_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        Topology(1, 4, gpus=(0, 0))
    with pytest.raises(ValueError, match="rates"):
        TopologyParams(roce=0)
    with pytest.raises(ValueError, match="channel"):
        hgx2(1, 2).path(0, 1, "tcp")


def test_per_rank_compute_skew_delays_the_collectives(small) -> None:
    """Per-GPU compute streams: with identical ranks (skew 1e-12) they reproduce the single
    SPMD stream; seeded per-rank slowdowns lengthen the iteration (stragglers hold up every
    collective after them), more skew more so, and the same seed gives the same run."""
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks)
    res = run_mode(dag, topo, "syndicate", cost=cost, budget=40, clock="proposals").result
    base = simulate_plan(dag, topo, cost, res, iterations=4)
    assert simulate_plan(dag, topo, cost, res, iterations=4, skew=0.0) == base
    alike = simulate_plan(dag, topo, cost, res, iterations=4, skew=1e-12)
    assert alike.period == pytest.approx(base.period, rel=1e-9)
    assert alike.makespan == pytest.approx(base.makespan, rel=1e-9)
    mild = simulate_plan(dag, topo, cost, res, iterations=4, skew=0.1, skew_seed=1)
    heavy = simulate_plan(dag, topo, cost, res, iterations=4, skew=0.5, skew_seed=1)
    assert base.period < mild.period < heavy.period
    assert base.makespan < mild.makespan < heavy.makespan
    # no rank is slowed by more than its factor: the iteration stays within (1 + skew) x
    assert heavy.makespan <= 1.5 * base.makespan + 1e-12
    again = simulate_plan(dag, topo, cost, res, iterations=4, skew=0.5, skew_seed=1)
    assert again == heavy
    other = simulate_plan(dag, topo, cost, res, iterations=4, skew=0.5, skew_seed=2)
    assert other.period != heavy.period
    with pytest.raises(ValueError, match="skew"):
        simulate_plan(dag, topo, cost, res, iterations=4, skew=-0.1)
