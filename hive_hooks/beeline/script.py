"""SQL scripts as ``qoop-hive`` reads them: where the statements come from (``-i``, ``-e``,
``-f``, stdin), how a script splits into statements, ``${...}`` variable substitution, and which
statements are queries the replanner takes.

* **Scripts** are split on ``;`` outside quotes (``'`` and ``"`` with backslash escapes, backtick
  identifiers) and comments (``--`` and nestable ``/* */``); an unterminated quote or comment is
  an error naming its line. Errors in ``-f`` scripts name ``file:line``.
* **Variables** (``--hivevar``, the URL's ``#k=v``, ``SET hivevar:k=v`` in a script) are
  substituted client-side before planning, like Hive's CLI: ``${hivevar:k}``, ``${k}`` (hivevar,
  then hiveconf), ``${hiveconf:k}``, ``${env:K}``; unknown references are left as they are.
* **What is replanned.** A statement that sqlglot parses (Hive dialect) as a query (SELECT,
  WITH ... SELECT, set operations) goes through the replanner unless ``--no-replan``; every
  other statement (DDL, DML, SET, USE, SHOW, EXPLAIN, ...) and a SELECT sqlglot cannot parse run
  directly on one session connection.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path

from hive_hooks.beeline.errors import EXIT_ERROR, CliError

__all__ = [
    "Statement",
    "is_query",
    "load_script",
    "read_text",
    "split_statements",
    "strip_leading_comments",
    "substitute_variables",
]


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


def load_script(args: argparse.Namespace) -> list[tuple[str, Statement]]:
    """(source, statement) pairs from -i files, -e strings, the -f file, or else (without
    --gc) stdin when it is not a terminal."""
    pieces: list[tuple[str, str]] = []
    for path in args.init or ():
        pieces.append((path, read_text(path)))
    for text in args.e or ():
        pieces.append(("-e", text))
    if args.f:
        pieces.append((args.f, read_text(args.f)))
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


def read_text(path: str) -> str:
    """The file's text; :class:`CliError` naming it if it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from e
