"""Extract the join graph of a SQL query (spec A.4.1-A.4.2): relations, filters, join predicates.

:func:`extract_join_graph` qualifies the query with sqlglot and picks its **join block**: the
FROM/JOIN/WHERE of the main SELECT (descending through a lone derived table, or a CTE referenced
once, whose SELECT joins two or more relations). The block's leading inner/comma joins are
decomposed:

* **relations**: the FROM items (base tables, CTE references, derived tables), each with the
  single-relation conjuncts of WHERE/ON pushed down to it (normalised SQL, sorted);
* **join predicates**: conjuncts ``f(a) = g(b)`` over exactly two relations, normalised so both
  orientations give one string (``"a.x = b.y"``, sides sorted);
* everything else stays in the **final stage** on top of the join tree: residual predicates
  (subqueries, multi-relation non-equi predicates, ...), outer joins and the joins after them,
  GROUP BY/HAVING, windows, DISTINCT, ORDER BY/LIMIT, set operations, the enclosing SELECTs.

An OR whose every branch shares a conjunct is factored first (``(a AND b) OR (a AND c)`` becomes
``a AND (b OR c)``), so TPC-H Q19's join predicate is found. Relations connected by no join
predicate form separate **components**, cross-joined in the final stage (so join trees never
contain cross products).

Inside the plan, the join tree's stages output each needed column ``a.c`` of a relation ``a`` as
``a__c``; the final stage reads the component roots as ``j`` (or ``j1``, ``j2``, ...) and refers
to ``j.a__c``. A query that cannot be decomposed (a top-level set operation, SELECT without FROM,
an unsupported FROM item, ...) gets ``fallback`` set to the reason; the planner then runs it as
one final stage. Unparseable or unqualifiable SQL raises :class:`ValueError`.

The module is split by responsibility (its public names, and the ``sql_text`` and
``COMPONENT_TOKEN`` the planner uses, are importable from here):
:mod:`qoop_planner.joingraph_model` (the graph's types and its Hive SQL text),
:mod:`qoop_planner.joingraph_block` (parsing, the join block, conjuncts and CTEs),
:mod:`qoop_planner.joingraph_final` (the final stage's provenance and cost facts), and this
module (:func:`extract_join_graph`, the decomposition itself).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope
from sqlglot.schema import Schema

from qoop_planner.joingraph_block import (
    _canonical,
    _collect_ctes,
    _conjuncts,
    _factor_or,
    _find_block,
    _has_agg_or_window,
    _has_nested_query,
    _inline_ctes,
    _is_volatile,
    _parse_qualified,
    _prune_ctes,
    _split_block,
    _uncorrelated_in_alias,
)
from qoop_planner.joingraph_final import _fallback, _final_facts, _in_expression_query, _operators
from qoop_planner.joingraph_model import (
    COMPONENT_TOKEN,
    OUT_DIALECT,
    JoinGraph,
    JoinPredicate,
    RelationSource,
    _digest,
    out_column,
    sql_text,
)
from qoop_planner.model import Relation

__all__ = [
    "OUT_DIALECT",
    "JoinGraph",
    "JoinPredicate",
    "RelationSource",
    "extract_join_graph",
    "out_column",
]


def extract_join_graph(
    sql: str, schema: Mapping[str, Any] | Schema | None, dialect: str = "hive"
) -> JoinGraph:
    """Qualify ``sql`` against ``schema`` and decompose its join block (module docstring).

    ``schema`` maps table -> {column: type} (or db -> table -> ...), as sqlglot's
    ``MappingSchema`` takes it. Raises :class:`ValueError` for unparseable SQL, a statement that
    is not a query, or columns/tables the schema cannot resolve.

    >>> g = extract_join_graph(
    ...     "SELECT a.x, SUM(b.y) AS s FROM a JOIN b ON a.k = b.k WHERE b.y > 1 GROUP BY a.x",
    ...     {"a": {"x": "int", "k": "int"}, "b": {"k": "int", "y": "int"}},
    ... )
    >>> [p.sql for p in g.predicates], g.relation("b").relation.filters, g.components
    (['a.k = b.k'], ('b.y > 1',), (('a', 'b'),))
    >>> g.final_sql
    'SELECT j.a__x AS x, SUM(j.b__y) AS s FROM qoopcomp0q AS j GROUP BY j.a__x'
    """
    root = _parse_qualified(sql, schema or {}, dialect)
    if not isinstance(root, exp.Select):
        return _fallback(root, f"top-level {root.key.upper()} (no single join block)")
    graph = _decompose(root.copy(), defer=True)
    if len(graph.components) > 1 and graph.deferred:
        # moving LEFT joins up disconnected the inner joins (a join predicate reads the outer
        # side, e.g. TPC-DS Q93): keep the FROM order instead if that leaves fewer components
        plain = _decompose(root, defer=False)
        if plain.fallback is None and len(plain.components) < len(graph.components):
            return plain
    return graph


def _decompose(root: exp.Select, defer: bool) -> JoinGraph:
    """Decompose the join block of the qualified query ``root`` (mutated)."""
    query_sql = sql_text(root)
    ctes = _collect_ctes(root)
    block = _find_block(root, ctes, defer)
    items, prefix_joins, suffix = _split_block(block, defer)
    if not items:
        if block.args.get("from_") is None:
            return _fallback(root, "SELECT without FROM")
        return _fallback(root, "unsupported FROM item (not a table or subquery)")
    if block.args.get("laterals"):
        return _fallback(root, "LATERAL VIEW in the join block")
    aliases = [it.alias_or_name for it in items]
    if len(set(aliases)) != len(aliases) or not all(aliases):
        return _fallback(root, "duplicate or missing relation aliases in the join block")
    alias_set = set(aliases)
    where_pushable = all((j.side or "") == "LEFT" for j in suffix)
    position = {id(j): i for i, j in enumerate(block.args.get("joins") or [])}
    last_inner = max((position[id(j)] for j in prefix_joins), default=-1)
    n_deferred = sum(1 for j in suffix if position[id(j)] < last_inner)

    # 1. factor ORs in place, so every conjunct is a node of the tree
    def refactor(holder: exp.Expr, key: str) -> list[exp.Expr]:
        node = holder.args.get(key)
        if node is None:
            return []
        cond = node.this if isinstance(node, exp.Where) else node
        conj = [c for x in _conjuncts(cond) for c in _factor_or(x)]
        if not conj:
            return []
        new = exp.and_(*conj, copy=False) if len(conj) > 1 else conj[0]
        if isinstance(node, exp.Where):
            node.set("this", new)
        else:
            holder.set(key, new)
        return _conjuncts(new)

    pool: list[tuple[str, exp.Expr]] = [("where", c) for c in refactor(block, "where")]
    for j in prefix_joins:
        pool.extend(("on", c) for c in refactor(j, "on"))

    # 2. classify the conjuncts
    filters: dict[str, list[exp.Expr]] = {a: [] for a in aliases}
    preds: dict[str, JoinPredicate] = {}
    residual: list[exp.Expr] = []
    pushed: list[exp.Expr] = []
    outer_ctes = {c.alias for c in root.find_all(exp.CTE)}
    for origin, c in pool:
        cols = list(c.find_all(exp.Column))
        tables = {col.table for col in cols}
        simple = (
            cols
            and tables <= alias_set
            and all(col.table for col in cols)
            and not _has_nested_query(c)
            and not _has_agg_or_window(c)
            and not _is_volatile(c)
            and (origin == "on" or where_pushable)
        )
        if simple and len(tables) == 1:
            filters[next(iter(tables))].append(c)
            pushed.append(c)
            continue
        in_alias = (
            _uncorrelated_in_alias(c, alias_set, outer_ctes)
            if origin == "on" or where_pushable
            else None
        )
        if in_alias is not None:
            filters[in_alias].append(c)
            pushed.append(c)
            continue
        p = c.unnest()
        if simple and len(tables) == 2 and isinstance(p, exp.EQ):
            lt = {col.table for col in p.left.find_all(exp.Column)}
            rt = {col.table for col in p.right.find_all(exp.Column)}
            if len(lt) == 1 and len(rt) == 1 and lt != rt:
                sides = sorted(
                    [(sql_text(p.left), p.left), (sql_text(p.right), p.right)],
                    key=lambda s: s[0],
                )
                canon = f"{sides[0][0]} = {sides[1][0]}"
                side_aliases = tuple(next(iter(s[1].find_all(exp.Column))).table for s in sides)
                side_cols = tuple(
                    s[1].unnest().name if isinstance(s[1].unnest(), exp.Column) else None
                    for s in sides
                )
                if canon not in preds:
                    pair = sorted(zip(side_aliases, side_cols, strict=True))
                    preds[canon] = JoinPredicate(
                        sql=canon,
                        aliases=(pair[0][0], pair[1][0]),
                        columns=(pair[0][1], pair[1][1]),
                        expr=c.copy(),
                    )
                pushed.append(c)
                continue
        if origin == "on" and not where_pushable:
            return _fallback(root, "inner-join condition cannot move above a RIGHT/FULL join")
        residual.append(c)
    filter_copies = {a: [f.copy() for f in fs] for a, fs in filters.items()}

    # 3. connected components (union-find over the join predicates)
    parent = {a: a for a in aliases}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for pred in preds.values():
        ra, rb = find(pred.aliases[0]), find(pred.aliases[1])
        if ra != rb:
            parent[max(ra, rb, key=aliases.index)] = min(ra, rb, key=aliases.index)
    comp_of: dict[str, int] = {}
    components: list[list[str]] = []
    for a in aliases:
        r = find(a)
        if r not in comp_of:
            comp_of[r] = len(components)
            components.append([])
        components[comp_of[r]].append(a)
    comp_index = {a: comp_of[find(a)] for a in aliases}
    used = {t.alias_or_name for t in root.find_all(exp.Table, exp.Subquery, exp.CTE)}
    base = "qoopj" if any(re.fullmatch(r"j\d*", n) for n in used) else "j"
    j_alias = [base] if len(components) == 1 else [f"{base}{i + 1}" for i in range(len(components))]

    # 4. which column references point at the join block's relations (scope-aware)
    item_ids = {id(it) for it in items}
    root_scope = build_scope(root)
    if root_scope is None:  # pragma: no cover - qualify succeeded, so scoping does too
        return _fallback(root, "cannot build scopes")
    scopes = list(root_scope.traverse())
    block_scope = next((s for s in scopes if s.expression is block), None)
    if block_scope is None:  # pragma: no cover
        return _fallback(root, "join block has no scope")

    def inside_relation(scope: Scope) -> bool:
        node: exp.Expr | None = scope.expression
        while node is not None and node is not block:
            if id(node) in item_ids:
                return True
            node = node.parent
        return False

    rewrite: dict[int, exp.Column] = {}
    for s in scopes:
        chain: list[Scope] = []
        cur: Scope | None = s
        while cur is not None and cur is not block_scope:
            chain.append(cur)
            cur = cur.parent
        if cur is None or any(c.is_cte for c in chain) or inside_relation(s):
            continue
        for col in s.columns:
            t = col.table
            if t in alias_set and not any(t in c.sources for c in chain):
                rewrite[id(col)] = col
    pushed_cols = {id(col) for p in pushed for col in p.find_all(exp.Column)}
    final_cols: dict[str, set[str]] = {a: set() for a in aliases}
    for cid, col in rewrite.items():
        if cid not in pushed_cols:
            final_cols[col.table].add(col.name)

    # 5. rewrite the block into the final stage
    replaced: dict[int, exp.Expr] = {}
    for cid, col in rewrite.items():
        new = exp.column(out_column(col.table, col.name), table=j_alias[comp_index[col.table]])
        if col.parent is not None:
            col.replace(new)
        replaced[cid] = new
    residual = [replaced.get(id(c), c) for c in residual]
    residual_sql = [sql_text(c) for c in residual]
    comp_tables = [
        exp.Table(
            this=exp.to_identifier(COMPONENT_TOKEN.format(i)),
            alias=exp.TableAlias(this=exp.to_identifier(j_alias[i])),
        )
        for i in range(len(components))
    ]
    block.set("from_", exp.From(this=comp_tables[0]))
    new_joins = [exp.Join(this=t, kind="CROSS") for t in comp_tables[1:]]
    block.set("joins", new_joins + suffix or None)
    if residual:
        block.set("where", exp.Where(this=exp.and_(*[c.copy() for c in residual])))
    else:
        block.set("where", None)
    _prune_ctes(root)
    final_sql = sql_text(root)

    # 6. relations
    relations = []
    for it in items:
        a = it.alias_or_name
        if isinstance(it, exp.Table) and not it.args.get("db") and it.name in ctes:
            kind, label = "cte", it.name
            source = _inline_ctes(it, ctes)
        elif isinstance(it, exp.Table):
            kind, label = "table", exp.table_name(it)
            source = it.copy()
        else:
            kind = "derived"
            source = _inline_ctes(it, ctes)
            label = "subquery:" + _digest(sql_text(it.this), 12)
        fs = filter_copies[a]
        rel = Relation(alias=a, table=label, filters=tuple(sorted(_canonical(f) for f in fs)))
        f_cols = {  # not the columns inside a pushed IN's subquery (its own relations')
            c.name
            for f in fs
            for c in f.find_all(exp.Column)
            if c.table == a and not _in_expression_query(c)
        }
        relations.append(
            RelationSource(
                relation=rel,
                kind=kind,
                source=source,
                filter_exprs=tuple(fs),
                final_columns=frozenset(final_cols[a]),
                filter_columns=frozenset(f_cols),
            )
        )

    final_root = sqlglot.parse_one(final_sql, read=OUT_DIALECT)
    facts = _final_facts(final_root)
    return JoinGraph(
        query=query_sql,
        relations=tuple(relations),
        predicates=tuple(sorted(preds.values(), key=lambda p: p.sql)),
        residual=tuple(residual_sql),
        components=tuple(tuple(c) for c in components),
        final_sql=final_sql,
        final_operators=_operators(final_root, residual_sql, len(components)),
        deferred=n_deferred,
        **facts,
    )
