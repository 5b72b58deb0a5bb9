"""Enumerate candidate plans of a SQL query: join trees as DAGs of stages (spec A.4.1-A.4.2).

:func:`enumerate_plans` extracts the join graph (:mod:`qoop_planner.joingraph`), then finds the
``k`` cheapest **distinct** join trees of every connected component: left-deep and bushy trees
without cross products, by dynamic programming over connected subsets (each subset keeps its
``k`` cheapest sub-trees; a subset's cardinality does not depend on the tree, so the cost of a
join node is a function of its two input subsets and the top-``k`` lists combine exactly). With
more than ``max_dp_relations`` relations in a component, or when the DP would take more than
``DP_BUDGET`` steps (about 0.3 s; dense join graphs of 11+ relations), a bounded search takes
over: a left-deep beam search plus the greedy bushy tree (GOO, smallest intermediate result
first). Components are cross-joined only in the final stage; their top-``k`` lists merge exactly
because costs add.

Every plan is: one ``scan`` stage per relation, one ``join`` stage per inner node of the join
trees, and the ``final`` stage (the rest of the query over the component roots). Two plans are
distinct when their sets of stage signatures differ, i.e. their trees have different sets of
joined subsets. Stage ids are ``<kind>_<signature digest>``, so the same result carries the same
id in every plan of the query. Costs come from :mod:`qoop_planner.cost`, with a
:class:`~qoop_planner.cost.History` of measured stages applied over the estimates.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.schema import MappingSchema, Schema

from qoop_planner.cost import (
    CostConfig,
    History,
    StageMeasurement,
    TableStats,
    filter_selectivity,
    stage_cost,
    stage_work,
    type_width,
)
from qoop_planner.diverse import DEFAULT_GRID_VCORES, diverse_cache, share_grid
from qoop_planner.joingraph import (
    COMPONENT_TOKEN,
    OUT_DIALECT,
    JoinGraph,
    JoinPredicate,
    extract_join_graph,
    out_column,
    sql_text,
)
from qoop_planner.model import Plan, Share, Stage, StageCost, StageSignature
from qoop_planner.physical import (
    BROADCAST,
    PROFILES,
    PhysicalProfile,
    join_method,
    join_stage_cost,
    partitions_for,
)

__all__ = [
    "enumerate_plan_space",
    "enumerate_plans",
    "extract_join_graph",
    "is_bushy",
    "plan_space_for_graph",
    "plans_for_graph",
]

DP_BUDGET = 1_000_000  # steps of the exact DP per component before the bounded search
PAIR_STEPS = 40  # steps per joinable pair (a subset split), relative to one subset visited
# placeholder table names of a stage's inputs, replaced by "{{<stage id>}}" in the SQL text
INPUT_TOKEN = "qoopin{}q"
DUMMY_COLUMN = "qoop_one"  # the column a stage outputs when nothing above reads any of its columns

# A join tree: a relation index (leaf) or (mask, left tree, right tree).
Tree = Any


@dataclass
class _Entry:
    cost: float
    tree: Tree
    nodes: frozenset[int]  # masks of the tree's join nodes (its distinctness key)
    mask: int = 0  # the relations the tree covers


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


class _Planner:
    def __init__(
        self,
        graph: JoinGraph,
        schema: Schema | None,
        stats: Mapping[str, TableStats] | None,
        cfg: CostConfig,
        history: Mapping[str, StageMeasurement] | None,
        profile: PhysicalProfile | None = None,
    ) -> None:
        self.profile = profile
        self.g = graph
        self.schema = schema
        self.stats = stats or {}
        self.cfg = cfg
        self.history = history or {}
        self.rels = graph.relations
        self.n = len(self.rels)
        self.index = {r.alias: i for i, r in enumerate(self.rels)}
        self.preds: list[tuple[int, JoinPredicate]] = [
            ((1 << self.index[p.aliases[0]]) | (1 << self.index[p.aliases[1]]), p)
            for p in graph.predicates
        ]
        self.nbr = [0] * self.n
        for m, _ in self.preds:
            a, b = _bits(m)
            self.nbr[a] |= 1 << b
            self.nbr[b] |= 1 << a
        self._pred_cols = [p.referenced() for _, p in self.preds]
        # (kind, mask or relation index[, column or second mask]) -> width, signature, cost, stage
        self._memo: dict[tuple[str | int, ...], Any] = {}
        self._tstats = [
            self._table_stats(r.table) if r.kind == "table" else None for r in self.rels
        ]
        self.base_rows = [
            float(ts.rows) if ts is not None else cfg.default_rows for ts in self._tstats
        ]
        self.rows_f = [self._filtered_rows(i) for i in range(self.n)]
        self.pred_masks = [m for m, _ in self.preds]
        self.pred_sels = [self._join_sel(p) for _, p in self.preds]
        self._pred_idx_cols = [{(self.index[a], c) for a, c in pc} for pc in self._pred_cols]
        self.final_cols = [{(i, c) for c in r.final_columns} for i, r in enumerate(self.rels)]
        self._card: dict[int, float] = {}
        self._bytes: dict[int, float] = {}

    # ---- statistics -------------------------------------------------------------------------

    def _table_stats(self, table: str) -> TableStats | None:
        for key in (table, table.lower(), table.split(".")[-1], table.split(".")[-1].lower()):
            if key in self.stats:
                return self.stats[key]
        return None

    def _col_type(self, table: str, column: str) -> exp.DataType | None:
        if self.schema is None:
            return None
        try:
            t = self.schema.get_column_type(exp.to_table(table, dialect=OUT_DIALECT), column)
        except (SqlglotError, KeyError, ValueError):
            return None
        return None if t is None or t.this == exp.DataType.Type.UNKNOWN else t

    def width(self, i: int, column: str) -> float:
        key = ("w", i, column)
        if key not in self._memo:
            r = self.rels[i]
            dtype = self._col_type(r.table, column) if r.kind == "table" else None
            self._memo[key] = type_width(dtype, self.cfg.default_width)
        return self._memo[key]

    def _row_width(self, i: int) -> float:
        r = self.rels[i]
        if r.kind == "table" and self.schema is not None:
            try:
                cols = self.schema.column_names(exp.to_table(r.table, dialect=OUT_DIALECT))
            except (SqlglotError, KeyError, ValueError):
                cols = []
            if cols:
                return sum(self.width(i, c) for c in cols)
        return max(1.0, len(self._read_columns(i))) * self.cfg.default_width

    def _read_columns(self, i: int) -> set[str]:
        a = self.rels[i].alias
        cols = set(self.rels[i].final_columns) | set(self.rels[i].filter_columns)
        for pc in self._pred_cols:
            cols |= {c for al, c in pc if al == a}
        return cols

    def ndv(self, i: int, column: str | None) -> float | None:
        ts = self._tstats[i]
        if ts is None or column is None:
            return None
        v = ts.ndv.get(column, ts.ndv.get(column.lower()))
        return float(v) if v else None

    def _filtered_rows(self, i: int) -> float:
        sel = 1.0
        for f in self.rels[i].filter_exprs:
            sel *= filter_selectivity(f, lambda c: self.ndv(i, c), self.cfg)
        return max(1.0, self.base_rows[i] * sel)

    def _join_sel(self, p: JoinPredicate) -> float:
        ndvs = []
        for alias, col in zip(p.aliases, p.columns, strict=True):
            i = self.index[alias]
            d = self.ndv(i, col) or self.base_rows[i]
            ndvs.append(max(1.0, min(d, self.rows_f[i])))
        return 1.0 / max(ndvs)

    # ---- subsets ----------------------------------------------------------------------------

    def signature(self, mask: int) -> StageSignature:
        key = ("sig", mask)
        if key not in self._memo:
            self._memo[key] = StageSignature(
                relations=frozenset(self.rels[i].relation for i in _bits(mask)),
                predicates=frozenset(p.sql for m, p in self.preds if m & mask == m),
            )
        return self._memo[key]

    def measured(self, sig: StageSignature) -> StageMeasurement | None:
        return self.history.get(sig.digest) if self.history else None

    def measured_mask(self, mask: int) -> StageMeasurement | None:
        return self.measured(self.signature(mask)) if self.history else None

    def join_work(self, m1: int, m2: int) -> float:
        """Task-seconds of joining ``m1`` and ``m2`` (the DP's edge weight)."""
        mask = m1 | m2
        return stage_work(
            "join",
            self.bytes(m1) + self.bytes(m2),
            self.bytes(mask),
            self.cfg,
            self.measured_mask(mask),
        )

    def card(self, mask: int) -> float:
        rows = self._card.get(mask)
        if rows is None:
            m = self.measured_mask(mask)
            if m is not None:
                rows = float(m.rows_out)
            else:
                rows = 1.0
                for i in _bits(mask):
                    rows *= self.rows_f[i]
                for pm, sel in zip(self.pred_masks, self.pred_sels, strict=True):
                    if pm & mask == pm:
                        rows *= sel
            rows = self._card[mask] = max(1.0, rows)
        return rows

    def _output_set(self, mask: int) -> set[tuple[int, str]]:
        cols: set[tuple[int, str]] = set()
        for i in _bits(mask):
            cols |= self.final_cols[i]
        for pm, pc in zip(self.pred_masks, self._pred_idx_cols, strict=True):
            if pm & mask and pm & mask != pm:  # the predicate crosses the boundary
                cols |= {(i, c) for i, c in pc if (1 << i) & mask}
        return cols

    def outputs(self, mask: int) -> list[tuple[str, str]]:
        """(alias, column) the stage computing ``mask`` outputs: what the stages above read."""
        return [(self.rels[i].alias, c) for i, c in sorted(self._output_set(mask))]

    def bytes(self, mask: int) -> float:
        b = self._bytes.get(mask)
        if b is None:
            cols = self._output_set(mask)
            width = sum(self.width(i, c) for i, c in cols) if cols else 4.0
            b = self._bytes[mask] = self.card(mask) * width
        return b

    # ---- stage costs ------------------------------------------------------------------------

    def scan_cost(self, i: int) -> StageCost:
        mask = 1 << i
        sig = self.signature(mask)
        ts = self._tstats[i]
        full_width = self._row_width(i)
        table_bytes = ts.bytes if ts is not None and ts.bytes is not None else None
        if table_bytes is None:
            table_bytes = self.base_rows[i] * full_width
        read = table_bytes
        if self.cfg.columnar and self.rels[i].kind == "table":
            read_width = sum(self.width(i, c) for c in self._read_columns(i)) or 4.0
            read = table_bytes * min(1.0, read_width / full_width)
        return stage_cost(
            "scan",
            read,
            self.card(mask),
            self.bytes(mask),
            self.cfg,
            measured=self.measured(sig),
        )

    def physical_join(self, m1: int, m2: int) -> tuple[StageCost, str, int]:
        """Cost, method and partitions of joining ``m1`` and ``m2`` under the profile."""
        key = ("jp", min(m1, m2), max(m1, m2))
        if key not in self._memo:
            prof = self.profile
            assert prof is not None
            cfg = self.cfg
            mask = m1 | m2
            b1, b2 = self.bytes(m1), self.bytes(m2)
            probe, build = max(b1, b2), min(b1, b2)
            parts = partitions_for(b1 + b2, prof)
            method = join_method(build, parts, prof.broadcast, cfg)
            if method == BROADCAST:
                parts = partitions_for(probe, prof)  # the probe side's splits
            input_tasks = max(1, math.ceil(b1 / cfg.split_bytes)) + max(
                1, math.ceil(b2 / cfg.split_bytes)
            )
            form = f"join:{method}:{parts}"
            measured = (
                History.lookup(self.history, self.signature(mask).digest, form)
                if self.history
                else None
            )
            cost = join_stage_cost(
                method,
                probe,
                build,
                self.card(mask),
                self.bytes(mask),
                parts,
                cfg,
                input_tasks=input_tasks,
                measured=measured,
            )
            self._memo[key] = (cost, method, parts)
        return self._memo[key]

    def join_cost(self, m1: int, m2: int) -> StageCost:
        if self.profile is not None:
            return self.physical_join(m1, m2)[0]
        key = ("jc", min(m1, m2), max(m1, m2))
        if key not in self._memo:
            mask = m1 | m2
            b1, b2 = self.bytes(m1), self.bytes(m2)
            self._memo[key] = stage_cost(
                "join",
                b1 + b2,
                self.card(mask),
                self.bytes(mask),
                self.cfg,
                build_bytes=min(b1, b2),
                measured=self.measured(self.signature(mask)),
            )
        return self._memo[key]

    def final_signature(self) -> StageSignature:
        return StageSignature(
            relations=frozenset(r.relation for r in self.rels),
            predicates=frozenset(p.sql for p in self.g.predicates),
            top=self.g.top,
        )

    def final_cost(self, roots: list[int]) -> StageCost:
        g, cfg = self.g, self.cfg
        in_bytes = sum(self.bytes(m) for m in roots)
        rows = math.prod(self.card(m) for m in roots) if roots else 1.0
        for t in g.final_tables:
            ts = self._table_stats(t)
            t_rows = float(ts.rows) if ts is not None else cfg.default_rows
            in_bytes += ts.bytes if ts is not None and ts.bytes is not None else t_rows * 100.0
            rows = max(rows, t_rows)
        rows *= cfg.default_selectivity ** len(g.residual)
        if g.final_grouped:
            rows *= cfg.default_selectivity
        elif g.final_aggregate:
            rows = 1.0
        if g.final_limit is not None:
            rows = min(rows, float(g.final_limit))
        rows = max(1.0, rows)
        return stage_cost(
            "final",
            in_bytes,
            rows,
            rows * g.final_width * cfg.default_width,
            cfg,
            extra_memory_bytes=min(in_bytes, cfg.split_bytes) if g.final_aggregate else 0.0,
            measured=self.measured(self.final_signature()),
        )

    # ---- enumeration ------------------------------------------------------------------------

    def nbr_of(self, mask: int) -> int:
        out = 0
        for i in _bits(mask):
            out |= self.nbr[i]
        return out & ~mask

    def connected(self, mask: int) -> bool:
        low = mask & -mask
        seen = low
        frontier = low
        while frontier:
            nxt = 0
            for i in _bits(frontier):
                nxt |= self.nbr[i]
            frontier = nxt & mask & ~seen
            seen |= frontier
        return seen == mask

    def dp(self, full: int, k: int, budget: int = DP_BUDGET) -> list[_Entry] | None:
        """Exact top-k distinct join trees (left-deep and bushy) over the connected set ``full``.

        ``None`` when the search would exceed ``budget`` basic steps (subsets visited plus
        candidate trees combined); the caller then uses :meth:`bounded`.
        """
        steps = 0
        best: dict[int, list[_Entry]] = {1 << i: [_Entry(0.0, i, frozenset())] for i in _bits(full)}
        masks = []
        sub = full
        while sub:
            if sub & (sub - 1) and self.connected(sub):
                masks.append(sub)
            sub = (sub - 1) & full
        masks.sort(key=lambda m: (m.bit_count(), m))
        if sum(1 << (m.bit_count() - 1) for m in masks) > budget:
            return None  # the subset splits alone exceed the budget
        nbr_memo: dict[int, int] = {}
        for mask in masks:
            low = mask & -mask
            cands: list[tuple[float, int, _Entry, _Entry]] = []
            seq = 0
            bound = math.inf
            rest = mask ^ low
            steps += 1 << (mask.bit_count() - 1)  # s1 = low | (every subset of rest but rest)
            r = (rest - 1) & rest
            while True:
                s1 = low | r
                s2 = mask ^ s1
                l1, l2 = best.get(s1), best.get(s2)
                if l1 and l2:
                    if s1 not in nbr_memo:
                        nbr_memo[s1] = self.nbr_of(s1)
                    if nbr_memo[s1] & s2:
                        c = self.join_work(s1, s2)
                        for e1 in l1:
                            if e1.cost + l2[0].cost + c > bound:
                                break
                            for e2 in l2:
                                total = e1.cost + e2.cost + c
                                if total > bound:
                                    break
                                seq += 1
                                cands.append((total, seq, e1, e2))
                        steps += PAIR_STEPS
                        if len(cands) >= k:
                            cands = heapq.nsmallest(k, cands)
                            bound = cands[-1][0]
                if not r:
                    break
                r = (r - 1) & rest
            if steps > budget:
                return None
            cands = heapq.nsmallest(k, cands)
            best[mask] = [
                _Entry(total, (mask, e1.tree, e2.tree), e1.nodes | e2.nodes | {mask})
                for total, _, e1, e2 in cands
            ]
        return best.get(full, [])

    def bounded(self, full: int, k: int) -> list[_Entry]:
        """Left-deep beam search plus the greedy bushy tree, for large components."""
        width = max(4 * k, 16)
        states = [_Entry(0.0, i, frozenset(), 1 << i) for i in _bits(full)]
        for _ in range(len(states) - 1):
            nxt: dict[frozenset[int], _Entry] = {}
            for e in states:
                for b in _bits(self.nbr_of(e.mask) & full):
                    m2 = e.mask | (1 << b)
                    cost = e.cost + self.join_work(e.mask, 1 << b)
                    nodes = e.nodes | {m2}
                    if nodes not in nxt or nxt[nodes].cost > cost:
                        nxt[nodes] = _Entry(cost, (m2, e.tree, b), nodes, m2)
            states = heapq.nsmallest(width, nxt.values(), key=lambda x: x.cost)
        results = {e.nodes: e for e in states}
        goo = self.greedy(full)
        if goo is not None and goo.nodes not in results:
            results[goo.nodes] = goo
        return heapq.nsmallest(k, results.values(), key=lambda e: e.cost)

    def greedy(self, full: int) -> _Entry | None:
        items = [(1 << i, _Entry(0.0, i, frozenset())) for i in _bits(full)]
        while len(items) > 1:
            pick = None
            for (a, (ma, _)), (b, (mb, _)) in itertools.combinations(enumerate(items), 2):
                if self.nbr_of(ma) & mb:
                    size = self.bytes(ma | mb)
                    if pick is None or size < pick[0]:
                        pick = (size, a, b)
            if pick is None:
                return None
            _, a, b = pick
            (ma, ea), (mb, eb) = items[a], items[b]
            m = ma | mb
            e = _Entry(
                ea.cost + eb.cost + self.join_work(ma, mb),
                (m, ea.tree, eb.tree),
                ea.nodes | eb.nodes | {m},
            )
            items = [x for j, x in enumerate(items) if j not in (a, b)] + [(m, e)]
        return items[0][1]

    # ---- stages -----------------------------------------------------------------------------

    def stage_id(self, kind: str, sig: StageSignature) -> str:
        return f"{kind}_{sig.digest}"

    def scan_stage(self, i: int) -> Stage:
        key = ("scan", i)
        if key in self._memo:
            return self._memo[key]
        r = self.rels[i]
        mask = 1 << i
        sig = self.signature(mask)
        outs = self.outputs(mask)
        projections = [
            exp.alias_(exp.column(c, table=a), out_column(a, c), quoted=None) for a, c in outs
        ] or [exp.alias_(exp.Literal.number(1), DUMMY_COLUMN)]
        sel = exp.Select(expressions=projections)
        sel.set("from_", exp.From(this=r.source.copy()))
        if r.filter_exprs:
            sel.set("where", exp.Where(this=exp.and_(*[f.copy() for f in r.filter_exprs])))
        ops = [f"Scan({r.table} AS {r.alias})"]
        ops += [f"Filter({f})" for f in r.relation.filters]
        ops.append(f"Project({', '.join(f'{a}.{c}' for a, c in outs) or '1'})")
        stage = Stage(
            stage_id=self.stage_id("scan", sig),
            kind="scan",
            inputs=(),
            signature=sig,
            operators=tuple(ops),
            sql=sql_text(sel),
            cost=self.scan_cost(i),
        )
        self._memo[key] = stage
        return stage

    def join_stage(self, m1: int, m2: int, id1: str, id2: str) -> Stage:
        key = ("join", min(m1, m2), max(m1, m2))
        if key in self._memo:
            return self._memo[key]
        if self.bytes(m1) < self.bytes(m2):  # probe (larger) side left, build side right
            m1, m2, id1, id2 = m2, m1, id2, id1
        mask = m1 | m2
        sig = self.signature(mask)
        side = {self.rels[i].alias: ("l" if (1 << i) & m1 else "r") for i in _bits(mask)}
        across = [p for pm, p in self.preds if pm & m1 and pm & m2]

        def rewrite(e: exp.Expr) -> exp.Expr:
            e = e.copy()
            for col in list(e.find_all(exp.Column)):
                new = exp.column(out_column(col.table, col.name), table=side[col.table])
                if col is e:
                    return new
                col.replace(new)
            return e

        outs = self.outputs(mask)
        projections = [
            exp.alias_(exp.column(out_column(a, c), table=side[a]), out_column(a, c))
            for a, c in outs
        ] or [exp.alias_(exp.Literal.number(1), DUMMY_COLUMN)]
        left = exp.Table(
            this=exp.to_identifier(INPUT_TOKEN.format(0)),
            alias=exp.TableAlias(this=exp.to_identifier("l")),
        )
        right = exp.Table(
            this=exp.to_identifier(INPUT_TOKEN.format(1)),
            alias=exp.TableAlias(this=exp.to_identifier("r")),
        )
        on = exp.and_(*[rewrite(p.expr) for p in across])
        sel = exp.Select(expressions=projections)
        sel.set("from_", exp.From(this=left))
        sel.set("joins", [exp.Join(this=right, on=on)])
        sql = sql_text(sel)
        sql = sql.replace(INPUT_TOKEN.format(0), "{{" + id1 + "}}")
        sql = sql.replace(INPUT_TOKEN.format(1), "{{" + id2 + "}}")
        method, parts = "", 0
        if self.profile is not None:
            _, method, parts = self.physical_join(m1, m2)
        join_op = f"Join[INNER{', ' + method.upper() if method else ''}]"
        ops = (
            f"{join_op}({' AND '.join(p.sql for p in across)})",
            f"Project({', '.join(f'{a}.{c}' for a, c in outs) or '1'})",
        )
        stage = Stage(
            stage_id=self.stage_id("join", sig),
            kind="join",
            inputs=(id1, id2),
            signature=sig,
            operators=ops,
            sql=sql,
            cost=self.join_cost(m1, m2),
            method=method,
            partitions=parts,
        )
        self._memo[key] = stage
        return stage

    def final_stage(self, roots: list[tuple[int, str]]) -> Stage:
        sig = self.final_signature()
        sql = self.g.final_sql
        for i, (_, sid) in enumerate(roots):
            sql = sql.replace(COMPONENT_TOKEN.format(i), "{{" + sid + "}}")
        return Stage(
            stage_id=self.stage_id("final", sig),
            kind="final",
            inputs=tuple(sid for _, sid in roots),
            signature=sig,
            operators=self.g.final_operators,
            sql=sql,
            cost=self.final_cost([m for m, _ in roots]),
        )

    def build(self, query_id: str, rank: int, trees: list[Tree]) -> Plan:
        stages: list[Stage] = [self.scan_stage(i) for i in range(self.n)]
        scan_ids = [s.stage_id for s in stages]

        def emit(tree: Tree) -> tuple[int, str]:
            if isinstance(tree, int):
                return 1 << tree, scan_ids[tree]
            _, t1, t2 = tree
            (m1, id1), (m2, id2) = emit(t1), emit(t2)
            st = self.join_stage(m1, m2, id1, id2)
            stages.append(st)
            return m1 | m2, st.stage_id

        roots = [emit(t) for t in trees]
        final = self.final_stage(roots)
        stages.append(final)
        return Plan(
            plan_id=f"{query_id}/p{rank}",
            query_id=query_id,
            stages=tuple(stages),
            root=final.stage_id,
            total_cost=sum(s.cost.work for s in stages),
            physical=self.profile.name if self.profile is not None else "",
        )


def _fallback_plan(planner: _Planner, query_id: str) -> Plan:
    g = planner.g
    sig = StageSignature(relations=frozenset(), predicates=frozenset(), top=g.top)
    stage = Stage(
        stage_id=f"final_{sig.digest}",
        kind="final",
        inputs=(),
        signature=sig,
        operators=g.final_operators,
        sql=g.final_sql,
        cost=planner.final_cost([]),
    )
    return Plan(
        plan_id=f"{query_id}/p0",
        query_id=query_id,
        stages=(stage,),
        root=stage.stage_id,
        total_cost=stage.cost.work,
    )


def _as_schema(schema: Mapping[str, Any] | Schema | None) -> Schema | None:
    if schema is not None and not isinstance(schema, Schema):
        try:
            return MappingSchema(dict(schema), dialect=OUT_DIALECT)
        except SqlglotError:
            return None
    return schema


def _tree_combos(
    planner: _Planner, k: int, max_dp_relations: int
) -> list[tuple[float, list[Tree]]]:
    """The ``k`` cheapest combinations of one join tree per component, cheapest first."""
    per_component: list[list[_Entry]] = []
    for comp in planner.g.components:
        full = 0
        for a in comp:
            full |= 1 << planner.index[a]
        entries: list[_Entry] | None
        if len(comp) == 1:
            entries = [_Entry(0.0, planner.index[comp[0]], frozenset())]
        else:
            entries = planner.dp(full, k) if len(comp) <= max_dp_relations else None
            if entries is None:
                entries = planner.bounded(full, k)
        if not entries:  # pragma: no cover - components are connected by construction
            raise RuntimeError(f"no join tree for component {comp}")
        per_component.append(entries)
    # combine the components' top-k lists (costs add, so pairwise top-k merging is exact)
    combos: list[tuple[float, list[Tree]]] = [(0.0, [])]
    for entries in per_component:
        merged = [(c + e.cost, [*trees, e.tree]) for c, trees in combos for e in entries]
        combos = heapq.nsmallest(k, merged, key=lambda x: x[0])
    return combos


def is_bushy(tree: Tree) -> bool:
    """Whether a join tree has a join whose inputs are both joins.

    >>> is_bushy((15, (3, 0, 1), (12, 2, 3))), is_bushy((7, (3, 0, 1), 2))
    (True, False)
    """
    if isinstance(tree, int):
        return False
    _, left, right = tree
    if not isinstance(left, int) and not isinstance(right, int):
        return True
    return is_bushy(left) or is_bushy(right)


def plans_for_graph(
    graph: JoinGraph,
    schema: Mapping[str, Any] | Schema | None = None,
    stats: Mapping[str, TableStats] | None = None,
    k: int = 8,
    *,
    query_id: str = "q",
    history: History | Mapping[str, StageMeasurement] | None = None,
    config: CostConfig | None = None,
    max_dp_relations: int = 14,
) -> list[Plan]:
    """The ``k`` cheapest distinct plans of an extracted join graph (module docstring)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    schema = _as_schema(schema)
    planner = _Planner(graph, schema, stats, config or CostConfig(), history)
    if graph.fallback is not None:
        return [_fallback_plan(planner, query_id)]
    combos = _tree_combos(planner, k, max_dp_relations)
    plans = [planner.build(query_id, rank, trees) for rank, (_, trees) in enumerate(combos)]
    plans.sort(key=lambda p: p.total_cost)
    return _ranked(plans, query_id)


def _ranked(plans: Sequence[Plan], query_id: str) -> list[Plan]:
    """``plans`` with ids ``<query_id>/p<rank>`` in their order."""
    return [replace(p, plan_id=f"{query_id}/p{rank}") for rank, p in enumerate(plans)]


def plan_space_for_graph(
    graph: JoinGraph,
    schema: Mapping[str, Any] | Schema | None = None,
    stats: Mapping[str, TableStats] | None = None,
    *,
    query_id: str = "q",
    trees: int = 8,
    bushy: int = 4,
    pool: int = 24,
    profiles: Sequence[PhysicalProfile] = PROFILES,
    grid: Sequence[Share] | None = None,
    max_plans: int = 8,
    history: History | Mapping[str, StageMeasurement] | None = None,
    config: CostConfig | None = None,
    max_dp_relations: int = 14,
) -> list[Plan]:
    """The diverse plan cache of a join graph: join trees times physical profiles, then
    :func:`qoop_planner.diverse.diverse_cache` over ``grid`` (default: 2-512 vcores at 4 GB).

    Candidate trees are the ``trees`` cheapest by work plus up to ``bushy`` more bushy ones
    among the ``pool`` cheapest (bushy trees run independent joins side by side: more
    parallelism for more work); each is built under every profile of ``profiles``, plans equal
    stage by stage (signature and form) counted once. Plan ids are ``<query_id>/p<rank>``,
    least work first; :attr:`Plan.physical` names the profile.
    """
    if trees < 1 or pool < trees or bushy < 0:
        raise ValueError(f"need 1 <= trees <= pool and bushy >= 0, got {trees}, {pool}, {bushy}")
    if not profiles:
        raise ValueError("plan_space_for_graph needs at least one physical profile")
    schema = _as_schema(schema)
    cfg = config or CostConfig()
    base = _Planner(graph, schema, stats, cfg, history)
    if graph.fallback is not None:
        return [_fallback_plan(base, query_id)]
    combos = _tree_combos(base, pool, max_dp_relations)
    chosen = combos[:trees]
    extra = [c for c in combos[trees:] if any(is_bushy(t) for t in c[1])]
    chosen += extra[:bushy]
    candidates: list[Plan] = []
    seen: set[tuple[tuple[StageSignature, str], ...]] = set()
    for prof in profiles:
        planner = _Planner(graph, schema, stats, cfg, history, prof)
        for _, tree_list in chosen:
            p = planner.build(query_id, len(candidates), tree_list)
            key = tuple(sorted(((s.signature, s.form) for s in p.stages), key=repr))
            if key not in seen:
                seen.add(key)
                candidates.append(p)
    shares = tuple(grid) if grid is not None else share_grid(DEFAULT_GRID_VCORES, 4096.0)
    return _ranked(diverse_cache(candidates, shares, max_plans=max_plans), query_id)


def enumerate_plan_space(
    sql: str,
    schema: Mapping[str, Any] | Schema | None,
    stats: Mapping[str, TableStats] | None = None,
    dialect: str = "hive",
    *,
    query_id: str | None = None,
    **kwargs: Any,
) -> list[Plan]:
    """The diverse plan cache of ``sql`` (:func:`plan_space_for_graph`; arguments as
    :func:`enumerate_plans`, plus that function's keywords)."""
    graph = extract_join_graph(sql, schema, dialect=dialect)
    qid = query_id if query_id is not None else "q" + hashlib.sha256(sql.encode()).hexdigest()[:12]
    return plan_space_for_graph(graph, schema, stats, query_id=qid, **kwargs)


def enumerate_plans(
    sql: str,
    schema: Mapping[str, Any] | Schema | None,
    stats: Mapping[str, TableStats] | None = None,
    k: int = 8,
    dialect: str = "hive",
    *,
    query_id: str | None = None,
    history: History | Mapping[str, StageMeasurement] | None = None,
    config: CostConfig | None = None,
    max_dp_relations: int = 14,
) -> list[Plan]:
    """Up to ``k`` cheapest distinct plans of ``sql``, cheapest first (module docstring).

    ``schema`` maps table -> {column: type} (used to qualify the query and for column widths);
    ``stats`` maps table name -> :class:`TableStats`; ``history`` maps stage signature digests to
    measured stages. ``query_id`` defaults to a digest of ``sql``. Queries without a decomposable
    join block get a single plan (scan(s) + final, or one final stage for a top-level set
    operation). Raises :class:`ValueError` for SQL that does not parse or qualify.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    graph = extract_join_graph(sql, schema, dialect=dialect)
    qid = query_id if query_id is not None else "q" + hashlib.sha256(sql.encode()).hexdigest()[:12]
    return plans_for_graph(
        graph,
        schema,
        stats,
        k,
        query_id=qid,
        history=history,
        config=config,
        max_dp_relations=max_dp_relations,
    )
