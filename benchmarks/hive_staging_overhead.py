"""The stage-by-stage overhead of the Hive replanner, on Hive on Tez and on the Spark Thrift Server.

For each TPC-H query, two ways of running the same SQL on the same real HiveServer2:

* ``direct``: the SQL as one statement on a new pyhive connection (``qoop-hive --no-replan``),
  rows fetched;
* ``staged``: :class:`hive_hooks.executor.QueryRunner` under a share that never changes
  (``StaticShare(--vcores)``, 4): planning (``DESCRIBE FORMATTED`` of every table, plan
  enumeration), one ``CREATE TABLE ... AS SELECT`` checkpoint per non-final stage (ready stages
  side by side up to ``max_concurrency``, below), then the final SELECT over the checkpoints,
  rows fetched.

``overhead = staged / direct - 1`` (medians over ``--reps``); the summary per engine is the
geometric mean of ``staged / direct`` over the queries (and over those whose direct run takes
more than 5 s). Both times are wall clock in this process and include opening the
connections; ``planning_s`` is the runner's own ``QueryResult.planning_s``.

Engines, one after the other (never both at once on this 2-core machine), each from a fresh
work dir with TPC-H at ``--sf`` loaded by :func:`hive_hooks.tpcload.load_tpc` (DuckDB writes
Parquet files, the engine reads them as external tables):

1. ``hive``: Apache Hive 4.0.1 on Tez 0.10.3 in local mode
   (:class:`hive_hooks.hive_engine.HiveOnTez`; the DAG runs inside HiveServer2's JVM,
   ``--hive-heap``), the runner with ``max_concurrency=1`` (``--hive-max-concurrency``): with
   several DAGs at once in that one JVM, a task intermittently reads another DAG's plan and
   fails with ``IllegalStateException: Invalid input path <a table's parquet file>`` (measured
   at sf 1: Q7 staged failed in 2 of 4 runs with up to 4 stages at once; none of the 40-odd
   staged runs with 1 stage at a time failed; a direct query is one DAG). Tez local mode runs
   one task at a time per DAG, so a direct query uses one core, and so does each stage;
2. ``spark``: the Spark Thrift Server (:class:`hive_hooks.engine.LocalHiveServer`, ``local[2]``,
   unpooled metastore connections), the runner's default ``max_concurrency=4``
   (``--max-concurrency``).

Scale and queries (defaults chosen by measurement on this 2-core machine): TPC-H sf 1, where
most of the chosen queries take more than 5 s directly on Hive (warm medians on an idle
machine: Q1 5.3 s, Q3 4.2, Q5 5.3, Q7 6.5, Q10 5.5, Q12 4.1, Q18 33, Q21 16; Q6, Q14 and Q19
take 2.5-3 s and are left out; Q8 takes 43 s and Q9 over 6 minutes: the join order is pinned to
the SQL's by ``deploy/conf/hive-site.xml``, which makes both start with a cross join of part
and supplier). Q1 reads one table (one stage, no checkpoint): the runner's fixed cost alone.
The whole default run takes about 11 minutes on an idle machine (15 with other work on it).

Fairness. Every staged run starts from nothing: a new QueryRunner, a new registry file (no
measured history, no cached plans) and a checkpoint database of its own
(``ck_<engine>_q<n>_r<rep>``, dropped after the run, outside the timing), so no stage is ever
reused (checked: ``reused`` must be empty). Table statistics are given to the runner
(``stats=``, measured by DuckDB on the same generated data, as ``benchmarks/hive_replan.py``
does): otherwise the first staged run of each table version would also pay for a
``COUNT(*), approx_count_distinct(...)`` scan that a real deployment does once per load. Before
measuring, each query runs once directly (the engine's JIT and the page cache warm) and one query
(``--warmup-staged``) once staged (the CTAS / Parquet-writer path warm). The measured runs are
paired: the direct and the staged run of a query back to back, the order alternating from query
to query and repetition to repetition, so slow drift (other work on the machine) hits both
sides alike. The rows of every staged run are compared with the direct run's (floats to 9
significant digits, decimals normalised, as a multiset); a difference is printed at once and
makes the script exit with status 1 after writing the results. A statement that fails
(``QueryError``) is recorded and the next run goes on; a run over ``--run-timeout`` kills the
engine (pyhive cannot time out a fetch) and ends that engine's measurement, keeping its
results so far. Both also make the exit status 1.

Usage: ``python benchmarks/hive_staging_overhead.py [--quick] [--sf S] [--queries 1,3,5]
[--reps N] [--engines hive,spark] [--out PATH]``. Writes
``benchmarks/results/hive_staging_overhead.json`` (``hive_staging_overhead_quick.json`` with
``--quick``): machine, versions, settings, per engine the start and load times, the warm-up
runs, and per query every run's raw numbers (times, plan, stages with their seconds and rows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arbiter.tables import format_table
from hive_hooks.demo import canonical_rows as canon

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
LONG_QUERY_S = 5.0
DEFAULT_QUERIES = (1, 3, 5, 7, 10, 12, 18, 21)
QUICK_QUERIES = (3, 5, 6)
DEFAULT_SF = 1.0
ENGINES = ("hive", "spark")
DATABASE = "tpch"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- rows and stats


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# ----------------------------------------------------------------------------- the engines


def make_server(engine: str, work_dir: Path, args: argparse.Namespace) -> Any:
    if engine == "hive":
        from hive_hooks.hive_engine import HiveOnTez

        return HiveOnTez(work_dir=work_dir, heap=args.hive_heap)
    from hive_hooks.engine import LocalHiveServer

    return LocalHiveServer(
        work_dir=work_dir, extra_conf={"spark.hadoop.datanucleus.connectionPoolingType": "None"}
    )


def connector(port: int, database: str = DATABASE) -> Callable[[], Any]:
    from pyhive import hive

    from hive_hooks.engine import HOST

    return lambda: hive.connect(host=HOST, port=port, auth="NOSASL", database=database)


def execute(connect: Callable[[], Any], sql: str) -> None:
    conn = connect()
    try:
        conn.cursor().execute(sql)
    finally:
        conn.close()


class RunTimeout(RuntimeError):
    """A run took longer than ``--run-timeout``; the engine was killed to end it."""


class Watchdog:
    """Kills the engine (``srv.kill()``, SIGKILL) when one run takes longer than ``timeout``
    seconds: the run then fails with a lost connection (pyhive has no client-side timeout and a
    blocked ``fetchall`` does not see Ctrl-C), and the engine's results so far are kept."""

    def __init__(self, srv: Any, timeout: float) -> None:
        self.srv, self.timeout = srv, timeout

    @contextlib.contextmanager
    def __call__(self, what: str) -> Any:
        fired: list[bool] = []

        def fire() -> None:
            fired.append(True)
            log(f"!!! {what} still running after {self.timeout:g} s: killing the engine")
            self.srv.kill()

        timer = threading.Timer(self.timeout, fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception as e:
            if fired:
                raise RunTimeout(f"{what} took over {self.timeout:g} s (engine killed)") from e
            raise
        finally:
            timer.cancel()
        if fired:  # it ended while the engine was being killed: not a measurement either
            raise RunTimeout(f"{what} took over {self.timeout:g} s (engine killed)")


class Runs:
    """The two ways of running a query on one engine, each under the watchdog."""

    def __init__(
        self,
        engine: str,
        connect: Callable[[], Any],
        stats: dict,
        work: Path,
        args: argparse.Namespace,
        guard: Watchdog,
    ) -> None:
        self.engine, self.connect, self.stats = engine, connect, stats
        self.work, self.args, self.guard = work, args, guard
        self.max_concurrency = (
            args.hive_max_concurrency if engine == "hive" else args.max_concurrency
        )
        self.work.mkdir(parents=True, exist_ok=True)

    def direct(self, sql: str, n: int, tag: str) -> tuple[float, list[tuple[Any, ...]]]:
        with self.guard(f"{self.engine} Q{n} direct ({tag})"):
            t0 = time.perf_counter()
            conn = self.connect()
            try:
                cur = conn.cursor()
                cur.execute(sql)
                rows = [tuple(r) for r in cur.fetchall()]
                return time.perf_counter() - t0, rows
            finally:
                conn.close()

    def staged(self, sql: str, n: int, tag: str) -> tuple[float, Any]:
        """A fresh QueryRunner, registry and checkpoint database; the database is dropped
        afterwards (not timed)."""
        from hive_hooks.executor import QueryRunner
        from hive_hooks.registry import CheckpointRegistry
        from hive_hooks.share import StaticShare

        db = f"ck_{self.engine}_q{n}_{tag}"
        registry = CheckpointRegistry(self.work / f"registry-q{n}-{tag}.db")
        with contextlib.ExitStack() as stack:
            if not self.args.keep_checkpoints:  # after the run, failed or not; not timed
                stack.callback(self.drop, db)
            stack.callback(registry.close)
            stack.enter_context(self.guard(f"{self.engine} Q{n} staged ({tag})"))
            t0 = time.perf_counter()
            runner = QueryRunner(
                self.connect,
                registry=registry,
                checkpoint_db=db,
                share=StaticShare(self.args.vcores),
                stats=self.stats,
                metadata_ttl_s=3600,
                max_concurrency=self.max_concurrency,
            )
            stack.callback(runner.close)
            res = runner.run(sql, query_id=f"{self.engine}-q{n}-{tag}")
            seconds = time.perf_counter() - t0
        return seconds, res

    def drop(self, db: str) -> None:
        try:
            execute(self.connect, f"DROP DATABASE IF EXISTS {db} CASCADE")
        except Exception as e:  # the engine is gone (killed): the next run says so
            log(f"[{self.engine}] could not drop {db}: {type(e).__name__}: {e}")


def stage_record(res: Any) -> dict[str, Any]:
    done = [s for s in res.stages if s.outcome == "done"]
    return {
        "plan_id": res.plan_id,
        "passthrough": res.passthrough,
        "planning_s": res.planning_s,
        "elapsed_s": res.elapsed_s,
        "stages": len(done),
        "checkpoints": sum(1 for s in done if s.kind != "final"),
        "stage_s_sum": sum(s.seconds for s in done),
        "final_s": sum(s.seconds for s in done if s.kind == "final"),
        "switches": len(res.switches),
        "reused": list(res.reused),
        "stage_log": [
            {
                "stage": s.stage_id,
                "kind": s.kind,
                "outcome": s.outcome,
                "seconds": round(s.seconds, 4),
                "rows": s.rows,
            }
            for s in res.stages
        ],
    }


def pair(runs: Runs, n: int, sql: str, rep: int, direct_first: bool) -> dict[str, Any]:
    """One paired measurement of query ``n``: direct and staged back to back."""
    rec: dict[str, Any] = {
        "rep": rep,
        "order": "direct,staged" if direct_first else "staged,direct",
    }
    for side in ("direct", "staged") if direct_first else ("staged", "direct"):
        if side == "direct":
            rec["direct_s"], rows = runs.direct(sql, n, f"r{rep}")
        else:
            rec["staged_s"], res = runs.staged(sql, n, f"r{rep}")
    rec.update(stage_record(res))
    rec["rows"] = len(rows)
    rec["rows_equal"] = canon(res.rows) == canon(rows)
    rec["ratio"] = rec["staged_s"] / rec["direct_s"]
    return rec


def bench_engine(
    engine: str,
    root: Path,
    tpc: Any,
    wanted: list[int],
    args: argparse.Namespace,
    failures: list[str],
) -> dict[str, Any]:
    """Start ``engine``, load TPC-H, warm up, measure; the server is always stopped."""
    from hive_hooks.tpcload import load_tpc as load_into_hive

    work = root / engine
    srv = make_server(engine, work / "server", args)
    out: dict[str, Any] = {"engine": engine}
    t0 = time.perf_counter()
    try:
        srv.start()
        out["start_s"] = time.perf_counter() - t0
        log(f"[{engine}] {srv.what} ready in {out['start_s']:.1f} s on port {srv.port}")
        rep_ = load_into_hive(
            connector(srv.port, "default"), "tpch", args.sf, DATABASE, data_dir=work / "data"
        )
        out["load"] = {"rows": rep_.rows, "generate_s": rep_.generate_s, "create_s": rep_.create_s}
        log(
            f"[{engine}] TPC-H sf {args.sf:g} loaded: lineitem {rep_.rows['lineitem']} rows, "
            f"generated in {rep_.generate_s:.1f} s, tables in {rep_.create_s:.1f} s"
        )
        stats = {f"{DATABASE}.{t}": s for t, s in tpc.stats.items()}
        guard = Watchdog(srv, args.run_timeout)
        runs = Runs(engine, connector(srv.port), stats, work / "registries", args, guard)
        measure(runs, tpc, wanted, args, out, failures)
    finally:
        t_stop = time.perf_counter()
        srv.stop()
        log(f"[{engine}] stopped in {time.perf_counter() - t_stop:.1f} s")
    out["wall_s"] = time.perf_counter() - t0
    return out


def measure(
    runs: Runs,
    tpc: Any,
    wanted: list[int],
    args: argparse.Namespace,
    out: dict[str, Any],
    failures: list[str],
) -> None:
    """Warm-up, then the paired runs, into ``out``; an error (a run over the timeout, a lost
    engine) ends the engine's measurement but keeps what was measured before it."""
    from hive_hooks.errors import QueryError

    engine = runs.engine
    warm: dict[str, Any] = {"direct": []}
    out["warmup"] = warm
    per_query: dict[int, list[dict[str, Any]]] = {n: [] for n in wanted}
    errors: dict[int, list[str]] = {n: [] for n in wanted}
    out["query_errors"] = errors

    def failed(n: int, what: str, e: Exception) -> None:
        # the statement failed, the engine is fine: recorded, the next run goes on
        errors[n].append(f"{what}: {type(e).__name__}: {e}"[:2000])
        failures.append(f"{engine} Q{n} {what}: {type(e).__name__}: {str(e)[:300]}")
        log(f"!!! {failures[-1]}")

    t_meas = time.perf_counter()
    try:
        for n in wanted:
            s, rows = runs.direct(tpc.queries[n], n, "warm-up")
            warm["direct"].append({"query": n, "direct_s": s, "rows": len(rows)})
            log(f"[{engine} warm-up] Q{n} direct {s:.2f} s ({len(rows)} rows)")
        if args.warmup_staged and args.reps > 0:
            n = args.warmup_staged
            try:
                s, res = runs.staged(tpc.queries[n], n, "warm")
            except QueryError as e:
                failed(n, "staged warm-up", e)
            else:
                warm["staged"] = {"query": n, "staged_s": s, **stage_record(res)}
                stages = warm["staged"]["stages"]
                log(f"[{engine} warm-up] Q{n} staged {s:.2f} s ({stages} stages)")
        t_meas = time.perf_counter()
        for rep in range(args.reps):
            for k, n in enumerate(wanted):
                try:
                    rec = pair(runs, n, tpc.queries[n], rep, direct_first=(rep + k) % 2 == 0)
                except QueryError as e:
                    failed(n, f"rep {rep}", e)
                    continue
                per_query[n].append(rec)
                ok = rec["rows_equal"] and not rec["reused"]
                log(
                    f"[{engine} {rep + 1}/{args.reps}] Q{n}: direct {rec['direct_s']:.2f} s, "
                    f"staged {rec['staged_s']:.2f} s ({100 * (rec['ratio'] - 1):+.0f} %, "
                    f"{rec['stages']} stages, planning {rec['planning_s']:.2f} s, "
                    f"{rec['order']}) rows {'equal' if ok else 'DIFFER'} "
                    f"[{time.perf_counter() - t_meas:.0f} s]"
                )
                if not rec["rows_equal"]:
                    failures.append(f"{engine} Q{n} rep {rep}: staged rows differ from direct")
                    log(f"!!! {failures[-1]} ({rec['rows']} direct rows)")
                if rec["reused"]:
                    failures.append(f"{engine} Q{n} rep {rep}: reused {rec['reused']}")
                    log(f"!!! {failures[-1]}")
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc()
        failures.append(f"{engine}: {out['error']}")
        log(f"!!! {engine}: {out['error']}; its measurement stops here")
    out["measure_s"] = time.perf_counter() - t_meas
    out["queries"] = [
        summarize_query(n, per_query[n], errors[n]) for n in wanted if per_query[n] or errors[n]
    ]
    out["summary"] = summarize_engine(out["queries"])


# ----------------------------------------------------------------------------- summaries


def summarize_query(n: int, runs: list[dict[str, Any]], errors: list[str]) -> dict[str, Any]:
    if not runs:
        return {"query": n, "failed_runs": len(errors), "errors": errors, "runs": []}
    d = median([r["direct_s"] for r in runs])
    s = median([r["staged_s"] for r in runs])
    last = runs[-1]
    return {
        "query": n,
        "failed_runs": len(errors),
        "errors": errors,
        "direct_s": d,
        "staged_s": s,
        "overhead": s / d - 1,
        "paired_ratio_median": median([r["ratio"] for r in runs]),
        "planning_s": median([r["planning_s"] for r in runs]),
        "stages": last["stages"],
        "checkpoints": last["checkpoints"],
        "plans": sorted({r["plan_id"] for r in runs}),
        "passthrough": any(r["passthrough"] for r in runs),
        "rows": last["rows"],
        "rows_equal": all(r["rows_equal"] for r in runs),
        "runs": runs,
    }


def summarize_engine(recs: list[dict[str, Any]]) -> dict[str, Any]:
    failed = sum(r["failed_runs"] for r in recs)
    recs = [r for r in recs if r["runs"]]
    long = [r for r in recs if r["direct_s"] > LONG_QUERY_S]
    return {
        "queries": len(recs),
        "failed_runs": failed,
        "geomean_ratio": geomean([r["staged_s"] / r["direct_s"] for r in recs]),
        "median_overhead": median([r["overhead"] for r in recs]) if recs else None,
        "long_queries": [r["query"] for r in long],
        "geomean_ratio_long": geomean([r["staged_s"] / r["direct_s"] for r in long]),
        "direct_s_total": sum(r["direct_s"] for r in recs),
        "staged_s_total": sum(r["staged_s"] for r in recs),
        "planning_s_median": median([r["planning_s"] for r in recs]) if recs else None,
        "rows_equal": all(r["rows_equal"] for r in recs),
    }


def pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * (ratio - 1):+.0f} %"


def table(engines: list[dict[str, Any]]) -> str:
    headers = ["engine", "query", "direct s", "staged s", "overhead", "planning s", "stages",
               "rows equal"]  # fmt: skip
    rows: list[list[str]] = []
    for e in engines:
        name = e["engine"]
        for r in e.get("queries", []):
            fails = f" ({r['failed_runs']} run(s) FAILED)" if r["failed_runs"] else ""
            if not r["runs"]:
                rows.append([name, f"Q{r['query']}", "-", "-", "-", "-", "-", "FAILED"])
                continue
            rows.append([name, f"Q{r['query']}", f"{r['direct_s']:.2f}", f"{r['staged_s']:.2f}",
                         f"{100 * r['overhead']:+.0f} %", f"{r['planning_s']:.2f}",
                         f"{r['stages']} ({r['checkpoints']} ckpt)",
                         ("yes" if r["rows_equal"] else "NO") + fails])  # fmt: skip
        s = e.get("summary")
        if s and s["queries"]:
            rows.append([name, f"geomean ({s['queries']} q)", f"{s['direct_s_total']:.1f} sum",
                         f"{s['staged_s_total']:.1f} sum", pct(s["geomean_ratio"]),
                         f"{s['planning_s_median']:.2f} med", "",
                         "yes" if s["rows_equal"] else "NO"])  # fmt: skip
            if s["long_queries"]:
                rows.append([name, f"geomean ({len(s['long_queries'])} q > {LONG_QUERY_S:g} s)",
                             "", "", pct(s["geomean_ratio_long"]), "", "", ""])  # fmt: skip
    return format_table(headers, rows)


# ----------------------------------------------------------------------------- provenance


def _cmd(*argv: str) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=REPO)
    except (OSError, subprocess.SubprocessError):
        return None
    return (p.stdout + p.stderr).strip() or None


def machine() -> dict[str, Any]:
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "mem_mb": mem,
        "python": platform.python_version(),
    }


def versions() -> dict[str, Any]:
    import duckdb
    import pyspark
    import sqlglot

    from hive_hooks.hive_engine import HIVE_VERSION, TEZ_VERSION
    from yarn_bridge.local_hadoop import find_java

    java = None
    with contextlib.suppress(Exception):
        java = (_cmd(str(find_java()), "-version") or "").splitlines()[0]
    commit = _cmd("git", "rev-parse", "HEAD")
    dirty = _cmd("git", "status", "--porcelain", "--untracked-files=no")
    return {
        "hive": HIVE_VERSION,
        "tez": TEZ_VERSION,
        "spark": pyspark.__version__,
        "duckdb": duckdb.__version__,
        "sqlglot": sqlglot.__version__,
        "java": java,
        "git_commit": commit,
        "git_dirty": bool(dirty),
    }


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="smoke test: sf 0.01, queries 3,5,6, 1 rep"
    )
    ap.add_argument("--sf", type=float, help=f"TPC-H scale factor (default {DEFAULT_SF:g})")
    ap.add_argument(
        "--queries",
        help=f"comma-separated TPC-H query numbers (default {','.join(map(str, DEFAULT_QUERIES))})",
    )
    ap.add_argument(
        "--reps",
        type=int,
        help="paired repetitions per query (default 2; 0: "
        "warm-up direct runs only, to size the scale)",
    )
    ap.add_argument("--engines", default=",".join(ENGINES), help="hive,spark (run in this order)")
    ap.add_argument("--vcores", type=float, default=4.0, help="the runner's static share (4)")
    ap.add_argument(
        "--warmup-staged",
        type=int,
        default=None,
        help="query run once staged before measuring (default 3 if chosen, else the "
        "first; 0: none)",
    )
    ap.add_argument(
        "--hive-heap",
        default="1g",
        help="HiveServer2 JVM heap (Tez local mode runs in it; default 1g)",
    )
    ap.add_argument(
        "--work-dir",
        type=Path,
        help="parent of the engines' work dirs (default: a "
        "new /tmp/hive-staging-bench-* removed at the end)",
    )
    ap.add_argument(
        "--hive-max-concurrency",
        type=int,
        default=1,
        help="stages at once on Hive (default 1: see the docstring, Tez local mode)",
    )
    ap.add_argument(
        "--max-concurrency",
        type=int,
        default=4,
        help="stages at once on Spark (default 4, the runner's default)",
    )
    ap.add_argument(
        "--run-timeout",
        type=float,
        default=600.0,
        help="kill the engine if one run takes longer (seconds, default 600)",
    )
    ap.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="do not drop each staged run's checkpoint database",
    )
    ap.add_argument(
        "--out",
        type=Path,
        help="results JSON (default benchmarks/results/hive_staging_overhead[_quick].json)",
    )
    args = ap.parse_args(argv)
    args.sf = args.sf or (0.01 if args.quick else DEFAULT_SF)
    args.reps = args.reps if args.reps is not None else (1 if args.quick else 2)
    wanted = (
        [int(x) for x in args.queries.split(",")]
        if args.queries
        else list(QUICK_QUERIES if args.quick else DEFAULT_QUERIES)
    )
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if bad := [e for e in engines if e not in ENGINES]:
        ap.error(f"unknown engine(s) {bad}; choose from {ENGINES}")
    if args.warmup_staged is None:
        args.warmup_staged = 3 if 3 in wanted else wanted[0]
    out_path = args.out or RESULTS / (
        "hive_staging_overhead_quick.json" if args.quick else "hive_staging_overhead.json"
    )

    from qoop_planner.tpc import load_tpc

    wall0 = time.perf_counter()
    loadavg_start = list(os.getloadavg())
    log(f"TPC-H sf {args.sf:g}: queries {wanted}, {args.reps} rep(s), engines {engines}")
    t = time.perf_counter()
    tpc = load_tpc("tpch", args.sf)  # query texts, and DuckDB's statistics for the runner
    log(f"query texts and statistics from DuckDB in {time.perf_counter() - t:.1f} s")
    if missing := [n for n in wanted if n not in tpc.queries]:
        ap.error(f"no TPC-H query {missing}")

    own_root = args.work_dir is None
    root = Path(tempfile.mkdtemp(prefix="hive-staging-bench-") if own_root else args.work_dir)
    root.mkdir(parents=True, exist_ok=True)
    log(f"work dir {root}")
    failures: list[str] = []
    results: list[dict[str, Any]] = []
    try:
        for engine in engines:
            try:
                results.append(bench_engine(engine, root, tpc, wanted, args, failures))
            except Exception as e:  # one engine failing still leaves the other's results
                failures.append(f"{engine}: {type(e).__name__}: {e}")
                log(f"!!! {engine} failed: {type(e).__name__}: {e}")
                results.append({"engine": engine, "error": f"{type(e).__name__}: {e}"})
    finally:
        if own_root:
            shutil.rmtree(root, ignore_errors=True)

    print(
        f"TPC-H sf {args.sf:g}, {args.reps} paired rep(s), medians; overhead = staged / direct "
        f"- 1; geomean row: geometric mean of staged / direct"
    )
    print(table(results))
    wall = time.perf_counter() - wall0
    print(f"wall time {wall:.0f} s")
    doc = {
        "benchmark": "hive_staging_overhead",
        "machine": machine(),
        "versions": versions(),
        "settings": {
            "sf": args.sf,
            "queries": wanted,
            "reps": args.reps,
            "engines": engines,
            "vcores": args.vcores,
            "warmup_staged": args.warmup_staged,
            "hive_heap": args.hive_heap,
            "spark_master": "local[2]",
            "tez": "local",
            "stats": "DuckDB (qoop_planner.tpc.load_tpc), given to the runner",
            "metadata_ttl_s": 3600,
            "run_timeout_s": args.run_timeout,
            "max_concurrency": {"hive": args.hive_max_concurrency, "spark": args.max_concurrency},
            "long_query_s": LONG_QUERY_S,
        },
        "wall_s": wall,
        "loadavg_start": loadavg_start,
        "loadavg_end": list(os.getloadavg()),
        "failures": failures,
        "engines": results,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    log(f"wrote {out_path}")
    if failures:
        log("FAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
