"""The execution-plan cost model (thesis T:1492, T:1494, T:1783; spec §3.4).

The optimizer needs, for a comm-op under an option, its motifs with their intra-op deps and
standalone durations. In the paper the PARAM microbenchmarks *are* the cost model (T:1783);
here :class:`MicrobenchCost` is the same idea on the flow simulator: each motif is run alone on
the topology (:func:`syndicate.flowsim.motif_time`) and its time cached, so the optimizer's
prices and the simulator's ground truth share one platform model. :class:`TableCost` gives
fixed per-option durations (one motif per comm-op), for the spec's fixtures X1-X3.

:class:`RefinedCost` is the refinement by enforcer statistics (T:1494, spec §3.4 (1) and Gap
4.5: "refresh the cost model before the search"): the motif times the ranks measure update the
prices by an EWMA (α = 0.2). A measured motif is priced at its own average; a motif never run
(another option of a comm-op) at its base price times its channel's measured/base ratio, so
that a platform slower or faster than the model, or one channel slower than the other, moves
every price of that channel, not only the options in use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from syndicate.motifs import CommOp, ExecOption, Motif, expand

__all__ = ["CostModel", "MicrobenchCost", "MotifCost", "RefinedCost", "TableCost"]


@dataclass(frozen=True, slots=True)
class MotifCost:
    id: str
    deps: tuple[str, ...]
    dur: float
    channel: str
    motif: Motif | None = None  # the algebra's motif (None for table fixtures)


class CostModel(Protocol):
    def motifs(self, op: CommOp, opt: ExecOption) -> list[MotifCost]: ...


@dataclass(frozen=True)
class TableCost:
    """One motif per comm-op, priced from ``table[(op name, option label)]`` (seconds or any
    unit). ``ExecOption.label`` is e.g. ``"ring/seg1/gpu"`` or ``"1-way/seg1/cpu"``."""

    table: Mapping[tuple[str, str], float]

    def motifs(self, op: CommOp, opt: ExecOption) -> list[MotifCost]:
        key = (op.name, opt.label)
        if key not in self.table:
            raise KeyError(f"no cost for {key}")
        return [MotifCost(f"{op.name}/m", (), self.table[key], opt.channel)]


@dataclass
class MicrobenchCost:
    """Motif durations measured standalone on the flow simulator, cached per (op, option)."""

    topology: object  # syndicate.topology.Topology (kept loose to avoid an import cycle)
    _cache: dict[tuple[CommOp, ExecOption], list[MotifCost]] = field(default_factory=dict)

    def motifs(self, op: CommOp, opt: ExecOption) -> list[MotifCost]:
        from syndicate.flowsim import motif_time

        key = (op, opt)
        hit = self._cache.get(key)
        if hit is None:
            hit = []
            seen: dict[tuple[str, int], float] = {}
            for m in expand(op, opt):
                # Segments of one op have the same shape: price each stage kind once per size.
                size = sum(t.hi - t.lo for t in m.transfers)
                sig = (m.id.rsplit("/", 1)[-1], size)
                if sig not in seen:
                    seen[sig] = motif_time(self.topology, m)  # type: ignore[arg-type]
                hit.append(MotifCost(m.id, m.deps, seen[sig], m.channel, m))
            self._cache[key] = hit
        return hit


@dataclass
class RefinedCost:
    """``base`` prices refined by measured motif times (module docstring).

    >>> from syndicate.motifs import CommOp, ExecOption
    >>> op = CommOp("emb", "AA", 24, 4, 8)
    >>> gpu, cpu = ExecOption("aa"), ExecOption("aa", channel="cpu")
    >>> cost = RefinedCost(TableCost({("emb", gpu.label): 1.0, ("emb", cpu.label): 4.0}))
    >>> cost.observe(op, gpu, "emb/m", 3.0)   # the gpu channel runs 3x slower than modelled
    >>> [m.dur for m in cost.motifs(op, gpu)], [m.dur for m in cost.motifs(op, cpu)]
    ([3.0], [12.0])
    >>> cost.observe(op, cpu, "emb/m", 2.0)   # and the cpu channel is measured at 2.0
    >>> cost.observe(op, cpu, "emb/m", 4.5)   # EWMA(0.2): 0.8 * 2.0 + 0.2 * 4.5
    >>> round(cost.motifs(op, cpu)[0].dur, 6)
    2.5
    """

    base: CostModel
    alpha: float = 0.2
    _measured: dict[tuple[str, ExecOption, str], float] = field(default_factory=dict)
    _ratio: dict[str, float] = field(default_factory=dict)  # channel -> EWMA of measured/base

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")

    @property
    def observations(self) -> int:
        """Motifs (of some comm-op under some option) measured at least once."""
        return len(self._measured)

    def _ewma(self, old: float | None, new: float) -> float:
        return new if old is None else (1 - self.alpha) * old + self.alpha * new

    def observe(self, op: CommOp, opt: ExecOption, motif_id: str, seconds: float) -> None:
        """One measured run of motif ``motif_id`` of ``op`` under ``opt``. A measurement that
        is not a finite time >= 0, or names a motif ``op`` does not have under ``opt``, is
        refused with ValueError and changes nothing."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"a motif time must be finite and >= 0, got {seconds}")
        base = {m.id: m for m in self.base.motifs(op, opt)}
        if motif_id not in base:
            raise ValueError(f"{op.name} under {opt.label} has no motif {motif_id!r}")
        key = (op.name, opt, motif_id)
        self._measured[key] = self._ewma(self._measured.get(key), seconds)
        if base[motif_id].dur > 0:
            ch = base[motif_id].channel
            self._ratio[ch] = self._ewma(self._ratio.get(ch), seconds / base[motif_id].dur)

    def ratio(self, channel: str) -> float:
        """Measured over base for ``channel``: its own EWMA, else the mean over the measured
        channels, else 1 (nothing measured yet)."""
        if channel in self._ratio:
            return self._ratio[channel]
        return sum(self._ratio.values()) / len(self._ratio) if self._ratio else 1.0

    def motifs(self, op: CommOp, opt: ExecOption) -> list[MotifCost]:
        out = []
        for m in self.base.motifs(op, opt):
            got = self._measured.get((op.name, opt, m.id))
            out.append(replace(m, dur=got if got is not None else m.dur * self.ratio(m.channel)))
        return out
