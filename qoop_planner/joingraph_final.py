"""The final stage on top of the join trees (QOOP; spec A.4.1 provenance of a stage).

What stays above the join block (residual predicates, outer joins, GROUP BY/HAVING, windows,
DISTINCT, ORDER BY/LIMIT, set operations, the enclosing SELECTs) runs as one final stage. Here
are its provenance (:func:`_operators`, the logical operators attached to the stage), the facts
the cost model reads from it (:func:`_final_facts`), and the one-stage graph of a query that is
not decomposed (:func:`_fallback`).
"""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from sqlglot import exp

from qoop_planner.joingraph_model import JoinGraph, sql_text

E = TypeVar("E", bound=exp.Expr)


def _aggregates(sel: exp.Select) -> bool:
    """Whether ``sel`` itself aggregates (an aggregate outside windows and nested queries)."""
    for proj in sel.expressions:
        for n in proj.find_all(exp.AggFunc):
            if n.find_ancestor(exp.Window, exp.Select) is sel:
                return True
    return False


def _final_facts(final: exp.Expr) -> dict[str, Any]:
    facts: dict[str, Any] = {"final_grouped": False, "final_aggregate": False}
    facts["final_grouped"] = any(True for _ in final.find_all(exp.Group))
    facts["final_aggregate"] = facts["final_grouped"] or any(
        _aggregates(sel) for sel in final.find_all(exp.Select)
    )
    limit = final.args.get("limit")
    if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
        with contextlib.suppress(ValueError):
            facts["final_limit"] = int(limit.expression.name)
    if isinstance(final, exp.Select):
        facts["final_width"] = max(1, len(final.expressions))
    tables = []
    for t in final.find_all(exp.Table):
        name = t.name
        if name.startswith("qoopcomp") or (not t.args.get("db") and _is_cte_name(final, name)):
            continue
        tables.append(exp.table_name(t))
    facts["final_tables"] = tuple(tables)
    return facts


def _is_cte_name(root: exp.Expr, name: str) -> bool:
    return any(c.alias_or_name == name for c in root.find_all(exp.CTE))


def _in_expression_query(node: exp.Expr) -> bool:
    """Whether ``node`` sits inside a subquery used as an expression (scalar, IN, EXISTS)."""
    cur = node.parent
    while cur is not None:
        if isinstance(cur, exp.Query):
            par = cur.parent
            if isinstance(par, exp.Subquery):
                par = par.parent
                if not isinstance(par, (exp.From, exp.Join)):
                    return True
            elif par is not None and not isinstance(
                par, (exp.CTE, exp.With, exp.Union, exp.Intersect, exp.Except)
            ):
                return True
        cur = cur.parent
    return False


def _operators(final: exp.Expr, residual: list[str], n_components: int) -> tuple[str, ...]:
    """Provenance of the final stage: its logical operators, outermost query blocks only."""

    def nodes(*types: type[E]) -> list[E]:
        return [n for n in final.find_all(*types) if not _in_expression_query(n)]

    ops: list[str] = []
    if n_components > 1:
        ops.append(f"CrossJoin({n_components} components)")
    ops.extend(f"Filter({r})" for r in residual)
    for j in nodes(exp.Join):
        if isinstance(j.this, exp.Table) and j.this.name.startswith("qoopcomp"):
            continue
        side = " ".join(x for x in (j.side, j.kind) if x) or "INNER"
        on = j.args.get("on")
        ops.append(f"Join[{side}]({sql_text(j.this)}{' ON ' + sql_text(on) if on else ''})")
    for sel in nodes(exp.Select):
        if sel.args.get("group"):
            ops.append(f"Aggregate({sql_text(sel.args['group'])})")
        elif _aggregates(sel):
            ops.append("Aggregate()")
        if sel.args.get("having"):
            ops.append(f"Having({sql_text(sel.args['having'].this)})")
        if sel.args.get("distinct"):
            ops.append("Distinct")
    ops.extend(f"Window({sql_text(w)})" for w in nodes(exp.Window))
    ops.extend(f"SetOp({s.key.upper()})" for s in nodes(exp.Union, exp.Intersect, exp.Except))
    n_sub = sum(
        1
        for q in final.find_all(exp.Subquery, exp.Exists, exp.In)
        if (not isinstance(q, exp.In) or q.args.get("query"))
        and not isinstance(q.parent, (exp.From, exp.Join))
        and not _in_expression_query(q)
    )
    if n_sub:
        ops.append(f"Subqueries({n_sub})")
    for o in nodes(exp.Order):
        ops.append(f"Sort({', '.join(sql_text(x) for x in o.expressions)})")
    ops.extend(f"Limit({sql_text(lim.expression)})" for lim in nodes(exp.Limit))
    if isinstance(final, exp.Select):
        ops.append(f"Project({', '.join(sql_text(x) for x in final.expressions)})")
    return tuple(ops)


def _fallback(root: exp.Expr, reason: str) -> JoinGraph:
    final_sql = sql_text(root)
    facts = _final_facts(root)
    return JoinGraph(
        query=final_sql,
        relations=(),
        predicates=(),
        residual=(),
        components=(),
        final_sql=final_sql,
        final_operators=(f"Query({reason})",),
        fallback=reason,
        **facts,
    )
