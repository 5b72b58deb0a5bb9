"""The arguments of ``qoop-hive`` running SQL (``qoop-hive -u URL -e ...``): the parser with
beeline's option names, the value types of its options, ``--share-profile`` parsing and the
checks between options; :class:`Parser`, whose usage errors go through ``main``.

Beeline's conventions where beeline has one: ``-u -n -p -w -a -c -d -e -f -i``,
``--hiveconf``, ``--hivevar`` (and Hive CLI's ``--define``), ``--outputformat`` with
``--showHeader``, ``--silent``, ``--delimiterForDSV``, ``--nullemptystring``, ``--force``
(go on after a failed statement), boolean flags also as ``--flag=true|false``.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, TextIO

from hive_hooks.beeline.errors import EXIT_USAGE, PROG, CliError
from hive_hooks.output import FORMATS

__all__ = [
    "Parser",
    "build_parser",
    "check_args",
    "hostport",
    "hostports",
    "parse_args",
    "parse_share_profile",
]


def parse_share_profile(text: str) -> list[tuple[float, float]]:
    """``"0:1.0,5:0.25,12:0.5"`` -> ``[(0.0, 1.0), (5.0, 0.25), (12.0, 0.5)]``: at ``t``
    seconds after a query starts, its share becomes ``fraction`` of the cluster.

    >>> parse_share_profile("0:1, 5:0.25")
    [(0.0, 1.0), (5.0, 0.25)]
    """
    points: list[tuple[float, float]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        t, colon, f = item.partition(":")
        try:
            point = (float(t), float(f))
        except ValueError:
            point = None
        if not colon or point is None:
            raise CliError(
                f"bad --share-profile entry {item!r}: expected SECONDS:FRACTION, e.g. 0:1.0,5:0.25",
                EXIT_USAGE,
            )
        if point[0] < 0 or not 0 < point[1] <= 1:
            raise CliError(
                f"bad --share-profile entry {item!r}: seconds must be >= 0 and the fraction "
                "in (0, 1]",
                EXIT_USAGE,
            )
        if points and point[0] <= points[-1][0]:
            raise CliError("--share-profile times must increase", EXIT_USAGE)
        points.append(point)
    if not points:
        raise CliError("--share-profile is empty", EXIT_USAGE)
    if points[0][0] != 0:
        raise CliError("--share-profile must start at 0 seconds, e.g. 0:1.0,5:0.25", EXIT_USAGE)
    return points


def _bool(text: str) -> bool:
    """A boolean option's value (:func:`arbiter.config.parse_bool`, the keys' syntax)."""
    from arbiter.config import parse_bool  # lazily: arbiter.config loads the auction

    try:
        return parse_bool(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def _keyvalue(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return n


def hostport(text: str) -> str:
    """An option value ``HOST:PORT``, as given."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def hostports(text: str) -> str:
    """An option value ``HOST:PORT`` or a comma-separated list of them (an arbiter HA pair,
    parsed as :func:`arbiter.agent.arbiter_addresses` does), as given.

    >>> hostports("a:1, b:2")
    'a:1, b:2'
    """
    from arbiter.agent import arbiter_addresses

    try:
        addresses = arbiter_addresses(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}") from e
    for a in addresses:
        try:
            hostport(a)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"expected HOST:PORT[,HOST:PORT...], got {text!r}"
            ) from None
    return text


class Parser(argparse.ArgumentParser):
    """Usage errors exit with status 2 through :func:`hive_hooks.cli.main` (never
    ``sys.exit`` mid-way); ``--help`` goes to the stream ``main`` writes to."""

    stream: TextIO | None = None

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{message} (see {self.prog} --help)", EXIT_USAGE)

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            (self.stream or file or sys.stdout).write(message)


_DESCRIPTION = """\
A beeline-like client for HiveServer2 whose SELECT statements run through the QOOP
replanner: each query's alternative plans are cached, the chosen plan runs one stage at a
time with every finished stage kept as a checkpoint table (--checkpoint-db), and when the
query's resource share changes (from the arbiter, --arbiter, or a scripted profile,
--share-profile) the query may switch plans, reusing checkpoints. Other statements (DDL,
SET, USE, INSERT, ...) run directly, as in beeline."""

_EPILOG = f"""\
subcommands (the first word):
  {PROG} engine start|stop|status|jars [--engine spark|hive] [--workdir DIR] [--port P]
        a local HiveServer2 (Spark Thrift Server, or Hive 4.0.1 on Tez) that outlives the
        command
  {PROG} beeline -u URL [BEELINE OPTIONS]
        Hive's BeeLine from the Hive jars (plain SQL, no replanning)
  {PROG} load-tpch|load-tpcds --scale S -u URL [--database DB]
        generate TPC data with DuckDB and load it as Parquet tables
  ({PROG} engine --help, {PROG} load-tpch --help for their options)

examples:
  {PROG} engine start --port 10000 --workdir /tmp/hs2
  {PROG} load-tpch --scale 0.01 -u 'jdbc:hive2://127.0.0.1:10000/default;auth=noSasl'
  {PROG} -u 'jdbc:hive2://127.0.0.1:10000/tpch;auth=noSasl' \\
      -e 'SELECT n_name, count(*) FROM nation JOIN customer ON n_nationkey = c_nationkey
          GROUP BY n_name' --share-profile 0:1.0,5:0.25,15:0.5
  {PROG} -u URL -f report.sql --hivevar day=2024-01-01 --outputformat=csv2 --silent=true
  {PROG} -u URL --arbiter arbiter.example.com:50051 --arbiter-tls --arbiter-ca ca.pem \\
      -f q.sql
  {PROG} -u URL --explain-plans -e 'SELECT ...'     the cached plans and their estimates
  {PROG} -u URL --gc --dry-run                      checkpoint tables past retention

JDBC URL: jdbc:hive2://HOST:PORT/DB[;auth=noSasl;user=U;...][?hiveconf=v;...][#hivevar=v;...]

interactive: without -e and -f, a prompt with history (~/.qoop-hive/history) reads SQL ended
  by ';' and beeline's commands: !connect URL [USER [PASSWORD]], !close, !quit (!q, !exit),
  !set KEY VALUE (outputformat, showHeader, silent, nullemptystring, force,
  delimiterForDSV), !set (show them), !history, !help. A pipe on stdin is read the same way.

exit status: 0 ok; 1 a statement failed or HiveServer2 is unreachable (as beeline); 2 a
  statement of the -f script failed (as beeline), or a usage error (bad option, JDBC URL or
  share profile; beeline says 1); 130 interrupted.
"""


def build_parser() -> Parser:
    """The parser of ``qoop-hive`` running SQL (the subcommands have their own)."""
    p = Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conn = p.add_argument_group("connection")
    conn.add_argument("-u", metavar="URL", help="JDBC URL: jdbc:hive2://HOST:PORT/DB[;auth=noSasl]")
    conn.add_argument("-n", metavar="USER", help="user name (default: the login name)")
    conn.add_argument("-p", metavar="PASSWORD", help="password (SASL PLAIN / LDAP)")
    conn.add_argument(
        "-w", "--password-file", metavar="FILE", help="read the password from FILE (as beeline)"
    )
    conn.add_argument(
        "-a", "--authType", metavar="TYPE",
        help="authentication type passed to the JDBC URL as auth=TYPE (e.g. noSasl)",
    )  # fmt: skip
    conn.add_argument(
        "-c", metavar="NAME", dest="named_url",
        help="the JDBC URL named NAME in beeline-site.xml (beeline.hs2.jdbc.url.NAME; "
        "$HIVE_CONF_DIR, ~/.beeline or /etc/hive/conf); without -u and -c its default one",
    )  # fmt: skip
    conn.add_argument(
        "-d", metavar="DRIVER", dest="driver",
        help="JDBC driver class (accepted for beeline's sake; this client speaks HiveServer2's "
        "Thrift protocol itself)",
    )  # fmt: skip
    sql = p.add_argument_group("what to run")
    sql.add_argument(
        "-e", metavar="SQL", action="append", help="SQL to run; ';' separates several (repeatable)"
    )
    sql.add_argument(
        "-f", metavar="FILE",
        help="script file to run (else an interactive shell, or SQL and !commands from stdin)",
    )  # fmt: skip
    sql.add_argument(
        "-i", dest="init", metavar="FILE", action="append", help="init script run first"
    )
    sql.add_argument(
        "--hiveconf",
        metavar="K=V",
        type=_keyvalue,
        action="append",
        help="session setting, like SET K=V (repeatable)",
    )
    sql.add_argument(
        "--hivevar",
        "--define",
        dest="hivevar",
        metavar="K=V",
        type=_keyvalue,
        action="append",
        help="variable for ${K} / ${hivevar:K} substitution (repeatable)",
    )
    sql.add_argument(
        "--force",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="go on after a failed statement (exit status still 1)",
    )
    rep = p.add_argument_group("replanning")
    rep.add_argument(
        "--no-replan",
        action="store_true",
        help="run SELECTs directly, as one query (no plans, no checkpoints)",
    )
    rep.add_argument(
        "--explain-plans",
        action="store_true",
        help="print each SELECT's cached plans with their estimates instead of running it",
    )
    rep.add_argument(
        "--share-profile",
        metavar="T:F,...",
        help="scripted share: at T seconds after a query starts its share becomes fraction F "
        "of the cluster, e.g. 0:1.0,5:0.25,15:0.5",
    )
    rep.add_argument(
        "--hysteresis",
        type=float,
        default=0.15,
        metavar="H",
        help="switch plans only if the new one is estimated H faster (default 0.15 = 15%%)",
    )
    rep.add_argument(
        "--max-stages",
        type=_positive_int,
        default=4,
        metavar="N",
        help="run at most N independent stages at once, within the share (default 4; 1 for "
        "Hive with Tez in local mode, whose DAGs share one JVM)",
    )
    rep.add_argument(
        "--cluster-vcores",
        type=float,
        default=16.0,
        metavar="V",
        help="--share-profile: the vcores a fraction of 1.0 means (default 16)",
    )
    rep.add_argument(
        "--memory-per-vcore-mb",
        type=float,
        default=2048.0,
        metavar="MB",
        help="--share-profile: memory that comes with each vcore (default 2048)",
    )
    rep.add_argument(
        "--arbiter",
        metavar="HOST:PORT[,HOST:PORT]",
        type=hostports,
        help="take the share from the arbiter (an HA pair: both addresses, comma-separated)",
    )
    rep.add_argument("--arbiter-tls", action="store_true", help="TLS to the arbiter")
    rep.add_argument("--arbiter-ca", metavar="PEM", help="CA certificate(s) to trust (TLS)")
    rep.add_argument("--arbiter-cert", metavar="PEM", help="client certificate (mutual TLS)")
    rep.add_argument("--arbiter-key", metavar="PEM", help="client private key (mutual TLS)")
    rep.add_argument("--queue", default="default", help="YARN queue reported to the arbiter")
    rep.add_argument(
        "--engine-control",
        metavar="HOST:PORT",
        type=hostport,
        help="push the share to this engine (engine start --on-yarn prints it)",
    )
    rep.add_argument(
        "--checkpoint-db",
        default="qoop_ckpt",
        metavar="DB",
        help="database for checkpoint tables (default qoop_ckpt)",
    )
    rep.add_argument(
        "--registry",
        metavar="PATH",
        help="checkpoint registry, SQLite (default $QOOP_HIVE_REGISTRY or "
        "~/.qoop-hive/registry.db; key qoop.hive.registry.path)",
    )
    rep.add_argument(
        "--gc",
        action="store_true",
        help="drop checkpoint tables past their retention, and orphans (after any SQL)",
    )
    rep.add_argument("--dry-run", action="store_true", help="with --gc: only list them")
    rep.add_argument(
        "--retention-days",
        type=float,
        default=7.0,
        metavar="D",
        help="--gc: drop checkpoints unused for D days (default 7)",
    )
    rep.add_argument(
        "--retention-gb",
        type=float,
        metavar="G",
        help="--gc: then drop least recently used ones until G GB remain (default: no limit)",
    )
    fmt = p.add_argument_group("output")
    fmt.add_argument(
        "--outputformat",
        choices=FORMATS,
        default="table",
        help="result format, as beeline (default table)",
    )
    for name, default, text in (
        ("--showHeader", True, "print column names (default true)"),
        ("--silent", False, "no progress, timings or info on stderr (default false)"),
        ("--nullemptystring", False, "print NULL as an empty string (default false)"),
    ):
        fmt.add_argument(
            name, type=_bool, nargs="?", const=True, default=default, metavar="BOOL", help=text
        )
    fmt.add_argument(
        "--delimiterForDSV", default="|", metavar="D", help="dsv delimiter (default |)"
    )
    fmt.add_argument(
        "--quoting",
        action="store_true",
        help="csv2/tsv2/dsv: quote values holding the delimiter, a quote or a newline",
    )
    return p


def parse_args(parser: Parser, argv: list[str], out: TextIO) -> argparse.Namespace:
    """``parser``'s namespace for ``argv``; ``--help`` is written to ``out``."""
    parser.stream = out
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The checks between options :func:`build_parser` cannot make: usage errors before
    connecting."""
    if args.dry_run and not args.gc:
        raise CliError("--dry-run goes with --gc", EXIT_USAGE)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", args.checkpoint_db or ""):
        raise CliError(
            f"--checkpoint-db {args.checkpoint_db!r} is not a Hive database name "
            "(letters, digits and _; not starting with a digit)",
            EXIT_USAGE,
        )
    if args.arbiter and args.share_profile:
        raise CliError("give --arbiter or --share-profile, not both", EXIT_USAGE)
    if args.share_profile:
        parse_share_profile(args.share_profile)
    if not args.cluster_vcores > 0 or not args.memory_per_vcore_mb > 0:
        raise CliError("--cluster-vcores and --memory-per-vcore-mb must be > 0", EXIT_USAGE)
