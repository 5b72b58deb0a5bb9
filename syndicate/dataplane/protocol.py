"""The data plane's pure parts (thesis §4.4.3-4.4.4, T:1617-1691; spec §4): the installed plan
and its wire form, the re-plan trigger, the two-phase-commit participant's state machine, and
the per-rank execution of one motif's rounds.

* :class:`InstalledPlan` is what every enforcer holds: an option per comm-op and the sequence
  of motif ids of one iteration (Pseudocode 5's ``E`` and ``S``; strictly increasing sequence
  numbers, Gap 4.2). Version 0 is FIFO: comm-ops "as-is, one-at-a-time and in-order" (T:1674).
  Its JSON and SHA-256 travel in ``Prepare`` (Gap 4.7).
* :class:`ReplanTrigger`: re-plan iff the busy-waits add up to more than 5 % of the iteration
  (T:1672) in each of W consecutive iterations (Gap 4.5, W = 10 by default).
* :class:`TwoPhase`: a rank votes YES with its current iteration k_r; the coordinator commits
  with ``activate_at = max k_r + 2``; a prepared rank never passes iteration ``k_r + 2`` without
  a decision (Gap 4.7b). NO or a timeout aborts, and the old plan stays everywhere.
* :func:`rank_rounds`: what rank r sends and receives in each round of a motif.
* :func:`motif_key` / :func:`parse_motif_key`: how a measured motif time names its comm-op,
  option and motif on the wire (the enforcer statistics the optimizer receives, T:1494).

Not done: the prefetch of the next batch's data-prep (δ = +1 ops, Gap 4.3) — every comm-op
here belongs to its own iteration.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from syndicate.motifs import CommOp, ExecOption, Motif, Transfer, expand

__all__ = [
    "FIFO_VERSION",
    "InstalledPlan",
    "ReplanTrigger",
    "TwoPhase",
    "fifo_plan",
    "from_schedule",
    "motif_key",
    "parse_motif_key",
    "rank_rounds",
]

FIFO_VERSION = 0


@dataclass(frozen=True)
class InstalledPlan:
    version: int
    options: Mapping[str, ExecOption]
    order: tuple[str, ...]  # motif ids of one iteration, by sequence number

    def motifs(self, op: CommOp) -> list[Motif]:
        return expand(op, self.options[op.name])

    @property
    def fifo(self) -> bool:
        return self.version == FIFO_VERSION

    def to_json(self) -> str:
        opts = {
            k: {
                "algo": o.algo,
                "seg": o.seg,
                "ways": o.ways,
                "channel": o.channel,
                "tree_n": o.tree_n,
            }
            for k, o in sorted(self.options.items())
        }
        return json.dumps(
            {"version": self.version, "options": opts, "order": list(self.order)}, sort_keys=True
        )

    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> InstalledPlan:
        d = json.loads(text)
        opts = {k: ExecOption(**v) for k, v in d["options"].items()}
        return cls(int(d["version"]), opts, tuple(d["order"]))

    def validate(self, ops: Sequence[CommOp]) -> None:
        """Raise ValueError unless the order names every motif of ``ops`` once and respects
        each comm-op's intra-op deps."""
        if self.fifo:
            return
        names = {op.name for op in ops}
        if set(self.options) != names:
            raise ValueError(f"plan covers {sorted(self.options)}, the job has {sorted(names)}")
        motifs = {m.id: m for op in ops for m in self.motifs(op)}
        if sorted(self.order) != sorted(motifs):
            raise ValueError("the order must name every motif of the plan exactly once")
        seen: set[str] = set()
        for mid in self.order:
            if set(motifs[mid].deps) - seen:
                raise ValueError(f"motif {mid} is ordered before its deps")
            seen.add(mid)


def motif_key(op_name: str, opt: ExecOption, motif_id: str) -> str:
    """The wire name of motif ``motif_id`` of comm-op ``op_name`` run under ``opt`` (motif
    ids alone are not unique across options: every option's first chunk is ``op/s0/...``).

    >>> key = motif_key("emb", ExecOption("aa", seg=2, ways=2, channel="cpu"), "emb/s1/c0")
    >>> key
    'emb|aa|2|2|cpu|8|emb/s1/c0'
    >>> parse_motif_key(key) == ("emb", ExecOption("aa", seg=2, ways=2, channel="cpu"), "emb/s1/c0")
    True
    """
    o = opt
    return f"{op_name}|{o.algo}|{o.seg}|{o.ways}|{o.channel}|{o.tree_n}|{motif_id}"


def parse_motif_key(key: str) -> tuple[str, ExecOption, str]:
    """The inverse of :func:`motif_key`; ValueError for anything else."""
    parts = key.split("|")
    if len(parts) != 7:
        raise ValueError(f"not a motif key: {key!r}")
    name, algo, seg, ways, channel, tree_n, mid = parts
    try:
        opt = ExecOption(algo, seg=int(seg), ways=int(ways), channel=channel, tree_n=int(tree_n))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a motif key: {key!r}: {exc}") from None
    return name, opt, mid


def fifo_plan(ops: Sequence[CommOp]) -> InstalledPlan:
    """Version 0: each comm-op unmodified (ring AR, 1-way AA) on ``gpu``, in submission order."""
    opts = {op.name: ExecOption("ring" if op.kind == "AR" else "aa") for op in ops}
    return InstalledPlan(FIFO_VERSION, opts, ())


@dataclass
class ReplanTrigger:
    """Fires iff Σwait > ``threshold`` · T_iter in each of ``window`` consecutive iterations."""

    threshold: float = 0.05
    window: int = 10
    _streak: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1 or self.window < 1:
            raise ValueError("threshold in (0, 1) and window >= 1")

    def feed(self, wait_s: float, iter_s: float) -> bool:
        if iter_s <= 0:
            raise ValueError(f"iteration time must be > 0, got {iter_s}")
        self._streak = self._streak + 1 if wait_s > self.threshold * iter_s else 0
        if self._streak >= self.window:
            self._streak = 0
            return True
        return False


@dataclass
class TwoPhase:
    """A rank's 2PC state (Gap 4.7b). ``boundary(k)`` is asked at the start of iteration k and
    answers the plan to run, or None: wait for the decision."""

    current: InstalledPlan
    pending: InstalledPlan | None = None
    voted_at: int | None = None
    activate_at: int | None = None
    history: list[tuple[int, int]] = field(default_factory=list)  # (iteration, version)

    def prepare(self, plan: InstalledPlan, sha: str, iteration: int, ok: bool = True) -> bool:
        """Vote on ``plan`` at ``iteration``; NO if its hash or contents are wrong."""
        if self.pending is not None:
            return False  # one decision at a time
        if not ok or plan.sha256() != sha or plan.version <= self.current.version:
            return False
        self.pending, self.voted_at, self.activate_at = plan, iteration, None
        return True

    def commit(self, version: int, activate_at: int) -> None:
        if self.pending is None or self.pending.version != version:
            raise ValueError(f"commit of version {version} without a matching prepare")
        if self.voted_at is not None and activate_at < self.voted_at + 2:
            raise ValueError(f"activate_at {activate_at} is before this rank may switch")
        self.activate_at = activate_at

    def abort(self, version: int) -> None:
        if self.pending is not None and self.pending.version == version:
            self.pending, self.voted_at, self.activate_at = None, None, None

    def boundary(self, k: int) -> InstalledPlan | None:
        if self.pending is not None:
            if self.activate_at is None:
                assert self.voted_at is not None
                if k >= self.voted_at + 2:
                    return None  # undecided: wait here, never time out alone
            elif k >= self.activate_at:
                self.current = self.pending
                self.pending, self.voted_at, self.activate_at = None, None, None
        self.history.append((k, self.current.version))
        return self.current


def rank_rounds(motif: Motif, rank: int) -> list[tuple[list[Transfer], list[Transfer]]]:
    """Per round of ``motif``: the transfers ``rank`` sends and those it receives."""
    out: list[tuple[list[Transfer], list[Transfer]]] = [([], []) for _ in range(motif.rounds)]
    for t in motif.transfers:
        if t.src == rank:
            out[t.round][0].append(t)
        if t.dst == rank:
            out[t.round][1].append(t)
    return out


def from_schedule(
    options: Mapping[str, ExecOption], order: Sequence[str], version: int
) -> InstalledPlan:
    """The plan to install from an optimizer result: its options and the steady-state
    (second unrolled iteration's) motif order, without the ``#k`` suffixes."""
    if version <= FIFO_VERSION:
        raise ValueError(f"an optimizer plan's version must be > {FIFO_VERSION}")
    last = max(int(m.rsplit("#", 1)[1]) for m in order)
    steady = tuple(m.rsplit("#", 1)[0] for m in order if m.endswith(f"#{last}"))
    return InstalledPlan(version, dict(options), steady)
