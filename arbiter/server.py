"""Running the arbiter: its gRPC server, scheduler loop, journal, decider and metrics page.

:class:`RunningArbiter` starts and stops them together; :func:`serve_forever` runs one until
SIGTERM/SIGINT. What runs beside the arbiter on its core (the YARN bridge, which the
composition root :mod:`yarn_arbiter` starts) is an *attachment*: started after the arbiter,
stopped before it (while the journal is still open); this module does not know what it is.

The admin credential comes from ``arbiter.admin.token-file``; when that key is empty a fresh
token is generated and written, mode 0600, beside the journal as ``<journal>.admin-token``, and
its path is logged, never the token itself. With ``arbiter.metrics.port`` set, a Prometheus
``/metrics`` page runs beside the gRPC server (:mod:`arbiter.metrics`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.core import ArbiterCore
from arbiter.decider import Decider, ProcessDecider, decide_inline
from arbiter.journal import Journal, SQLiteJournal, new_token
from arbiter.metrics import MetricsServer
from arbiter.service import build_server
from arbiter.signals import stop_on_signals
from arbiter.telemetry import Telemetry

__all__ = [
    "Attachment",
    "Observed",
    "RunningArbiter",
    "StartAttachment",
    "admin_token_for",
    "serve_forever",
    "service_token_for",
    "short_gil_slices",
    "start_arbiter",
    "submit_token_for",
]

log = logging.getLogger("yarn_arbiter.server")


class Attachment(Protocol):
    """Something running beside an arbiter on its core (the YARN bridge, ...)."""

    def stop(self) -> object:
        """Stop; called before the arbiter stops, while its journal is still open."""
        ...


class Observed(Protocol):
    """An attachment that reports to the arbiter's telemetry (status for the console and
    ``/readyz``, timings for ``/metrics``): :meth:`RunningArbiter.attach` binds it."""

    def bind_telemetry(self, telemetry: Telemetry) -> None: ...


# Starts an attachment on the arbiter's core and returns it running.
StartAttachment = Callable[[ArbiterCore], Attachment]


def token_file_for(config: Config, key: str, suffix: str) -> tuple[str, Path]:
    """The credential the setting ``key`` names and its file: the configured file, or
    ``<journal>.<suffix>`` created 0600 with a new token if missing."""
    configured = config[key]
    path = Path(configured or f"{config['arbiter.journal.path']}.{suffix}")
    if path.is_file():
        token = path.read_text().strip()
        if not token:
            raise ValueError(f"{key} {path} is empty")
        return token, path
    if configured:
        raise FileNotFoundError(f"{key} = {path}: no such file")
    token = new_token()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token, path


def admin_token_for(config: Config) -> tuple[str, Path]:
    """The admin token and the file it lives in (created 0600 if missing)."""
    return token_file_for(config, "arbiter.admin.token-file", "admin-token")


def submit_token_for(config: Config) -> tuple[str, Path]:
    """The credential submitters register apps with (``x-submit-token``; ``yarn-arbiter submit
    --submit-token-file``) and its file (created 0600 if missing); see
    :mod:`arbiter.admission`."""
    return token_file_for(config, "arbiter.admission.submit-token-file", "submit-token")


def service_token_for(config: Config) -> tuple[str, Path]:
    """The credential the arbiter issues to query services (HiveServer2's hooks register the
    queries of plain beeline users with it) and its file (created 0600 if missing)."""
    return token_file_for(config, "arbiter.query.service-token-file", "service-token")


class RunningArbiter:
    """A core, its asyncio gRPC server (on its own event-loop thread) and its scheduler
    thread, started and stopped together."""

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        *,
        admin_token: str,
        service_token: str | None = None,
        submit_token: str | None = None,
        clock: Callable[[], float] = time.time,
        tick_seconds: float = 0.05,
        decider: Decider | None = None,
        topology_from_rm: bool = False,
        journal: Journal | None = None,
    ) -> None:
        """``decider`` solves the auctions (in-thread by default; ``serve`` passes a
        :class:`arbiter.decider.ProcessDecider`, which :meth:`stop` closes). ``journal``: the
        durable state (default: the SQLite file ``arbiter.journal.path``; the HA pair passes
        its ZooKeeper journal, :mod:`arbiter.ha`)."""
        # Telemetry (metrics, health, the console's history) wraps the journal and the
        # decider the core is given, and times the gRPC calls (arbiter.telemetry).
        self.telemetry = Telemetry()
        if journal is None:
            journal = SQLiteJournal(config["arbiter.journal.path"])
        self.journal = self.telemetry.wrap_journal(journal)
        self._decider = decider
        self.core = ArbiterCore(
            cluster,
            config,
            self.journal,
            admin_token=admin_token,
            service_token=service_token,
            submit_token=submit_token,
            clock=clock,
            decider=self.telemetry.decider(decider if decider is not None else decide_inline),
            topology_from_rm=topology_from_rm,
        )
        self.telemetry.bind(self.core)
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="grpc-loop", daemon=True
        )
        self._loop_thread.start()
        try:
            self.server, self.port = self._call(
                build_server(self.core, interceptors=[self.telemetry.interceptor()])
            )
        except BaseException:
            self._shutdown_loop()
            self.journal.close()
            raise
        self.metrics: MetricsServer | None = None
        if config["arbiter.metrics.port"] >= 0:
            try:
                self.metrics = MetricsServer(
                    self.core,
                    config["arbiter.metrics.port"],
                    config["arbiter.metrics.bind-host"],
                    telemetry=self.telemetry,
                )
            except OSError as exc:
                self._call(self.server.stop(0))
                self._shutdown_loop()
                self.journal.close()
                raise OSError(
                    f"arbiter.metrics.port {config['arbiter.metrics.port']} on "
                    f"{config['arbiter.metrics.bind-host']}: {exc.strerror or exc}"
                ) from None
        self._tick = tick_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop_ticks, name="scheduler", daemon=True)
        self.attachments: list[Attachment] = []

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def _shutdown_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(timeout=5)

    def _loop_ticks(self) -> None:
        while not self._stop.wait(self._tick):
            try:
                self.core.tick()
            except Exception:  # keep scheduling; the error is logged with its traceback
                log.exception("scheduler tick failed")
            else:
                self.telemetry.ticked()  # liveness for /healthz; samples the history

    def start(self) -> RunningArbiter:
        self._call(self.server.start())
        self.telemetry.loop_starting()
        self._thread.start()
        if self.metrics is not None:
            self.metrics.start()
        return self

    def attach(self, start: StartAttachment) -> Attachment:
        """Start ``start(self.core)`` beside the running arbiter; :meth:`stop` stops it first
        (attachments in reverse order of attaching)."""
        attachment = start(self.core)
        self.attachments.append(attachment)
        bind = getattr(attachment, "bind_telemetry", None)
        if callable(bind):  # an Observed attachment (the YARN bridge)
            bind(self.telemetry)
        return attachment

    def stop(self, grace: float = 1.0) -> None:
        while self.attachments:
            self.attachments.pop().stop()  # before the journal closes
        self._stop.set()
        if self.metrics is not None:
            self.metrics.stop()
        self._call(self.server.stop(grace))
        self._thread.join(timeout=5)
        self._shutdown_loop()
        self.journal.close()
        close = getattr(self._decider, "close", None)
        if close is not None:
            close()


def start_arbiter(
    cluster: Cluster,
    config: Config,
    *,
    topology_from_rm: bool = False,
    attach: Sequence[tuple[str, StartAttachment]] = (),
    journal: Journal | None = None,
) -> tuple[RunningArbiter, tuple[Path, Path, Path]]:
    """Start an arbiter with the configured credentials (and decider) and its attachments;
    returns it and the admin, query-service and submitters' token files."""
    token, token_path = admin_token_for(config)
    service_token, service_path = service_token_for(config)
    submit_token, submit_path = submit_token_for(config)
    decider = ProcessDecider() if config["arbiter.auction.worker-process"] else None
    try:
        arbiter = RunningArbiter(
            cluster,
            config,
            admin_token=token,
            service_token=service_token,
            submit_token=submit_token,
            decider=decider,
            topology_from_rm=topology_from_rm,
            journal=journal,
        ).start()
    except BaseException:
        if decider is not None:
            decider.close()
        raise
    try:
        for _, start in attach:
            arbiter.attach(start)
    except BaseException:
        arbiter.stop()
        raise
    return arbiter, (token_path, service_path, submit_path)


def serve_forever(
    cluster: Cluster,
    config: Config,
    *,
    topology_from_rm: bool = False,
    attach: Sequence[tuple[str, StartAttachment]] = (),
) -> int:
    """Serve ``cluster`` until SIGTERM/SIGINT. Each ``(description, start)`` of ``attach`` is
    started on the running arbiter (:meth:`RunningArbiter.attach`; the description goes to the
    log) and stopped before it; ``topology_from_rm`` as for :class:`RunningArbiter`."""
    # The handlers go in before anything serves: a SIGTERM that arrives while the arbiter
    # starts (a client may already be connected) stops it cleanly once it is up.
    done = threading.Event()
    stop_on_signals(done)
    arbiter, (token_path, service_path, submit_path) = start_arbiter(
        cluster, config, topology_from_rm=topology_from_rm, attach=attach
    )
    log.info(
        "arbiter serving cluster %s (%d GPUs) on port %d; journal %s; admin token in %s; "
        "query-service token in %s; submitters' token in %s%s",
        cluster.name,
        cluster.num_gpus,
        arbiter.port,
        config["arbiter.journal.path"],
        token_path,
        service_path,
        submit_path,
        "".join(f"; {description}" for description, _ in attach),
    )
    print(
        f"yarn-arbiter: serving {cluster.name} ({cluster.num_gpus} GPUs) on port {arbiter.port}; "
        f"admin token in {token_path}"
        + (
            f"; metrics at {arbiter.metrics.url}; console at {arbiter.metrics.console_url}"
            if arbiter.metrics is not None
            else ""
        ),
        flush=True,
    )
    quiet_gc()
    short_gil_slices()
    done.wait()
    arbiter.stop()  # the attachments first
    return 0


def quiet_gc(young: int = 50_000) -> None:
    """Keep Python's cyclic garbage collector off the event loop's back under fan-in: what
    was built while starting (modules, the cluster, gRPC's machinery) is frozen out of every
    later collection, and the youngest generation is collected every ``young`` allocations
    instead of 700. Measured (benchmarks/arbiter_load.py, 3,000 Agents): a quarter of the
    served arbiter's samples were ``gc_collect_main`` before, walking thousands of sessions'
    futures and coroutines that live a heartbeat's second and so outlived the young
    collections."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young, older, oldest)


# How long a thread that wants the GIL waits for the one running Python before it is asked to
# let go (Python's default is 5 ms).
SWITCH_INTERVAL_S = 0.0005


def short_gil_slices(interval: float = SWITCH_INTERVAL_S) -> float:
    """Let the event loop thread back onto the GIL within ``interval`` (instead of 5 ms) while
    the scheduler thread runs Python; returns the interval it had.

    The loop lets go of the GIL at every socket call and every wait for gRPC's completion
    queue, and the scheduler thread, busy with a round (3,000 apps' views for the policy, the
    in-process call for bids, pickling for the auction worker, the journal), takes it each time
    and keeps it for a whole interval: at 5 ms a heartbeat that needs a dozen such hand-offs
    waits tens of milliseconds (Python's convoy effect). Measured (``benchmarks/
    arbiter_load.py``, 3,000 Agents, README "Arbiter under load"): it was most of the
    heartbeat's tail once the loop no longer waited for the core's lock."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    return previous
