"""How ``qoop-hive`` reports failures: its exit statuses, :class:`CliError` (one line
``qoop-hive: error: ...`` and a status) and one-line descriptions of errors from the server,
the client libraries and the planner.

Exit statuses, measured on beeline 2.3.10 where beeline has one: **1** a failed statement or an
unreachable server (as beeline); **2** a statement of the ``-f`` script failed (as beeline's
``ERRNO_OTHER``), or a usage error (a bad flag, JDBC URL or share profile; beeline says 1);
**3** ``engine status`` of a stopped engine (LSB); **130** Ctrl-C.
"""

from __future__ import annotations

import logging
import re

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_RUNNING",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "CliError",
    "describe_error",
    "quiet_client_logs",
    "server_message",
    "why_unreachable",
]

PROG = "qoop-hive"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class CliError(Exception):
    """A failure reported as one line ``qoop-hive: error: ...`` with an exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


_EXC_CLASS = re.compile(r"^(?:\[[A-Z0-9_.]+\]\s*)?[\w.$]+(?:Exception|Error):\s*", re.S)


def server_message(exc: BaseException) -> str | None:
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

    msg = server_message(exc)
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


def why_unreachable(exc: BaseException) -> str:
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


def quiet_client_logs() -> None:
    """thrift and pyhive log connection failures with tracebacks; the CLI reports them itself."""
    for name in ("thrift", "pyhive", "thrift_sasl"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
