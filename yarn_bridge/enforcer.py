"""The lease enforcer: a YARN app that keeps GPUs past its leases is killed.

Spec: ``../shared/spec/yarn-hive-integration.md`` §0.2 (what the arbiter can enforce through
REST: kill, queue capacities; it cannot resize a running container, which only the AM can do
over AMRM, §1.8), §1.1 (``PUT /apps/{id}/state``), §1.4 (an app's GPU use is
``resourceInfo.resourceUsagesByPartition[].used`` ``yarn.io/gpu``, Capacity Scheduler only), §1.6
(``PUT /scheduler-conf``, absolute resource vectors).

Enforcement has two steps, and the arbiter already does the first: a revoked lease reaches the
application master as a ``Revocation`` on its session (:class:`arbiter.messages.Revocation`) with a
grace period, and the lease's end is moved to *now + grace*, so the GPUs still count as the
app's until then. The AM is expected to checkpoint and release its containers. This module is
the second step, a backstop for an AM that does not: after the lease has ended, if the YARN app
still holds more ``yarn.io/gpu`` than it has live leases for, it is killed through the RM.

Functional core and shell, as everywhere (``ARCHITECTURE.md`` principle 1):

* :func:`decide` (pure): the apps the watcher sees (:class:`~yarn_bridge.rm_events.AppView`, with
  ``gpus_used`` from the RM), the GPUs each arbiter app holds leases for at ``now``
  (:func:`held_counts` over the core's leases), the registered arbiter apps, and the enforcer's
  own state -> the next state and the actions (:class:`Action`) to take. :func:`settle` folds an
  action's outcome back into the state. :func:`with_gpus` rewrites a resource vector.
* :class:`Enforcer` (shell): reads the core and the clock, calls :func:`decide`, performs each
  action on the RM, logs it in an action log with ids (:class:`ActionRecord`).

Decisions:

* **Never before the grace period ends.** Over-use is ``gpus_used - held`` with ``held``
  counting every lease live at ``now``, a lease in its grace period included; so it cannot
  start before the lease's (cut) end. After that the AM gets ``slack_s`` more (default 10 s:
  releasing a container takes NodeManager heartbeats), measured from the first poll that saw the
  over-use; over-use that stops resets the timer.
* **Who is enforced.** Only ML apps (``yarn-arbiter-ml`` tag) linked to an app *registered* in
  the arbiter (``yarn-arbiter-app:<id>``): the arbiter knows their leases. An ML-tagged app
  without a link, or linked to an id the arbiter does not know, is left alone (the enforcer
  kills only what it can account for). An app whose GPU use the RM does not report (the Fair
  Scheduler has no per-app ``resourceInfo``) cannot be enforced; that is logged once per app.
* **Kill** is ``PUT /apps/{id}/state {"state":"KILLED"}`` once (``wait=False``: the watcher sees
  the KILLED state on its next poll and finishes the app in the arbiter, which frees its
  leases). The action id is ``kill:<yarn id>``: a kill that succeeded (or found the app already
  gone, 404) is never sent again, so repeating a tick repeats nothing; a kill that failed (RM
  unreachable) is retried on the next tick and logged as a new attempt.
* **GPU queue capacity** (optional, ``gpu_queue="root.gpu"``): the GPU queue's ``capacity`` and
  ``maximum-capacity`` vectors get ``yarn.io/gpu`` = the number of GPUs under live leases, so
  YARN itself refuses GPU containers beyond what the arbiter leased (an aggregate backstop; the
  per-app kill stays the precise one). Memory and vcores in the vectors are kept as configured.
  The update is sent only when that number changed and the queue's current vector differs
  (read back with ``GET /scheduler-conf``). A queue not in absolute-resource mode (percentages,
  as in the emulator's default queues) cannot carry a GPU count: the update is skipped once,
  logged, and not tried again. In absolute mode (``deploy/conf/capacity-scheduler.xml``'s
  ``root.gpu``) the update is one ``update-queue`` for that queue alone: its siblings keep
  their vectors, so the mutation never mixes modes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from arbiter.rounds import Lease
from yarn_bridge.rm import GPU, RMClient, RMError, RMNotFound, SchedConfUpdate
from yarn_bridge.rm_events import ML, AppView

if TYPE_CHECKING:
    from yarn_bridge.arbiter_port import ArbiterPort

__all__ = [
    "DONE",
    "FAILED",
    "KILL",
    "QUEUE",
    "SKIPPED",
    "Action",
    "ActionRecord",
    "Enforcer",
    "EnforcerState",
    "decide",
    "held_counts",
    "parse_vector",
    "settle",
    "with_gpus",
]

log = logging.getLogger("yarn_arbiter.bridge.enforcer")

KILL: Final = "kill"
QUEUE: Final = "queue-capacity"
DONE: Final = "done"
FAILED: Final = "failed"
SKIPPED: Final = "skipped"
DEFAULT_SLACK_S: Final = 10.0
CS_PREFIX: Final = "yarn.scheduler.capacity"


@dataclass(frozen=True, slots=True)
class Action:
    """Something to do on the RM. ``action_id`` names it for idempotence (``kill:<yarn id>``,
    ``queue:<queue>:<gpus>``)."""

    action_id: str
    kind: str  # KILL | QUEUE
    target: str  # the YARN application id, or the queue path
    reason: str
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One attempt at an action, as logged: ``seq`` orders the log."""

    seq: int
    action: Action
    at: float
    outcome: str  # DONE | FAILED | SKIPPED
    detail: str
    attempt: int


def _empty() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True)
class EnforcerState:
    """What the enforcer remembers between ticks: since when each app has over-used, the
    actions completed, attempts per action, the GPU count last written to the queue."""

    over_since: Mapping[str, float] = field(default_factory=_empty)
    done: frozenset[str] = frozenset()
    attempts: Mapping[str, int] = field(default_factory=_empty)
    queue_gpus: int | None = None
    queue_disabled: str | None = None


def held_counts(leases: Iterable[Lease], now: float) -> dict[str, int]:
    """GPUs each arbiter app holds live leases for at ``now`` (a lease in its grace counts).

    >>> held_counts([Lease("a", frozenset({"g0", "g1"}), 0.0, 10.0, 1),
    ...              Lease("a", frozenset({"g2"}), 0.0, 5.0, 1)], now=6.0)
    {'a': 2}
    """
    out: dict[str, set[str]] = {}
    for lease in leases:
        if lease.live_at(now):
            out.setdefault(lease.app_id, set()).update(lease.gpus)
    return {a: len(g) for a, g in out.items()}


def kill_id(yarn_id: str) -> str:
    return f"kill:{yarn_id}"


def decide(
    state: EnforcerState,
    apps: Iterable[AppView],
    held: Mapping[str, int],
    registered: frozenset[str],
    now: float,
    *,
    slack_s: float = DEFAULT_SLACK_S,
    gpu_queue: str | None = None,
) -> tuple[EnforcerState, tuple[Action, ...]]:
    """The actions due at ``now`` (module docstring) and the state after deciding them.

    >>> app = AppView("application_1_0001", "RUNNING", ML, arbiter_id="app-a", gpus_used=4)
    >>> s, acts = decide(EnforcerState(), [app], {"app-a": 2}, frozenset({"app-a"}), 100.0,
    ...                  slack_s=10)
    >>> acts, dict(s.over_since)                       # over-use seen: the slack starts
    ((), {'application_1_0001': 100.0})
    >>> s, acts = decide(s, [app], {"app-a": 2}, frozenset({"app-a"}), 110.0, slack_s=10)
    >>> [a.action_id for a in acts]
    ['kill:application_1_0001']
    >>> s = settle(s, acts[0], DONE)
    >>> decide(s, [app], {"app-a": 2}, frozenset({"app-a"}), 120.0, slack_s=10)[1]
    ()
    """
    if slack_s < 0:
        raise ValueError(f"slack_s must be >= 0, got {slack_s}")
    actions: list[Action] = []
    over_since: dict[str, float] = {}
    for app in apps:
        if app.kind != ML or not app.live or app.arbiter_id not in registered:
            continue
        if app.gpus_used is None:
            continue
        holds = held.get(app.arbiter_id or "", 0)
        over = app.gpus_used - holds
        if over <= 0:
            continue
        since = state.over_since.get(app.yarn_id, now)
        over_since[app.yarn_id] = since
        aid = kill_id(app.yarn_id)
        if now - since >= slack_s and aid not in state.done:
            actions.append(
                Action(
                    aid,
                    KILL,
                    app.yarn_id,
                    f"arbiter app {app.arbiter_id} uses {app.gpus_used} yarn.io/gpu but holds "
                    f"leases for {holds}, for {now - since:.1f} s after its leases ended "
                    f"(slack {slack_s:g} s)",
                )
            )
    if gpu_queue and state.queue_disabled is None:
        leased = sum(held.values())
        if leased != state.queue_gpus:
            actions.append(
                Action(
                    f"queue:{gpu_queue}:{leased}",
                    QUEUE,
                    gpu_queue,
                    f"{leased} GPUs under live leases",
                    gpus=leased,
                )
            )
    return replace(state, over_since=MappingProxyType(over_since)), tuple(actions)


def settle(state: EnforcerState, action: Action, outcome: str, detail: str = "") -> EnforcerState:
    """``state`` after ``action`` ended with ``outcome`` (DONE, FAILED or SKIPPED)."""
    attempts = dict(state.attempts)
    attempts[action.action_id] = attempts.get(action.action_id, 0) + 1
    state = replace(state, attempts=MappingProxyType(attempts))
    if action.kind == KILL and outcome in (DONE, SKIPPED):
        return replace(state, done=state.done | {action.action_id})
    if action.kind == QUEUE:
        if outcome == DONE:
            return replace(state, queue_gpus=action.gpus)
        if outcome == SKIPPED:
            return replace(state, queue_disabled=detail or "skipped")
    return state


_VECTOR = re.compile(r"^\s*\[(.*)\]\s*$")


def parse_vector(value: str) -> list[tuple[str, str]] | None:
    """A Capacity Scheduler absolute resource vector as (name, value) pairs; ``None`` for a
    percentage or weight.

    >>> parse_vector("[memory=4096,vcores=4,yarn.io/gpu=8]")
    [('memory', '4096'), ('vcores', '4'), ('yarn.io/gpu', '8')]
    >>> parse_vector("40") is None
    True
    """
    m = _VECTOR.match(value)
    if not m:
        return None
    out = []
    for part in m.group(1).split(","):
        if not part.strip():
            continue
        name, sep, val = part.partition("=")
        if not sep:
            return None
        out.append((name.strip(), val.strip()))
    return out


def with_gpus(value: str, gpus: int) -> str | None:
    """``value`` (an absolute resource vector) with ``yarn.io/gpu`` set to ``gpus``; ``None``
    if ``value`` is not a vector.

    >>> with_gpus("[memory=4096,vcores=4,yarn.io/gpu=8]", 3)
    '[memory=4096,vcores=4,yarn.io/gpu=3]'
    >>> with_gpus("[memory=4096,vcores=4]", 2)
    '[memory=4096,vcores=4,yarn.io/gpu=2]'
    """
    pairs = parse_vector(value)
    if pairs is None:
        return None
    pairs = [(k, v) for k, v in pairs if k != GPU] + [(GPU, str(int(gpus)))]
    return "[" + ",".join(f"{k}={v}" for k, v in pairs) + "]"


class Enforcer:
    """Runs :func:`decide` against ``core`` and performs the actions on the RM through ``rm``.
    :attr:`log` is the action log (every attempt, in order)."""

    def __init__(
        self,
        core: ArbiterPort,
        rm: RMClient,
        *,
        slack_s: float = DEFAULT_SLACK_S,
        gpu_queue: str | None = None,
    ) -> None:
        if slack_s < 0:
            raise ValueError(f"slack_s must be >= 0, got {slack_s}")
        self.core = core
        self.rm = rm
        self.slack_s = slack_s
        self.gpu_queue = gpu_queue
        self.state = EnforcerState()
        self.log: list[ActionRecord] = []
        self._seq = 0
        self._unreported: set[str] = set()
        self._lock = threading.Lock()

    def tick(self, apps: Iterable[AppView]) -> list[ActionRecord]:
        """Decide and act once; returns the records of this tick's actions."""
        with self._lock:
            apps = tuple(apps)
            now = self.core.clock()
            snap = self.core.snapshot()
            registered = frozenset(snap.apps)
            held = held_counts(snap.leases, now)
            for app in apps:
                managed = app.kind == ML and app.live and app.arbiter_id in registered
                if managed and app.gpus_used is None and app.yarn_id not in self._unreported:
                    self._unreported.add(app.yarn_id)
                    log.warning(
                        "the RM does not report the GPUs of %s (no resourceInfo: Fair "
                        "Scheduler?); its leases cannot be enforced",
                        app.yarn_id,
                    )
            state, actions = decide(
                self.state,
                apps,
                held,
                registered,
                now,
                slack_s=self.slack_s,
                gpu_queue=self.gpu_queue,
            )
            records = []
            for action in actions:
                outcome, detail = self._perform(action)
                state = settle(state, action, outcome, detail)
                self._seq += 1
                record = ActionRecord(
                    self._seq, action, now, outcome, detail, state.attempts[action.action_id]
                )
                self.log.append(record)
                records.append(record)
                level = (
                    logging.WARNING if action.kind == KILL or outcome == FAILED else logging.INFO
                )
                log.log(
                    level,
                    "action #%d %s (attempt %d): %s -> %s%s",
                    record.seq,
                    action.action_id,
                    record.attempt,
                    action.reason,
                    outcome,
                    f" ({detail})" if detail else "",
                )
            self.state = state
            return records

    def _perform(self, action: Action) -> tuple[str, str]:
        try:
            if action.kind == KILL:
                state = self.rm.kill_app(action.target, wait=False)
                return DONE, f"kill requested; the RM reported {state}"
            if action.kind == QUEUE:
                return self._set_queue_gpus(action.target, action.gpus)
        except RMNotFound as exc:
            if action.kind == KILL:
                return SKIPPED, f"unknown to the RM, already gone: {exc.detail}"
            return FAILED, str(exc)
        except RMError as exc:
            return FAILED, str(exc)
        return FAILED, f"unknown action kind {action.kind!r}"

    def release_queue(self) -> tuple[str, str] | None:
        """Give the GPU queue every GPU of the cluster back (``gpu_queue`` only): called when
        the bridge stops, so that YARN's own scheduler is not left capped at the last lease
        count while no arbiter leases anything (found on the real RM: a stopped demo left
        ``root.gpu`` at 4 of 8 GPUs and the next app waited for ever). After a crash the next
        start sets the count again on its first tick."""
        if not self.gpu_queue or self.state.queue_disabled is not None:
            return None
        total = self.core.snapshot().cluster.num_gpus
        try:
            outcome = self._set_queue_gpus(self.gpu_queue, total)
        except RMError as e:
            log.warning("could not give %s its %d GPUs back: %s", self.gpu_queue, total, e)
            return FAILED, str(e)
        log.info("queue %s: yarn.io/gpu back to the cluster's %d (%s)", self.gpu_queue, total,
                 outcome[1])  # fmt: skip
        return outcome

    def _set_queue_gpus(self, queue: str, gpus: int) -> tuple[str, str]:
        conf = self.rm.scheduler_conf()
        params: dict[str, str] = {}
        for key in ("capacity", "maximum-capacity"):
            current = conf.get(f"{CS_PREFIX}.{queue}.{key}")
            if current is None:
                if key == "capacity":
                    return SKIPPED, f"queue {queue} has no configured capacity"
                continue
            new = with_gpus(current, gpus)
            if new is None:
                if key == "capacity":
                    return SKIPPED, (
                        f"queue {queue} is not in absolute-resource mode ({key}={current}); "
                        "a GPU count needs a vector like [memory=...,vcores=...,yarn.io/gpu=N]"
                    )
                continue
            if new != current:
                params[key] = new
        if not params:
            return DONE, f"queue {queue} already has yarn.io/gpu={gpus}"
        self.rm.update_scheduler_conf(SchedConfUpdate(update_queue={queue: params}))
        return DONE, ", ".join(f"{k}={v}" for k, v in params.items())
