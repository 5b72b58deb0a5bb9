"""The motif abstraction and its algebra (thesis §4.3, T:1499-1542; App. C, T:2044-2092).

A *motif* is "a logical grouping of several point-to-point transfers" (T:1501); once issued it
holds its links until done. A comm-op (an all-reduce ``AR`` or all-to-all ``AA``) is cut into
motifs by *segmentation* of its payload and *splining* of its pattern (T:1507). Rules, with
the spec's errata fixed (spec §2.3, §7):

* R1, segmented AA / R3, segmented AR: ``seg`` segments of ⌈D/seg⌉ elements, the last ragged
  (Gap 2.1b); empty segments are dropped;
* R2, splined AA, ``ways`` = k = N/n motifs; in motif c rank i sends its full rows to the
  cyclic set {(i + c·n + m) mod N : m < n} (E4, Gap 2.2; the i→i transfer is a local copy);
  n must divide N (Gap 2.1a);
* R4, ring AR = RS → AG, each N−1 rounds (E1) towards the neighbour P_{i−1}; in RS round r
  P_i sends piece (i+r) mod N, in AG round r piece (i−1+r) mod N (spec W1);
* R5, tree AR with fan-in n: ∥ RE to each group's first rank → AR over the roots (R5 again
  while more than n roots remain, else RE + BC) → ∥ BC (E6); every stage is one motif.

Every motif carries its transfers (element ranges ``[lo, hi)`` of the rank's buffer for AR, of
row ``dst`` for AA) with a round index: rounds run in order inside a motif. :func:`execute` is
the NumPy reference of these semantics (what the data plane does over sockets), and
:func:`flows` the motif's traffic matrix for the flow simulator.

Not from the text: the cap of 16 segments x splines per comm-op (Gap 2.3) counts the
independently schedulable chains (``seg`` x ``ways``), not the stages inside one ring or tree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MAX_CHAINS",
    "CommOp",
    "ExecOption",
    "Motif",
    "Transfer",
    "execute",
    "expand",
    "flows",
    "reference",
]

MAX_CHAINS = 16


@dataclass(frozen=True, slots=True)
class Transfer:
    src: int  # rank
    dst: int
    lo: int  # element range of the buffer (AR) or of row ``dst`` (AA)
    hi: int
    round: int = 0


@dataclass(frozen=True, slots=True)
class CommOp:
    """A collective over ``n_ranks`` ranks: ``AR`` of ``size`` elements per rank, or ``AA`` of
    ``size`` elements per destination row; ``elem_bytes`` prices it."""

    name: str
    kind: str
    size: int
    n_ranks: int
    elem_bytes: int = 4

    def __post_init__(self) -> None:
        if self.kind not in ("AR", "AA"):
            raise ValueError(f"{self.name}: kind must be AR or AA, got {self.kind!r}")
        if self.size < 1 or self.n_ranks < 1 or self.elem_bytes < 1:
            raise ValueError(f"{self.name}: size, n_ranks and elem_bytes must be >= 1")


@dataclass(frozen=True, slots=True)
class ExecOption:
    """How a comm-op is cut: ``algo`` ring|tree (AR) or aa (AA), ``seg`` segments, ``ways``
    splines of an AA, the tree's fan-in ``tree_n``, and the ``channel`` (gpu|cpu)."""

    algo: str
    seg: int = 1
    ways: int = 1
    channel: str = "gpu"
    tree_n: int = 8

    def __post_init__(self) -> None:
        if self.algo not in ("ring", "tree", "aa"):
            raise ValueError(f"unknown algo {self.algo!r}")
        if self.channel not in ("gpu", "cpu"):
            raise ValueError(f"unknown channel {self.channel!r}")
        if self.seg < 1 or self.ways < 1 or self.tree_n < 2:
            raise ValueError(f"seg, ways >= 1 and tree_n >= 2: {self}")
        if self.algo != "aa" and self.ways != 1:
            raise ValueError("only an all-to-all is splined by ways")
        if self.seg * self.ways > MAX_CHAINS:
            raise ValueError(f"{self}: more than {MAX_CHAINS} motif chains (Gap 2.3)")

    @property
    def label(self) -> str:
        shape = f"{self.ways}-way" if self.algo == "aa" else self.algo
        return f"{shape}/seg{self.seg}/{self.channel}"


@dataclass(frozen=True, slots=True)
class Motif:
    """``kind`` ∈ AA RS AG RE BC; ``deps`` are motif ids of the same comm-op (the "→")."""

    id: str
    op: str
    kind: str
    channel: str
    transfers: tuple[Transfer, ...]
    deps: tuple[str, ...]
    elem_bytes: int
    striped: bool  # an AR-family motif spreads its inter-node traffic over the node's NICs

    @property
    def rounds(self) -> int:
        return 1 + max((t.round for t in self.transfers), default=0)

    @property
    def reduces(self) -> bool:
        return self.kind in ("RS", "RE")

    def ranks(self) -> frozenset[int]:
        return frozenset(r for t in self.transfers for r in (t.src, t.dst))


def _segments(size: int, seg: int) -> list[tuple[int, int]]:
    d = math.ceil(size / seg)
    return [(lo, min(lo + d, size)) for lo in range(0, size, d)]


def _ring(op: CommOp, opt: ExecOption, s: int, lo: int, hi: int) -> list[Motif]:
    n = op.n_ranks
    bounds = [lo + (hi - lo) * k // n for k in range(n + 1)]

    def piece(p: int) -> tuple[int, int]:
        return bounds[p % n], bounds[p % n + 1]

    rs = [Transfer(i, (i - 1) % n, *piece(i + r), r) for r in range(n - 1) for i in range(n)]
    ag = [Transfer(i, (i - 1) % n, *piece(i - 1 + r), r) for r in range(n - 1) for i in range(n)]
    rs = [t for t in rs if t.hi > t.lo]
    ag = [t for t in ag if t.hi > t.lo]
    base = f"{op.name}/s{s}"
    return [
        Motif(f"{base}/RS", op.name, "RS", opt.channel, tuple(rs), (), op.elem_bytes, True),
        Motif(
            f"{base}/AG",
            op.name,
            "AG",
            opt.channel,
            tuple(ag),
            (f"{base}/RS",),
            op.elem_bytes,
            True,
        ),
    ]


def _tree_stages(members: Sequence[int], fan: int) -> list[tuple[str, list[tuple[int, int]]]]:
    """R5 as stages of (kind, [(src, dst)]), recursively; RE stages then the mirrored BCs."""
    if len(members) <= 1:
        return []
    if len(members) <= fan:
        root = members[0]
        pairs = [(m, root) for m in members[1:]]
        return [("RE", pairs), ("BC", [(d, s) for s, d in pairs])]
    groups = [list(members[c : c + fan]) for c in range(0, len(members), fan)]
    up = [(m, g[0]) for g in groups for m in g[1:]]
    inner = _tree_stages([g[0] for g in groups], fan)
    return [("RE", up), *inner, ("BC", [(d, s) for s, d in up])]


def _tree(op: CommOp, opt: ExecOption, s: int, lo: int, hi: int) -> list[Motif]:
    out: list[Motif] = []
    base = f"{op.name}/s{s}"
    for k, (kind, pairs) in enumerate(_tree_stages(range(op.n_ranks), opt.tree_n)):
        deps = (out[-1].id,) if out else ()
        ts = tuple(Transfer(a, b, lo, hi) for a, b in pairs)
        out.append(
            Motif(f"{base}/{kind}{k}", op.name, kind, opt.channel, ts, deps, op.elem_bytes, True)
        )
    return out


def _aa(op: CommOp, opt: ExecOption, s: int, lo: int, hi: int) -> list[Motif]:
    n_ranks = op.n_ranks
    n = n_ranks // opt.ways
    out = []
    for c in range(opt.ways):
        ts = tuple(
            Transfer(i, (i + c * n + m) % n_ranks, lo, hi) for i in range(n_ranks) for m in range(n)
        )
        out.append(
            Motif(f"{op.name}/s{s}/c{c}", op.name, "AA", opt.channel, ts, (), op.elem_bytes, False)
        )
    return out


def expand(op: CommOp, opt: ExecOption) -> list[Motif]:
    """The motifs of ``op`` under ``opt`` (R1-R5), in program order."""
    if (op.kind == "AA") != (opt.algo == "aa"):
        raise ValueError(f"{op.name}: option {opt.algo!r} does not apply to a {op.kind}")
    if op.kind == "AA" and op.n_ranks % opt.ways:
        raise ValueError(f"{op.name}: {opt.ways}-way splining needs ways | N = {op.n_ranks}")
    build = {"ring": _ring, "tree": _tree, "aa": _aa}[opt.algo]
    motifs: list[Motif] = []
    for s, (lo, hi) in enumerate(_segments(op.size, opt.seg)):
        motifs += build(op, opt, s, lo, hi)
    return [m for m in motifs if m.transfers]


# ---- semantics ----------------------------------------------------------------------------


def reference(op: CommOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The collective itself: the sum on every rank (AR), the transpose of rows (AA)."""
    if op.kind == "AR":
        total = np.sum(np.stack(inputs), axis=0)
        return [total.copy() for _ in inputs]
    return [np.stack([inputs[i][j] for i in range(len(inputs))]) for j in range(len(inputs))]


def apply_round(
    motif: Motif, r: int, bufs: list[np.ndarray], outs: list[np.ndarray] | None
) -> None:
    """Round ``r`` of ``motif`` on every rank's buffer (sends read before any receive lands)."""
    ts = [t for t in motif.transfers if t.round == r]
    if motif.kind == "AA":
        assert outs is not None
        for t in ts:
            outs[t.dst][t.src, t.lo : t.hi] = bufs[t.src][t.dst, t.lo : t.hi]
        return
    sent = [bufs[t.src][t.lo : t.hi].copy() for t in ts]
    for t, data in zip(ts, sent, strict=True):
        if motif.reduces:
            bufs[t.dst][t.lo : t.hi] += data
        else:
            bufs[t.dst][t.lo : t.hi] = data


def execute(op: CommOp, motifs: Sequence[Motif], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``motifs`` (in an order that respects their deps) on copies of ``inputs``."""
    if len(inputs) != op.n_ranks:
        raise ValueError(f"{op.name}: {len(inputs)} inputs for {op.n_ranks} ranks")
    done: set[str] = set()
    bufs = [np.array(x, copy=True) for x in inputs]
    outs = [np.zeros_like(x) for x in inputs] if op.kind == "AA" else None
    for m in motifs:
        missing = set(m.deps) - done
        if missing:
            raise ValueError(f"motif {m.id} runs before its deps {sorted(missing)}")
        for r in range(m.rounds):
            apply_round(m, r, bufs, outs)
        done.add(m.id)
    return outs if outs is not None else bufs


def flows(motif: Motif) -> dict[tuple[int, int], int]:
    """The motif's traffic: bytes per (src, dst) rank pair, over all its rounds."""
    out: dict[tuple[int, int], int] = {}
    for t in motif.transfers:
        key = (t.src, t.dst)
        out[key] = out.get(key, 0) + (t.hi - t.lo) * motif.elem_bytes
    return out
