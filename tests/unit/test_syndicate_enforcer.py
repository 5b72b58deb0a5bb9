"""The enforcer's prefetch on one rank (seed 000 T:1771; spec Gap 4.3): a comm-op of the next
iteration is accepted (one extra batch) and no further; under a prefetching plan the next
batch's data op is issued in this iteration's sequence, after the prologue of the first
prefetching iteration; the results are the inputs' (an all-to-all on one rank is a copy)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from support import free_port

from syndicate.dataplane.enforcer import Enforcer
from syndicate.dataplane.mesh import Mesh
from syndicate.dataplane.protocol import InstalledPlan, fifo_plan
from syndicate.motifs import CommOp, ExecOption, expand

# on one rank a ring all-reduce has no motifs at all, so the second op is an all-to-all too
OPS = (CommOp("data", "AA", 6, 1, 8), CommOp("emb", "AA", 4, 1, 8))
OPTS = {"data": ExecOption("aa", seg=2), "emb": ExecOption("aa", seg=2)}


@pytest.fixture
def enforcer() -> Iterator[Enforcer]:
    mesh = Mesh(0, [free_port()])
    enf = Enforcer(0, mesh, OPS, fifo_plan(OPS))
    yield enf
    enf.close()
    mesh.close()


def _prefetching() -> InstalledPlan:
    order = tuple(m.id for op in reversed(OPS) for m in expand(op, OPTS[op.name]))
    return InstalledPlan(1, OPTS, order, frozenset({"data"}))


def test_one_extra_batch_and_no_more(enforcer: Enforcer) -> None:
    enforcer.begin_iteration(0)
    enforcer.submit(1, "data", np.ones((1, 6)))  # the next batch: fine
    with pytest.raises(RuntimeError, match="one extra batch"):
        enforcer.submit(2, "data", np.ones((1, 6)))
    with pytest.raises(ValueError, match="twice"):
        enforcer.submit(1, "data", np.ones((1, 6)))


def test_a_prefetching_plan_issues_the_next_batch_in_this_iteration(enforcer: Enforcer) -> None:
    plan = _prefetching()
    assert enforcer.prepare(plan, plan.sha256())[0]
    enforcer.commit(1, activate_at=2)
    rng = np.random.default_rng(0)
    inputs = {(k, op.name): rng.integers(0, 9, (1, op.size))
              for k in range(5) for op in OPS}  # fmt: skip
    futures = {}
    for k in range(4):
        enforcer.begin_iteration(k)
        for j in [k, k + 1] if k == 0 else [k + 1]:  # the input pipeline, a batch ahead
            futures[(j, "data")] = enforcer.submit(j, "data", inputs[(j, "data")])
        futures[(k, "emb")] = enforcer.submit(k, "emb", inputs[(k, "emb")])
        for name in ("data", "emb"):
            assert np.array_equal(futures[(k, name)].result(timeout=30), inputs[(k, name)])
    assert np.array_equal(futures[(4, "data")].result(timeout=30), inputs[(4, "data")])
    data = [m.id for m in expand(OPS[0], OPTS["data"])]
    emb = [m.id for m in expand(OPS[1], OPTS["emb"])]
    fifo_data = [m.id for m in expand(OPS[0], ExecOption("aa"))]
    fifo_emb = [m.id for m in expand(OPS[1], ExecOption("aa"))]
    assert enforcer.issue_log[0] == fifo_data + fifo_emb
    assert enforcer.issue_log[2] == data + emb + [f"{m}@+1" for m in data]  # prologue first
    assert enforcer.issue_log[3] == emb + [f"{m}@+1" for m in data]
    assert enforcer.tpc.history == [(0, 0), (1, 0), (2, 1), (3, 1)]


def test_a_comm_op_with_no_motifs_completes_under_fifo_and_under_a_plan() -> None:
    """A ring all-reduce on one rank has no motifs: no sequence names it and nothing issues
    it, yet its Future must complete (with its input, the one-rank sum) in FIFO and under a
    committed plan, and the ops around it still run in order."""
    ops = (CommOp("data", "AA", 6, 1, 8), CommOp("ar", "AR", 5, 1, 8))
    assert expand(ops[1], ExecOption("ring")) == [] and expand(ops[1], ExecOption("tree")) == []
    opts = {"data": ExecOption("aa", seg=2), "ar": ExecOption("tree", seg=2)}
    order = tuple(m.id for m in expand(ops[0], opts["data"]))
    plan = InstalledPlan(1, opts, order)
    plan.validate(list(ops))
    mesh = Mesh(0, [free_port()])
    enf = Enforcer(0, mesh, ops, fifo_plan(ops))
    try:
        rng = np.random.default_rng(1)
        assert enf.prepare(plan, plan.sha256())[0]
        enf.commit(1, activate_at=2)
        for k in range(4):  # iterations 0-1 FIFO, 2-3 under the plan
            assert enf.begin_iteration(k).version == (0 if k < 2 else 1)
            ar_in = rng.standard_normal(5)
            data_in = rng.integers(0, 9, (1, 6))
            ar = enf.submit(k, "ar", ar_in)  # submitted first: FIFO must not wait on it forever
            data = enf.submit(k, "data", data_in)
            assert np.array_equal(ar.result(timeout=10), ar_in)
            assert np.array_equal(data.result(timeout=10), data_in)
        assert enf.error is None
        assert enf.issue_log[3] == list(order)
    finally:
        enf.close()
        mesh.close()
