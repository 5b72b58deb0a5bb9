"""Syndicate's data plane on real processes and sockets (seed 000 §4.4.4, Pseudocode 5; spec
§4, §6.5; facts F15, F18, F19): every collective equals the reference, every rank issues motifs
in the same order under jitter and shuffled submissions, a plan installed by two-phase commit
switches all ranks at one iteration, a NO vote or a vanished coordinator leaves the old plan
everywhere, and FIFO runs until the first commit."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support import wait_for

from arbiter.localhost import free_ports
from syndicate.cost import MicrobenchCost
from syndicate.dag import Workload, dlrm
from syndicate.dataplane.node import Coordinator, RankConfig, run_rank
from syndicate.dataplane.protocol import (
    FIFO_VERSION,
    InstalledPlan,
    carried,
    fifo_plan,
    issued_ids,
    iteration_sequence,
)
from syndicate.dataplane.replan import data_ops, installable
from syndicate.motifs import CommOp, ExecOption, expand
from syndicate.optimizer import plan as optimize
from syndicate.topology import hgx2

N = 4
OPS = (
    CommOp("ar-mlp", "AR", 1000, N, 8),
    CommOp("a2a-emb", "AA", 24, N, 8),
    CommOp("ar-top", "AR", 37, N, 8),
)


def _plan(version: int) -> InstalledPlan:
    """A plan cutting every op (segmented ring, splined AA on cpu, tree) with an order that
    interleaves the comm-ops (valid: each op's motifs keep their deps' order)."""
    options = {
        "ar-mlp": ExecOption("ring", seg=2),
        "a2a-emb": ExecOption("aa", seg=2, ways=2, channel="cpu"),
        "ar-top": ExecOption("tree", tree_n=2),
    }
    chains = [[m.id for m in expand(op, options[op.name])] for op in OPS]
    order: list[str] = []
    while any(chains):
        for chain in reversed(chains):
            if chain:
                order.append(chain.pop(0))
    return InstalledPlan(version, options, tuple(order))


@contextmanager
def _job(cfg: RankConfig) -> Iterator[tuple[list[int], mp.Queue]]:
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    chosen = free_ports(2 * N)  # distinct: mesh and control listeners of every rank
    ports, ctl = chosen[:N], chosen[N:]
    procs = [
        ctx.Process(target=run_rank, args=(r, ports, ctl[r], cfg.to_dict(), out), daemon=True)
        for r in range(N)
    ]
    for p in procs:
        p.start()
    try:
        yield ctl, out
    finally:
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.kill()


def _reports(out: mp.Queue) -> list[dict]:
    reports = sorted((out.get(timeout=180) for _ in range(N)), key=lambda r: r["rank"])
    for r in reports:
        assert r["ok"], (r["rank"], r["errors"])
    return reports


def _same_everywhere(reports: list[dict], key: str) -> object:
    first = reports[0][key]
    for r in reports[1:]:
        assert r[key] == first, f"rank {r['rank']} {key} differs from rank 0"
    return first


def _wait_until_iteration(coord: Coordinator, k: int) -> None:
    wait_for(f"every rank at iteration {k}", lambda: min(coord.status()) >= k, every=0.02)


@pytest.mark.parametrize("floats", [False, True])
def test_fifo_then_two_phase_switch_at_one_iteration(floats: bool) -> None:
    cfg = RankConfig(
        OPS, iterations=40, compute_s=0.02, jitter_s=0.01, permute=True, seed=7, floats=floats
    )
    plan = _plan(1)
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 2)
        activate_at = coord.propose(plan)
        coord.close()
        reports = _reports(out)
    assert activate_at is not None and activate_at < cfg.iterations
    versions = _same_everywhere(reports, "versions")
    assert versions == [(k, FIFO_VERSION if k < activate_at else 1) for k in range(40)]
    logs = _same_everywhere(reports, "issue_log")
    for k in range(cfg.iterations):
        if k >= activate_at:
            assert logs[str(k)] == list(plan.order)  # sequence numbers, despite shuffles
        else:  # FIFO: each op whole, in program order
            assert logs[str(k)] == [m.id for op in OPS for m in expand(op, _fifo(op))]


def _fifo(op: CommOp) -> ExecOption:
    return ExecOption("ring" if op.kind == "AR" else "aa")


def test_a_no_vote_aborts_everywhere_and_a_later_plan_commits() -> None:
    cfg = RankConfig(OPS, iterations=40, compute_s=0.02, jitter_s=0.01, seed=3)
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        assert coord.propose(_plan(1), corrupt=[2]) is None  # rank 2 sees a bad hash
        activate_at = coord.propose(_plan(2))
        coord.close()
        reports = _reports(out)
    assert activate_at is not None
    versions = _same_everywhere(reports, "versions")
    assert {v for _, v in versions} == {FIFO_VERSION, 2}  # version 1 never ran anywhere
    assert next(k for k, v in versions if v == 2) == activate_at


def test_coordinator_gone_after_prepare_aborts_on_every_rank() -> None:
    cfg = RankConfig(OPS, iterations=25, compute_s=0.02, jitter_s=0.01, seed=5)
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        votes = coord.prepare(_plan(1))
        assert all(v is not None and v["yes"] for v in votes)
        coord.close()  # dies before deciding: the ranks resolve among themselves
        reports = _reports(out)
    versions = _same_everywhere(reports, "versions")
    assert {v for _, v in versions} == {FIFO_VERSION}


def test_coordinator_gone_after_a_partial_commit_commits_everywhere() -> None:
    cfg = RankConfig(OPS, iterations=40, compute_s=0.02, jitter_s=0.01, seed=9)
    plan = _plan(1)
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        votes = coord.prepare(plan)
        activate_at = max(int(v["iter"]) for v in votes if v is not None) + 2
        coord._ask(0, {"type": "commit", "version": 1, "activate_at": activate_at})
        coord.close()  # only rank 0 heard COMMIT
        reports = _reports(out)
    versions = _same_everywhere(reports, "versions")
    assert next(k for k, v in versions if v == 1) == activate_at


def test_an_optimizer_plan_runs_on_the_data_plane() -> None:
    """The optimizer's own output for a tiny DLRM-like DAG on one 4-GPU node, installed by
    2PC and run: the last iterations issue exactly its steady-state order."""
    topo = hgx2(nodes=1, gpus_per_node=N)
    tiny = Workload("tiny", 1.0, tables=8, avg_dim=4, avg_pooling=2, mlp_layers=3, avg_mlp=8)
    dag = dlrm(tiny, N, batch_per_gpu=4)
    result = optimize(
        dag, MicrobenchCost(topo), mode="syndicate", budget=100, clock="proposals", warmup=20
    )
    installed = installable(dag, result, version=1)  # its prefetch decision included
    assert installed.prefetch == {"a2a-data-prep"}  # T:1779: data-prep prefetched
    cfg = RankConfig(
        dag.ops, iterations=30, compute_s=0.02, jitter_s=0.01, permute=True, seed=11,
        prefetch=tuple(data_ops(dag)),
    )  # fmt: skip
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        activate_at = coord.propose(installed)
        coord.close()
        reports = _reports(out)
    assert activate_at is not None
    logs = _same_everywhere(reports, "issue_log")
    steady = iteration_sequence(installed, dag.ops, carried(installed))
    assert logs[str(cfg.iterations - 1)] == issued_ids(steady)
    assert any(m.endswith("@+1") for m in logs[str(cfg.iterations - 1)])


def test_waits_over_5_percent_trigger_replans_installed_on_every_rank() -> None:
    """T:1672: the ranks' busy-waits, collected per iteration, exceed 5 % of the iteration in
    three consecutive iterations (the app submits its comm-ops spread over its compute), so the
    coordinator re-plans, and every new version switches all ranks at one iteration."""
    from syndicate.dataplane.protocol import ReplanTrigger

    cfg = RankConfig(OPS, iterations=36, compute_s=0.03, jitter_s=0.01, permute=True, seed=13)
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        first = coord.propose(_plan(1))
        assert first is not None
        proposals = coord.replan_when_waiting(
            ReplanTrigger(threshold=0.05, window=3),
            lambda v: _plan(v + 1),
            until=lambda: min(coord.status()) >= cfg.iterations - 8,
        )
        coord.close()
        reports = _reports(out)
    committed = [(v + 1, a) for v, a in proposals if a is not None]
    assert committed, proposals
    versions = _same_everywhere(reports, "versions")
    switches = [
        (v, k) for (k, v), (_, prev) in zip(versions[1:], versions, strict=False) if v != prev
    ]
    assert switches[0] == (1, first)
    assert switches[1:] == [(v, a) for v, a in committed if a < cfg.iterations]
    waits = reports[0]["wait_s"]
    assert any(w > 0 for w in waits.values())


def test_a_replan_reruns_the_optimizer_on_measured_motif_times() -> None:
    """Gap 4.5: the ranks' motif times refine the cost model (T:1494) and every re-plan the
    5 % trigger fires reruns the optimizer on the refined prices; each new plan is installed
    by 2PC on every rank and every collective still equals the reference."""
    from syndicate.cost import RefinedCost
    from syndicate.dataplane.protocol import ReplanTrigger
    from syndicate.dataplane.replan import refine, reoptimizer

    topo = hgx2(nodes=1, gpus_per_node=N)
    tiny = Workload("tiny", 1.0, tables=8, avg_dim=4, avg_pooling=2, mlp_layers=3, avg_mlp=8)
    dag = dlrm(tiny, N, batch_per_gpu=4)
    cost = RefinedCost(MicrobenchCost(topo))
    priced: list[float] = []
    make = reoptimizer(
        dag, cost, budget=60, warmup=10, on_plan=lambda r: priced.append(r.iter_time)
    )
    cfg = RankConfig(
        dag.ops, iterations=36, compute_s=0.03, jitter_s=0.01, permute=True, seed=17,
        prefetch=tuple(data_ops(dag)),
    )  # fmt: skip
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        _wait_until_iteration(coord, 1)
        first = coord.propose(make(1))
        assert first is not None
        proposals = coord.replan_when_waiting(
            ReplanTrigger(threshold=0.05, window=3),
            lambda v: make(v + 1),
            until=lambda: min(coord.status()) >= cfg.iterations - 8,
            observe=refine(cost, dag.ops),
        )
        coord.close()
        reports = _reports(out)  # every collective equal to the reference on every rank
    committed = [(v + 1, a) for v, a in proposals if a is not None]
    assert committed, proposals
    # the motif times arrived and moved the prices off the model's (loopback TCP on CPUs is
    # not the modelled NVLink/RoCE fabric)
    assert cost.observations > 0 and cost.ratio("gpu") != 1.0
    assert len(priced) == 1 + len(proposals) and priced[1] != priced[0]
    versions = _same_everywhere(reports, "versions")
    switches = [
        (v, k) for (k, v), (_, prev) in zip(versions[1:], versions, strict=False) if v != prev
    ]
    assert switches[0] == (1, first)
    assert switches[1:] == [(v, a) for v, a in committed if a < cfg.iterations]


# ---- prefetch of the next batch's data-prep (δ = +1; Gap 3.12, Gap 4.3, T:1771) -------------

DATA = CommOp("a2a-data", "AA", 16, N, 8)  # needs only its batch: the app submits it ahead
OPS_DP = (DATA, *OPS)


def _dp_plan(version: int, prefetch: bool) -> InstalledPlan:
    """:func:`_plan` with the data op (2 segments on ``gpu``, with ar-mlp), prefetched or not."""
    base = _plan(version)
    options = {**base.options, DATA.name: ExecOption("aa", seg=2)}
    data = [m.id for m in expand(DATA, options[DATA.name])]
    order = (base.order[0], *data, *base.order[1:])
    return InstalledPlan(version, options, order, frozenset({DATA.name} if prefetch else ()))


def _expected_logs(plans: list[InstalledPlan]) -> list[list[str]]:
    """What each iteration issues under ``plans[k]`` after ``plans[k-1]``: FIFO in submission
    order (the data op first: it was submitted a batch ahead) minus what the previous
    iteration prefetched; a plan, its :func:`iteration_sequence`."""
    logs: list[list[str]] = []
    for k, plan in enumerate(plans):
        done = carried(plans[k - 1] if k else None)
        if plan.fifo:
            logs.append(
                [m.id for op in OPS_DP if op.name not in done for m in expand(op, _fifo(op))]
            )
        else:
            logs.append(issued_ids(iteration_sequence(plan, OPS_DP, done)))
    return logs


def _run_with_switches(
    plans: list[InstalledPlan], seed: int, iterations: int = 40, data_wait: bool = False
) -> tuple:
    cfg = RankConfig(
        OPS_DP, iterations=iterations, compute_s=0.02, jitter_s=0.01, permute=True, seed=seed,
        prefetch=(DATA.name,), data_wait=data_wait,
    )  # fmt: skip
    starts = []
    with _job(cfg) as (ctl, out):
        coord = Coordinator(ctl)
        for i, plan in enumerate(plans):
            _wait_until_iteration(coord, 1 if i == 0 else starts[-1] + 3)
            activate_at = coord.propose(plan)
            assert activate_at is not None
            starts.append(activate_at)
        coord.close()
        reports = _reports(out)  # every collective, prefetched or not, equals the reference
    assert starts[-1] < iterations - 2
    return cfg, starts, reports


def test_a_prefetching_plan_issues_the_next_batch_identically_on_every_rank() -> None:
    """After the switch (a FIFO prologue of the data op, then the plan's sequence) every
    iteration issues the next batch's data-prep at its places (``@+1``), identically on every
    rank despite shuffled submissions, and every result equals the reference. The app computes
    only once it has its batch (``data_wait``): the prefetched batch is there in time."""
    pf = _dp_plan(1, prefetch=True)
    cfg, (a,), reports = _run_with_switches([pf], seed=21, iterations=30, data_wait=True)
    versions = _same_everywhere(reports, "versions")
    assert versions == [(k, FIFO_VERSION if k < a else 1) for k in range(cfg.iterations)]
    plans = [fifo_plan(OPS_DP) if k < a else pf for k in range(cfg.iterations)]
    logs = _same_everywhere(reports, "issue_log")
    want = _expected_logs(plans)
    assert [logs[str(k)] for k in range(cfg.iterations)] == want
    data = [m.id for m in expand(DATA, pf.options[DATA.name])]
    assert logs[str(a)][: len(data)] == data  # the prologue: this iteration's own batch
    assert logs[str(a + 1)].count(f"{data[0]}@+1") == 1 and data[0] not in logs[str(a + 1)]


def test_two_phase_switches_into_and_out_of_prefetch() -> None:
    """FIFO -> prefetching v1 -> plain v2 -> prefetching v3, each by 2PC: at every boundary all
    ranks switch together; into prefetch the data op runs first as a prologue, out of it the
    batch issued a step early is not issued again; results equal the reference throughout."""
    plans = [_dp_plan(1, True), _dp_plan(2, False), _dp_plan(3, True)]
    cfg, starts, reports = _run_with_switches(plans, seed=23)
    versions = _same_everywhere(reports, "versions")
    by_version = {p.version: p for p in plans} | {FIFO_VERSION: fifo_plan(OPS_DP)}
    ran = [by_version[v] for _, v in versions]
    switches = [k for k in range(1, cfg.iterations) if ran[k] is not ran[k - 1]]
    assert switches == starts
    logs = _same_everywhere(reports, "issue_log")
    assert [logs[str(k)] for k in range(cfg.iterations)] == _expected_logs(ran)
    data = {m.id for m in expand(DATA, plans[0].options[DATA.name])}
    assert not data & set(logs[str(starts[1])])  # switch out: nothing of the data op
    assert not any(m.endswith("@+1") for m in logs[str(starts[1])])
    assert set(logs[str(starts[2])][: len(data)]) == data  # switch in again: prologue


def test_a_jobs_ports_are_distinct() -> None:
    """The mesh and control ports of every rank: chosen together, never twice."""
    ports = free_ports(64)
    assert len(set(ports)) == 64 and all(1024 <= p < 65536 for p in ports)
