"""The training DAG, its two-iteration unrolling, the DLRM-like workloads and the spec's
fixtures (thesis §4.4.1-4.4.2, T:1492, T:1609; Table 4.2, T:1703-1717; spec §3.6, §3.7).

A :class:`TrainingDAG` is one iteration: compute tasks in program order (one compute stream,
T:1411) and comm-ops, each produced by a task (``after``; None for a data op submitted when its
iteration starts) and consumed by tasks of the same iteration (``before``) or of the next one
(``next_before``: ar-bottom-mlp(k) → fwd-bottom-mlp(k+1), spec §3.6). ``carry`` holds
compute → compute edges across iterations (bwd-emb(k) → fwd-emb(k+1)).

:func:`unroll` builds the scheduler's :class:`~syndicate.sched.Graph` over two iterations
(T:1609) under a plan. With ``prefetch`` a data op of iteration k+1 needs only its data, so a
scheduler may run it inside iteration k (the prefetch Syndicate finds, T:1771, T:1777);
without, it is submitted after iteration k's last compute (FIFO submission).

The DLRM DAG's shape is ours (Fig 4.14 is lost): fwd-emb → a2a-emb-fwd (E18: assumed to
exist); fwd-bottom-mlp; fwd-top-mlp (needs a2a-emb-fwd); bwd-top-mlp → ar-top-mlp;
bwd-interaction → a2a-emb-bwd; bwd-bottom-mlp → ar-bottom-mlp; bwd-emb (needs a2a-emb-bwd);
a2a-data-prep (data op) before fwd-emb. Sizes follow Table 4.2 as described in
:func:`dlrm`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from syndicate.cost import CostModel, TableCost
from syndicate.motifs import CommOp, ExecOption
from syndicate.sched import Graph, Node

__all__ = [
    "WORKLOADS",
    "CommSite",
    "Task",
    "TrainingDAG",
    "Workload",
    "catalogue",
    "dlrm",
    "fixture_x1",
    "fixture_x2",
    "fixture_x3",
    "plan_from",
    "single_plan",
    "unroll",
]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    time: float


@dataclass(frozen=True, slots=True)
class CommSite:
    op: CommOp
    after: str | None
    before: tuple[str, ...] = ()
    next_before: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainingDAG:
    name: str
    tasks: tuple[Task, ...]
    comms: tuple[CommSite, ...]
    options: Mapping[str, tuple[ExecOption, ...]]
    carry: tuple[tuple[str, str], ...] = ()
    priority: tuple[str, ...] = ()  # HO's hand order of comm-ops (T:1755)
    meta: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = {t.name for t in self.tasks}
        for c in self.comms:
            if c.after is not None and c.after not in names:
                raise ValueError(f"{c.op.name}: producer {c.after!r} is not a task")
            bad = [b for b in (*c.before, *c.next_before) if b not in names]
            if bad:
                raise ValueError(f"{c.op.name}: consumers {bad} are not tasks")
            if not self.options.get(c.op.name):
                raise ValueError(f"{c.op.name}: no execution options")
        for a, b in self.carry:
            if a not in names or b not in names:
                raise ValueError(f"carry edge {a}->{b} names an unknown task")

    @property
    def ops(self) -> tuple[CommOp, ...]:
        return tuple(c.op for c in self.comms)

    def scaled(self, compute_scale: float) -> TrainingDAG:
        """The same DAG with every compute time multiplied by ``compute_scale``."""
        tasks = tuple(Task(t.name, t.time * compute_scale) for t in self.tasks)
        return TrainingDAG(
            self.name, tasks, self.comms, self.options, self.carry, self.priority, self.meta
        )

    def skewed(self, skew: float, n_ranks: int) -> TrainingDAG:
        """The DAG as the optimizer prices it under per-rank compute skew (each rank's task
        slowed by 1 + ``skew``·U(0, 1), as in :func:`syndicate.flowsim.simulate`): a task is
        done when its slowest rank is, so every task is priced at the expected slowest of
        ``n_ranks``, 1 + skew·n/(n+1) times its time [ASSUMPTION: the draws are independent
        and the ranks meet at every task; chains of tasks with no collective between them let
        the ranks drift, so this overprices them a little]."""
        if not (skew >= 0 and n_ranks >= 1):
            raise ValueError(f"skew must be >= 0 and n_ranks >= 1, got {skew}, {n_ranks}")
        return self.scaled(1.0 + skew * n_ranks / (n_ranks + 1))


Plan = Mapping[str, ExecOption]


def unroll(
    dag: TrainingDAG,
    plan: Plan,
    cost: CostModel,
    *,
    iterations: int = 2,
    prefetch: bool = False,
) -> Graph:
    """The DAG unrolled over ``iterations`` under ``plan`` (node ids ``name#k``)."""
    missing = [c.op.name for c in dag.comms if c.op.name not in plan]
    if missing:
        raise ValueError(f"plan lacks options for {missing}")
    parents: dict[str, list[str]] = {}
    nodes: list[Node] = []
    prog = 0
    priced = {c.op.name: cost.motifs(c.op, plan[c.op.name]) for c in dag.comms}
    last_task = dag.tasks[-1].name
    for k in range(1, iterations + 1):
        for t in dag.tasks:
            parents.setdefault(f"{t.name}#{k}", [])
        for a, b in dag.carry:
            if k > 1:
                parents[f"{b}#{k}"].append(f"{a}#{k - 1}")
        comm_nodes: list[Node] = []
        for c in dag.comms:
            motifs = priced[c.op.name]
            if c.after is not None:
                entry = [f"{c.after}#{k}"]
            elif k > 1 and not prefetch:
                entry = [f"{last_task}#{k - 1}"]
            else:
                entry = []
            for m in motifs:
                deps = [f"{d}#{k}" for d in m.deps] if m.deps else list(entry)
                comm_nodes.append(
                    Node(f"{m.id}#{k}", m.dur, tuple(deps), 0, k, c.op.name, m.channel)
                )
            sinks = {m.id for m in motifs} - {d for m in motifs for d in m.deps}
            for b in c.before:
                parents[f"{b}#{k}"] += [f"{s}#{k}" for s in sorted(sinks)]
            if k < iterations:
                for b in c.next_before:
                    parents.setdefault(f"{b}#{k + 1}", []).extend(f"{s}#{k}" for s in sorted(sinks))
        # Program order: a comm-op is submitted right after its producer (data ops first).
        by_after: dict[str | None, list[Node]] = {}
        for n in comm_nodes:
            site = next(c for c in dag.comms if c.op.name == n.op)
            by_after.setdefault(site.after, []).append(n)
        for n in by_after.get(None, []):
            nodes.append(_with_prog(n, prog))
            prog += 1
        for t in dag.tasks:
            tid = f"{t.name}#{k}"
            nodes.append(Node(tid, t.time, (), prog, k))
            prog += 1
            for n in by_after.get(t.name, []):
                nodes.append(_with_prog(n, prog))
                prog += 1
    final = [
        Node(n.id, n.dur, tuple(parents[n.id]), n.prog, n.iteration) if not n.comm else n
        for n in nodes
    ]
    return Graph(tuple(final))


def _with_prog(n: Node, prog: int) -> Node:
    return Node(n.id, n.dur, n.parents, prog, n.iteration, n.op, n.channel)


# ---- the option catalogue (Gap 3.1) -------------------------------------------------------


def catalogue(op: CommOp) -> tuple[ExecOption, ...]:
    """AR: {ring, tree(n=8)} x seg {1,2,4} on gpu; AA: {1,2,4,8}-way x seg {1,2} x {gpu,cpu},
    keeping the ways that divide N."""
    if op.kind == "AR":
        return tuple(ExecOption(a, s) for a in ("ring", "tree") for s in (1, 2, 4))
    return tuple(
        ExecOption("aa", s, k, ch)
        for k in (1, 2, 4, 8)
        if op.n_ranks % k == 0
        for s in (1, 2)
        for ch in ("gpu", "cpu")
    )


# ---- the DLRM-like workloads (Table 4.2; spec §5.2, §6.4) ---------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    """Table 4.2's columns we use (T:1703-1717); ``tables`` reads "~100s" as 300 and "~1000s"
    as 1000 [ASSUMPTION]."""

    name: str
    mflops_per_sample: float
    tables: int
    avg_dim: float
    avg_pooling: float
    mlp_layers: int
    avg_mlp: int


WORKLOADS = {
    "A1": Workload("A1", 89, 300, 68, 27, 26, 914),
    "A2": Workload("A2", 638, 1000, 93, 15, 20, 3375),
    "A3": Workload("A3", 784, 1000, 231, 17, 26, 3210),
}

# Fractions of an iteration's compute per task [ASSUMPTION]; backward ~2x forward.
_SPLIT = (
    ("fwd-emb", 0.06),
    ("fwd-bottom-mlp", 0.12),
    ("fwd-top-mlp", 0.16),
    ("bwd-top-mlp", 0.24),
    ("bwd-interaction", 0.06),
    ("bwd-bottom-mlp", 0.24),
    ("bwd-emb", 0.12),
)


def dlrm(
    workload: str | Workload,
    n_ranks: int,
    *,
    batch_per_gpu: int = 256,
    grad_bytes: int = 2,
    flops_per_s: float = 125e12 * 0.2,
    options: Mapping[str, tuple[ExecOption, ...]] | None = None,
) -> TrainingDAG:
    """The DLRM-like DAG of a workload on ``n_ranks`` GPUs [ASSUMPTION throughout, from
    Table 4.2 and T:1790, T:1797]:

    * compute per iteration = MFLOPS/sample x batch / ``flops_per_s`` (V100 FP16 at an
      efficiency the calibration sets), split over the tasks by fixed fractions;
    * all-to-alls: rows of batch x tables / N x dim fp16 values per destination for the
      embedding exchange (forward and backward), batch x tables / N x pooling int32 indices
      for a2a-data-prep;
    * all-reduces in fp16: ar-top-mlp two layers of avg width (O(MB)), ar-bottom-mlp the
      other layers (O(100s MB)).
    """
    w = WORKLOADS[workload] if isinstance(workload, str) else workload
    compute = w.mflops_per_sample * 1e6 * batch_per_gpu / flops_per_s
    tasks = tuple(Task(n, compute * f) for n, f in _SPLIT)
    per_dst = batch_per_gpu * w.tables / n_ranks  # (sample, table) pairs per destination
    emb = CommOp("a2a-emb-fwd", "AA", max(1, round(per_dst * w.avg_dim)), n_ranks, 2)
    emb_b = CommOp("a2a-emb-bwd", "AA", emb.size, n_ranks, 2)
    prep = CommOp("a2a-data-prep", "AA", max(1, round(per_dst * w.avg_pooling)), n_ranks, 4)
    top = CommOp("ar-top-mlp", "AR", 2 * w.avg_mlp**2, n_ranks, grad_bytes)
    bottom = CommOp("ar-bottom-mlp", "AR", (w.mlp_layers - 2) * w.avg_mlp**2, n_ranks, grad_bytes)
    comms = (
        CommSite(prep, None, ("fwd-emb",)),
        CommSite(emb, "fwd-emb", ("fwd-top-mlp",)),
        CommSite(top, "bwd-top-mlp", (), ("fwd-top-mlp",)),
        CommSite(emb_b, "bwd-interaction", ("bwd-emb",)),
        CommSite(bottom, "bwd-bottom-mlp", (), ("fwd-bottom-mlp",)),
    )
    opts = options or {c.op.name: catalogue(c.op) for c in comms}
    return TrainingDAG(
        f"dlrm-{w.name}",
        tasks,
        comms,
        opts,
        carry=(("bwd-emb", "fwd-emb"),),
        priority=("a2a-emb-bwd", "a2a-data-prep", "a2a-emb-fwd", "ar-top-mlp", "ar-bottom-mlp"),
        meta={"compute_s": compute, "batch_per_gpu": batch_per_gpu},
    )


# ---- fixtures X1-X3 (spec §3.7; durations in abstract units) -------------------------------

_RING, _TREE = ExecOption("ring"), ExecOption("tree")
_GPU, _CPU = ExecOption("aa", channel="gpu"), ExecOption("aa", channel="cpu")


def fixture_x1() -> tuple[TrainingDAG, TableCost]:
    """Channel choice, a miniature Fig 4.6: greedy 7.0, best (cpu, ring, tree, ring) 6.0."""
    tasks = tuple(Task(n, 1.0) for n in ("f", "bwd3", "bwd2", "bwd1", "nxt"))
    a = CommOp("a", "AA", 1, 1)
    b, c, d = (CommOp(n, "AR", 1, 1) for n in "bcd")
    comms = (
        CommSite(a, "f", ("nxt",)),
        CommSite(b, "bwd3", ("nxt",)),
        CommSite(c, "bwd2", ("nxt",)),
        CommSite(d, "bwd1", ("nxt",)),
    )
    table = {
        ("a", _GPU.label): 2.0,
        ("a", _CPU.label): 3.0,
        ("b", _RING.label): 1.0,
        ("b", _TREE.label): 1.5,
        ("c", _RING.label): 1.5,
        ("c", _TREE.label): 1.0,
        ("d", _RING.label): 1.0,
        ("d", _TREE.label): 1.2,
    }
    opts = {"a": (_GPU, _CPU), "b": (_RING, _TREE), "c": (_RING, _TREE), "d": (_RING, _TREE)}
    return TrainingDAG("X1", tasks, comms, opts), TableCost(table)


def fixture_x2() -> tuple[TrainingDAG, TableCost]:
    """Order: FIFO 8.0 against the critical path 7.0 (one iteration)."""
    tasks = (Task("p", 1.0), Task("q", 3.0), Task("r", 1.0), Task("s", 2.0))
    x, y = CommOp("x", "AA", 1, 1), CommOp("y", "AA", 1, 1)
    comms = (CommSite(x, "p"), CommSite(y, "p", ("r",)))
    table = {("x", _GPU.label): 3.0, ("y", _GPU.label): 1.0}
    return TrainingDAG("X2", tasks, comms, {"x": (_GPU,), "y": (_GPU,)}), TableCost(table)


def fixture_x3() -> tuple[TrainingDAG, TableCost]:
    """Prefetch: 2-iteration makespan 12 without, 10 with; period 6 -> 4."""
    tasks = (Task("emb", 1.0), Task("mlp", 3.0))
    dp = CommOp("dp", "AA", 1, 1)
    comms = (CommSite(dp, None, ("emb",)),)
    return TrainingDAG("X3", tasks, comms, {"dp": (_GPU,)}), TableCost({("dp", _GPU.label): 2.0})


def single_plan(dag: TrainingDAG) -> dict[str, ExecOption]:
    """Each comm-op's first option."""
    return {c.op.name: dag.options[c.op.name][0] for c in dag.comms}


def plan_from(dag: TrainingDAG, choice: Sequence[int]) -> dict[str, ExecOption]:
    """The plan picking option ``choice[i]`` for the i-th comm-op."""
    return {c.op.name: dag.options[c.op.name][i] for c, i in zip(dag.comms, choice, strict=True)}
