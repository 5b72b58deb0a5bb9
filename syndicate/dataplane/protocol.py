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

* Prefetch (Gap 3.12, Gap 4.3, T:1771): a plan's ``prefetch`` names comm-ops with δ = +1:
  iteration k's sequence issues their motifs for the app's iteration k+1 at their places.
  :func:`iteration_sequence` is iteration k's issue sequence given the previous iteration's
  plan: an op that plan did not prefetch but this one does runs first, whole, as a FIFO
  prologue (the first iteration, and the 2PC switch into a prefetching plan); an op the
  previous plan prefetched is already issued and is skipped (the switch out of one, into a
  plan or FIFO: :func:`carried`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from syndicate.motifs import CommOp, ExecOption, Motif, Transfer, expand

__all__ = [
    "FIFO_VERSION",
    "InstalledPlan",
    "ReplanTrigger",
    "TwoPhase",
    "carried",
    "fifo_plan",
    "from_schedule",
    "issued_ids",
    "iteration_sequence",
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
    prefetch: frozenset[str] = frozenset()  # comm-ops with δ = +1 (issued for k+1 in k)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefetch", frozenset(self.prefetch))
        if self.fifo and self.prefetch:
            raise ValueError("FIFO (version 0) prefetches nothing")

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
        d: dict[str, object] = {"version": self.version, "options": opts, "order": list(self.order)}
        if self.prefetch:  # absent without prefetch: older plans keep their hash
            d["prefetch"] = sorted(self.prefetch)
        return json.dumps(d, sort_keys=True)

    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> InstalledPlan:
        d = json.loads(text)
        opts = {k: ExecOption(**v) for k, v in d["options"].items()}
        return cls(int(d["version"]), opts, tuple(d["order"]), frozenset(d.get("prefetch", ())))

    def validate(self, ops: Sequence[CommOp]) -> None:
        """Raise ValueError unless the order names every motif of ``ops`` once and respects
        each comm-op's intra-op deps."""
        if self.fifo:
            return
        names = {op.name for op in ops}
        if set(self.options) != names:
            raise ValueError(f"plan covers {sorted(self.options)}, the job has {sorted(names)}")
        if not self.prefetch <= names:
            raise ValueError(f"prefetch names {sorted(self.prefetch - names)}: not in the job")
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
    options: Mapping[str, ExecOption],
    order: Sequence[str],
    version: int,
    prefetch: Collection[str] = (),
) -> InstalledPlan:
    """The plan to install from an optimizer result: its options and the periodic motif order,
    without the ``#k`` suffixes. Without ``prefetch`` that is the steady-state (second unrolled
    iteration's) order; with it (the data ops of a result that prefetches), Gap 3.12's: the
    unrolled order of iteration 1's δ = 0 motifs and iteration 2's motifs of the ``prefetch``
    ops, which the plan issues one iteration ahead."""
    if version <= FIFO_VERSION:
        raise ValueError(f"an optimizer plan's version must be > {FIFO_VERSION}")
    pf = frozenset(prefetch)
    unknown = pf - set(options)
    if unknown:
        raise ValueError(f"prefetch names {sorted(unknown)}: the plan has no such comm-op")
    split = [(m.rsplit("#", 1)[0], int(m.rsplit("#", 1)[1])) for m in order]
    if not pf:
        last = max(k for _, k in split)
        return InstalledPlan(version, dict(options), tuple(b for b, k in split if k == last))
    first = min(k for _, k in split)
    steady = tuple(b for b, k in split if k == first + (1 if b.split("/", 1)[0] in pf else 0))
    return InstalledPlan(version, dict(options), steady, pf)


def carried(prev: InstalledPlan | None) -> frozenset[str]:
    """The comm-ops whose instance for this iteration the previous iteration's plan
    already issued (its δ = +1 ops); nothing before the first iteration."""
    return frozenset() if prev is None else prev.prefetch


def iteration_sequence(
    plan: InstalledPlan, ops: Sequence[CommOp], done: Collection[str] = frozenset()
) -> list[tuple[str, int, str]]:
    """Iteration k's issue sequence under a non-FIFO ``plan`` as (comm-op, δ, motif id): the
    FIFO prologue (δ = 0, whole, in plan order) of each prefetched op not in ``done`` (the
    :func:`carried` ops, issued in iteration k-1), then ``plan.order`` with the prefetched
    ops' motifs at δ = +1 and the motifs of ``done`` ops that this plan runs at δ = 0
    dropped (they were issued, under the previous plan's options, in iteration k-1)."""
    if plan.fifo:
        raise ValueError("FIFO has no sequence: it issues whole comm-ops as submitted")
    op_of = {m.id: op.name for op in ops for m in plan.motifs(op)}
    pending = set(plan.prefetch) - set(done)
    prologue = [(op_of[mid], 0, mid) for mid in plan.order if op_of[mid] in pending]
    prologue.sort(key=lambda t: sorted(pending).index(t[0]))  # stable: op by op, in plan order
    body: list[tuple[str, int, str]] = []
    for mid in plan.order:
        name = op_of[mid]
        if name in plan.prefetch:
            body.append((name, 1, mid))
        elif name not in done:
            body.append((name, 0, mid))
    return prologue + body


def issued_ids(sequence: Sequence[tuple[str, int, str]]) -> list[str]:
    """The issue log's names for a sequence: the motif id, suffixed ``@+1`` when δ = +1."""
    return [mid if d == 0 else f"{mid}@+{d}" for _, d, mid in sequence]
