"""The orchestrator of one run: the decision cycle on the caller's thread, the stages on worker
threads.

This is QOOP's execution loop (QOOP §2.3-2.4): stages run one by one (side by side when the
share allows), each finished stage becomes a checkpoint at once, and on every share change the
policy decides whether to switch plans; a switch cancels the running stages the new plan does not
need and resumes from every usable checkpoint, including those of plans run earlier. A lost
connection is recovered from the checkpoints (package docstring: lost connection); a stage the
engine rejects ends the run with a :class:`~hive_hooks.errors.QueryError`.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from hive_hooks.errors import (
    QoopHiveError,
    QueryError,
    ResultInterruptedError,
    engine_message,
    is_connection_lost,
)
from hive_hooks.executor.connections import CONTROL_ERRORS
from hive_hooks.executor.metadata import _Prepared
from hive_hooks.executor.results import PlanSwitch, QueryResult, StageEvent, StageTiming
from hive_hooks.executor.staging import (
    checkpoint_name,
    launchable,
    needed_signatures,
    pin_hint,
    pin_settings,
    resolve_sql,
    stage_vcores,
)
from hive_hooks.executor.worker import _StatementError, _Task
from hive_hooks.registry import CheckpointRecord
from hive_hooks.share import SwitchReporter
from qoop_planner.model import Plan, Progress, RunningStage, Share, Stage, StageSignature
from qoop_planner.replan import rewrite

if TYPE_CHECKING:
    from hive_hooks.executor.runner import QueryRunner


class _Execution:
    """The orchestrator of one run: the decision cycle on the caller's thread, the stages on
    worker threads (Kubernetes-style: decide serially, bind concurrently)."""

    def __init__(self, runner: QueryRunner, prep: _Prepared, t0: float) -> None:
        self.r = runner
        self.prep = prep
        self.t0 = t0
        self.qid = prep.query_id
        self.by_id = {p.plan_id: p for p in prep.plans}
        self.out: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.sources: dict[StageSignature, str] = {}
        self.ckpt: set[StageSignature] = set()  # signatures held in checkpoint tables
        self.made_by: dict[StageSignature, str] = {}  # made in this run: signature -> plan id
        self.running: dict[StageSignature, _Task] = {}
        self.cancelling: dict[StageSignature, _Task] = {}
        self.unmeasured: list[tuple[_Task, str]] = []  # checkpoints made, not yet measured
        self.measuring: set[_Task] = set()
        self.threads: list[threading.Thread] = []
        self.final_task: _Task | None = None
        self.final_result: tuple[tuple[str, ...], list[tuple[Any, ...]], float] | None = None
        self.streamed = 0  # rows the final stage handed to the runner's on_rows
        self.events: list[StageEvent] = []
        self.timings: list[StageTiming] = []
        self.switches: list[PlanSwitch] = []
        self.reused_pairs: set[tuple[str, str]] = set()
        self.reused: list[str] = []
        self.lost: BaseException | None = None
        self.error: tuple[_Task, BaseException] | None = None
        self.reconnects = 0
        self.share_changes = 0
        self.last_beat = time.monotonic()
        self.dirty = True  # something changed since the last scheduling pass

    # -- events ------------------------------------------------------------------------------

    def emit(
        self,
        plan_id: str,
        stage_id: str,
        kind: str,
        *,
        rows: int | None = None,
        seconds: float | None = None,
        table: str | None = None,
        detail: str = "",
    ) -> None:
        ev = StageEvent(self.qid, plan_id, stage_id, kind, rows, seconds, table, detail)
        self.events.append(ev)
        self.r.registry.log_stage(self.qid, plan_id, stage_id, kind, table, rows, seconds)
        self.last_beat = time.monotonic()
        if self.r.on_event is not None:
            self.r.on_event(ev)

    # -- decisions ---------------------------------------------------------------------------

    def progress(self, current: str | None) -> Progress:
        now = time.monotonic()
        running: dict[StageSignature, RunningStage] = {}
        if current is not None:
            running = {
                sig: RunningStage(0, now - t.started)
                for sig, t in self.running.items()
                if not t.final
            }
        return Progress(current, frozenset(self.sources), running)

    def note_reuse(self, plan: Plan) -> list[str]:
        """Emit ``reused`` for the checkpoints ``plan`` resumes from that it did not make."""
        rem = rewrite(plan, Progress(plan.plan_id, frozenset(self.sources)))
        out = []
        for s in rem.stages:
            if s.kind != "checkpoint" or s.signature not in self.ckpt:
                continue
            if self.made_by.get(s.signature) == plan.plan_id:
                continue
            key = (plan.plan_id, s.stage_id)
            if key in self.reused_pairs:
                continue
            self.reused_pairs.add(key)
            if s.stage_id not in self.reused:
                self.reused.append(s.stage_id)
            table = self.sources[s.signature]
            kind = plan.stage(s.stage_id).kind
            self.timings.append(
                StageTiming(plan.plan_id, s.stage_id, kind, "reused", 0.0, None, table)
            )
            self.emit(plan.plan_id, s.stage_id, "reused", table=table)
            out.append(s.stage_id)
        return out

    # -- launching ---------------------------------------------------------------------------

    def launch(self, plan: Plan, stage: Stage) -> None:
        sql = resolve_sql(plan, stage, self.sources)
        settings: tuple[str, ...] = ()
        if self.r.physical is not None:  # pin the stage's physical form
            sql = pin_hint(sql, stage, self.r.engine)
            settings = pin_settings(stage, self.r.engine)
        inputs = tuple(
            self.sources[sig]
            for sig in (plan.stage(i).signature for i in stage.inputs)
            if sig in self.ckpt
        )
        if stage.stage_id == plan.root:
            task = _Task(
                stage, plan.plan_id, sql, None, time.monotonic(), inputs=inputs, settings=settings
            )
            self.final_task = task
            self.launch_measure()
        else:
            table = checkpoint_name(self.prep.namespace, stage.signature)
            task = _Task(
                stage, plan.plan_id, sql, table, time.monotonic(), inputs=inputs, settings=settings
            )
            self.running[stage.signature] = task
        th = threading.Thread(
            target=self.r._work, args=(task, self.out), name=f"stage-{stage.stage_id}", daemon=True
        )
        task.thread = th
        self.threads.append(th)
        self.emit(plan.plan_id, stage.stage_id, "start", table=task.table)
        th.start()

    def launch_measure(self) -> None:
        """Measure the checkpoints made so far, beside the final stage (one worker)."""
        batch, self.unmeasured = self.unmeasured, []
        if not batch:
            return
        self.measuring.update(t for t, _ in batch)
        th = threading.Thread(
            target=self.r._measure, args=(batch, self.out), name="measure", daemon=True
        )
        self.threads.append(th)
        th.start()

    def schedule(self, plan: Plan, share: Share) -> None:
        if self.final_task is not None:
            return
        rem = rewrite(plan, Progress(plan.plan_id, frozenset(self.sources)))
        root = rem.stage(rem.root)
        if all(rem.stage(i).signature in self.sources for i in root.inputs):
            self.launch(plan, plan.stage(root.stage_id))
            return
        busy = set(self.running) | set(self.cancelling)
        used = sum(
            stage_vcores(t.stage, share)
            for t in [*self.running.values(), *self.cancelling.values()]
        )
        n = len(self.running) + len(self.cancelling)
        for s in launchable(rem, frozenset(self.sources), busy):
            need = stage_vcores(s, share)
            if n > 0 and (n >= self.r.max_concurrency or used + need > share.vcores + 1e-9):
                break
            self.launch(plan, plan.stage(s.stage_id))
            used += need
            n += 1

    def switch(self, old: Plan, new: Plan, share: Share) -> None:
        rem = rewrite(new, Progress(new.plan_id, frozenset(self.sources)))
        needed = needed_signatures(rem)
        cancelled = []
        for sig, task in list(self.running.items()):
            if sig not in needed:
                self.r._cancel_operation(task)
                del self.running[sig]
                self.cancelling[sig] = task
                cancelled.append(task.stage.stage_id)
        self.emit(new.plan_id, "", "switch", detail=f"from {old.plan_id}")
        self.note_reuse(new)
        resumed = tuple(s.stage_id for s in rem.stages if s.signature in self.ckpt)
        record = PlanSwitch(
            time.monotonic() - self.t0, old.plan_id, new.plan_id, share, tuple(cancelled), resumed
        )
        self.switches.append(record)
        if isinstance(self.r.share, SwitchReporter):  # the arbiter's console lists it
            self.r.share.report_switch(
                record.at_s, old.plan_id, new.plan_id, share, record.cancelled, resumed
            )

    # -- worker messages ---------------------------------------------------------------------

    def handle(self, msg: tuple[Any, ...]) -> None:
        self.dirty = True
        kind, task = msg[0], msg[1]
        sig = task.stage.signature
        reg = self.r.registry
        if kind == "ready":
            _, _, table, seconds = msg
            self.running.pop(sig, None)
            self.cancelling.pop(sig, None)
            now = reg.clock()
            reg.record_checkpoint(
                CheckpointRecord(
                    database=self.r.checkpoint_db,
                    table=table,
                    namespace=self.prep.namespace,
                    signature=sig.digest,
                    query_id=self.qid,
                    plan_id=task.plan_id,
                    stage_id=task.stage.stage_id,
                    seconds=seconds,
                    created_at=now,
                    last_used_at=now,
                )
            )
            reg.record_measurement(
                self.prep.query_key,
                sig.digest,
                seconds,
                task.stage.cost.tasks,
                task.stage.cost.rows_out,
            )
            qualified = f"{self.r.checkpoint_db}.{table}"
            self.sources[sig] = qualified
            self.ckpt.add(sig)
            self.made_by[sig] = task.plan_id
            self.unmeasured.append((task, table))
            self.timings.append(
                StageTiming(
                    task.plan_id,
                    task.stage.stage_id,
                    task.stage.kind,
                    "done",
                    seconds,
                    None,
                    qualified,
                )
            )
            self.emit(task.plan_id, task.stage.stage_id, "done", seconds=seconds, table=qualified)
        elif kind == "measured":
            _, _, table, rows, nbytes = msg
            self.measuring.discard(task)
            if rows is not None or nbytes is not None:
                reg.update_size(self.r.checkpoint_db, table, rows, nbytes)
            if rows is not None:
                t = next(
                    (
                        x
                        for x in self.timings
                        if x.stage_id == task.stage.stage_id and x.outcome == "done"
                    ),
                    None,
                )
                seconds = t.seconds if t is not None else 0.0
                reg.record_measurement(
                    self.prep.query_key, sig.digest, seconds, task.stage.cost.tasks, rows
                )
                self.timings = [
                    StageTiming(x.plan_id, x.stage_id, x.kind, x.outcome, x.seconds, rows, x.table)
                    if x is t
                    else x
                    for x in self.timings
                ]
        elif kind == "cancelled":
            seconds = msg[2]
            self.cancelling.pop(sig, None)
            self.running.pop(sig, None)
            if task is self.final_task:
                self.final_task = None
            self.timings.append(
                StageTiming(
                    task.plan_id, task.stage.stage_id, task.stage.kind, "cancelled", seconds
                )
            )
            self.emit(task.plan_id, task.stage.stage_id, "cancelled", seconds=seconds)
        elif kind == "failed":
            exc = msg[2]
            self.running.pop(sig, None)
            was_cancelling = self.cancelling.pop(sig, None) is not None
            if task is self.final_task:
                self.final_task = None
            if isinstance(exc, ResultInterruptedError):
                self.error = self.error or (task, exc)
            elif is_connection_lost(exc):
                self.lost = self.lost or exc
                self.timings.append(
                    StageTiming(
                        task.plan_id,
                        task.stage.stage_id,
                        task.stage.kind,
                        "lost",
                        time.monotonic() - task.started,
                    )
                )
                self.emit(task.plan_id, task.stage.stage_id, "lost")
            elif was_cancelling:
                self.emit(task.plan_id, task.stage.stage_id, "cancelled")
            elif self.error is None and self.lost is None:
                if self.r._server_healthy(exc):
                    self.error = (task, exc)
                else:  # the server is going down: the stage is lost, not wrong
                    self.lost = exc
                    self.emit(task.plan_id, task.stage.stage_id, "lost")
        elif kind == "final":
            _, _, columns, rows, seconds, streamed = msg
            self.final_result = (columns, rows, seconds)
            self.streamed = streamed
            n = streamed or len(rows)
            self.timings.append(
                StageTiming(task.plan_id, task.stage.stage_id, "final", "done", seconds, n)
            )
            self.emit(task.plan_id, task.stage.stage_id, "done", rows=n, seconds=seconds)

    def drain(self, timeout: float) -> None:
        try:
            msg = self.out.get(timeout=timeout)
        except queue.Empty:
            return
        self.handle(msg)
        while True:
            try:
                msg = self.out.get_nowait()
            except queue.Empty:
                return
            self.handle(msg)

    def wait_workers(self, timeout: float) -> None:
        """Let every worker thread end, handling what they report."""
        deadline = time.monotonic() + timeout
        while any(t.is_alive() for t in self.threads) and time.monotonic() < deadline:
            self.drain(0.05)
        self.drain(0.0)
        self.threads = [t for t in self.threads if t.is_alive()]

    def abort_all(self) -> None:
        for task in [*self.running.values(), *self.cancelling.values()]:
            self.r._cancel_operation(task)
        if self.final_task is not None:
            self.r._cancel_operation(self.final_task)

    # -- recovery ----------------------------------------------------------------------------

    def recover(self) -> None:
        """The connection died: collect the workers, reconnect, re-check the checkpoints."""
        assert self.lost is not None
        why = self.lost
        self.wait_workers(30.0)
        for sig, task in list(self.running.items()) + list(self.cancelling.items()):
            self.emit(task.plan_id, task.stage.stage_id, "lost")
            self.running.pop(sig, None)
            self.cancelling.pop(sig, None)
        self.final_task = None
        self.r._reconnect(why)
        self.reconnects += 1
        self.lost = None
        known = self.r.registry.lookup(self.r.checkpoint_db, self.prep.namespace)
        for sig in list(self.ckpt):
            if sig.digest not in known:  # the table vanished with the server: recompute
                self.ckpt.discard(sig)
                self.sources.pop(sig, None)
                self.made_by.pop(sig, None)
        self.unmeasured = [(t, n) for t, n in self.unmeasured if t.stage.signature in self.ckpt]

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> QueryResult:
        r = self.r
        self.sources, self.ckpt = r._sources(self.prep)
        snap = r.share.current()
        epoch = snap.epoch
        share = snap.share
        plans = list(self.prep.plans)
        current = r.policy(plans, self.progress(None), share, None)
        initial = current.plan_id
        self.note_reuse(current)
        try:
            while self.final_result is None:
                if self.error is not None:
                    self.fail()
                if self.lost is not None:
                    self.recover()
                    current = self.by_id[current.plan_id]
                    self.dirty = True
                snap = r.share.current()
                if snap.epoch != epoch:
                    epoch, share = snap.epoch, snap.share
                    self.share_changes += 1
                    self.dirty = True
                    r.enforce_share(share)
                    if self.final_task is None and len(plans) > 1:
                        new = r.policy(
                            plans, self.progress(current.plan_id), share, current.plan_id
                        )
                        if new.plan_id != current.plan_id:
                            self.switch(current, new, share)
                            current = new
                if self.dirty and self.lost is None and self.error is None:
                    self.dirty = False
                    try:
                        self.schedule(current, share)
                    except CONTROL_ERRORS as e:  # the control connection died while cancelling
                        if not is_connection_lost(e):
                            raise
                        self.lost = e
                        continue
                self.drain(0.05)
                if time.monotonic() - self.last_beat > 10.0:
                    r.registry.heartbeat(self.qid)
                    self.last_beat = time.monotonic()
            # the result is in; let cancelled statements wind down (their partial tables are
            # dropped) and the size measurements finish (they ran beside the final stage)
            deadline = time.monotonic() + 30.0
            while (self.measuring or self.cancelling) and time.monotonic() < deadline:
                self.drain(0.05)
                if self.lost is not None:
                    break
        except BaseException:
            self.abort_all()
            self.wait_workers(10.0)
            raise
        tables = [self.sources[s].split(".", 1)[1] for s in self.ckpt if s in self.sources]
        r.registry.touch(r.checkpoint_db, tables)
        assert self.final_result is not None
        columns, rows, _ = self.final_result
        return QueryResult(
            query_id=self.qid,
            columns=columns,
            rows=rows,
            plan_id=current.plan_id,
            initial_plan_id=initial,
            switches=tuple(self.switches),
            stages=tuple(self.timings),
            reused=tuple(self.reused),
            elapsed_s=time.monotonic() - self.t0,
            planning_s=self.prep.planning_s,
            share_changes=self.share_changes,
            reconnects=self.reconnects,
            passthrough=self.prep.passthrough,
            events=tuple(self.events),
            streamed=self.streamed,
            plans=self.prep.plans,
        )

    def fail(self) -> None:
        assert self.error is not None
        task, exc = self.error
        self.abort_all()
        self.wait_workers(30.0)
        msg = exc.message if isinstance(exc, _StatementError) else engine_message(exc)
        sql = exc.sql if isinstance(exc, _StatementError) else task.sql
        if isinstance(exc, QoopHiveError):
            raise exc
        where = (
            "query" if self.prep.passthrough else f"stage {task.stage.stage_id} of {task.plan_id}"
        )
        raise QueryError(
            f"{where} failed: {msg}",
            engine_message=msg,
            sql=sql,
            stage_id=task.stage.stage_id,
            query_id=self.qid,
        ) from exc
