"""TPC-H / TPC-DS query texts, schemas and statistics from DuckDB's TPC extensions.

The one module of :mod:`qoop_planner` that does I/O: benchmarks, tests and demos call it for
real queries and table statistics; the planner itself never does. The extensions come from the
``duckdb-ext-tpch`` / ``duckdb-ext-tpcds`` wheels (``../shared/spec/local-hive-engine.md`` §5:
``INSTALL`` cannot download here), loaded from their ``extension_directory``. Queries are
transpiled from DuckDB's dialect to Hive with sqlglot.
"""

from __future__ import annotations

from dataclasses import dataclass

from qoop_planner.cost import TableStats

__all__ = ["TpcData", "load_tpc"]


@dataclass(frozen=True)
class TpcData:
    bench: str
    schema: dict[str, dict[str, str]]  # table -> {column: type}
    stats: dict[str, TableStats]  # measured at the generated scale factor
    queries: dict[int, str]  # query number -> Hive SQL


def connect(bench: str, sf: float = 0.01):
    """A DuckDB connection with ``bench`` ("tpch" or "tpcds") generated at scale ``sf``."""
    import duckdb
    import duckdb_ext

    if bench not in ("tpch", "tpcds"):
        raise ValueError(f"bench must be tpch or tpcds, got {bench!r}")
    ext_dir = next(iter(duckdb_ext.__path__)) + "/extensions"
    con = duckdb.connect(config={"extension_directory": ext_dir})
    con.sql(f"LOAD {bench}")
    con.sql(f"CALL {'dbgen' if bench == 'tpch' else 'dsdgen'}(sf={sf})")
    return con


def load_tpc(bench: str, sf: float = 0.01) -> TpcData:
    """Schema, statistics (rows, approximate NDV per column) and Hive query texts."""

    con = connect(bench, sf)
    schema: dict[str, dict[str, str]] = {}
    for t, c, ty in con.sql(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "ORDER BY table_name, ordinal_position"
    ).fetchall():
        schema.setdefault(t, {})[c] = ty
    stats = {}
    for t, cols in schema.items():
        exprs = ", ".join(f'approx_count_distinct("{c}")' for c in cols)
        rows, *ndvs = con.sql(f"SELECT count(*), {exprs} FROM {t}").fetchone()
        stats[t] = TableStats(rows=rows, ndv=dict(zip(cols, ndvs, strict=True)))
    fn = "tpch_queries()" if bench == "tpch" else "tpcds_queries()"
    queries = {n: to_hive(q) for n, q in con.sql(f"SELECT query_nr, query FROM {fn}").fetchall()}
    return TpcData(bench, schema, stats, queries)


def to_hive(duckdb_sql: str) -> str:
    """A query from DuckDB's TPC texts in SQL that Hive 4's parser takes (and Spark's too).

    Two rules beyond sqlglot's transpiling: a derived table's column-alias list
    (``(SELECT a, COUNT(b) ...) AS t(x, y)``) becomes aliases in its SELECT list, and a GROUP BY
    on a SELECT alias groups by the aliased expression (Hive resolves GROUP BY names against
    the FROM clause only).

    >>> to_hive("SELECT y FROM (SELECT a, count(b) FROM r GROUP BY a) AS t(x, y)")
    'SELECT y FROM (SELECT a AS x, COUNT(b) AS y FROM r GROUP BY a) AS t'
    >>> to_hive("SELECT k AS s, sum(v) AS n FROM r GROUP BY s")
    'SELECT k AS s, SUM(v) AS n FROM r GROUP BY k'
    """
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(duckdb_sql, read="duckdb")
    for sub in list(tree.find_all(exp.Subquery)):
        alias = sub.args.get("alias")
        inner = sub.this
        if alias is None or not alias.columns or not isinstance(inner, exp.Select):
            continue
        names = [c.name for c in alias.columns]
        if len(names) != len(inner.expressions):
            continue
        inner.set(
            "expressions",
            [exp.alias_(e.unalias() if isinstance(e, exp.Alias) else e, n)
             for e, n in zip(inner.expressions, names, strict=True)],
        )  # fmt: skip
        alias.set("columns", None)
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if group is None:
            continue
        aliased = {e.alias: e.this for e in select.expressions if isinstance(e, exp.Alias)}
        for col in list(group.expressions):
            if isinstance(col, exp.Column) and not col.table and col.name in aliased:
                col.replace(aliased[col.name].copy())
    return tree.sql(dialect="hive")
