"""Running a ``qoop-hive`` script: connect, run each statement (queries through the
replanner, the rest directly), report failures and go on with ``--force``, then ``--gc`` (drop
checkpoint tables past their retention).

``--explain-plans`` prints a query's cached plans with their estimates instead of running it
(like EXPLAIN).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from hive_hooks.beeline.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    describe_error,
)
from hive_hooks.beeline.printing import Printer, explain_table, short_plan
from hive_hooks.beeline.script import is_query, load_script, read_text, substitute_variables
from hive_hooks.beeline.session import Replanner, Session
from hive_hooks.jdbc import JdbcUrlError, parse_jdbc_url

__all__ = ["EXIT_SCRIPT_FAILED", "connection_args", "named_url", "run_shell", "run_sql"]


EXIT_SCRIPT_FAILED = 2  # beeline's status for a failed -f script (its ERRNO_OTHER)


def named_url(name: str | None, environ: Mapping[str, str]) -> str | None:
    """The JDBC URL ``name`` (None: the default one) of beeline-site.xml, as beeline's ``-c``
    finds it: ``$HIVE_CONF_DIR``, ``~/.beeline``, ``/etc/hive/conf``; None when there is no
    file (and no name was asked for)."""
    from arbiter.hadoop_xml import read_site_xml

    dirs = [environ.get("HIVE_CONF_DIR", ""), str(Path.home() / ".beeline"), "/etc/hive/conf"]
    for d in filter(None, dirs):
        site = Path(d) / "beeline-site.xml"
        if not site.is_file():
            continue
        try:
            props = {k: p.value for k, p in read_site_xml(site).items()}
        except ValueError as e:
            raise CliError(str(e), EXIT_USAGE) from None
        key = name or props.get("beeline.hs2.jdbc.url.default", "")
        url = props.get(f"beeline.hs2.jdbc.url.{key}")
        if url is None:
            if name is None:
                return None
            raise CliError(f"{site}: no beeline.hs2.jdbc.url.{name}", EXIT_USAGE)
        return url
    if name is not None:
        raise CliError(f"-c {name}: no beeline-site.xml in {', '.join(dirs[1:])}", EXIT_USAGE)
    return None


def connection_args(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Resolve beeline's connection flags into ``-u``/``-p``: ``-c`` (or beeline-site.xml's
    default URL without ``-u``), ``-a`` (``auth=TYPE`` on the URL), ``-w`` (the password)."""
    if args.named_url or not args.u:
        args.u = named_url(args.named_url, environ) or args.u
    if args.authType and args.u and "auth=" not in args.u.split("?")[0].split("#")[0]:
        base, sep, rest = args.u.partition("?")
        args.u = f"{base};auth={args.authType}{sep}{rest}"
    if args.password_file:
        try:
            args.p = Path(args.password_file).read_text().splitlines()[0]
        except (OSError, IndexError) as e:
            raise CliError(f"-w {args.password_file}: cannot read a password ({e})") from None


def run_shell(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Without ``-e``/``-f``: the shell (:mod:`hive_hooks.beeline.shell`) on the terminal,
    or on what stdin pipes in; ``-i`` files first."""
    import itertools

    from hive_hooks.beeline.shell import Shell, terminal_lines

    interactive = sys.stdin.isatty()
    shell = Shell(args, out, err, interactive=interactive, run_statement=_run_statement)
    if args.u:
        shell._guard(lambda: shell.connect(args.u, args.n, args.p))
        if shell.failed and not interactive:
            return EXIT_ERROR
    init = [line for path in args.init or () for line in read_text(path).splitlines()]
    if interactive:
        history = Path.home() / ".qoop-hive" / "history"
        lines: Iterable[str] = terminal_lines(shell.prompt, history)
    else:
        lines = sys.stdin
    return shell.run(itertools.chain(init, lines))


def run_sql(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the script of ``args`` (its statements, then ``--gc``); the exit status."""
    from hive_hooks.errors import EngineUnavailableError

    connection_args(args, os.environ)
    if not (args.e or args.f or args.gc):
        return run_shell(args, out, err)
    printer = Printer(args, out, err)
    script = load_script(args)
    if not args.u:
        if script or args.gc:
            raise CliError(
                "no HiveServer2 to connect to: give -u jdbc:hive2://HOST:PORT/DB", EXIT_USAGE
            )
        raise CliError(
            f"nothing to do: give -u URL with -e SQL or -f FILE (see {PROG} --help)", EXIT_USAGE
        )
    try:
        url = parse_jdbc_url(args.u)
    except JdbcUrlError as e:
        raise CliError(str(e), EXIT_USAGE) from e
    if not script and not args.gc:
        raise CliError("nothing to run: the -e SQL or -f FILE holds no statement", EXIT_USAGE)
    session = Session(
        url,
        user=args.n,
        password=args.p,
        hiveconf={**url.hiveconf, **dict(args.hiveconf or ())},
        hivevar={**url.hivevar, **dict(args.hivevar or ())},
    )
    rp = Replanner(args, session, printer)
    failed = 0
    failed_in_file = False
    try:
        session.conn  # noqa: B018 - connect now: an unreachable server is one clear error
        for source, stmt in script:
            sql = substitute_variables(stmt.text, session.hivevar, session.hiveconf)
            where = f"{source}:{stmt.line}: " if source != "-e" else ""
            try:
                _run_statement(sql, args, session, rp, printer)
            except CliError:
                raise
            except Exception as e:  # broad on purpose: see below
                # A failed statement, whatever failed (the server, the client, the planner), is
                # an error line and exit status 1, and with --force the script goes on, as in
                # beeline.
                failed += 1
                msg = describe_error(e)
                if isinstance(e, EngineUnavailableError) and url.hostport not in msg:
                    msg += f" (HiveServer2 at {url.hostport})"
                printer.error(where + msg)
                if source == args.f:
                    failed_in_file = True
                if not args.force:
                    return EXIT_SCRIPT_FAILED if failed_in_file else EXIT_ERROR
        if args.gc:
            _gc(rp, session, printer, args)
    finally:
        rp.close()
        session.close()
    if failed_in_file:
        return EXIT_SCRIPT_FAILED
    return EXIT_ERROR if failed else EXIT_OK


def _run_statement(
    sql: str, args: argparse.Namespace, session: Session, rp: Replanner, printer: Printer
) -> None:
    """One statement: a query through the replanner (or its plans, ``--explain-plans``),
    anything else directly on the session's connection."""
    if not args.no_replan and is_query(sql):
        if args.explain_plans:
            _explain(rp, sql, printer)
        else:
            _run_query(rp, sql, printer)
        return
    t0 = time.monotonic()
    res = session.execute(sql)
    if session.track(sql):
        rp.invalidate()
    if res is None:
        printer.info(f"No rows affected ({time.monotonic() - t0:.3f} seconds)")
        return
    printer.result(*res)
    printer.rows_line(len(res[1]), time.monotonic() - t0)


def _gc(rp: Replanner, session: Session, printer: Printer, args: argparse.Namespace) -> None:
    """Apply the retention policy (``--gc``), or list what it would drop (``--dry-run``)."""
    from arbiter.tables import format_table
    from hive_hooks.registry import RetentionPolicy

    if args.retention_days < 0 or (args.retention_gb is not None and args.retention_gb < 0):
        raise CliError("--retention-days and --retention-gb must be >= 0", EXIT_USAGE)
    policy = RetentionPolicy(
        max_age_s=args.retention_days * 86400.0,
        max_total_bytes=None if args.retention_gb is None else int(args.retention_gb * 1e9),
    )
    report = rp.registry().gc(
        session.connect, policy, database=args.checkpoint_db, dry_run=args.dry_run
    )
    rows = [
        [
            r.qualified,
            report.reasons.get(r.table, ""),
            "-" if r.rows is None else f"{r.rows:,}",
            "-" if r.bytes is None else f"{r.bytes / 1e6:,.1f}",
            dt.datetime.fromtimestamp(r.last_used_at).isoformat(sep=" ", timespec="seconds"),
            r.query_id,
        ]
        for r in report.dropped
    ]
    rows += [[f"{report.database}.{o}", "orphan", "-", "-", "-", "-"]
             for o in report.orphans_dropped]  # fmt: skip
    if rows:
        headers = ["checkpoint table", "reason", "rows", "MB", "last used", "query"]
        printer.out.write(format_table(headers, rows) + "\n")
        printer.out.flush()
    verb = "would drop" if report.dry_run else "dropped"
    n = len(report.dropped) + len(report.orphans_dropped)
    note = f"gc: {verb} {n} checkpoint table{'s' if n != 1 else ''} in {report.database}"
    note += f" ({report.freed_bytes / 1e6:,.1f} MB)"
    if report.orphans_kept:
        note += f"; {len(report.orphans_kept)} orphans kept (a run is live)"
    printer.info(note)
    for table, msg in report.failed.items():
        printer.error(f"gc: could not drop {table}: {msg}")
    if report.failed:
        raise CliError(f"gc: {len(report.failed)} tables could not be dropped")


def _run_query(rp: Replanner, sql: str, printer: Printer) -> None:
    """A query through the replanner: its result, then a line with its plan and switches."""
    sink = printer.row_sink()
    result = rp.runner().run(sql, on_rows=sink)
    if sink is None or not result.streamed:  # buffered, or an empty result (its header)
        printer.result(result.columns, result.rows)
    n = len(result.switches)
    extra = f"plan {short_plan(result.plan_id)}, {n} switch{'es' if n != 1 else ''}"
    if n:
        extra += (
            " ("
            + ", ".join(
                f"{short_plan(w.from_plan)}->{short_plan(w.to_plan)} at {w.at_s:.1f} s"
                for w in result.switches
            )
            + ")"
        )
    if result.reused:
        extra += f", {len(result.reused)} checkpoint{'s' if len(result.reused) != 1 else ''} reused"
    if result.passthrough:
        extra = "ran as one statement (not decomposable into plans)"
    printer.rows_line(result.row_count, result.elapsed_s, "; " + extra)


def _explain(rp: Replanner, sql: str, printer: Printer) -> None:
    """``--explain-plans``: the query's cached plans and their estimates, as a table."""
    from arbiter.tables import format_table

    headers, rows = explain_table(rp.runner().explain(sql))
    printer.out.write(format_table(headers, rows) + "\n")
    printer.out.flush()
