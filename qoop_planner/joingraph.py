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
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.hive import Hive
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope
from sqlglot.schema import Schema

from qoop_planner.model import Relation

__all__ = [
    "OUT_DIALECT",
    "JoinGraph",
    "JoinPredicate",
    "RelationSource",
    "extract_join_graph",
    "out_column",
]

OUT_DIALECT = "hive"  # stage SQL is always Hive SQL (model docstring)
COMPONENT_TOKEN = "qoopcomp{}q"  # placeholder table names of the component roots in the final SQL


def out_column(alias: str, column: str) -> str:
    """The name under which the join tree's stages output column ``alias.column``."""
    return f"{alias}__{column}"


class _HiveOut(Hive):
    """Hive SQL as Hive's own parser takes it: its lexer starts an unquoted identifier with a
    letter or digit, so names such as sqlglot's ``_col_0`` aliases are back-quoted (Spark SQL
    takes them either way).

    >>> sql_text(sqlglot.parse_one("SELECT SUM(x) AS _col_0 FROM t", read="hive"))
    'SELECT SUM(x) AS `_col_0` FROM t'
    """

    def can_quote(self, identifier: exp.Identifier, identify: str | bool = "safe") -> bool:
        return identifier.this.startswith("_") or super().can_quote(identifier, identify)


_HIVE_OUT = _HiveOut()


def sql_text(e: exp.Expr) -> str:
    return e.sql(dialect=_HIVE_OUT, comments=False)


def _digest(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


@dataclass(frozen=True)
class JoinPredicate:
    """A 2-relation equi-join conjunct ``f(a) = g(b)``."""

    sql: str  # canonical text: the two sides' SQL sorted
    aliases: tuple[str, str]  # the two relations, sorted
    # per side (same order as ``aliases``): the column name when the side is a bare column
    columns: tuple[str | None, str | None]
    expr: exp.Expr = field(compare=False, repr=False)  # the qualified conjunct

    def referenced(self) -> frozenset[tuple[str, str]]:
        """(alias, column) pairs the predicate reads."""
        return frozenset((c.table, c.name) for c in self.expr.find_all(exp.Column))


@dataclass(frozen=True)
class RelationSource:
    """A relation of the join block with what the planner needs to build its scan stage."""

    relation: Relation
    kind: str  # "table" | "cte" | "derived"
    source: exp.Expr = field(compare=False, repr=False)  # FROM item, CTEs inlined, alias kept
    filter_exprs: tuple[exp.Expr, ...] = field(compare=False, repr=False)
    final_columns: frozenset[str] = frozenset()  # columns the final stage reads
    filter_columns: frozenset[str] = frozenset()  # columns only the pushed filters read

    @property
    def alias(self) -> str:
        return self.relation.alias

    @property
    def table(self) -> str:
        return self.relation.table


@dataclass(frozen=True)
class JoinGraph:
    """The decomposed join block of one query (module docstring)."""

    query: str  # the qualified query, Hive SQL
    relations: tuple[RelationSource, ...]  # in FROM order
    predicates: tuple[JoinPredicate, ...]
    residual: tuple[str, ...]  # predicates of the block evaluated in the final stage
    components: tuple[tuple[str, ...], ...]  # aliases of each connected component
    final_sql: str  # final stage SQL; component i's root is the table COMPONENT_TOKEN.format(i)
    final_operators: tuple[str, ...]
    fallback: str | None = None  # why the query is not decomposed (then final_sql is the query)
    # final-stage facts for the cost model
    final_tables: tuple[str, ...] = ()  # base tables the final stage reads itself
    final_grouped: bool = False
    final_aggregate: bool = False
    final_limit: int | None = None
    final_width: int = 1  # output columns
    deferred: int = 0  # LEFT joins moved above the inner joins of the block

    @property
    def top(self) -> str:
        """Digest of the final stage (its SQL), the signature's ``top``."""
        return _digest(self.final_sql)

    def relation(self, alias: str) -> RelationSource:
        for r in self.relations:
            if r.alias == alias:
                return r
        raise KeyError(alias)


# --------------------------------------------------------------------------------------------
# parsing


def _parse_qualified(sql: str, schema: Mapping[str, Any], dialect: str) -> exp.Expr:
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

    def nodes(*types: type[exp.Expr]) -> list[exp.Expr]:
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


# --------------------------------------------------------------------------------------------
# extraction


def extract_join_graph(
    sql: str, schema: Mapping[str, Any] | None, dialect: str = "hive"
) -> JoinGraph:
    """Qualify ``sql`` against ``schema`` and decompose its join block (module docstring).

    ``schema`` maps table -> {column: type} (or db -> table -> ...), as sqlglot's
    ``MappingSchema`` takes it. Raises :class:`ValueError` for unparseable SQL, a statement that
    is not a query, or columns/tables the schema cannot resolve.
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

    for p in preds.values():
        ra, rb = find(p.aliases[0]), find(p.aliases[1])
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
