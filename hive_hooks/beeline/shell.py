"""``qoop-hive``'s shell: beeline's prompt and ``!`` commands over the replanning client.

Without ``-e`` and ``-f``, ``qoop-hive`` reads what a beeline user types: SQL ended by ``;``
(over several lines, ``;`` inside quotes and comments ignored, :func:`split_statements`) and
beeline's commands, each on its own line:

* ``!connect URL [USER [PASSWORD]]`` (``jdbc:hive2://...``), ``!close``;
* ``!quit`` / ``!q`` / ``!exit``;
* ``!set KEY VALUE`` for the output options (``outputformat``, ``showHeader``, ``silent``,
  ``nullemptystring``, ``force``, ``delimiterForDSV``; keys in any case, as beeline), ``!set``
  alone lists them;
* ``!history``, ``!help``.

On a terminal it prompts as beeline does (``0: jdbc:hive2://host:port/db>``; ``beeline>``
unconnected) with line editing and a history file (``~/.qoop-hive/history``, readline); from a
pipe it prints no prompt, and a failed statement ends the input unless ``--force`` (as a script
does). SELECTs run through the replanner as with ``-e`` (:func:`hive_hooks.beeline.run`).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from hive_hooks.beeline.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, describe_error
from hive_hooks.beeline.printing import Printer
from hive_hooks.beeline.script import (
    split_statements,
    strip_leading_comments,
    substitute_variables,
)
from hive_hooks.beeline.session import Replanner, Session
from hive_hooks.jdbc import JdbcUrlError, parse_jdbc_url
from hive_hooks.output import FORMATS

__all__ = ["SETTABLE", "Shell", "complete_statements", "terminal_lines"]

_END = "__qoop_hive_end_of_input__"

# beeline's !set keys this client honours: lower-case key -> (attribute, parser)
# (None: a boolean, parsed as the configuration's booleans are)
SETTABLE: dict[str, tuple[str, Callable[[str], Any] | None]] = {
    "outputformat": ("outputformat", str),
    "showheader": ("showHeader", None),
    "silent": ("silent", None),
    "nullemptystring": ("nullemptystring", None),
    "force": ("force", None),
    "delimiterfordsv": ("delimiterForDSV", str),
}

HELP = """\
!connect URL [USER [PASSWORD]]  open a connection to HiveServer2 (jdbc:hive2://HOST:PORT/DB)
!close                          close the connection
!quit, !q, !exit                leave
!set KEY VALUE                  outputformat, showHeader, silent, nullemptystring, force,
                                delimiterForDSV; !set alone shows them
!history                        the statements and commands of this session
!help                           this text
SQL ends with ';' and may span lines; SELECTs run through the QOOP replanner.
"""


def complete_statements(buffer: str) -> list[str] | None:
    """The statements of ``buffer`` if it ends after a ``;`` (comments may follow), else None
    (more lines are needed: no ``;`` yet, or an open quote or comment).

    >>> complete_statements("SELECT 1; -- done")
    ['SELECT 1']
    >>> complete_statements("SELECT ';")
    >>> complete_statements("SELECT 1")
    """
    try:
        stmts = split_statements(buffer + "\n" + _END)
    except CliError:
        return None  # an unterminated quote or comment
    if not stmts or strip_leading_comments(stmts[-1].text) != _END:
        return None
    return [s.text for s in stmts[:-1]]


def terminal_lines(prompt: Callable[[], str], history: Path | None) -> Iterator[str]:
    """Lines typed at a terminal, edited with readline and kept in ``history``."""
    try:
        import readline
    except ImportError:  # no readline on this Python: plain input()
        readline = None  # type: ignore[assignment]
    if readline is not None and history is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
        readline.set_history_length(10000)
    try:
        while True:
            try:
                yield input(prompt())
            except EOFError:
                return
    finally:
        if readline is not None and history is not None:
            with contextlib.suppress(OSError):
                history.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(history)


class Shell:
    """One interactive (or piped) session (module docstring)."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        *,
        interactive: bool,
        run_statement: Callable[[str, argparse.Namespace, Session, Replanner, Printer], None],
    ) -> None:
        self.args, self.out, self.err = args, out, err
        self.interactive = interactive
        self.printer = Printer(args, out, err)
        self._run_statement = run_statement
        self.session: Session | None = None
        self.replanner: Replanner | None = None
        self.history: list[str] = []
        self.failed = 0
        self.done = False

    # -------------------------------------------------------------- connection

    def prompt(self) -> str:
        if self.session is None:
            return "beeline> "
        url = self.session.url
        return f"0: jdbc:hive2://{url.hostport}/{self.session.database}> "

    def connect(self, url_text: str, user: str | None = None, password: str | None = None) -> None:
        try:
            url = parse_jdbc_url(url_text)
        except JdbcUrlError as e:
            raise CliError(str(e), EXIT_USAGE) from e
        self.close()
        session = Session(
            url, user=user, password=password,
            hiveconf={**url.hiveconf, **dict(self.args.hiveconf or ())},
            hivevar={**url.hivevar, **dict(self.args.hivevar or ())},
        )  # fmt: skip
        session.conn  # noqa: B018 - connect now: an unreachable server is one clear error
        self.session = session
        self.replanner = Replanner(self.args, session, self.printer)
        self.printer.info(f"Connected to: HiveServer2 at {url.hostport} (database {url.database})")

    def close(self) -> None:
        if self.replanner is not None:
            self.replanner.close()
        if self.session is not None:
            self.session.close()
        self.session = self.replanner = None

    # -------------------------------------------------------------- input

    def run(self, lines: Iterable[str]) -> int:
        """Read ``lines`` to the end or ``!quit``; the exit status."""
        buffer = ""
        try:
            for raw in lines:
                line = raw.rstrip("\n")
                if not buffer.strip() and line.lstrip().startswith("!"):
                    self.history.append(line.strip())
                    self._guard(lambda line=line: self.command(line.strip()))
                elif line.strip() or buffer:
                    buffer += line + "\n"
                    stmts = complete_statements(buffer)
                    if stmts is not None:
                        self.history.append(buffer.strip())
                        buffer = ""
                        for sql in stmts:
                            self._guard(lambda sql=sql: self.statement(sql))
                            if self.done:
                                break
                if self.done:
                    break
            if buffer.strip() and not self.done:  # the last statement of a pipe, without ';'
                for sql in [s.text for s in split_statements(buffer)]:
                    self._guard(lambda sql=sql: self.statement(sql))
        finally:
            self.close()
        if self.interactive:
            return EXIT_OK
        return EXIT_ERROR if self.failed else EXIT_OK

    def _guard(self, action: Callable[[], None]) -> None:
        """Run ``action``; a failure is an error line (and ends a pipe without --force)."""
        try:
            action()
        except CliError as e:
            self.failed += 1
            self.printer.error(str(e))
            self.done = self.done or not (self.interactive or self.args.force)
        except Exception as e:  # broad on purpose: any failure of a statement is one line
            self.failed += 1
            self.printer.error(describe_error(e))
            self.done = self.done or not (self.interactive or self.args.force)

    def statement(self, sql: str) -> None:
        if self.session is None or self.replanner is None:
            raise CliError("no current connection: !connect jdbc:hive2://HOST:PORT/DB first")
        text = substitute_variables(sql, self.session.hivevar, self.session.hiveconf)
        self._run_statement(text, self.args, self.session, self.replanner, self.printer)

    # -------------------------------------------------------------- ! commands

    def command(self, line: str) -> None:
        name, *rest = line[1:].split()
        name = name.lower()
        if name in ("quit", "q", "exit"):
            self.done = True
        elif name == "connect":
            if not 1 <= len(rest) <= 3:
                raise CliError("usage: !connect jdbc:hive2://HOST:PORT/DB [USER [PASSWORD]]")
            self.connect(rest[0], *rest[1:])
        elif name == "close":
            self.close()
        elif name == "set":
            self.set(rest)
        elif name == "history":
            for i, entry in enumerate(self.history[:-1], start=1):
                print(f"{i:5d}  {entry}", file=self.out)
        elif name == "help":
            print(HELP, end="", file=self.out)
        else:
            raise CliError(f"unknown command !{name} (!help lists them)")
        self.out.flush()

    def set(self, words: list[str]) -> None:
        if not words:
            for attr, _ in SETTABLE.values():
                value = getattr(self.args, attr)
                shown = str(value).lower() if isinstance(value, bool) else value
                print(f"{attr:<16} {shown}", file=self.out)
            return
        if len(words) != 2 or words[0].lower() not in SETTABLE:
            raise CliError(f"usage: !set KEY VALUE with KEY one of {', '.join(SETTABLE)}")
        attr, parse = SETTABLE[words[0].lower()]
        if parse is None:
            from arbiter.config import parse_bool

            try:
                value: Any = parse_bool(words[1])
            except ValueError:
                raise CliError(f"!set {attr}: expected true or false, got {words[1]!r}") from None
        else:
            value = parse(words[1])
        if attr == "outputformat" and value not in FORMATS:
            raise CliError(f"!set outputformat: one of {', '.join(FORMATS)}, got {value!r}")
        setattr(self.args, attr, value)
