"""The qoop-hive demo: TPC-H queries replanned on a real HiveServer2 while their share changes.

:func:`run_demo` starts a local HiveServer2 (:class:`~hive_hooks.engine.LocalHiveServer`) in a
temporary directory, loads TPC-H at sf 0.01 (:func:`hive_hooks.tpcload.load_tpc`), and runs four
TPC-H queries through :class:`~hive_hooks.executor.QueryRunner` under a scripted share
(:class:`~hive_hooks.share.ScriptedShare`): each query starts on a busy cluster (1 of 16
vcores), which frees up half a second later (all 16), and fills up again after 8 s (4 vcores).
For each query it prints the cached plans with their estimates, then a line per share change and
per stage event (start, done, reused, cancelled, switch), then the first rows; at the end a
summary table, with each query's rows checked against the same SQL run in one statement. The
engine is stopped and the directory removed, also on Ctrl-C or an error.

Why this profile: with one vcore only one stage runs at a time, so the cheapest total work wins
(a left-deep plan); with sixteen, plans whose independent joins run side by side finish sooner,
and QOOP switches to one of them if its estimate beats the current plan's by more than the
hysteresis (15 %), resuming from the checkpoints the new plan can use. Whether a switch happens
depends on the cost model and on how far the first plan got when the share rose (a running
stage counts for the current plan): Q8 (8 relations) switched in every run so far, Q21 in some,
Q3 (2 plans) and Q5 in none.

Run it with ``python -m hive_hooks.demo``: about 1 minute on a quiet 2-core machine (4 when it
is busy), most of it the engine's start and the first query's table statistics.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

__all__ = ["DEMO_PROFILE", "DEMO_QUERIES", "run_demo"]

DEMO_QUERIES = (3, 5, 8, 21)
CLUSTER_VCORES = 16.0
DEMO_PROFILE = ((0.0, 1 / 16), (0.5, 1.0), (8.0, 0.25))  # (seconds after start, fraction)


def _share(fraction: float) -> Any:
    from qoop_planner.model import Share

    v = fraction * CLUSTER_VCORES
    return Share(vcores=v, memory_mb=2048.0 * v)


def canonical_rows(rows: Sequence[Sequence[Any]]) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset, floats to 9 significant digits and decimals normalised: what two
    runs of one query (staged and direct, two plans) are compared by.

    >>> from decimal import Decimal
    >>> a, b = [(1.0000000001, Decimal("2.50"))], [(1.0, Decimal("2.5"))]
    >>> canonical_rows(a) == canonical_rows(b)
    True
    """

    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.9g}")
        if isinstance(v, Decimal):
            return v.normalize()
        return v

    return Counter(tuple(norm(v) for v in r) for r in rows)


def _same_rows(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    def norm(rows: list[tuple[Any, ...]]) -> list[str]:
        return sorted(
            repr(tuple(f"{float(v):.9g}" if isinstance(v, float) else str(v) for v in r))
            for r in rows
        )

    return norm(a) == norm(b)


def timed_one_shot(connect: Any, sql: str) -> tuple[float, list[tuple[Any, ...]]]:
    """``sql`` run in one statement on a new connection from ``connect()``: the seconds from
    execute to the last row fetched, and the rows."""
    conn = connect()
    try:
        cur = conn.cursor()
        t0 = time.perf_counter()
        cur.execute(sql)
        rows = [tuple(r) for r in cur.fetchall()]
        return time.perf_counter() - t0, rows
    finally:
        conn.close()


def matches_one_shot(connect: Any, sql: str, rows: list[tuple[Any, ...]]) -> bool:
    """Whether ``rows`` (a replanned run's answer) equal ``sql`` run in one statement on a new
    connection from ``connect()`` (floats to 9 significant digits, row order ignored)."""
    return _same_rows(rows, timed_one_shot(connect, sql)[1])


def run_demo(
    queries: tuple[int, ...] = DEMO_QUERIES,
    *,
    scale: float = 0.01,
    out: TextIO | None = None,
) -> int:
    """Run the demo (module docstring); returns 0, or 1 if a query's rows were wrong."""
    from arbiter.tables import format_table
    from hive_hooks.beeline.printing import ReportingShare, explain_table, format_event, short_plan
    from hive_hooks.engine import LocalHiveServer
    from hive_hooks.executor import QueryRunner
    from hive_hooks.output import render
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import ScriptedShare
    from hive_hooks.tpcload import load_tpc as load_into_hive
    from qoop_planner.tpc import load_tpc

    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    with tempfile.TemporaryDirectory(prefix="qoop-hive-demo-") as tmp:
        root = Path(tmp)
        srv = LocalHiveServer(work_dir=root / "engine")
        say(f"starting a local HiveServer2 (Spark Thrift Server) in {root / 'engine'} ...")
        srv.start()
        registry = CheckpointRegistry(root / "registry.db")
        runner = None
        try:
            say(f"ready in {srv.start_seconds:.1f} s: {srv.jdbc_url};auth=noSasl")
            report = load_into_hive(srv.connect, "tpch", scale, "tpch", data_dir=root / "data")
            say(
                f"loaded TPC-H sf {scale:g}: {len(report.rows)} tables, "
                f"{sum(report.rows.values()):,} rows in {report.seconds:.1f} s"
            )
            texts = load_tpc("tpch", scale).queries
            profile = ", ".join(
                f"{f * CLUSTER_VCORES:g} vcores at {t:g} s" for t, f in DEMO_PROFILE
            )
            say(f"share profile (restarted for every query): {profile}\n")
            share = ReportingShare(
                ScriptedShare([(t, _share(f)) for t, f in DEMO_PROFILE]), lambda t: say("  " + t)
            )
            runner = QueryRunner(
                lambda: srv.connect(database="tpch"),
                registry=registry,
                share=share,
                on_event=lambda ev: say("  " + format_event(ev)),
            )
            summary: list[list[str]] = []
            wrong = 0
            for n in queries:
                sql = texts[n]
                say(f"=== TPC-H Q{n}: cached plans under the starting share")
                headers, rows = explain_table(runner.explain(sql, share=_share(DEMO_PROFILE[0][1])))
                say(format_table(headers, rows))
                res = runner.run(sql, query_id=f"q{n}")
                say(render(list(res.columns), res.rows[:5], "table").rstrip())
                if len(res.rows) > 5:
                    say(f"({len(res.rows)} rows, first 5 shown)")
                ok = matches_one_shot(lambda: srv.connect(database="tpch"), sql, res.rows)
                wrong += not ok
                done = [s for s in res.stages if s.outcome == "done" and s.kind != "final"]
                summary.append(
                    [
                        f"Q{n}",
                        str(len(rows)),
                        short_plan(res.initial_plan_id),
                        short_plan(res.plan_id),
                        str(len(res.switches)),
                        str(len(done)),
                        str(sum(1 for s in res.stages if s.outcome == "cancelled")),
                        str(len(res.reused)),
                        str(len(res.rows)),
                        f"{res.elapsed_s:.1f}",
                        "yes" if ok else "NO",
                    ]
                )
                say()
            say("=== summary")
            headers = ["query", "plans", "first plan", "final plan", "switches", "checkpoints",
                       "cancelled", "reused", "rows", "seconds", "rows = one-shot"]  # fmt: skip
            say(format_table(headers, summary))
            switches = sum(int(r[4]) for r in summary)
            say(
                f"{switches} plan switch{'es' if switches != 1 else ''} in {len(queries)} "
                f"queries; every query's rows {'match' if not wrong else 'DO NOT all match'} "
                "the same SQL run in one statement"
            )
            return 1 if wrong else 0
        finally:
            if runner is not None:
                runner.close()
            registry.close()
            t0 = time.monotonic()
            srv.stop()
            say(f"engine stopped ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(run_demo())
