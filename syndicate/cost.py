"""The execution-plan cost model (thesis T:1492, T:1494, T:1783; spec §3.4).

The optimizer needs, for a comm-op under an option, its motifs with their intra-op deps and
standalone durations. In the paper the PARAM microbenchmarks *are* the cost model (T:1783);
here :class:`MicrobenchCost` is the same idea on the flow simulator: each motif is run alone on
the topology (:func:`syndicate.flowsim.motif_time`) and its time cached, so the optimizer's
prices and the simulator's ground truth share one platform model. :class:`TableCost` gives
fixed per-option durations (one motif per comm-op), for the spec's fixtures X1-X3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from syndicate.motifs import CommOp, ExecOption, Motif, expand

__all__ = ["CostModel", "MicrobenchCost", "MotifCost", "TableCost"]


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
