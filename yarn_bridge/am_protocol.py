"""The line protocol between the lease ApplicationMaster (Java,
``java/am/src/main/java/org/yarnarbiter/am/LeaseApplicationMaster.java``) and its sidecar
(:mod:`yarn_bridge.lease_am`): the AM runs the sidecar and they talk over the sidecar's stdin
and stdout, one message a line, fields separated by tabs; the sidecar's stderr is the AM's log.

Sidecar -> AM (:data:`SIDECAR_MESSAGES`):

* ``ACQUIRE <lease> <node> <gpus> <memory_mb> <vcores> <gpu_indices_csv> <command>``: one
  container with ``yarn.io/gpu`` = gpus on exactly that node (strict locality), running
  ``bash -c <command>``; ``lease`` is the sidecar's key for it (several containers may share one).
* ``RELEASE <lease>``: stop and release the key's containers, withdraw its pending requests.
* ``FINISH <SUCCEEDED|FAILED> <message>``: release everything, unregister, exit.

AM -> sidecar (:data:`AM_MESSAGES`): ``ALLOCATED <lease> <container> <node>``,
``STARTED <lease> <container>``, ``COMPLETED <lease> <container> <exit_status> <diagnostics>``,
``NODE_LOST <node>``, ``SHUTDOWN``.

This module has the pure part (one frozen dataclass per message, :func:`encode`,
:func:`parse_am_line`, :func:`parse_sidecar_line`: a malformed line is a
:class:`ProtocolError` naming what is wrong; a field holding a tab or a line break cannot be
encoded) and :class:`LeaseContainers`, which drives the protocol over two text streams.

Decisions: the free-text field (command, message, diagnostics) is always last, so it may hold
spaces; an empty lease key or node is refused; numbers are decimal integers; the AM cleans
diagnostics of tabs and line breaks itself, so a COMPLETED line always parses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Final, Union

__all__ = [
    "AM_MESSAGES",
    "ENV_LOCAL_RESOURCES",
    "ENV_SIDECAR",
    "SIDECAR_MESSAGES",
    "Acquire",
    "Allocated",
    "Completed",
    "Finish",
    "LeaseContainers",
    "NodeLost",
    "ProtocolError",
    "Release",
    "Shutdown",
    "Started",
    "encode",
    "parse_am_line",
    "parse_sidecar_line",
]

log = logging.getLogger("yarn_arbiter.lease_am.protocol")

FINAL_STATUSES: Final = ("SUCCEEDED", "FAILED")
# The AM container's environment, read by the Java AM (``yarn-arbiter submit`` fills them in):
ENV_SIDECAR: Final = "YARN_ARBITER_SIDECAR"  # the sidecar's command line (bash -c)
ENV_LOCAL_RESOURCES: Final = "YARN_ARBITER_LOCAL_RESOURCES"  # name=TYPE:size:ts:url,... for jobs


class ProtocolError(ValueError):
    """A line that is not a message of the protocol, or a message that cannot be encoded."""


def _field(name: str, value: str, *, empty: bool = False) -> str:
    if not empty and not value:
        raise ProtocolError(f"{name} is empty")
    if any(c in value for c in "\t\r\n"):
        raise ProtocolError(f"{name} {value!r} holds a tab or a line break")
    return value


def _word(name: str, value: str) -> str:
    _field(name, value)
    if any(c.isspace() for c in value):
        raise ProtocolError(f"{name} {value!r} holds white space")
    return value


# -- sidecar -> AM --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acquire:
    lease_id: str
    node_id: str
    gpus: int
    memory_mb: int
    vcores: int
    gpu_indices: tuple[int, ...]
    command: str

    def fields(self) -> list[str]:
        if self.gpus < 0 or self.memory_mb < 1 or self.vcores < 1:
            raise ProtocolError(
                f"ACQUIRE needs gpus >= 0, memory_mb >= 1, vcores >= 1 (got {self.gpus}, "
                f"{self.memory_mb}, {self.vcores})"
            )
        if len(self.gpu_indices) != self.gpus or any(i < 0 for i in self.gpu_indices):
            raise ProtocolError(
                f"ACQUIRE of {self.gpus} GPUs names indices {list(self.gpu_indices)}"
            )
        return [
            "ACQUIRE",
            _word("lease id", self.lease_id),
            _word("node id", self.node_id),
            str(self.gpus),
            str(self.memory_mb),
            str(self.vcores),
            ",".join(map(str, self.gpu_indices)),
            _field("command", self.command),
        ]


@dataclass(frozen=True, slots=True)
class Release:
    lease_id: str

    def fields(self) -> list[str]:
        return ["RELEASE", _word("lease id", self.lease_id)]


@dataclass(frozen=True, slots=True)
class Finish:
    status: str  # SUCCEEDED | FAILED
    message: str = ""

    def fields(self) -> list[str]:
        if self.status not in FINAL_STATUSES:
            raise ProtocolError(f"FINISH status {self.status!r} is not SUCCEEDED or FAILED")
        return ["FINISH", self.status, _field("message", self.message, empty=True)]


# -- AM -> sidecar --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Allocated:
    lease_id: str
    container_id: str
    node_id: str

    def fields(self) -> list[str]:
        return [
            "ALLOCATED",
            _word("lease id", self.lease_id),
            _word("container id", self.container_id),
            _word("node id", self.node_id),
        ]


@dataclass(frozen=True, slots=True)
class Started:
    lease_id: str
    container_id: str

    def fields(self) -> list[str]:
        return [
            "STARTED",
            _word("lease id", self.lease_id),
            _word("container id", self.container_id),
        ]


@dataclass(frozen=True, slots=True)
class Completed:
    lease_id: str
    container_id: str
    exit_status: int
    diagnostics: str = ""

    def fields(self) -> list[str]:
        return [
            "COMPLETED",
            _word("lease id", self.lease_id),
            _word("container id", self.container_id),
            str(self.exit_status),
            _field("diagnostics", self.diagnostics, empty=True),
        ]


@dataclass(frozen=True, slots=True)
class NodeLost:
    node_id: str

    def fields(self) -> list[str]:
        return ["NODE_LOST", _word("node id", self.node_id)]


@dataclass(frozen=True, slots=True)
class Shutdown:
    def fields(self) -> list[str]:
        return ["SHUTDOWN"]


SidecarMessage = Union[Acquire, Release, Finish]  # noqa: UP007 (a runtime alias)
AMMessage = Union[Allocated, Started, Completed, NodeLost, Shutdown]  # noqa: UP007
SIDECAR_MESSAGES: Final = {"ACQUIRE": 8, "RELEASE": 2, "FINISH": 3}  # name -> fields
AM_MESSAGES: Final = {"ALLOCATED": 4, "STARTED": 3, "COMPLETED": 5, "NODE_LOST": 2, "SHUTDOWN": 1}


def encode(msg: SidecarMessage | AMMessage) -> str:
    """The message as one line, newline included.

    >>> encode(Acquire("l1@n1:8041", "n1:8041", 2, 2048, 2, (0, 1), "python train.py --x 1"))
    'ACQUIRE\\tl1@n1:8041\\tn1:8041\\t2\\t2048\\t2\\t0,1\\tpython train.py --x 1\\n'
    """
    return "\t".join(msg.fields()) + "\n"


def _split(line: str, known: dict[str, int]) -> tuple[str, list[str]]:
    text = line.rstrip("\r\n")
    if not text:
        raise ProtocolError("empty line")
    if "\n" in text or "\r" in text:
        raise ProtocolError(f"more than one line: {text!r}")
    name = text.split("\t", 1)[0]
    if name not in known:
        raise ProtocolError(f"unknown message {name!r} in {text!r}")
    n = known[name]
    parts = text.split("\t", n - 1)
    if len(parts) != n:
        raise ProtocolError(f"{name} has {n} tab-separated fields, got {len(parts)}: {text!r}")
    return name, parts[1:]


def _int(name: str, value: str, line: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise ProtocolError(f"{name} {value!r} is not an integer in {line!r}") from None


def _checked(msg, line: str):
    try:
        msg.fields()  # the same rules both ways
    except ProtocolError as exc:
        raise ProtocolError(f"{exc} in {line.rstrip()!r}") from None
    return msg


def parse_sidecar_line(line: str) -> SidecarMessage:
    """A sidecar -> AM line (what the Java AM parses; here for tests and tools).

    >>> parse_sidecar_line("RELEASE\\tl1@n1:8041\\n")
    Release(lease_id='l1@n1:8041')
    """
    name, f = _split(line, SIDECAR_MESSAGES)
    if name == "ACQUIRE":
        indices = tuple(_int("GPU index", i, line) for i in f[5].split(",")) if f[5] else ()
        msg: SidecarMessage = Acquire(
            f[0],
            f[1],
            _int("gpus", f[2], line),
            _int("memory_mb", f[3], line),
            _int("vcores", f[4], line),
            indices,
            f[6],
        )
    elif name == "RELEASE":
        msg = Release(f[0])
    else:
        msg = Finish(f[0], f[1])
    return _checked(msg, line)


def parse_am_line(line: str) -> AMMessage:
    """An AM -> sidecar line.

    >>> parse_am_line("COMPLETED\\tl1\\tcontainer_1_0001_01_000002\\t0\\t\\n")
    Completed(lease_id='l1', container_id='container_1_0001_01_000002', exit_status=0, \
diagnostics='')
    """
    name, f = _split(line, AM_MESSAGES)
    if name == "ALLOCATED":
        msg: AMMessage = Allocated(f[0], f[1], f[2])
    elif name == "STARTED":
        msg = Started(f[0], f[1])
    elif name == "COMPLETED":
        msg = Completed(f[0], f[1], _int("exit status", f[2], line), f[3])
    elif name == "NODE_LOST":
        msg = NodeLost(f[0])
    else:
        msg = Shutdown()
    return _checked(msg, line)


class LeaseContainers:
    """The sidecar's end of the protocol over ``inbox`` (the AM's messages: the sidecar's stdin)
    and ``outbox`` (to the AM: the sidecar's stdout).

    :meth:`acquire`, :meth:`release` and :meth:`finish` are thread-safe and write one line each
    (a closed ``outbox`` means the AM is gone: logged, not raised). :meth:`start` runs a reader
    thread that parses each line and calls the matching callback (``on_allocated``,
    ``on_started``, ``on_completed``, ``on_node_lost``, ``on_shutdown``, each taking the
    message) in order on that thread; a malformed line is logged and skipped. ``on_closed``
    runs once when the AM closes the stream (it is ending); :attr:`closed` is then set.
    """

    def __init__(
        self,
        inbox: IO[str],
        outbox: IO[str],
        *,
        on_allocated: Callable[[Allocated], None] | None = None,
        on_started: Callable[[Started], None] | None = None,
        on_completed: Callable[[Completed], None] | None = None,
        on_node_lost: Callable[[NodeLost], None] | None = None,
        on_shutdown: Callable[[Shutdown], None] | None = None,
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        self._inbox, self._outbox = inbox, outbox
        self._handlers: dict[type, Callable | None] = {
            Allocated: on_allocated,
            Started: on_started,
            Completed: on_completed,
            NodeLost: on_node_lost,
            Shutdown: on_shutdown,
        }
        self.on_closed = on_closed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.closed = threading.Event()
        self.finished = False

    def start(self) -> LeaseContainers:
        self._thread = threading.Thread(target=self._read, name="am-protocol", daemon=True)
        self._thread.start()
        return self

    def send(self, msg: SidecarMessage) -> bool:
        """Write ``msg``; False when the AM is gone. Raises :class:`ProtocolError` for a message
        that cannot be encoded (before anything is written)."""
        line = encode(msg)
        with self._lock:
            try:
                self._outbox.write(line)
                self._outbox.flush()
            except (OSError, ValueError) as exc:  # broken pipe, closed file
                log.warning("cannot tell the AM %s: %s", line.split("\t", 1)[0].strip(), exc)
                return False
        return True

    def acquire(
        self,
        lease_id: str,
        node_id: str,
        gpu_indices: tuple[int, ...],
        command: str,
        *,
        memory_mb: int,
        vcores: int,
    ) -> bool:
        return self.send(
            Acquire(lease_id, node_id, len(gpu_indices), memory_mb, vcores, gpu_indices, command)
        )

    def release(self, lease_id: str) -> bool:
        return self.send(Release(lease_id))

    def finish(self, status: str, message: str = "") -> bool:
        ok = self.send(Finish(status, " ".join(message.split())))
        self.finished = True
        return ok

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _read(self) -> None:
        try:
            for line in self._inbox:
                if not line.strip():
                    continue
                try:
                    msg = parse_am_line(line)
                except ProtocolError as exc:
                    log.error("ignoring a line from the AM: %s", exc)
                    continue
                handler = self._handlers[type(msg)]
                if handler is not None:
                    try:
                        handler(msg)
                    except Exception:  # a callback bug must not stop the protocol
                        log.exception("callback for %s failed", type(msg).__name__)
        except (OSError, ValueError) as exc:
            log.warning("reading the AM failed: %s", exc)
        finally:
            self.closed.set()
            if self.on_closed is not None:
                self.on_closed()
