"""``qoop-hive load-tpch`` and ``load-tpcds``: generate TPC-H / TPC-DS data with DuckDB and load
it into HiveServer2 as Parquet tables, through :func:`hive_hooks.tpcload.load_tpc`; the progress
bar moves one step per table as the loader's CREATE TABLE statements go through the connection.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, TextIO

from hive_hooks.beeline.args import Parser, parse_args
from hive_hooks.beeline.errors import EXIT_OK, EXIT_USAGE, PROG, CliError
from hive_hooks.beeline.session import Session
from hive_hooks.jdbc import JdbcUrlError, parse_jdbc_url

__all__ = ["TPC_TABLES", "build_load_parser", "load_tpc_command", "run_load"]


TPC_TABLES = {"tpch": 8, "tpcds": 24}


class _CountingConnection:
    """A pyhive connection whose cursors report each CREATE TABLE to a progress bar."""

    def __init__(self, conn: Any, on_create: Callable[[str], None]) -> None:
        self._conn, self._on_create = conn, on_create

    def cursor(self) -> Any:
        """A cursor whose ``execute`` reports each CREATE TABLE it runs."""
        cur = self._conn.cursor()
        execute, on_create = cur.execute, self._on_create

        def counted(sql: str, *a: Any, **kw: Any) -> Any:
            res = execute(sql, *a, **kw)
            m = re.match(r"(?is)\s*create\s+(?:external\s+)?table\s+([\w.]+)\s*\(", sql)
            if m:
                on_create(m.group(1))
            return res

        cur.execute = counted
        return cur

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def load_tpc_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``load-tpch`` / ``load-tpcds``: :func:`hive_hooks.tpcload.load_tpc` with a progress bar
    (generation with DuckDB first, then one step per table created)."""
    from tqdm import tqdm

    from hive_hooks.tpcload import load_tpc

    try:
        url = parse_jdbc_url(args.u)
    except JdbcUrlError as e:
        raise CliError(str(e), EXIT_USAGE) from e
    if not args.scale > 0:
        raise CliError(f"--scale must be > 0, got {args.scale:g}", EXIT_USAGE)
    bench = "tpch" if args.command == "load-tpch" else "tpcds"
    database = args.database or bench
    session = Session(url, user=args.n, password=args.p, hiveconf={}, hivevar={})
    session.conn  # noqa: B018 - fail fast, and clearly, on an unreachable server
    session.close()
    bar = tqdm(
        total=TPC_TABLES[bench],
        unit="table",
        desc=f"{bench} sf {args.scale:g}: generating with DuckDB",
        disable=args.silent,
        file=err,
    )

    def connect() -> Any:
        bar.set_description(f"{bench} sf {args.scale:g}: creating tables in {database}")
        return _CountingConnection(session.connect(), on_create)

    def on_create(table: str) -> None:
        bar.set_postfix_str(table.rsplit(".", 1)[-1])
        bar.update(1)

    try:
        kwargs = {"data_dir": args.data_dir} if args.data_dir else {}
        report = load_tpc(connect, bench, args.scale, database, **kwargs)
    finally:
        bar.close()
    rows = sum(report.rows.values())
    print(
        f"loaded {bench} sf {args.scale:g} into {database}: {len(report.rows)} tables, "
        f"{rows:,} rows in {report.seconds:.1f} s (data in {report.data_dir})",
        file=out,
    )
    return EXIT_OK


def build_load_parser(command: str) -> Parser:
    """The parser of ``qoop-hive load-tpch`` or ``load-tpcds`` (``command``)."""
    bench = "TPC-H" if command == "load-tpch" else "TPC-DS"
    default_db = "tpch" if command == "load-tpch" else "tpcds"
    p = Parser(
        prog=f"{PROG} {command}",
        description=f"Generate {bench} data with DuckDB's extension, write it as Parquet and "
        "create one external table per file in HiveServer2 (tables of the same names are "
        "replaced).",
        epilog=f"example:\n  {PROG} {command} --scale 0.01 "
        "-u 'jdbc:hive2://127.0.0.1:10000/default;auth=noSasl'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scale", type=float, default=0.01, help="scale factor (default 0.01)")
    p.add_argument("-u", required=True, metavar="URL", help="JDBC URL of HiveServer2")
    p.add_argument("-n", metavar="USER")
    p.add_argument("-p", metavar="PASSWORD")
    p.add_argument("--database", help=f"target database (default {default_db})")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the Parquet files go; the server must read them at the same path "
        "(default ~/.qoop-hive/data)",
    )
    p.add_argument("--silent", action="store_true", help="no progress bar")
    return p


def run_load(command: str, argv: list[str], out: TextIO, err: TextIO) -> int:
    """``qoop-hive load-tpch|load-tpcds ...`` (``command``): its exit status."""
    args = parse_args(build_load_parser(command), argv, out)
    args.command = command
    return load_tpc_command(args, out, err)
