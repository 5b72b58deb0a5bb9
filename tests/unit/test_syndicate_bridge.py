"""Syndicate-priced slowdowns in Themis's bids (spec §6.3; fact F26): placement classes, the
plan-dependent flip between dense and spread placements, and the Agent's bid table priced
through the ``PredictedSlowdown`` seam of :mod:`arbiter.placement`."""

from __future__ import annotations

import pytest

from arbiter.bids import generate_bid
from arbiter.cluster import load_cluster
from arbiter.fairness import rho_single_job
from arbiter.placement import Placement, PredictedSlowdown, placement_of
from syndicate.bridge import SyndicatePredictor, class_topology, placement_classes
from syndicate.dag import CommSite, Task, TrainingDAG
from syndicate.motifs import CommOp, ExecOption
from syndicate.topology import Topology, TopologyParams

IDEAL = TopologyParams(
    alpha_nvlink=0.0,
    alpha_rdma=0.0,
    alpha_pcie=0.0,
    alpha_tcp=0.0,
    motif_overhead=0.0,
    incast_kappa=0.0,
    tcp_efficiency=1.0,
    pcie=1e15,
)


def _a2a_job(channel: str):
    """One all-to-all of 1 GB per GPU between two negligible compute tasks, on ``channel``."""

    def build(n: int) -> TrainingDAG:
        op = CommOp("a2a", "AA", 1_000_000_000 // n, n, 1)
        tasks = (Task("fwd", 1e-9), Task("bwd", 1e-9))
        opts = {"a2a": (ExecOption("aa", channel=channel),)}
        return TrainingDAG("a2a", tasks, (CommSite(op, "fwd", ("bwd",)),), opts)

    return build


def test_f26_placement_class_counts() -> None:
    assert [len(placement_classes(k)) for k in (4, 8, 16, 32)] == [5, 22, 186, 2755]
    assert placement_classes(3, nodes=2, per_node=2) == [(2, 1)]
    with pytest.raises(ValueError):
        placement_classes(0)
    with pytest.raises(ValueError, match="does not fit"):
        class_topology(Topology(2, 4), (5,))


def test_f26_the_better_placement_flips_with_the_plan() -> None:
    base = Topology(16, 8, IDEAL)
    gpu = SyndicatePredictor(_a2a_job("gpu"), base, budget=1)
    cpu = SyndicatePredictor(_a2a_job("cpu"), base, budget=1)
    assert gpu((8, 8)) == pytest.approx(0.040, rel=1e-6)
    assert gpu((4, 4, 4, 4)) == pytest.approx(0.060, rel=1e-6)
    assert cpu((8, 8)) == pytest.approx(0.160, rel=1e-6)
    assert cpu((4, 4, 4, 4)) == pytest.approx(0.120, rel=1e-6)
    s_gpu, s_cpu = PredictedSlowdown(gpu), PredictedSlowdown(cpu)
    spread = Placement(((("V100", (4,)),) * 4,))
    assert s_gpu.slowdown(spread) == pytest.approx(1.5)
    assert s_cpu.slowdown(spread) == pytest.approx(0.75)  # spread beats dense


def test_host_nic_share_of_co_tenants_enters_the_prediction() -> None:
    base = Topology(16, 8, IDEAL)
    alone = SyndicatePredictor(_a2a_job("cpu"), base, budget=1)
    shared = SyndicatePredictor(_a2a_job("cpu"), base, host_nic_share=0.5, budget=1)
    assert shared((4, 4, 4, 4)) == pytest.approx(2 * alone((4, 4, 4, 4)), rel=1e-6)


def test_the_agents_bid_is_priced_by_the_plan() -> None:
    """Eq. 1 with S(G) from Syndicate: on ``cpu`` the 2+2+2+2 split of 8 GPUs bids a lower ρ
    than 4+4; on ``gpu`` the reverse (the locality model ranks them equal)."""
    cluster = load_cluster("nodes:4:8")
    base = Topology(4, 8, IDEAL)
    offer = frozenset(g.id for g in cluster.gpus)

    def rho_of(slowdown: PredictedSlowdown):
        def rho(gpus: frozenset[str], placement: Placement) -> float:
            return rho_single_job(
                elapsed=0.0,
                iters_left=1000,
                iter_time_serial=1.0,
                slowdown=slowdown.slowdown(placement),
                gpus=len(gpus),
                demand_max=8,
                t_id=200.0,
            )

        return rho

    machines = sorted({g.machine for g in cluster.gpus})

    def take(per_machine: tuple[int, ...]) -> frozenset[str]:
        out: list[str] = []
        for m, c in zip(machines, per_machine, strict=False):
            out += sorted(g.id for g in cluster.gpus if g.machine == m)[:c]
        return frozenset(out)

    values = {}
    for channel in ("gpu", "cpu"):
        rho = rho_of(PredictedSlowdown(SyndicatePredictor(_a2a_job(channel), base, budget=1)))
        values[channel] = {
            c: rho(take(c), placement_of(cluster, take(c))) for c in ((4, 4), (2, 2, 2, 2))
        }
        # The Agent's real bid generator prices its rows with the same estimator.
        bid = generate_bid("dlrm", cluster, offer, rho, demand_max=8, max_rows=64)
        for g, v in bid.rows.items():
            if g:
                assert v == pytest.approx(rho(g, placement_of(cluster, g)))
    assert values["cpu"][(2, 2, 2, 2)] < values["cpu"][(4, 4)]
    assert values["gpu"][(4, 4)] < values["gpu"][(2, 2, 2, 2)]


def test_predicted_slowdown_caches_and_refuses_bad_predictions() -> None:
    calls: list[tuple[int, ...]] = []

    def predict(c: tuple[int, ...]) -> float:
        calls.append(c)
        return float(len(c))

    s = PredictedSlowdown(predict, gpus_per_machine=4)
    two = Placement(((("V100", (2,)), ("V100", (2,))),))
    assert s.slowdown(two) == 2.0 and s.slowdown(two) == 2.0
    assert calls == [(2, 2), (4,)]
    assert s.dense(9) == (4, 4, 1)
    with pytest.raises(ValueError, match="not > 0"):
        PredictedSlowdown(lambda c: 0.0).slowdown(two)
