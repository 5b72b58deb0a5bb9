"""What ``qoop-hive`` prints while it runs SQL: result sets on stdout (beeline's formats, row by
row for the streamable ones), and on stderr "N rows selected (T seconds)", errors and progress
lines: one per stage event of the replanner (:func:`format_event`) and one per share change the
executor sees (:class:`ReportingShare`); and the ``--explain-plans`` table
(:func:`explain_table`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from hive_hooks.beeline.errors import PROG
from hive_hooks.output import STREAMABLE, write_result

__all__ = [
    "Printer",
    "ReportingShare",
    "explain_table",
    "format_event",
    "plan_shape",
    "short_plan",
]


class Printer:
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
