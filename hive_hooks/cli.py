"""``qoop-hive``: a beeline-like HiveServer2 client whose SELECTs are replanned by QOOP.

A thin shell over :mod:`hive_hooks.executor` (``QueryRunner``: cached plans, stage-by-stage
execution with checkpoint tables, plan switches when the share changes),
:mod:`hive_hooks.registry` (durable checkpoint registry), :mod:`hive_hooks.share` (where the
query's resource share comes from), :mod:`hive_hooks.engine` (a local HiveServer2) and
:mod:`hive_hooks.tpcload` (TPC-H / TPC-DS data). ``qoop-hive --help`` has the whole surface with
examples.

Decisions:

* **Beeline's conventions** where beeline has one: ``-u -n -p -e -f -i``, ``--hiveconf``,
  ``--hivevar`` (and ``--define``), ``--outputformat`` with ``--showHeader``, ``--silent``,
  ``--delimiterForDSV``, ``--nullemptystring``, ``--force`` (go on after a failed statement),
  boolean flags also as ``--flag=true|false``; result sets on stdout, "N rows selected (T
  seconds)" and errors on stderr. Exit status measured on beeline 2.3.10: **1** for a failed
  statement or an unreachable server; here **2** is a usage error (a bad flag or JDBC URL),
  **3** ``engine status`` of a stopped engine (LSB), **130** Ctrl-C.
* **What is replanned.** A statement that sqlglot parses (Hive dialect) as a query (SELECT,
  WITH ... SELECT, set operations) goes through the replanner unless ``--no-replan``; every
  other statement (DDL, DML, SET, USE, SHOW, EXPLAIN, ...) and a SELECT sqlglot cannot parse run
  directly on one session connection. ``--explain-plans`` prints a query's cached plans with
  their estimates instead of running it (like EXPLAIN).
* **Session state reaches the replanner.** ``USE db``, ``SET k=v`` and ``--hiveconf`` are kept
  client-side too, so every connection the replanner opens starts in the current database with
  the same settings (sent at OpenSession as ``set:hiveconf:k``, as Hive's JDBC driver does, and
  passed to the QueryRunner, whose session settings they override); a ``USE`` or ``SET`` makes
  the next SELECT use a new QueryRunner (a runner keeps its connections).
* **The share.** ``--arbiter`` follows the arbiter's QueryShare stream (``ArbiterShare``, one
  registration per query); ``--share-profile T:F,...`` replays fractions ``F`` of
  ``--cluster-vcores`` (2 GB per vcore) from each query's start (``ScriptedShare``); neither:
  the executor's fixed default share. Each share change the executor sees is a progress line,
  like each stage event.
* **load-tpch / load-tpcds** call :func:`hive_hooks.tpcload.load_tpc`; the progress bar moves
  one step per table as the loader's CREATE TABLE statements go through the connection.
* **Variables** (``--hivevar``, the URL's ``#k=v``, ``SET hivevar:k=v`` in a script) are
  substituted client-side before planning, like Hive's CLI: ``${hivevar:k}``, ``${k}`` (hivevar,
  then hiveconf), ``${hiveconf:k}``, ``${env:K}``; unknown references are left as they are.
* **Scripts** are split on ``;`` outside quotes (``'`` and ``"`` with backslash escapes, backtick
  identifiers) and comments (``--`` and nestable ``/* */``); an unterminated quote or comment is
  an error naming its line. Errors in ``-f`` scripts name ``file:line``.
* **engine start** runs ``python -m hive_hooks.engine`` in its own session (so it outlives this
  command and Ctrl-C here does not reach it), waits until it accepts connections, prints the JDBC
  URL and writes ``qoop-hive-engine.json`` (pids, port, URL) in the work dir. **engine stop**
  sends SIGTERM to that process group (the engine stops its JVM), then to the JVM's group if it
  is still there, SIGKILL after a grace period; a pid is only signalled if its command line is
  still the engine's (no stray kill after pid reuse). Both are idempotent.
* **engine start --on-yarn** runs ``python -m hive_hooks.yarn_engine`` instead: the same server
  with its executors in YARN containers (``--hadoop-conf-dir``, queue ``--yarn-queue``), sized by
  the shares of the queries it runs; the pid file also records its control endpoint
  (``control``), which ``--engine-control HOST:PORT`` gives a query run so its share is pushed
  there (:mod:`hive_hooks.yarn_engine`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from hive_hooks.jdbc import JdbcUrl, JdbcUrlError, parse_jdbc_url
from hive_hooks.output import FORMATS, STREAMABLE, write_result

__all__ = [
    "CliError",
    "Statement",
    "describe_error",
    "is_query",
    "main",
    "parse_share_profile",
    "split_statements",
    "substitute_variables",
]

PROG = "qoop-hive"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
PID_FILE = "qoop-hive-engine.json"
ENGINE_LOG = "qoop-hive-engine.log"
DEFAULT_HOME = Path(os.environ.get("QOOP_HIVE_HOME", Path.home() / ".qoop-hive"))
DEFAULT_WORKDIR = DEFAULT_HOME / "engine"


class CliError(Exception):
    """A failure reported as one line ``qoop-hive: error: ...`` with an exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


# -------------------------------------------------------------------------- scripts


@dataclasses.dataclass(frozen=True)
class Statement:
    """One statement of a script: its text (no trailing ``;``) and the line it starts on."""

    text: str
    line: int = 1


def split_statements(text: str) -> list[Statement]:
    """Split a script on ``;`` outside quotes and comments (module docstring).

    Statements that are empty or only comments are dropped.

    >>> [s.text for s in split_statements("SELECT ';' AS a; -- x;y\\nSELECT 2 /* ; */;")]
    ["SELECT ';' AS a", '-- x;y\\nSELECT 2 /* ; */']
    """
    out: list[Statement] = []
    n = len(text)
    i = start = 0
    line = start_line = 1
    meaningful = False  # the current piece has something besides comments and blanks

    def flush(end: int) -> None:
        piece = text[start:end].strip()
        if meaningful and piece:
            lead = len(text[start:end]) - len(text[start:end].lstrip())
            first = start_line + text[start : start + lead].count("\n")
            out.append(Statement(piece, first))

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and text.startswith("/*", i):
            depth, j, opened = 1, i + 2, line
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    line += text[j] == "\n"
                    j += 1
            if depth:
                raise CliError(f"line {opened}: unterminated /* comment", EXIT_ERROR)
            i = j
        elif c in "'\"`":
            j, opened = i + 1, line
            while j < n and text[j] != c:
                step = 2 if text[j] == "\\" and c != "`" else 1  # backslash escapes in strings
                line += text[j : j + step].count("\n")
                j += step
            if j >= n:
                what = "identifier" if c == "`" else "string"
                raise CliError(f"line {opened}: unterminated {c}-quoted {what}", EXIT_ERROR)
            meaningful, i = True, j + 1
        elif c == ";":
            flush(i)
            i += 1
            start, start_line, meaningful = i, line, False
        else:
            meaningful = meaningful or not c.isspace()
            i += 1
    flush(n)
    return out


def strip_leading_comments(sql: str) -> str:
    """``sql`` without leading blanks and comments."""
    while True:
        s = sql.lstrip()
        if s.startswith("--"):
            nl = s.find("\n")
            sql = "" if nl < 0 else s[nl + 1 :]
        elif s.startswith("/*"):
            end = s.find("*/")
            sql = "" if end < 0 else s[end + 2 :]
        else:
            return s


_VAR = re.compile(r"\$\{(?:(hivevar|hiveconf|env|system):)?([^}:]+)\}")


def substitute_variables(
    sql: str,
    hivevar: dict[str, str],
    hiveconf: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Hive-style ``${...}`` substitution (module docstring); unknown references stay.

    >>> substitute_variables("SELECT ${n}, '${hivevar:d}', ${env:X}, ${y}", {"n": "1", "d": "x"},
    ...                      env={"X": "2"})
    "SELECT 1, 'x', 2, ${y}"
    """
    hiveconf = hiveconf or {}
    env = os.environ if env is None else env

    def one(m: re.Match[str]) -> str:
        kind, name = m.group(1), m.group(2)
        if kind == "hivevar":
            value = hivevar.get(name)
        elif kind == "hiveconf":
            value = hiveconf.get(name)
        elif kind == "env":
            value = env.get(name)
        elif kind == "system":
            value = None
        else:
            value = hivevar.get(name, hiveconf.get(name))
        return m.group(0) if value is None else value

    for _ in range(40):  # Hive's bound on nested substitution
        new = _VAR.sub(one, sql)
        if new == sql:
            break
        sql = new
    return sql


_QUERY_START = re.compile(r"(?is)^\(*\s*(select|with|from|values|table)\b")


def is_query(sql: str) -> bool:
    """True for a statement the replanner takes: a query sqlglot parses in the Hive dialect.

    >>> is_query("-- c\\nSELECT a FROM t"), is_query("INSERT INTO t SELECT 1"), is_query("SET x")
    (True, False, False)
    """
    body = strip_leading_comments(sql)
    if not _QUERY_START.match(body):
        return False
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(body, read="hive")
    except SqlglotError:
        return False
    return isinstance(tree, exp.Query)


_SET = re.compile(r"(?is)^set\s+(hivevar:|hiveconf:)?([^=\s]+)\s*=\s*(.*?)\s*$")
_USE = re.compile(r"(?is)^use\s+`?([A-Za-z0-9_]+)`?\s*$")


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


# -------------------------------------------------------------------------- errors

_EXC_CLASS = re.compile(r"^(?:\[[A-Z0-9_.]+\]\s*)?[\w.$]+(?:Exception|Error):\s*", re.S)


def _server_message(exc: BaseException) -> str | None:
    """The HiveServer2 error text carried by a pyhive error, if any (anywhere in the chain)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for arg in getattr(e, "args", ()):
            status = getattr(arg, "status", None)
            msg = getattr(status, "errorMessage", None)
            if msg:
                return str(msg)
        e = e.__cause__ or e.__context__
    return None


def describe_error(exc: BaseException) -> str:
    """One line a person can act on, for any error from the server, the client or the planner.

    >>> describe_error(ValueError("bad thing\\nmore"))
    'bad thing'
    """
    from hive_hooks.errors import QoopHiveError

    msg = _server_message(exc)
    if isinstance(exc, QoopHiveError):  # the engine's own text when there is one
        msg = getattr(exc, "engine_message", "") or str(exc).strip()
    if msg is None:
        msg = str(exc).strip() or type(exc).__name__
        if type(exc).__module__.startswith(("thrift", "pyhive")):
            msg = f"{type(exc).__name__}: {msg}"
    msg = re.sub(r"^(?:[\w.]+HiveSQLException:\s*)?Error running query:\s*", "", msg.strip())
    msg = _EXC_CLASS.sub("", msg, count=1)
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _why(exc: BaseException) -> str:
    """Why a connection failed, in words (thrift's messages are cryptic)."""
    text = str(exc)
    if "Could not connect" in text or isinstance(exc, ConnectionRefusedError):
        return f"connection refused (is it running? try `{PROG} engine status`)"
    if "resolve" in text:
        return "unknown host"
    if "read 0 bytes" in text or "closed" in text.lower():
        return (
            "the server closed the connection; does the URL's auth match the server's "
            "(;auth=noSasl for a NOSASL server)?"
        )
    return describe_error(exc)


def _quiet_client_logs() -> None:
    """thrift and pyhive log connection failures with tracebacks; the CLI reports them itself."""
    for name in ("thrift", "pyhive", "thrift_sasl"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# -------------------------------------------------------------------------- session


class Session:
    """A connection to HiveServer2 plus the client-side state new connections must share."""

    def __init__(
        self,
        url: JdbcUrl,
        *,
        user: str | None,
        password: str | None,
        hiveconf: dict[str, str],
        hivevar: dict[str, str],
    ) -> None:
        self.url = url
        self.user, self.password = user, password
        self.database = url.database
        self.hiveconf = dict(hiveconf)
        self.hivevar = dict(hivevar)
        self._conn: Any = None

    def connect(self) -> Any:
        """A new pyhive connection in the session's database with its settings (the factory
        the replanner gets: connection errors come out as pyhive/thrift raise them, so the
        executor can tell a lost server from a failed statement)."""
        from pyhive import hive

        kwargs = self.url.pyhive_kwargs(self.user, self.password)
        kwargs["database"] = self.database
        kwargs["configuration"] = {f"set:hiveconf:{k}": v for k, v in self.hiveconf.items()}
        return hive.connect(**kwargs)

    @property
    def conn(self) -> Any:
        """The session's own connection (direct statements); :class:`CliError` naming
        host:port if the server cannot be reached."""
        if self._conn is None:
            try:
                self._conn = self.connect()
            except Exception as e:
                if _server_message(e) is not None:
                    raise
                msg = f"cannot reach HiveServer2 at {self.url.hostport}: {_why(e)}"
                raise CliError(msg) from e
        return self._conn

    def execute(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """Run one statement directly; the result set, or None if it has none."""
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
            if not cur.description:
                return None
            cols = [d[0] for d in cur.description]
            return cols, [tuple(r) for r in cur.fetchall()]
        finally:
            with contextlib.suppress(Exception):
                cur.close()

    def track(self, sql: str) -> bool:
        """Mirror a successful SET/USE client-side (module docstring); True if the database or
        a setting changed (new connections differ)."""
        body = strip_leading_comments(sql)
        if m := _USE.match(body):
            self.database = m.group(1)
            return True
        if m := _SET.match(body):
            kind, key, value = m.groups()
            if (kind or "").lower() == "hivevar:":
                self.hivevar[key] = value
                return False
            self.hiveconf[key] = value
            return True
        return False

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


# -------------------------------------------------------------------------- running SQL


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


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


def _hostport(text: str) -> str:
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


class _Printer:
    """stdout for results, stderr for progress and info (quiet with --silent)."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args, self.out, self.err = args, out, err

    def info(self, text: str) -> None:
        if not self.args.silent:
            print(text, file=self.err, flush=True)

    def error(self, text: str) -> None:
        print(f"{PROG}: error: {text}", file=self.err, flush=True)

    def result(
        self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, header: bool = True
    ) -> None:
        a = self.args
        write_result(
            self.out,
            columns,
            rows,
            a.outputformat,
            header=a.showHeader and header,
            delimiter=a.delimiterForDSV,
            null_empty=a.nullemptystring,
            quoting=a.quoting,
        )

    def row_sink(self) -> Callable[[Sequence[str], Sequence[Sequence[Any]]], None] | None:
        """For a row-by-row output format, a callback printing each batch of the final stage
        as it arrives (the header once); None for ``table`` and ``json``, printed at the end."""
        if self.args.outputformat not in STREAMABLE:
            return None
        first = [True]

        def sink(columns: Sequence[str], batch: Sequence[Sequence[Any]]) -> None:
            self.result(columns, batch, header=first[0])
            first[0] = False

        return sink

    def rows_line(self, n: int, seconds: float, extra: str = "") -> None:
        what = "No rows selected" if n == 0 else f"{n:,} row{'s' if n != 1 else ''} selected"
        self.info(f"{what} ({seconds:.3f} seconds){extra}")

    def event(self, ev: Any) -> None:
        """One progress line per stage event of the replanner."""
        if self.args.silent:
            return
        self.info(format_event(ev))


def short_plan(plan_id: str) -> str:
    """``q-1a2b/p3`` -> ``p3`` (plan ids carry their query id)."""
    return plan_id.rsplit("/", 1)[-1]


def format_event(ev: Any) -> str:
    """One progress line for a :class:`hive_hooks.executor.StageEvent`.

    >>> from hive_hooks.executor import StageEvent
    >>> format_event(StageEvent("q1", "q1/p2", "join_ab", "done", rows=1200, seconds=0.84))
    '[q1] p2  done       join_ab  1,200 rows  0.84 s'
    >>> format_event(StageEvent("q1", "q1/p0", "", "switch", detail="from q1/p2"))
    '[q1] switch to p0 (from p2)'
    """
    qid, plan = ev.query_id, short_plan(ev.plan_id)
    if ev.kind == "switch":
        old = ev.detail.removeprefix("from ").strip()
        return f"[{qid}] switch to {plan}" + (f" (from {short_plan(old)})" if old else "")
    line = f"[{qid}] {plan}  {ev.kind:<9}  {ev.stage_id}"
    if ev.rows is not None:
        line += f"  {ev.rows:,} rows"
    if ev.seconds is not None:
        line += f"  {ev.seconds:.2f} s"
    if ev.kind == "reused" and ev.table:
        line += f"  from {ev.table}"
    return line


class ReportingShare:
    """A share source that reports every share change it hands out (a line per change).

    Wraps any :class:`hive_hooks.share.ShareSource`; the executor sees the same snapshots.
    """

    def __init__(self, inner: Any, report: Callable[[str], None]) -> None:
        self.inner, self.report = inner, report
        self._qid = ""
        self._epoch: int | None = None

    def _seen(self, snap: Any) -> Any:
        if snap.epoch != self._epoch:
            self._epoch = snap.epoch
            sh = snap.share
            self.report(
                f"[{self._qid}] share  {sh.vcores:g} vcores, {sh.memory_mb / 1024:g} GB"
                + (f"  ({snap.cause})" if snap.cause else "")
            )
        return snap

    @property
    def job_id(self) -> str | None:
        """The inner source's arbiter job id, if it has one (the engine's pool key)."""
        return getattr(self.inner, "job_id", None)

    def begin(self, query_id: str) -> None:
        self._qid, self._epoch = query_id, None
        self.inner.begin(query_id)

    def current(self) -> Any:
        return self._seen(self.inner.current())

    def wait_change(self, after_epoch: int, timeout: float) -> Any:
        return self._seen(self.inner.wait_change(after_epoch, timeout))

    def end(self, query_id: str) -> None:
        self.inner.end(query_id)


def plan_shape(plan: Any) -> str:
    """The join tree of a plan by relation aliases, e.g. ``((o ⋈ l) ⋈ c)``."""

    def shape(stage_id: str) -> str:
        st = plan.stage(stage_id)
        if st.kind == "join":
            return "(" + " ⋈ ".join(shape(i) for i in st.inputs) + ")"
        if st.kind == "final":
            return " x ".join(shape(i) for i in st.inputs)
        rels = sorted(r.alias for r in st.signature.relations)
        return ",".join(rels) or st.stage_id

    text = shape(plan.root)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def _load_script(args: argparse.Namespace) -> list[tuple[str, Statement]]:
    """(source, statement) pairs from -i files, -e strings, the -f file, or else (without
    --gc) stdin when it is not a terminal."""
    pieces: list[tuple[str, str]] = []
    for path in args.init or ():
        pieces.append((path, _read(path)))
    for text in args.e or ():
        pieces.append(("-e", text))
    if args.f:
        pieces.append((args.f, _read(args.f)))
    if not (args.e or args.f or args.init or args.gc) and not sys.stdin.isatty():
        pieces.append(("<stdin>", sys.stdin.read()))
    out = []
    for source, text in pieces:
        try:
            stmts = split_statements(text)
        except CliError as e:
            raise CliError(f"{source}: {e}", e.code) from None
        out += [(source, s) for s in stmts]
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from e


def _make_share(args: argparse.Namespace, session: Session) -> Any:
    """The share source: the arbiter's stream, a scripted profile, or None (the executor's
    static default)."""
    if args.arbiter:
        from hive_hooks.share import ArbiterShare

        credentials = None
        if args.arbiter_tls or args.arbiter_ca or args.arbiter_cert:
            import grpc

            def blob(p: str | None) -> bytes | None:
                return _read(p).encode() if p else None

            credentials = grpc.ssl_channel_credentials(
                root_certificates=blob(args.arbiter_ca),
                private_key=blob(args.arbiter_key),
                certificate_chain=blob(args.arbiter_cert),
            )
        kwargs: dict[str, Any] = {
            "user": session.url.pyhive_kwargs(session.user)["username"],
            "queue_name": args.queue,
            "credentials": credentials,
        }
        return ArbiterShare(args.arbiter, **kwargs)
    if args.share_profile:
        from hive_hooks.share import ScriptedShare
        from qoop_planner.model import Share

        full = args.cluster_vcores
        return ScriptedShare(
            [
                (t, Share(vcores=f * full, memory_mb=f * full * args.memory_per_vcore_mb))
                for t, f in parse_share_profile(args.share_profile)
            ]
        )
    return None


def _make_enforcer(args: argparse.Namespace) -> Any:
    """The engine's share control (``--engine-control``), or None."""
    if not getattr(args, "engine_control", None):
        return None
    from hive_hooks.yarn_engine import EngineControl

    host, _, port = args.engine_control.rpartition(":")
    return EngineControl(int(port), host or "127.0.0.1")


class _Replanner:
    """Builds the QueryRunner lazily (only scripts with a SELECT need the executor), and anew
    after ``USE``/``SET`` (a runner keeps its connections' database and settings)."""

    def __init__(self, args: argparse.Namespace, session: Session, printer: _Printer) -> None:
        self.args, self.session, self.printer = args, session, printer
        self._runner: Any = None
        self._registry: Any = None

    def registry(self) -> Any:
        if self._registry is None:
            from hive_hooks.registry import CheckpointRegistry

            self._registry = CheckpointRegistry(self.args.registry)
        return self._registry

    def runner(self) -> Any:
        if self._runner is None:
            from hive_hooks.executor import QueryRunner

            share = _make_share(self.args, self.session)
            if share is not None and not self.args.silent:
                share = ReportingShare(share, self.printer.info)
            self._runner = QueryRunner(
                self.session.connect,
                registry=self.registry(),
                checkpoint_db=self.args.checkpoint_db,
                share=share,
                hiveconf=self.session.hiveconf,
                on_event=self.printer.event,
                hysteresis=self.args.hysteresis,
                share_enforcer=_make_enforcer(self.args),
                max_concurrency=self.args.max_stages,
            )
        return self._runner

    def invalidate(self) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                self._runner.close()
            self._runner = None

    def close(self) -> None:
        self.invalidate()
        if self._registry is not None:
            with contextlib.suppress(Exception):
                self._registry.close()
            self._registry = None


def _run_query(rp: _Replanner, sql: str, printer: _Printer) -> None:
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


def _explain(rp: _Replanner, sql: str, printer: _Printer) -> None:
    from arbiter.tables import format_table

    headers, rows = explain_table(rp.runner().explain(sql))
    printer.out.write(format_table(headers, rows) + "\n")
    printer.out.flush()


def explain_table(estimates: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the ``--explain-plans`` table from ``QueryRunner.explain``
    (base-table scans are read in place, so they count neither as to run nor as checkpointed).
    """
    from hive_hooks.executor import is_base_scan

    headers = ["plan", "join tree", "stages", "to run", "checkpointed", "cost task-s",
               "estimate s", "chosen"]  # fmt: skip
    rows = [
        [
            short_plan(e.plan.plan_id),
            plan_shape(e.plan),
            str(len(e.plan.stages)),
            str(len(e.to_run)),
            str(sum(1 for i in e.checkpointed if not is_base_scan(e.plan.stage(i)))),
            f"{e.plan.total_cost:,.1f}",
            f"{e.estimate_s:,.2f}",
            "*" if e.chosen else "",
        ]
        for e in estimates
    ]
    return headers, rows


def _run_sql(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hive_hooks.errors import EngineUnavailableError

    printer = _Printer(args, out, err)
    script = _load_script(args)
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
        raise CliError("nothing to run: give -e SQL or -f FILE (no interactive shell)", EXIT_USAGE)
    session = Session(
        url,
        user=args.n,
        password=args.p,
        hiveconf={**url.hiveconf, **dict(args.hiveconf or ())},
        hivevar={**url.hivevar, **dict(args.hivevar or ())},
    )
    rp = _Replanner(args, session, printer)
    failed = 0
    try:
        session.conn  # noqa: B018 - connect now: an unreachable server is one clear error
        for source, stmt in script:
            sql = substitute_variables(stmt.text, session.hivevar, session.hiveconf)
            where = f"{source}:{stmt.line}: " if source != "-e" else ""
            try:
                _run_statement(sql, args, session, rp, printer)
            except CliError:
                raise
            except Exception as e:
                failed += 1
                msg = describe_error(e)
                if isinstance(e, EngineUnavailableError) and url.hostport not in msg:
                    msg += f" (HiveServer2 at {url.hostport})"
                printer.error(where + msg)
                if not args.force:
                    return EXIT_ERROR
        if args.gc:
            _gc(rp, session, printer, args)
    finally:
        rp.close()
        session.close()
    return EXIT_ERROR if failed else EXIT_OK


def _run_statement(
    sql: str, args: argparse.Namespace, session: Session, rp: _Replanner, printer: _Printer
) -> None:
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


def _gc(rp: _Replanner, session: Session, printer: _Printer, args: argparse.Namespace) -> None:
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


# -------------------------------------------------------------------------- engine


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


_ENGINE_MARKERS = ("hive_hooks.engine", "hive_hooks.yarn_engine", "hive_hooks.hive_engine")
# the JVM: Spark's Thrift Server, our PySpark driver (yarn), Hive's own HiveServer2
_JVM_MARKERS = ("HiveThriftServer2", "hive_hooks.yarn_engine", "service.server.HiveServer2")


def _is_engine(pid: int | None, markers: tuple[str, ...]) -> bool:
    if not pid or not _pid_alive(pid):
        return False
    cmdline = _cmdline(pid)
    return any(m in cmdline for m in markers)


def _read_pidfile(workdir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((workdir / PID_FILE).read_text())
    except (OSError, ValueError):
        return None


def _engine_running(workdir: Path) -> dict[str, Any] | None:
    info = _read_pidfile(workdir)
    if info and (
        _is_engine(info.get("pid"), _ENGINE_MARKERS)
        or _is_engine(info.get("jvm_pid"), _JVM_MARKERS)
    ):
        return info
    return None


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _engine_start(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hive_hooks.engine import free_port, port_is_open

    workdir = Path(args.workdir).expanduser().resolve()
    if info := _engine_running(workdir):
        print(f"already running: {info['url']}  (pid {info['pid']})", file=out)
        return EXIT_OK
    port = args.port or free_port()
    if port_is_open(port):
        raise CliError(f"port 127.0.0.1:{port} is already in use")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / ENGINE_LOG
    if args.engine == "hive":
        module = "hive_hooks.hive_engine"
    else:
        module = "hive_hooks.yarn_engine" if args.on_yarn else "hive_hooks.engine"
    cmd = [sys.executable, "-m", module, "--port", str(port), "--dir", str(workdir)]
    cmd += ["--driver-memory", args.driver_memory, "--timeout", str(args.timeout)]
    control = None
    if args.engine == "hive":
        if args.on_yarn:
            conf_dir = args.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
            if not conf_dir:
                raise CliError("--on-yarn needs --hadoop-conf-dir or HADOOP_CONF_DIR", EXIT_USAGE)
            cmd += ["--tez", "yarn", "--hadoop-conf-dir", str(Path(conf_dir).expanduser())]
        cmd += ["--queue", args.yarn_queue]
        if args.hooks_arbiter:
            cmd += ["--arbiter", args.hooks_arbiter]
            if args.service_token_file:
                token = Path(args.service_token_file).expanduser().resolve()
                if not token.is_file():
                    raise CliError(f"--service-token-file {token}: no such file", EXIT_USAGE)
                cmd += ["--service-token-file", str(token)]
    elif args.on_yarn:
        conf_dir = args.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
        if not conf_dir:
            raise CliError("--on-yarn needs --hadoop-conf-dir or HADOOP_CONF_DIR", EXIT_USAGE)
        control = free_port()
        cmd += ["--hadoop-conf-dir", str(Path(conf_dir).expanduser().resolve())]
        cmd += ["--queue", args.yarn_queue, "--control-port", str(control)]
        cmd += ["--max-executors", str(args.max_executors)]
    with open(log, "ab") as logf:
        logf.write(f"\n--- {dt.datetime.now().isoformat(timespec='seconds')} start\n".encode())
        logf.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    url = f"jdbc:hive2://127.0.0.1:{port}/default;auth=noSasl"
    info = {"pid": proc.pid, "jvm_pid": None, "port": port, "url": url, "workdir": str(workdir)}
    if control is not None:
        info["control"] = f"127.0.0.1:{control}"
    info["started_at"] = dt.datetime.now().isoformat(timespec="seconds")
    _write_pidfile(workdir, info)
    if not args.silent:
        print(f"starting HiveServer2 in {workdir} (log {log}) ...", file=err, flush=True)
    t0 = time.monotonic()
    try:
        info["jvm_pid"] = _wait_started(proc, port, log, args.timeout + 15)
    except BaseException:  # failed, timed out or Ctrl-C: leave nothing running
        _stop(workdir, info)
        raise
    _write_pidfile(workdir, info)
    if not args.silent:
        print(f"ready in {time.monotonic() - t0:.1f} s (pid {proc.pid})", file=err, flush=True)
    if control is not None and not args.silent:
        print(f"on YARN; share control at {info['control']}", file=err, flush=True)
    print(url, file=out, flush=True)
    return EXIT_OK


def _wait_started(
    proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float
) -> int | None:
    """Wait until the engine accepts connections; its JVM pid (from the engine's ready line,
    None if the line is not there but a connection opens)."""
    from hive_hooks.engine import port_is_open

    ready = re.compile(rf"ready in [\d.]+ s: jdbc:hive2://127\.0\.0\.1:{port}/\S+.*pid (\d+)")
    deadline = time.monotonic() + timeout
    connected_at: float | None = None  # no ready line yet, but a client got in
    while True:
        m = ready.search(_tail(log, 40))
        if port_is_open(port):
            if m:
                return int(m.group(1))
            if connected_at is None:
                with contextlib.suppress(Exception):
                    from pyhive import hive

                    hive.connect(host="127.0.0.1", port=port, auth="NOSASL").close()
                    connected_at = time.monotonic()
            elif time.monotonic() - connected_at > 10:  # the engine printed no ready line
                return None
        if proc.poll() is not None:
            raise CliError(
                f"the engine exited with code {proc.returncode} while starting; log: {log}\n"
                f"{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise CliError(f"the engine did not start in {timeout:.0f} s; log: {log}")
        time.sleep(0.5)


def _write_pidfile(workdir: Path, info: dict[str, Any]) -> None:
    tmp = workdir / (PID_FILE + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    tmp.replace(workdir / PID_FILE)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _stop(workdir: Path, info: dict[str, Any]) -> list[int]:
    """Stop the engine of a pid file (module docstring); the pids that were signalled."""
    stopped = []
    for key, marker, grace in (
        ("pid", _ENGINE_MARKERS, 45.0),
        ("jvm_pid", _JVM_MARKERS, 15.0),
    ):
        pid = info.get(key)
        if not _is_engine(pid, marker):
            continue
        _signal_group(pid, signal.SIGTERM)
        if not _wait_gone(pid, grace):
            _signal_group(pid, signal.SIGKILL)
            _wait_gone(pid, 10.0)
        stopped.append(pid)
    (workdir / PID_FILE).unlink(missing_ok=True)
    return stopped


def _engine_stop(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    workdir = Path(args.workdir).expanduser().resolve()
    info = _read_pidfile(workdir)
    if info is None:
        print(f"no engine running in {workdir} (no {PID_FILE})", file=out)
        return EXIT_OK
    stopped = _stop(workdir, info)
    if not stopped:
        print(f"no engine running in {workdir} (stale {PID_FILE} removed)", file=out)
    else:
        print(f"stopped the engine on port {info.get('port')} (pid {stopped[0]})", file=out)
    return EXIT_OK


def _engine_jars(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Fetch Hive's jars (Maven Central, once) and build the Hive hooks' jar."""
    from hive_hooks.hive_engine import build_hooks_jar, ensure_hive_jars
    from yarn_bridge.local_hadoop import HadoopError

    def say(m: str) -> None:
        print(m, file=err, flush=True)

    try:
        jars = ensure_hive_jars(progress=say)
        hooks = build_hooks_jar(progress=say)
    except HadoopError as e:
        raise CliError(str(e)) from e
    print(f"Hive jars: {jars}\nhooks jar: {hooks}", file=out)
    return EXIT_OK


def _beeline(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``qoop-hive beeline ARGS``: Hive's BeeLine (from the Hive jar cache) with ARGS, e.g.
    ``-u 'jdbc:hive2://127.0.0.1:10001/default;auth=noSasl' -e 'SELECT 1'``; its exit status."""
    from hive_hooks.hive_engine import beeline_command, ensure_hive_jars
    from yarn_bridge.local_hadoop import HadoopError

    try:
        jars = ensure_hive_jars(progress=lambda m: print(m, file=err, flush=True))
    except HadoopError as e:
        raise CliError(str(e)) from e
    cmd = beeline_command(None, *argv, jars=jars)
    if out is sys.stdout and err is sys.stderr:  # a terminal user: BeeLine takes over
        os.execv(cmd[0], cmd)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out.write(proc.stdout)
    err.write(proc.stderr)
    return proc.returncode


def _engine_status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from hive_hooks.engine import port_is_open

    workdir = Path(args.workdir).expanduser().resolve()
    info = _engine_running(workdir)
    if info is None:
        stale = " (stale pid file)" if _read_pidfile(workdir) else ""
        print(f"not running{stale}: {workdir}", file=out)
        return EXIT_NOT_RUNNING
    accepting = port_is_open(int(info["port"]))
    state = "running" if accepting else "starting (port not open yet)"
    print(
        f"{state}: {info['url']}  (pid {info['pid']}, JVM pid {info.get('jvm_pid') or '?'}, "
        f"since {info.get('started_at', '?')}, work dir {workdir})",
        file=out,
    )
    return EXIT_OK


# -------------------------------------------------------------------------- TPC loading


TPC_TABLES = {"tpch": 8, "tpcds": 24}


class _CountingConnection:
    """A pyhive connection whose cursors report each CREATE TABLE to a progress bar."""

    def __init__(self, conn: Any, on_create: Callable[[str], None]) -> None:
        self._conn, self._on_create = conn, on_create

    def cursor(self) -> Any:
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


def _load_tpc(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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


# -------------------------------------------------------------------------- parsers


class _Parser(argparse.ArgumentParser):
    """Usage errors exit with status 2 through :func:`main` (never ``sys.exit`` mid-way);
    ``--help`` goes to the stream :func:`main` writes to."""

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

exit status: 0 ok; 1 a statement failed or HiveServer2 is unreachable (as beeline);
  2 usage error (bad option, JDBC URL or share profile); 130 interrupted.
"""


def build_parser() -> _Parser:
    p = _Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conn = p.add_argument_group("connection")
    conn.add_argument("-u", metavar="URL", help="JDBC URL: jdbc:hive2://HOST:PORT/DB[;auth=noSasl]")
    conn.add_argument("-n", metavar="USER", help="user name (default: the login name)")
    conn.add_argument("-p", metavar="PASSWORD", help="password (SASL PLAIN / LDAP)")
    sql = p.add_argument_group("what to run")
    sql.add_argument(
        "-e", metavar="SQL", action="append", help="SQL to run; ';' separates several (repeatable)"
    )
    sql.add_argument("-f", metavar="FILE", help="script file to run (else SQL is read from stdin)")
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
        "-d",
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
        "--arbiter", metavar="HOST:PORT", type=_hostport, help="take the share from the arbiter"
    )
    rep.add_argument("--arbiter-tls", action="store_true", help="TLS to the arbiter")
    rep.add_argument("--arbiter-ca", metavar="PEM", help="CA certificate(s) to trust (TLS)")
    rep.add_argument("--arbiter-cert", metavar="PEM", help="client certificate (mutual TLS)")
    rep.add_argument("--arbiter-key", metavar="PEM", help="client private key (mutual TLS)")
    rep.add_argument("--queue", default="default", help="YARN queue reported to the arbiter")
    rep.add_argument(
        "--engine-control",
        metavar="HOST:PORT",
        type=_hostport,
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
        "~/.qoop-hive/registry.db)",
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


def build_engine_parser() -> _Parser:
    p = _Parser(
        prog=f"{PROG} engine",
        description="A local HiveServer2 (NOSASL, 127.0.0.1 only): the Spark Thrift Server from "
        "the pyspark wheel, or with --engine hive Apache Hive's own on Tez. start returns once "
        "it accepts connections and prints its JDBC URL; it keeps running after the command "
        "exits, until engine stop. Tables live in the work dir and survive a restart.",
        epilog=f"examples:\n  {PROG} engine start --port 10000 --workdir /tmp/hs2\n"
        f"  {PROG} engine start --engine hive --port 10001 --workdir /tmp/hive\n"
        f"  {PROG} engine start --engine hive --on-yarn --hadoop-conf-dir "
        "/tmp/yarn/etc/client --workdir /tmp/hive\n"
        f"  {PROG} engine status --workdir /tmp/hs2\n"
        f"  {PROG} engine stop --workdir /tmp/hs2\n"
        f"  {PROG} engine jars   (fetch Hive's jars and build the hooks jar ahead of time)\n\n"
        "exit status: 0 ok; 1 failed to start; 3 status: not running.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("start", "stop", "status", "jars"))
    p.add_argument(
        "--engine",
        choices=("spark", "hive"),
        default="spark",
        help="start: spark = the Spark Thrift Server (light, the default); hive = Apache Hive "
        "4.0.1's HiveServer2 on Tez (jars fetched from Maven Central on first use)",
    )
    p.add_argument(
        "--hooks-arbiter",
        type=_hostport,
        metavar="HOST:PORT",
        help="start, --engine hive: load the Hive hooks, which register every query with this "
        "arbiter (so plain beeline queries count in its share)",
    )
    p.add_argument(
        "--service-token-file",
        metavar="FILE",
        help="--hooks-arbiter: the credential the arbiter issued to query services "
        "(arbiter.query.service-token-file)",
    )
    p.add_argument(
        "--workdir",
        default=str(DEFAULT_WORKDIR),
        metavar="DIR",
        help=f"warehouse, metastore, logs and pid file (default {DEFAULT_WORKDIR})",
    )
    p.add_argument("--port", type=int, help="start: TCP port (default: a free one)")
    p.add_argument("--driver-memory", default="1g", help="start: JVM heap (default 1g)")
    p.add_argument(
        "--timeout", type=float, default=180.0, help="start: seconds to wait (default 180)"
    )
    p.add_argument("--silent", action="store_true", help="print only the JDBC URL")
    p.add_argument(
        "--on-yarn",
        action="store_true",
        help="start: spark: executors in YARN containers, sized by the queries' shares; "
        "hive: Tez AMs and tasks in YARN containers",
    )
    p.add_argument(
        "--hadoop-conf-dir",
        metavar="DIR",
        help="--on-yarn: YARN client conf (default $HADOOP_CONF_DIR)",
    )
    p.add_argument("--yarn-queue", default="analytics", help="--on-yarn: queue (default analytics)")
    p.add_argument(
        "--max-executors", type=int, default=8, help="--on-yarn: executor cap (default 8)"
    )
    return p


def build_load_parser(command: str) -> _Parser:
    bench = "TPC-H" if command == "load-tpch" else "TPC-DS"
    default_db = "tpch" if command == "load-tpch" else "tpcds"
    p = _Parser(
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


def _parse(parser: _Parser, argv: list[str], out: TextIO) -> argparse.Namespace:
    parser.stream = out
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None,
         err: TextIO | None = None) -> int:  # fmt: skip
    """The ``qoop-hive`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    _quiet_client_logs()
    try:
        command = argv[0] if argv else ""
        if command == "engine":
            args = _parse(build_engine_parser(), argv[1:], out)
            action = {"start": _engine_start, "stop": _engine_stop, "status": _engine_status,
                      "jars": _engine_jars}  # fmt: skip
            return action[args.action](args, out, err)
        if command == "beeline":
            return _beeline(argv[1:], out, err)
        if command in ("load-tpch", "load-tpcds"):
            args = _parse(build_load_parser(command), argv[1:], out)
            args.command = command
            return _load_tpc(args, out, err)
        args = _parse(build_parser(), argv, out)
        if args.dry_run and not args.gc:
            raise CliError("--dry-run goes with --gc", EXIT_USAGE)
        if args.arbiter and args.share_profile:
            raise CliError("give --arbiter or --share-profile, not both", EXIT_USAGE)
        if args.share_profile:
            parse_share_profile(args.share_profile)  # a usage error before connecting
        if not args.cluster_vcores > 0 or not args.memory_per_vcore_mb > 0:
            raise CliError("--cluster-vcores and --memory-per-vcore-mb must be > 0", EXIT_USAGE)
        return _run_sql(args, out, err)
    except SystemExit as e:  # --help, --version
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    except CliError as e:
        print(f"{PROG}: error: {e}", file=err, flush=True)
        return e.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err, flush=True)
        return EXIT_INTERRUPTED
    except Exception as e:
        print(f"{PROG}: error: {describe_error(e)}", file=err, flush=True)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
