"""The public runner: :class:`QueryRunner` runs queries as QOOP plans on HiveServer2.

It ties the pieces of stage-by-stage execution with checkpoints (QOOP §2.3) and plan switching
(QOOP §2.4) together: its connection, planning and worker sides
(:mod:`~hive_hooks.executor.connections`, :mod:`~hive_hooks.executor.metadata`,
:mod:`~hive_hooks.executor.worker`) are mixins of this class, and each :meth:`QueryRunner.run`
is one :class:`~hive_hooks.executor.execution._Execution`. It registers the run with the
checkpoint registry and the share source, gives the run's share to the engine (package
docstring: share enforcement) and reports what each cached plan would cost
(:meth:`QueryRunner.explain`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from hive_hooks.executor.connections import _EMPTY, _SETTING_KEY, ENGINE_SETTINGS, _Pool
from hive_hooks.executor.execution import _Execution
from hive_hooks.executor.metadata import _Metadata
from hive_hooks.executor.results import PlanEstimate, QueryResult, StageEvent
from hive_hooks.executor.staging import (
    STORAGE,
    ReplanPolicy,
    TableInfo,
    checkpoint_name,
    greedy_policy,
    pin_hint,
    pin_settings,
    resolve_sql,
)
from hive_hooks.executor.worker import _Worker
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import ShareEnforcer, ShareSource, StaticShare, tag_settings
from qoop_planner.cost import CostConfig, StageMeasurement, TableStats
from qoop_planner.model import Progress, Share
from qoop_planner.physical import PhysicalProfile
from qoop_planner.replan import decide, rewrite

__all__ = ["QueryRunner"]

log = logging.getLogger("qoop_hive.executor")


class QueryRunner(_Metadata, _Worker):
    """Runs queries as QOOP plans on HiveServer2 (package docstring).

    ``connect`` returns a new DB-API connection (pyhive ``hive.connect(...)``) to the server,
    already in the database the queries' unqualified tables live in. ``registry`` is the durable
    checkpoint registry; ``checkpoint_db`` the database holding checkpoint tables (created if
    missing). ``share`` follows the query's resource share (default: a fixed 4-vcore share, no
    switches). ``hiveconf`` settings are applied to every connection after
    :data:`ENGINE_SETTINGS`. ``on_event`` receives every :class:`StageEvent`. ``stats`` maps table
    names to statistics and disables gathering them from the engine.

    Tuning: ``policy`` (default :func:`greedy_policy` with ``hysteresis``), ``k`` cached plans,
    ``max_concurrency`` stages at once, ``materialize_scans``, ``reconnect_timeout_s``,
    ``fetch_size`` rows per fetch, ``metadata_ttl_s`` (how long a table's description is reused
    by later runs of this runner), ``cost_config`` for the planner, ``engine_settings`` to
    replace :data:`ENGINE_SETTINGS`. ``share_enforcer`` makes the share the engine's resources
    (package docstring: share enforcement). ``physical``: cache the diverse plan space of these
    physical profiles (:func:`~qoop_planner.sqlplan.enumerate_plan_space`, ``k`` plans) instead
    of the ``k`` cheapest join orders, and pin each join stage's method and partitions on the
    engine (:func:`~hive_hooks.executor.staging.pin_settings`, ``pin_hint``). ``history``:
    measured stages given to the planner over the registry's own (e.g. costs calibrated from the
    engine's history of prior runs, :func:`hive_hooks.spark_history.calibrate_from_runs`).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        registry: CheckpointRegistry,
        checkpoint_db: str = "qoop_ckpt",
        share: ShareSource | None = None,
        hiveconf: Mapping[str, str] = _EMPTY,
        on_event: Callable[[StageEvent], None] | None = None,
        stats: Mapping[str, TableStats] | None = None,
        policy: ReplanPolicy | None = None,
        hysteresis: float = 0.15,
        k: int = 8,
        max_concurrency: int = 4,
        materialize_scans: bool = False,
        reconnect_timeout_s: float = 120.0,
        fetch_size: int = 1000,
        metadata_ttl_s: float = 5.0,
        cost_config: CostConfig | None = None,
        engine_settings: Mapping[str, str] = ENGINE_SETTINGS,
        share_enforcer: ShareEnforcer | None = None,
        physical: Sequence[PhysicalProfile] | None = None,
        history: Mapping[str, StageMeasurement] | None = None,
    ) -> None:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", checkpoint_db):
            raise ValueError(f"checkpoint_db {checkpoint_db!r} is not a plain identifier")
        for key, value in {**engine_settings, **hiveconf}.items():
            if not _SETTING_KEY.match(key):
                raise ValueError(f"setting name {key!r} is not a property name")
            if "\n" in str(value):
                raise ValueError(f"setting {key}: value has a newline")
        if k < 1 or max_concurrency < 1 or fetch_size < 1:
            raise ValueError("k, max_concurrency and fetch_size must be >= 1")
        if not hysteresis >= 0:
            raise ValueError(f"hysteresis must be >= 0, got {hysteresis}")
        self.connect = connect
        self.registry = registry
        self.checkpoint_db = checkpoint_db.lower()
        self.share: ShareSource = share if share is not None else StaticShare()
        self.hiveconf = dict(hiveconf)
        self.on_event = on_event
        self.stats = dict(stats) if stats is not None else None
        self.hysteresis = hysteresis
        self.policy: ReplanPolicy = policy or greedy_policy(hysteresis)
        self.k = k
        self.max_concurrency = max_concurrency
        self.materialize_scans = materialize_scans
        self.reconnect_timeout_s = reconnect_timeout_s
        self.fetch_size = fetch_size
        self.metadata_ttl_s = metadata_ttl_s
        self.cost_config = cost_config
        self.engine_settings = dict(engine_settings)
        self.share_enforcer = share_enforcer
        self.physical = tuple(physical) if physical is not None else None
        self.history: Mapping[str, StageMeasurement] = dict(history or {})
        if self.physical == ():
            raise ValueError("physical needs at least one profile (None: join orders only)")
        self._share_key: str | None = None  # the run's key at the enforcer, while it runs
        self.poll_interval = 0.02
        self.cancel_settle_s = 1.5  # how long a cancelled CTAS is watched for a late table
        self._pool = _Pool(
            connect, self._setup_session, max_idle=max_concurrency + 1, refresh=self._sync_tags
        )
        self._control_conn: Any = None
        # the YARN tag settings of the run in progress, and what each connection has been given
        self._tags: dict[str, str] = {}
        self._conn_tags: weakref.WeakKeyDictionary[Any, dict[str, str]] = (
            weakref.WeakKeyDictionary()
        )
        self._tag_lock = threading.Lock()
        # what a run-scoped setting goes back to when the user's hiveconf does not say
        self._tag_defaults = share_enforcer.session_defaults() if share_enforcer else {}
        self._current_db: str | None = None
        self._ready = False
        self._tables: dict[str, tuple[float, TableInfo]] = {}
        self._run_lock = threading.Lock()
        self._on_rows: Callable[[tuple[str, ...], list[tuple[Any, ...]]], None] | None = None
        self.orphans: tuple[str, ...] = ()  # our tables without a record, found at startup
        self.engine = "hive"  # "spark" when the server is a Spark Thrift Server
        self.storage = STORAGE["hive"]

    # -- public API --------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection the runner holds (it can be used again afterwards)."""
        self._drop_connections()

    def __enter__(self) -> QueryRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def explain(self, sql: str, *, share: Share | None = None) -> list[PlanEstimate]:
        """The cached plans of ``sql`` with their estimated finish under ``share`` (default:
        the share source's current share), best first by estimate; what is checkpointed and
        the statements the executor would send."""
        with self._run_lock:
            qid = "explain-" + uuid.uuid4().hex[:8]
            prep = self._with_reconnect(lambda: self._prepare(sql, qid))
            sources, ckpt = self._sources(prep)
            sh = share if share is not None else self.share.current().share
            progress = Progress(None, frozenset(sources))
            d = decide(prep.plans, progress, sh, hysteresis=self.hysteresis, current_plan_id=None)
            chosen = self.policy(prep.plans, progress, sh, None).plan_id
            out = []
            for p in prep.plans:
                rem = rewrite(p, progress)
                names = dict(sources)
                for s in p.stages:
                    if s.signature not in names and s.kind != "final":
                        names[s.signature] = (
                            f"{self.checkpoint_db}.{checkpoint_name(prep.namespace, s.signature)}"
                        )
                statements = {}
                for s in rem.stages:
                    if s.kind == "checkpoint":
                        continue
                    body = resolve_sql(p, p.stage(s.stage_id), names)
                    pins = ""
                    if self.physical is not None:  # as the executor pins it
                        st = p.stage(s.stage_id)
                        body = pin_hint(body, st, self.engine)
                        pins = "".join(f"{x};\n" for x in pin_settings(st, self.engine))
                    if s.stage_id == p.root:
                        statements[s.stage_id] = pins + body
                    else:
                        statements[s.stage_id] = (
                            f"{pins}CREATE TABLE {names[s.signature]} {self.storage} AS {body}"
                        )
                out.append(
                    PlanEstimate(
                        plan=p,
                        estimate_s=float(d.estimates[p.plan_id]),
                        chosen=p.plan_id == chosen,
                        checkpointed=tuple(s.stage_id for s in p.stages if s.signature in ckpt),
                        to_run=tuple(statements),
                        statements=MappingProxyType(statements),
                    )
                )
            out.sort(key=lambda e: (e.estimate_s, e.plan.total_cost, e.plan.plan_id))
            return out

    def run(
        self,
        sql: str,
        *,
        query_id: str | None = None,
        on_rows: Callable[[tuple[str, ...], list[tuple[Any, ...]]], None] | None = None,
    ) -> QueryResult:
        """Run ``sql`` (package docstring) and return its rows with what the run did.

        With ``on_rows``, the final stage's rows go to ``on_rows(columns, batch)`` batch by
        batch as they are fetched (from a worker thread, in order) instead of into the result,
        whose ``streamed`` counts them. A connection lost after a batch was handed over cannot
        be resumed without sending rows twice, so it ends the run with
        :class:`~hive_hooks.errors.ResultInterruptedError` (rerunning is cheap: every
        checkpoint is kept); a loss before the first batch is recovered as usual."""
        with self._run_lock:
            self._on_rows = on_rows
            qid = query_id or "q-" + uuid.uuid4().hex[:12]
            t0 = time.monotonic()
            prep = self._with_reconnect(lambda: self._prepare(sql, qid))
            self.registry.start_run(qid, prep.namespace, self.checkpoint_db, sql)
            try:
                self.share.begin(qid)
                try:
                    self._tags = tag_settings(self.share, self.hiveconf)
                    if self.share_enforcer is not None:
                        self._share_key = getattr(self.share, "job_id", None) or qid
                        self._tags.update(self.share_enforcer.session_settings(self._share_key))
                        self.enforce_share(self.share.current().share)
                    if self._tags:
                        self._with_reconnect(self._control)  # tagged before any stage runs
                    result = _Execution(self, prep, t0).run()
                finally:
                    self._tags = {}
                    self._on_rows = None
                    self._release_share()
                    self.share.end(qid)
            except BaseException as e:
                self.registry.finish_run(qid, "failed", str(e)[:2000])
                raise
            self.registry.finish_run(qid, "finished")
            return result

    # -- share enforcement -------------------------------------------------------------------

    def enforce_share(self, share: Share) -> None:
        """Give the running query's share to the engine (package docstring: share enforcement)."""
        if self.share_enforcer is None or self._share_key is None:
            return
        try:
            self.share_enforcer.apply_share(self._share_key, share)
        except Exception as e:
            # broad: the enforcer is any ShareEnforcer (an HTTP control endpoint, ...) and the
            # answer does not depend on it, so its failure is logged, never the run's
            log.warning("share enforcer: applying %s to %s failed: %s", share, self._share_key, e)

    def _release_share(self) -> None:
        key, self._share_key = self._share_key, None
        if self.share_enforcer is None or key is None:
            return
        try:
            self.share_enforcer.release_share(key)
        except Exception as e:  # broad, logged: as in enforce_share
            log.warning("share enforcer: releasing %s failed: %s", key, e)
