"""The cost model refined by enforcer statistics (T:1494, spec §3.4 (1), Gap 4.5): measured
motif times reprice the options, and the optimizer rerun on them changes the plan."""

from __future__ import annotations

import math

import pytest

from syndicate.cost import MicrobenchCost, RefinedCost
from syndicate.dag import Workload, dlrm
from syndicate.dataplane.protocol import motif_key, parse_motif_key
from syndicate.dataplane.replan import refine, reoptimizer
from syndicate.motifs import ExecOption
from syndicate.optimizer import PlanResult
from syndicate.topology import hgx2

TINY = Workload("tiny", 1.0, tables=8, avg_dim=4, avg_pooling=2, mlp_layers=3, avg_mlp=8)
SEARCH = dict(budget=100, clock="proposals", warmup=20)


def _setup() -> tuple[object, MicrobenchCost]:
    return dlrm(TINY, 4, batch_per_gpu=4), MicrobenchCost(hgx2(nodes=1, gpus_per_node=4))


def test_a_slow_gpu_channel_moves_the_all_to_alls_to_cpu() -> None:
    dag, base = _setup()
    ops = {c.op.name: c.op for c in dag.comms}  # type: ignore[attr-defined]
    results: list[PlanResult] = []
    cost = RefinedCost(base)
    make = reoptimizer(dag, cost, on_plan=results.append, **SEARCH)  # type: ignore[arg-type]
    first = make(1)
    # the ranks measure the installed plan: gpu motifs 20x slower than modelled, cpu as modelled
    observe = refine(cost, list(ops.values()))
    for name, opt in first.options.items():
        observe({
            motif_key(name, opt, m.id): m.dur * (20 if m.channel == "gpu" else 1)
            for m in base.motifs(ops[name], opt)
        })  # fmt: skip
    assert cost.ratio("gpu") == pytest.approx(20.0) and cost.observations > 0
    second = make(2)
    on_cpu = [sum(o.channel == "cpu" for o in p.options.values()) for p in (first, second)]
    assert on_cpu[1] > on_cpu[0], on_cpu
    assert second.version == 2 and second.order != first.order
    # the refined prices predict a slower iteration than the model did
    assert results[1].iter_time > results[0].iter_time


def test_measurements_are_averaged_and_bad_ones_change_nothing() -> None:
    dag, base = _setup()
    op = next(c.op for c in dag.comms if c.op.kind == "AA")  # type: ignore[attr-defined]
    opt = ExecOption("aa")
    (m,) = base.motifs(op, opt)
    cost = RefinedCost(base)
    cost.observe(op, opt, m.id, 1.0)
    cost.observe(op, opt, m.id, 2.0)
    assert cost.motifs(op, opt)[0].dur == pytest.approx(0.8 * 1.0 + 0.2 * 2.0)
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(ValueError, match="finite"):
            cost.observe(op, opt, m.id, bad)
    with pytest.raises(ValueError, match="no motif"):
        cost.observe(op, opt, "nope", 1.0)
    assert cost.motifs(op, opt)[0].dur == pytest.approx(1.2) and cost.observations == 1
    # the callback logs and skips what it cannot use, and keeps the rest
    refine(cost, [op])({
        "not a key": 1.0,
        motif_key("other-op", opt, m.id): 1.0,
        motif_key(op.name, opt, "nope"): 1.0,
        motif_key(op.name, opt, m.id): 1.2,
    })  # fmt: skip
    assert cost.motifs(op, opt)[0].dur == pytest.approx(1.2)
    with pytest.raises(ValueError, match="alpha"):
        RefinedCost(base, alpha=0.0)


def test_motif_keys_round_trip_and_refuse_garbage() -> None:
    opt = ExecOption("tree", seg=4, tree_n=2)
    assert parse_motif_key(motif_key("ar", opt, "ar/s3/RE1")) == ("ar", opt, "ar/s3/RE1")
    for bad in ("", "a|b", "ar|tree|x|1|gpu|2|m", "ar|mesh|1|1|gpu|2|m", "ar|ring|1|1|nic|8|m"):
        with pytest.raises(ValueError, match="not a motif key"):
            parse_motif_key(bad)
