"""The join graph's data model and its SQL text (QOOP; spec A.4.1 provenance, A.4.2 signatures).

A decomposed join block (:class:`JoinGraph`) with its relations (:class:`RelationSource`) and
normalised equi-join predicates (:class:`JoinPredicate`), from which the planner builds stages
and their canonical signatures; and the Hive SQL the stages are written in (:func:`sql_text`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.hive import Hive

from qoop_planner.model import Relation

__all__ = [
    "COMPONENT_TOKEN",
    "OUT_DIALECT",
    "JoinGraph",
    "JoinPredicate",
    "RelationSource",
    "out_column",
    "sql_text",
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

    >>> import sqlglot
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
