"""The engine's own history of prior runs, for stage costs calibrated to it (QOOP §2.5).

QOOP's "peak resource estimates are based on prior runs for each QEP" (QOOP §2.5, seed 000
L610). On the Spark Thrift Server the prior runs' stages are in Spark's monitoring REST API on
the driver's UI port (``/api/v1/applications/<id>/stages``): this module is the thin shell that
fetches them (:class:`SparkHistory`), finds which engine stages were which planner stage of a
:class:`~hive_hooks.executor.QueryResult` (:func:`measured_statements`: a checkpoint's CTAS by
its table, the final ``SELECT`` by the checkpoints it reads) and hands them to the pure
:func:`qoop_planner.calibrate.calibrated_history` (:func:`calibrate_from_runs`).

The engine must run its UI: ``LocalHiveServer(extra_conf=ui_conf(port))``. Spark keeps the
newest ``spark.ui.retainedStages`` stages (1000 by default; :func:`ui_conf` raises it), so the
history is read soon after the runs it calibrates from.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from typing import Any

from hive_hooks.executor.results import QueryResult
from qoop_planner.calibrate import (
    EngineStage,
    MeasuredStatement,
    calibrated_config,
    calibrated_history,
    lookup_form,
    statement_stages,
)
from qoop_planner.cost import CostConfig, History
from qoop_planner.model import StageCost

__all__ = [
    "SparkHistory",
    "SparkHistoryError",
    "calibrate_from_runs",
    "calibration",
    "measured_statements",
    "ui_conf",
]

# the statement the executor measures checkpoints with (worker: ``SELECT i AS i, COUNT(*) ...``)
_COUNT = re.compile(r"^\s*select\s+\d+\s+as\s+i\s*,\s*count\(\*\)", re.IGNORECASE)
_CTAS = re.compile(r"^\s*create\s+table", re.IGNORECASE)


class SparkHistoryError(RuntimeError):
    """The engine's REST API could not be read (not running its UI, or an unexpected answer)."""


def ui_conf(port: int, retained_stages: int = 20000) -> dict[str, str]:
    """Spark settings that run the driver's UI (and so its REST API) on ``port``."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be in 1..65535, got {port}")
    return {
        "spark.ui.enabled": "true",
        "spark.ui.port": str(port),
        "spark.port.maxRetries": "0",  # the given port or fail, never a neighbour
        "spark.ui.retainedStages": str(retained_stages),
        "spark.ui.retainedJobs": str(retained_stages),
        "spark.sql.ui.retainedExecutions": str(retained_stages),
    }


class SparkHistory:
    """Spark's monitoring REST API at ``url`` (``http://host:port``, the driver's UI)."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.base = url.rstrip("/") + "/api/v1"
        self.timeout = timeout
        self._app: str | None = None

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.base + path, timeout=self.timeout) as r:
                return json.load(r)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise SparkHistoryError(f"GET {self.base}{path}: {e}") from e

    def app_id(self) -> str:
        """The application's id (the Thrift Server runs one)."""
        if self._app is None:
            apps = self._get("/applications")
            if not isinstance(apps, list) or not apps:
                raise SparkHistoryError(f"{self.base}/applications lists no application")
            self._app = str(apps[0]["id"])
        return self._app

    def stages(self) -> list[EngineStage]:
        """Every completed stage the driver still retains."""
        raw = self._get(f"/applications/{self.app_id()}/stages?status=complete")
        if not isinstance(raw, list):
            raise SparkHistoryError(f"stages: expected a list, got {type(raw).__name__}")
        return [EngineStage.from_spark(d) for d in raw]

    def executors(self) -> list[dict[str, Any]]:
        """The active executors (and the driver) as Spark reports them (``totalCores``, ...)."""
        raw = self._get(f"/applications/{self.app_id()}/executors")
        return list(raw) if isinstance(raw, list) else []


def _mentions(description: str, table: str) -> bool:
    return re.search(rf"(?<![\w.`]){re.escape(table)}(?![\w])", description, re.I) is not None


def measured_statements(
    result: QueryResult, stages: Sequence[EngineStage]
) -> list[MeasuredStatement]:
    """The planner stages ``result`` ran (outcome ``done``), each with its engine stages: a
    checkpoint by its ``CREATE TABLE <table>``, the final stage by the statement that is no
    CTAS nor a checkpoint count and reads every checkpoint its plan's final stage reads. A
    stage whose statement is not found (no longer retained, or inline inputs only) is left
    out. Keyed by the form the planner looks the stage up by
    (:func:`~qoop_planner.calibrate.lookup_form`)."""
    plans = {p.plan_id: p for p in result.plans}
    tables = {(t.plan_id, t.stage_id): t.table for t in result.stages if t.table}
    by_sig = {}
    for p in result.plans:
        for s in p.stages:
            if (p.plan_id, s.stage_id) in tables:
                by_sig[s.signature] = tables[(p.plan_id, s.stage_id)]
    out: list[MeasuredStatement] = []
    for t in result.stages:
        plan = plans.get(t.plan_id)
        if t.outcome != "done" or plan is None:
            continue
        st = plan.stage(t.stage_id)
        if st.kind != "final":
            if not t.table:
                continue
            found = statement_stages(stages, f"create table {t.table}")
            form = lookup_form(st)
        else:
            inputs = [by_sig.get(plan.stage(i).signature) for i in st.inputs]
            if not inputs or any(x is None for x in inputs):
                continue
            found = [
                s
                for s in stages
                if s.status == "COMPLETE"
                and not _CTAS.match(s.description)
                and not _COUNT.match(s.description)
                and all(_mentions(s.description, str(x)) for x in inputs)
            ]
            form = ""
        if not found:
            continue
        rows = float(t.rows) if t.rows is not None else st.cost.rows_out
        out.append(MeasuredStatement(st.signature.digest, form, tuple(found), t.seconds, rows))
    return out


def calibrate_from_runs(
    runs: Iterable[QueryResult],
    stages: Sequence[EngineStage],
    *,
    cores_per_vcore: float = 1.0,
    base_memory_mb: float = 0.0,
) -> History:
    """The calibrated stage costs of every stage the ``runs`` ran, from the engine's
    ``stages`` (:meth:`SparkHistory.stages`, read after the runs)."""
    measured = [m for r in runs for m in measured_statements(r, stages)]
    return calibrated_history(
        measured, cores_per_vcore=cores_per_vcore, base_memory_mb=base_memory_mb
    )


def calibration(
    runs: Sequence[QueryResult],
    stages: Sequence[EngineStage],
    cfg: CostConfig,
    *,
    cores_per_vcore: float = 1.0,
) -> tuple[History, CostConfig]:
    """The calibrated history of the ``runs`` (planned with ``cfg`` and no history) and ``cfg``
    scaled by measured over estimated work of the stages they ran
    (:func:`qoop_planner.calibrate.calibrated_config`), for the stages no run measured."""
    history = calibrate_from_runs(
        runs, stages, cores_per_vcore=cores_per_vcore, base_memory_mb=cfg.base_memory_mb
    )
    estimated: dict[tuple[str, str], StageCost] = {}
    for r in runs:
        for p in r.plans:
            for st in p.stages:
                key = (st.signature.digest, lookup_form(st))
                estimated.setdefault(key, st.cost)
    pairs = []
    for (digest, form), cost in estimated.items():
        got = history.get(f"{digest}@{form}" if form else digest)
        if got is not None:
            pairs.append((cost, got))
    return history, calibrated_config(cfg, pairs)
