"""Job performance model for the simulator: work and throughput as a function of placement.

Every simulated job has an amount of ``work`` and a :class:`PerfModel` whose ``rate(placement)``
is the work done per second on that GPU set (issue 4, item 3). Measured data is used where the
trace has it:

* **Gavel** (``simulation_throughputs.json``): work = ``total_steps``; rate = the measured steps/s
  of ``(job_type, scale_factor)`` alone on the worker type. A job whose GPUs sit on one machine
  uses the consolidated reading, one spread over machines the ``<type>_unconsolidated`` reading
  (Gavel measured both). A job spread over several GPU types runs at its slowest type's rate
  (synchronous data parallelism waits for the slowest worker; our choice, Gavel never mixes).
  Gavel's own simulator ignores placement (it never reads the unconsolidated readings);
  ``placement_blind=True`` reproduces that for comparisons with its published numbers.
* **Pollux** (``profiles/<model>``): work = the steps the model needed to converge at the job's
  batch size, read as the last ``iteration`` of ``validation-<B>.csv`` (statistical efficiency is
  in the data: cifar10 needs 39,062 steps at B=128 and 3,178 at B=2048). For another B the
  nearest measured curve is scaled by B_curve / B. Rate = 1 / step_time for the placement's
  per-machine GPU counts at local batch B / n, from ``placements.csv``; the nearest measured local
  batch is scaled linearly (gradient accumulation beyond what was measured). A placement the
  profile never measured falls back to the densest measured placement of that size times the
  locality model's slowdown.
* **Philly / Tiresias** (durations): work = the measured duration in seconds (taken as the run
  time on an ideal placement); rate = 1 / S(G). Philly jobs carry no model, so each gets a
  *model class by GPU-time*, the way Pollux's workload generator mapped Philly jobs to its
  profiled models: < 0.1 GPU-h ncf, < 1 cifar10, < 5 deepspeech2, < 25 yolov3, < 100 bert,
  else imagenet; S(G) is then that model's measured placement sensitivity (``ProfileModel``).
  Tiresias jobs use the 4-level locality model.
* **Synergy**: the replay trace gives iterations but no iteration time; we take one iteration as
  one second on an ideal placement with the locality model (the Synergy issue brings measured
  per-model sensitivities).
"""

from __future__ import annotations

import bisect
import csv
import functools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from arbiter.datasets import data_root
from arbiter.placement import LocalityModel, Placement, ProfileModel, SlowdownModel
from arbiter.traces import TraceError, TraceJob, load_gavel_throughputs

__all__ = [
    "PHILLY_CLASSES",
    "GavelModel",
    "PerfModel",
    "PolluxModel",
    "SimJob",
    "SlowdownPerf",
    "philly_class",
    "sim_jobs",
]


class PerfModel(Protocol):
    def rate(self, placement: Placement) -> float:
        """Work per second on ``placement`` (> 0 for a non-empty placement)."""
        ...


@dataclass(frozen=True)
class SimJob:
    """A job as the simulator runs it: a gang of ``gang`` GPUs doing ``work``."""

    job_id: str
    arrival_s: float
    gang: int
    work: float
    perf: PerfModel = field(compare=False)
    app_id: str = ""
    queue: str = "default"
    model: str = ""

    def __post_init__(self) -> None:
        if self.gang < 1:
            raise ValueError(f"job {self.job_id}: gang must be >= 1 GPU, got {self.gang}")
        if not (self.work > 0 and math.isfinite(self.work)):
            raise ValueError(f"job {self.job_id}: work must be positive, got {self.work}")
        if not self.app_id:
            object.__setattr__(self, "app_id", self.job_id)


@dataclass(frozen=True)
class SlowdownPerf:
    """rate = 1 / S(G): work is seconds on an ideal placement."""

    slowdown_model: SlowdownModel = field(default_factory=LocalityModel)

    def rate(self, placement: Placement) -> float:
        return 1.0 / self.slowdown_model.slowdown(placement)


@dataclass(frozen=True)
class GavelModel:
    """Measured steps/s per worker type, consolidated and unconsolidated (module docstring)."""

    job_type: str
    scale_factor: int
    rates: Mapping[str, float]  # worker type (or "<type>_unconsolidated") -> steps/s
    placement_blind: bool = False  # Gavel's own simulator: consolidated rate wherever it runs

    @classmethod
    def from_table(
        cls, table: Mapping, job_type: str, scale_factor: int, placement_blind: bool = False
    ) -> GavelModel:
        key = f"('{job_type}', {scale_factor})"
        rates = {wt: float(per[key]["null"]) for wt, per in table.items() if key in per}
        if not any(not wt.endswith("_unconsolidated") for wt in rates):
            raise TraceError(f"no Gavel throughput for {job_type!r} x{scale_factor}")
        return cls(job_type, scale_factor, rates, placement_blind)

    def rate(self, placement: Placement) -> float:
        spread = len(placement.per_machine) > 1 and not self.placement_blind
        out = math.inf
        for gtype in placement.gpu_types:
            r = self.rates.get(f"{gtype}_unconsolidated") if spread else None
            if r is None:
                r = self.rates.get(gtype)
                if r is None:
                    raise KeyError(f"no Gavel throughput for {self.job_type!r} on {gtype!r}")
                if spread:
                    r /= LocalityModel().slowdown(placement)
            out = min(out, r)
        return out


@dataclass(frozen=True)
class PolluxModel:
    """Measured step time per placement and local batch size (module docstring)."""

    model: str
    batch_size: int
    step_time: Mapping[tuple[int, ...], tuple[tuple[int, float], ...]]  # key -> ((bsz, s), ..)
    fallback: LocalityModel = field(default_factory=LocalityModel)

    def _time(self, key: tuple[int, ...], local_bsz: float) -> float | None:
        points = self.step_time.get(key)
        if not points:
            return None
        sizes = [b for b, _ in points]
        k = bisect.bisect_left(sizes, local_bsz)
        near = min(
            (i for i in (k - 1, k) if 0 <= i < len(points)),
            key=lambda i: abs(math.log(sizes[i] / local_bsz)),
        )
        b, t = points[near]
        return t * max(1.0, local_bsz / b) if local_bsz > b else t

    def rate(self, placement: Placement) -> float:
        n = placement.num_gpus
        local = self.batch_size / n
        t = self._time(placement.per_machine, local)
        if t is None:
            same = sorted((k for k in self.step_time if sum(k) == n), key=lambda k: (len(k), k))
            base = self._time(same[0], local) if same else None
            if base is None:  # size never measured: scale the single-GPU time
                base = self._time((1,), self.batch_size) or 1.0
                base /= n
            t = base * self.fallback.slowdown(placement)
        return 1.0 / t


@functools.cache
def _pollux_profile(root: Path, model: str) -> Mapping[tuple[int, ...], tuple]:
    path = root / "pollux" / "profiles" / model / "placements.csv"
    if not path.is_file():
        raise TraceError(f"no Pollux profile for model {model!r} ({path} missing)")
    acc: dict[tuple[int, ...], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as fh:
        for lineno, rec in enumerate(csv.DictReader(fh), start=2):
            try:
                key = tuple(sorted((int(ch) for ch in rec["placement"]), reverse=True))
                acc[key][int(rec["local_bsz"])].append(float(rec["step_time"]))
            except (KeyError, ValueError) as exc:
                raise TraceError(f"{path}:{lineno}: bad row: {exc}") from None
    return {
        key: tuple(sorted((b, sum(ts) / len(ts)) for b, ts in by_b.items()))
        for key, by_b in acc.items()
    }


@functools.cache
def _pollux_steps(root: Path, model: str, batch_size: int) -> float:
    """Steps to converge at ``batch_size`` (module docstring)."""
    curves = {}
    for path in (root / "pollux" / "profiles" / model).glob("validation-*.csv"):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        if rows:
            curves[int(path.stem.split("-")[1])] = float(rows[-1]["iteration"])
    if not curves:
        raise TraceError(f"no Pollux validation curves for model {model!r}")
    b = min(curves, key=lambda c: abs(math.log(c / batch_size)))
    return curves[b] * b / batch_size


@functools.cache
def _profile_perf(root: Path, model: str) -> SlowdownPerf:
    """One shared model object per class, so per-(model, gang) caches stay small."""
    return SlowdownPerf(
        ProfileModel.from_pollux_csv(root / "pollux" / "profiles" / model / "placements.csv")
    )


PHILLY_CLASSES: tuple[tuple[float, str], ...] = (
    (0.1, "ncf"),
    (1.0, "cifar10"),
    (5.0, "deepspeech2"),
    (25.0, "yolov3"),
    (100.0, "bert"),
    (math.inf, "imagenet"),
)


def philly_class(gpu_time_s: float) -> str:
    """The Pollux model standing in for a Philly job of this GPU-time (module docstring)."""
    hours = gpu_time_s / 3600.0
    return next(model for bound, model in PHILLY_CLASSES if hours < bound)


def sim_jobs(
    jobs: Iterable[TraceJob],
    *,
    data: str | Path | None = None,
    gavel_throughputs: Mapping | None = None,
    gavel_placement_blind: bool = False,
) -> list[SimJob]:
    """SimJobs for trace jobs of any format (``TraceJob.source`` picks the model).

    ``gavel_placement_blind`` uses the consolidated Gavel rate wherever a gang runs, as Gavel's
    own simulator does (it never reads the ``_unconsolidated`` readings)."""
    root = Path(data) if data is not None else data_root()
    out = []
    locality = SlowdownPerf()
    for j in jobs:
        if j.source == "gavel":
            if gavel_throughputs is None:
                gavel_throughputs = load_gavel_throughputs(
                    root / "gavel" / "simulation_throughputs.json"
                )
            perf: PerfModel = GavelModel.from_table(
                gavel_throughputs, j.model, j.num_gpus, gavel_placement_blind
            )
            work = float(j.total_steps or 0)
            model = j.model
        elif j.source == "pollux":
            bsz = int(j.batch_size or 0)
            if bsz < 1:
                raise TraceError(f"Pollux job {j.job_id} has no batch size")
            perf = PolluxModel(j.model, bsz, _pollux_profile(root, j.model))
            work = _pollux_steps(root, j.model, bsz)
            model = j.model
        elif j.source == "philly":
            model = philly_class(j.gpu_time_s or 0.0)
            perf = _profile_perf(root, model)
            work = float(j.duration_s or 0)
        elif j.source == "tiresias":
            perf, work, model = locality, float(j.duration_s or 0), j.model
        elif j.source == "synergy":
            perf, work, model = locality, float(j.total_steps or 0), j.model
        else:
            raise TraceError(f"job {j.job_id}: unknown trace source {j.source!r}")
        if not work > 0:
            work = 1.0  # a zero-length record (Philly has some) still arrives and leaves
        out.append(
            SimJob(j.job_id, j.arrival_s, j.num_gpus, work, perf, queue=j.queue, model=model)
        )
    return out
