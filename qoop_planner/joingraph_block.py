"""Parsing a query and finding its join block (QOOP; spec A.4.1 logical plan, A.4.2 signatures).

The SQL is parsed and qualified against the schema (:func:`_parse_qualified`); its **join
block** is the FROM/JOIN/WHERE of the main SELECT, descending through a lone derived table or
a CTE referenced once (:func:`_find_block`), whose leading inner/comma joins
(:func:`_split_block`) the join graph decomposes. The helpers here split WHERE/ON into
conjuncts (factoring ORs), classify them (volatile, nested queries, aggregates, uncorrelated
``IN`` filters), normalise predicates for the stage signatures, and inline or prune CTEs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import Schema

from qoop_planner.joingraph_model import sql_text


def _parse_qualified(sql: str, schema: Mapping[str, Any] | Schema, dialect: str) -> exp.Expr:
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError("empty SQL text")
    try:
        statements = [
            s for s in sqlglot.parse(sql, read=dialect, error_level=ErrorLevel.RAISE) if s
        ]
    except ParseError as e:
        raise ValueError(f"cannot parse SQL ({dialect}): {e}") from e
    except SqlglotError as e:  # e.g. unknown dialect, tokenizer errors
        raise ValueError(f"cannot parse SQL ({dialect}): {e}") from e
    if len(statements) != 1:
        raise ValueError(f"expected exactly one SQL statement, got {len(statements)}")
    stmt = statements[0]
    if not isinstance(stmt, exp.Query):
        raise ValueError(f"not a query: a {stmt.key.upper()} statement")
    for node in stmt.walk():
        node.comments = None
    try:
        return qualify(
            stmt,
            schema=schema if isinstance(schema, Schema) else dict(schema),
            dialect=dialect,
            quote_identifiers=False,
            validate_qualify_columns=True,
        )
    except SqlglotError as e:
        raise ValueError(f"cannot qualify the query against the schema: {e}") from e


# --------------------------------------------------------------------------------------------
# helpers


def _conjuncts(e: exp.Expr | None) -> list[exp.Expr]:
    if e is None:
        return []
    e = e.unnest()
    if isinstance(e, exp.And):
        return [c for x in e.flatten() for c in _conjuncts(x)]
    return [e]


def _factor_or(pred: exp.Expr) -> list[exp.Expr]:
    """Pull the conjuncts shared by every branch of an OR out of it (distributivity)."""
    p = pred.unnest()
    if not isinstance(p, exp.Or):
        return [pred]
    branches = [_conjuncts(b) for b in p.flatten()]
    keyed = [{sql_text(c): c for c in b} for b in branches]
    common = set(keyed[0])
    for k in keyed[1:]:
        common &= set(k)
    if not common:
        return [pred]
    out = [keyed[0][s].copy() for s in sorted(common)]
    rests = [[c for s, c in k.items() if s not in common] for k in keyed]
    if all(rests):  # otherwise one branch is just the common part and the OR is implied
        ors = [exp.and_(*r) if len(r) > 1 else r[0].copy() for r in rests]
        out.append(exp.paren(exp.or_(*[exp.paren(o) for o in ors]), copy=False))
    return out


def _is_volatile(e: exp.Expr) -> bool:
    return any(
        isinstance(n, (exp.Rand, exp.Randn))
        or (isinstance(n, exp.Anonymous) and n.name.lower() in {"uuid", "random"})
        for n in e.walk()
    )


def _has_nested_query(e: exp.Expr) -> bool:
    return any(isinstance(n, (exp.Query, exp.Subquery, exp.Exists)) for n in e.walk())


def _uncorrelated_in_alias(
    e: exp.Expr, aliases: frozenset[str] | set[str], outer_ctes: frozenset[str] | set[str]
) -> str | None:
    """The one alias whose rows an ``x [NOT] IN (SELECT ...)`` conjunct filters, when the
    subquery is uncorrelated and ``x`` reads only that alias; else None.

    Such a conjunct is a per-row predicate of that relation (the subquery is a constant set),
    so under inner joins it may run at the relation's scan like any single-relation filter
    (QOOP's stages then carry it, instead of materialising the unfiltered joins for the final
    stage: TPC-H Q18's ``o_orderkey IN (...)`` keeps 57 of 1.5 M orders at sf 1). Scoping is
    SQL's: a column inside the subquery whose table is defined there is inner; any other makes
    the subquery correlated, and the conjunct stays residual.
    """
    p = e.unnest()
    if isinstance(p, exp.Not):
        p = p.this.unnest()
    query = p.args.get("query") if isinstance(p, exp.In) else None
    if query is None or p.args.get("expressions"):
        return None
    left = {c.table for c in p.this.find_all(exp.Column)}
    if len(left) != 1 or not left <= set(aliases) or _has_nested_query(p.this):
        return None
    ctes = {c.alias for c in query.find_all(exp.CTE)}
    if any(t.name in outer_ctes and t.name not in ctes for t in query.find_all(exp.Table)):
        return None  # it reads a CTE of the outer query, which a stage does not define
    inner = {t.alias_or_name for t in query.find_all(exp.Table)}
    inner |= {s.alias for s in query.find_all(exp.Subquery, exp.CTE) if s.alias}
    if any(c.table not in inner for c in query.find_all(exp.Column) if c.table):
        return None
    if _is_volatile(query) or _is_volatile(p.this):
        return None
    return next(iter(left))


def _has_agg_or_window(e: exp.Expr) -> bool:
    return any(isinstance(n, (exp.AggFunc, exp.Window)) for n in e.walk())


def _canonical(pred: exp.Expr) -> str:
    """Normalised text of a predicate: = and <> with their sides sorted."""
    p = pred.unnest()
    if isinstance(p, (exp.EQ, exp.NEQ, exp.NullSafeEQ)):
        sides = sorted(
            [p.left, p.right], key=lambda x: (not any(x.find_all(exp.Column)), sql_text(x))
        )
        a, b = (sql_text(x) for x in sides)
        op = {exp.EQ: "=", exp.NEQ: "<>", exp.NullSafeEQ: "<=>"}[type(p)]
        return f"{a} {op} {b}"
    return sql_text(p)


def _is_relation_item(src: exp.Expr) -> bool:
    if isinstance(src, exp.Table):
        return isinstance(src.this, exp.Identifier) and not src.args.get("joins")
    return isinstance(src, exp.Subquery) and isinstance(src.this, exp.Query)


def _is_inner(j: exp.Join) -> bool:
    return (
        (j.side or "") == ""
        and (j.kind or "") in ("", "INNER", "CROSS")
        and not j.args.get("method")
        and not j.args.get("using")
        and _is_relation_item(j.this)
    )


def _split_block(
    sel: exp.Select, defer: bool = True
) -> tuple[list[exp.Expr], list[exp.Join], list[exp.Join]]:
    """(prefix FROM items, prefix joins, suffix joins) of a SELECT's FROM clause.

    With ``defer``, LEFT OUTER joins among the inner joins move to the suffix when no later inner
    join's ON condition reads the outer-joined relation.
    """
    frm = sel.args.get("from_")
    if frm is None or not _is_relation_item(frm.this):
        return [], [], list(sel.args.get("joins") or [])
    items: list[exp.Expr] = [frm.this]
    prefix: list[exp.Join] = []
    deferred: list[exp.Join] = []  # LEFT joins moved above the later inner joins
    deferred_aliases: set[str] = set()
    joins = list(sel.args.get("joins") or [])
    i = 0
    while i < len(joins):
        j = joins[i]
        if _is_inner(j):
            on = j.args.get("on")
            if on is not None and any(c.table in deferred_aliases for c in on.find_all(exp.Column)):
                break
            items.append(j.this)
            prefix.append(j)
        elif defer and _is_left_outer(j):
            # (A LEFT JOIN B ON p) JOIN C ON q == (A JOIN C ON q) LEFT JOIN B ON p if q avoids B
            deferred.append(j)
            deferred_aliases.add(j.this.alias_or_name)
        else:
            break
        i += 1
    return items, prefix, deferred + joins[i:]


def _is_left_outer(j: exp.Join) -> bool:
    return (
        j.side == "LEFT"
        and (j.kind or "") in ("", "OUTER")
        and not j.args.get("method")
        and _is_relation_item(j.this)
    )


def _collect_ctes(root: exp.Expr) -> dict[str, exp.CTE]:
    ctes: dict[str, exp.CTE] = {}
    for w in root.find_all(exp.With):
        if w.args.get("recursive"):
            continue
        for cte in w.expressions:
            ctes.setdefault(cte.alias_or_name, cte)
    return ctes


def _cte_refs(root: exp.Expr, name: str) -> int:
    return sum(1 for t in root.find_all(exp.Table) if not t.args.get("db") and t.name == name)


def _inline_ctes(node: exp.Expr, ctes: Mapping[str, exp.CTE], depth: int = 0) -> exp.Expr:
    """A copy of ``node`` with every CTE reference replaced by the CTE's body (aliased)."""
    if depth > 32:
        raise ValueError("CTE references nest too deeply (recursive CTE?)")
    node = node.copy()
    for t in list(node.find_all(exp.Table)):
        if t.args.get("db") or t.name not in ctes:
            continue
        cte = ctes[t.name]
        body = _inline_ctes(cte.this, ctes, depth + 1)
        cols = cte.args["alias"].columns if cte.args.get("alias") else []
        alias = exp.TableAlias(
            this=exp.to_identifier(t.alias_or_name), columns=[c.copy() for c in cols] or None
        )
        sub = exp.Subquery(this=body, alias=alias)
        if t is node:
            return sub
        t.replace(sub)
    return node


def _find_block(root: exp.Select, ctes: Mapping[str, exp.CTE], defer: bool) -> exp.Select:
    block = root
    while not block.args.get("joins") and block.args.get("from_") is not None:
        src = block.args["from_"].this
        inner: exp.Expr | None = None
        if isinstance(src, exp.Subquery) and isinstance(src.this, exp.Select):
            inner = src.this
        elif (
            isinstance(src, exp.Table)
            and not src.args.get("db")
            and src.name in ctes
            and isinstance(ctes[src.name].this, exp.Select)
            and _cte_refs(root, src.name) == 1
        ):
            inner = ctes[src.name].this
        if not isinstance(inner, exp.Select) or len(_split_block(inner, defer)[0]) < 2:
            break
        block = inner
    return block


def _prune_ctes(root: exp.Expr) -> None:
    """Drop the top-level CTEs nothing references any more."""
    with_ = root.args.get("with_")
    if with_ is None:
        return
    defs = {c.alias_or_name: c for c in with_.expressions}

    def refs(e: exp.Expr, skip_with: bool) -> set[str]:
        out = set()
        for t in e.find_all(exp.Table):
            if skip_with and t.find_ancestor(exp.With) is with_:
                continue
            if not t.args.get("db") and t.name in defs:
                out.add(t.name)
        return out

    live = refs(root, skip_with=True)
    todo = list(live)
    while todo:
        for n in refs(defs[todo.pop()].this, skip_with=False):
            if n not in live:
                live.add(n)
                todo.append(n)
    keep = [c for c in with_.expressions if c.alias_or_name in live]
    if not keep:
        root.set("with_", None)
    elif len(keep) != len(with_.expressions):
        with_.set("expressions", keep)
