"""Errors of hive_hooks: one base class, each subclass says what a person can do about it.

Everything the executor, the registry and the share sources raise on purpose is a
:class:`QoopHiveError`; the CLI catches that one class and prints its message (which carries the
engine's own message where there is one) without a traceback.

* :class:`QueryError`: HiveServer2 rejected or failed the SQL (syntax, unknown table or column, a
  runtime error inside a stage). ``engine_message`` is the engine's text (first line of the
  server-side exception, without the Java stack); ``stage_id`` names the failing stage, if any.
  Checkpoints already written stay registered: a corrected rerun resumes from them.
* :class:`EngineUnavailableError`: the server cannot be reached at the start of a run, or did not
  come back within the reconnect timeout after a connection was lost mid-query.
* :class:`ShareSourceError`: the arbiter's QueryShare service refused or could not be reached.
* :class:`SettingError`: a user ``hiveconf`` setting was rejected by the engine.
* :class:`ResultInterruptedError` (a :class:`QueryError`): the connection died after part of a
  streamed result had been delivered; rerun the query (its checkpoints are kept).

:func:`engine_message` and :func:`is_connection_lost` classify the exceptions pyhive and thrift
raise (pyhive's ``OperationalError`` carries the Thrift response; a dead server shows up as a
``TTransportException``, an ``OSError`` or, after a restart, as "Invalid SessionHandle").
"""

from __future__ import annotations

import contextlib
import http.client

__all__ = [
    "DRIVER_ERRORS",
    "EngineUnavailableError",
    "QoopHiveError",
    "QueryError",
    "ResultInterruptedError",
    "SettingError",
    "ShareSourceError",
    "clean_engine_text",
    "connect_error",
    "engine_message",
    "is_connection_lost",
]


def _driver_errors() -> tuple[type[Exception], ...]:
    """What a statement on a pyhive connection can raise: the driver's DB-API errors (the
    engine's refusals arrive as ``OperationalError``), Thrift's transport and protocol errors,
    socket errors, and the HTTP client's errors with ``transportMode=http``."""
    found: list[type[Exception]] = [OSError, EOFError, http.client.HTTPException]
    with contextlib.suppress(ImportError):  # pyhive and thrift come with the 'hive' extra
        from pyhive.exc import Error as PyhiveError

        found.append(PyhiveError)
    with contextlib.suppress(ImportError):
        from thrift.Thrift import TException

        found.append(TException)
    return tuple(found)


# What a DB-API call on a HiveServer2 connection raises (:func:`is_connection_lost` sorts these
# into "the connection is gone" and "the engine refused the statement").
DRIVER_ERRORS: tuple[type[Exception], ...] = _driver_errors()

# Messages HiveServer2 returns for handles of a session that no longer exists (server restart).
_LOST_MARKERS = (
    "invalid sessionhandle",
    "invalid operationhandle",
    "session does not exist",
    "tsocket read 0 bytes",
    "broken pipe",
    "connection reset",
    "connection refused",
    # Spark failing the running jobs of a server that is being stopped
    "sparkcontext was shut down",
    "stopped sparkcontext",
    "sparkcontext has been shutdown",
)


class QoopHiveError(Exception):
    """Base class of every error hive_hooks raises on purpose."""


class QueryError(QoopHiveError):
    """The engine rejected or failed the query (module docstring)."""

    def __init__(
        self,
        message: str,
        *,
        engine_message: str = "",
        sql: str = "",
        stage_id: str | None = None,
        query_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.engine_message = engine_message
        self.sql = sql
        self.stage_id = stage_id
        self.query_id = query_id


class ResultInterruptedError(QueryError):
    """The connection died while the result was being streamed to the caller: the rows already
    delivered cannot be taken back, so the run ends instead of resuming (rerun the query; its
    checkpoints make that cheap)."""


class EngineUnavailableError(QoopHiveError):
    """HiveServer2 cannot be reached (module docstring)."""


class ShareSourceError(QoopHiveError):
    """The arbiter's share stream is unavailable or refused the query."""


class SettingError(QoopHiveError):
    """A user setting (``hiveconf``) was rejected by the engine."""


def _status_message(exc: BaseException) -> str | None:
    """The errorMessage of the Thrift response a pyhive OperationalError wraps, if any."""
    for arg in getattr(exc, "args", ()):
        status = getattr(arg, "status", None)
        msg = getattr(status, "errorMessage", None)
        if msg:
            return str(msg)
    return None


def clean_engine_text(text: str) -> str:
    """The server's message without the Java stack and the HiveServer2 wrapper prefixes."""
    lines = []
    for line in text.splitlines():
        if line.startswith(("\tat ", "at ")) or line.strip().startswith("at org."):
            break
        lines.append(line.rstrip())
    msg = "\n".join(x for x in lines if x.strip()).strip()
    for prefix in ("org.apache.hive.service.cli.HiveSQLException: ", "Error running query: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg


def engine_message(exc: BaseException) -> str:
    """A one-paragraph, human-readable message for an exception from pyhive/thrift."""
    msg = _status_message(exc)
    if msg is None:
        msg = str(exc) or type(exc).__name__
    return clean_engine_text(msg)


def connect_error(exc: BaseException) -> QoopHiveError:
    """The error for a failed ``connect()``: the server is unreachable, or it refused the
    session (e.g. an unknown database) and said why."""
    msg = engine_message(exc)
    if is_connection_lost(exc) or _status_message(exc) is None:
        return EngineUnavailableError(f"cannot reach HiveServer2: {msg}")
    return QueryError(f"HiveServer2 refused the session: {msg}", engine_message=msg)


def is_connection_lost(exc: BaseException) -> bool:
    """True if ``exc`` means the connection (or the server's session) is gone, not a SQL error."""
    if isinstance(exc, (OSError, EOFError)):  # ConnectionError, socket.timeout, BrokenPipeError
        return True
    from thrift.Thrift import TApplicationException  # thrift comes with the 'hive' extra
    from thrift.transport.TTransport import TTransportException

    if isinstance(exc, (TTransportException, TApplicationException)):
        return True
    text = (_status_message(exc) or str(exc)).lower()
    return any(m in text for m in _LOST_MARKERS)
