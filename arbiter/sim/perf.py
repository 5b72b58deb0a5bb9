"""Job performance model for the simulator: work and throughput as a function of placement.

Every simulated job has an amount of ``work`` and a :class:`PerfModel` whose ``rate(placement)``
is the work done per second on that GPU set. Measured data is used where the
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
* **Synergy**: the replay trace gives iterations but no iteration time; by default we take one
  iteration as one second on an ideal placement with the locality model. With
  ``sim_jobs(..., synergy_sensitivity=True)`` each job gets a :class:`SynergyPerf`
  instead: work = iterations x the model's iteration time (seconds at the GPU-proportional
  point on one machine) and a measured CPU/memory :class:`Sensitivity` (below).

**Synergy sensitivity** (Synergy §3.1, spec ``synergy.md`` §2 and §15). The shipped trace names
each job's model but carries no sensitivity data, and the paper prints no per-model matrix (only
anchors, spec §9). We therefore use the reference implementation's profiles, which the paper's
simulator ran on (*not in the paper*; msr-fiddle/synergy @ 1b013c2,
``simulator/models/<model>_1.py``, MIT like the trace): throughput per GPU on the grid
CPU = 1, 2, 3, 4, 5, 6, 9, 12, 24 cores and memory = 20.83, 62.5, 125, 187.5, 250 GB per GPU,
normalised to 1 at the proportional point (3 CPUs, 62.5 GB), and the iteration times
``iter_time`` of those files. The tables of ``alexnet``, ``shufflenet``, ``res18``, ``res50``,
``mobilenet`` and ``m5`` are copied verbatim. ``deepspeech``, ``gnmt``, ``lstm`` and
``transformer`` have no ``_1`` file in the copy we could read; we build them from the spec's
table (best CPU, best memory, speed-up 1.0) and the ``_2`` files: deepspeech 0.3 / 0.66 / 1 at
1 / 2 / >= 3 CPUs and 0.1 at 20.83 GB (the image and speech models' cache-miss column; our
assumption), the three language models flat at 1 (insensitive down to 1 CPU and 20.83 GB,
Synergy L49, L96). The same model's matrix serves every GPU count, as the reference does.
Between grid points the throughput is bilinear (the paper does not say how unprofiled points are
filled, spec §2.2); beyond the largest point it stays flat (saturated); below the smallest it
falls linearly to 0 at 0. ``W`` must be non-decreasing in both resources (more never hurts).
Storage bandwidth, the reference's fourth dimension, is not modelled.
"""

from __future__ import annotations

import bisect
import csv
import functools
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from arbiter.cluster import DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU
from arbiter.datasets import data_root
from arbiter.placement import LocalityModel, Placement, ProfileModel, SlowdownModel
from arbiter.traces import TraceError, TraceJob, load_gavel_throughputs

__all__ = [
    "PHILLY_CLASSES",
    "SYNERGY_MODELS",
    "GavelModel",
    "PerfModel",
    "PolluxModel",
    "ResourcePerfModel",
    "Sensitivity",
    "SimJob",
    "SlowdownPerf",
    "SynergyPerf",
    "philly_class",
    "sim_jobs",
    "synergy_perf",
]


class PerfModel(Protocol):
    def rate(self, placement: Placement) -> float:
        """Work per second on ``placement`` (> 0 for a non-empty placement)."""
        ...


class ResourcePerfModel(PerfModel, Protocol):
    """A perf model whose rate also depends on the job's CPUs and memory (Synergy). The engine
    calls ``rate_with`` with the job's grant; ``rate`` is the rate at a reference
    GPU-proportional allocation (used for placement choices, ideal and isolated rates)."""

    def rate_with(self, placement: Placement, cpus: float, mem_gb: float) -> float: ...


def _axis(grid: tuple[float, ...], x: float) -> tuple[tuple[int, float], ...]:
    """Interpolation weights of ``x`` on one axis (module docstring)."""
    if x >= grid[-1]:
        return ((len(grid) - 1, 1.0),)
    if x <= grid[0]:
        return ((0, max(0.0, x) / grid[0]),)
    k = bisect.bisect_right(grid, x) - 1
    t = (x - grid[k]) / (grid[k + 1] - grid[k])
    return ((k, 1.0 - t), (k + 1, t))


@dataclass(frozen=True)
class Sensitivity:
    """A job's resource sensitivity matrix W (Synergy §3.1): throughput per GPU at
    ``tput[i][k]`` for ``cpus[i]`` cores and ``mem_gb[k]`` GB *per GPU*, normalised so that the
    job's work unit is a second at the reference proportional point (module docstring)."""

    cpus: tuple[float, ...]
    mem_gb: tuple[float, ...]
    tput: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        for name, grid in (("cpus", self.cpus), ("mem_gb", self.mem_gb)):
            if not grid or grid[0] <= 0 or any(b <= a for a, b in itertools.pairwise(grid)):
                raise ValueError(f"sensitivity {name} grid must be positive and increasing")
        if len(self.tput) != len(self.cpus) or any(len(r) != len(self.mem_gb) for r in self.tput):
            raise ValueError("sensitivity tput must be len(cpus) rows of len(mem_gb) values")
        rows = self.tput
        if any(not (math.isfinite(w) and w >= 0) for r in rows for w in r):
            raise ValueError("sensitivity tput must be finite and >= 0")
        if any(b < a for r in rows for a, b in itertools.pairwise(r)) or any(
            b < a for r0, r1 in itertools.pairwise(rows) for a, b in zip(r0, r1, strict=True)
        ):
            raise ValueError("sensitivity tput must not decrease with more CPU or memory")

    @classmethod
    def flat(cls, cpus: float = 1.0, mem_gb: float = 1.0) -> Sensitivity:
        """An insensitive job: throughput 1 from ``cpus`` and ``mem_gb`` per GPU up."""
        return cls((cpus,), (mem_gb,), ((1.0,),))

    def speed(self, cpus: float, mem_gb: float) -> float:
        """Throughput with ``cpus`` cores and ``mem_gb`` GB per GPU (module docstring)."""
        return sum(
            wc * wm * self.tput[i][k]
            for i, wc in _axis(self.cpus, cpus)
            for k, wm in _axis(self.mem_gb, mem_gb)
        )

    def candidates(
        self, cap: tuple[float, float] = (math.inf, math.inf)
    ) -> tuple[tuple[float, float], ...]:
        """The profiled points, each clipped to ``cap`` (CPUs, GB per GPU), without repeats:
        the per-GPU allocations Synergy-Tune and Synergy-Opt choose from."""
        pts = {(min(c, cap[0]), min(m, cap[1])) for c in self.cpus for m in self.mem_gb}
        return tuple(sorted(pts))

    def best_case(
        self,
        floor: float = 0.0,
        eps: float = 0.0,
        cap: tuple[float, float] = (math.inf, math.inf),
    ) -> tuple[float, float]:
        """The job's best-case demand per GPU (Synergy L144, spec §2.4): the candidate with the
        fewest CPUs, then the least memory, whose throughput reaches
        ``max(floor, (1 - eps) * best)``, ``best`` the highest throughput among the candidates.
        ``floor`` is the throughput at the GPU-proportional point (the no-slowdown rule)."""
        pts = self.candidates(cap)
        speeds = [self.speed(c, m) for c, m in pts]
        target = max(floor, (1.0 - eps) * max(speeds)) - 1e-12
        return next(p for p, w in zip(pts, speeds, strict=True) if w >= target)


@dataclass(frozen=True)
class SynergyPerf:
    """Rate = W(CPUs per GPU, GB per GPU) / S(G) (module docstring). ``rate`` alone assumes
    the ``reference`` proportional point (Synergy's 3 CPUs and 62.5 GB per GPU)."""

    sensitivity: Sensitivity
    slowdown_model: SlowdownModel = field(default_factory=LocalityModel)
    reference: tuple[float, float] = (DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU)
    rated_per_gang: ClassVar[bool] = True  # work is per whole gang: no throughput curve

    def rate(self, placement: Placement) -> float:
        return self.sensitivity.speed(*self.reference) / self.slowdown_model.slowdown(placement)

    def rate_with(self, placement: Placement, cpus: float, mem_gb: float) -> float:
        g = placement.num_gpus
        w = self.sensitivity.speed(cpus / g, mem_gb / g)
        return w / self.slowdown_model.slowdown(placement)


_CPU_GRID = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 12.0, 24.0)
_MEM_GRID = (20.83, 62.5, 125.0, 187.5, 250.0)


def _rows(cpu_rows: Iterable[Iterable[float]]) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(x) for x in r) for r in cpu_rows)


def _by_cpu(per_cpu: Iterable[float], low_mem: float = 0.1) -> tuple[tuple[float, ...], ...]:
    """Rows flat in memory from 62.5 GB up, ``low_mem`` at 20.83 GB."""
    return _rows([min(low_mem, w), w, w, w, w] for w in per_cpu)


_IMG_LOW = (0.3, 0.66, 1.0, 1.25, 1.53, 1.75)  # alexnet / shufflenet, 1-6 CPUs
# model -> (iteration time in s at the proportional point, W over _CPU_GRID x _MEM_GRID).
SYNERGY_MODELS: Mapping[str, tuple[float, tuple[tuple[float, ...], ...]]] = {
    "alexnet": (
        0.6,
        _by_cpu(_IMG_LOW)
        + _rows([[0.1, 2, 2, 2, 2], [0.1, 2, 2.94, 2.94, 2.94], [0.1, 2, 2.94, 2.94, 2.94]]),
    ),
    "shufflenet": (
        0.615,
        _by_cpu(_IMG_LOW)
        + _rows([[0.1, 2, 2, 2, 2], [0.1, 2, 2.89, 2.89, 2.89], [0.1, 2, 2.89, 2.89, 2.89]]),
    ),
    "res18": (0.64, _by_cpu((0.37, 0.72, 1, 1.3, 1.53, 1.75, 2.4, 2.4, 2.4))),
    "mobilenet": (0.71, _by_cpu((0.37, 0.72, 1, 1.3, 1.49, 1.55, 1.55, 1.55, 1.55))),
    "res50": (0.78, _by_cpu((0.4, 0.74, 1, 1.15, 1.15, 1.15, 1.15, 1.15, 1.15))),
    "m5": (
        0.6,
        _by_cpu((0.3, 0.66, 1, 1.2, 1.4)) + _rows([[0.1, 1.5, 2, 2.5, 2.5]] * 4),
    ),
    "deepspeech": (0.757, _by_cpu((0.3, 0.66, 1, 1, 1, 1, 1, 1, 1))),
    "gnmt": (0.12, _rows([[1.0] * 5] * 9)),
    "lstm": (0.011, _rows([[1.0] * 5] * 9)),
    "transformer": (0.67, _rows([[1.0] * 5] * 9)),
}


@functools.cache
def synergy_perf(model: str) -> SynergyPerf:
    """The shared :class:`SynergyPerf` of a Synergy model (one object per model, so the
    simulator's per-(model, gang) caches stay small)."""
    if model not in SYNERGY_MODELS:
        raise TraceError(
            f"no Synergy sensitivity for model {model!r} (known: {', '.join(SYNERGY_MODELS)})"
        )
    return SynergyPerf(Sensitivity(_CPU_GRID, _MEM_GRID, SYNERGY_MODELS[model][1]))


@dataclass(frozen=True)
class SimJob:
    """A job as the simulator runs it: a gang of ``gang`` GPUs doing ``work``.

    ``sensitivity`` (Synergy) defaults to the perf model's, if it has one."""

    job_id: str
    arrival_s: float
    gang: int
    work: float
    perf: PerfModel = field(compare=False)
    app_id: str = ""
    queue: str = "default"
    model: str = ""
    sensitivity: Sensitivity | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.gang < 1:
            raise ValueError(f"job {self.job_id}: gang must be >= 1 GPU, got {self.gang}")
        if not (self.work > 0 and math.isfinite(self.work)):
            raise ValueError(f"job {self.job_id}: work must be positive, got {self.work}")
        if not self.app_id:
            object.__setattr__(self, "app_id", self.job_id)
        if self.sensitivity is None:
            object.__setattr__(self, "sensitivity", getattr(self.perf, "sensitivity", None))

    @property
    def demand(self) -> tuple[int, float, float] | None:
        """Best-case demand vector (GPUs, CPUs, GB), uncapped, never below the throughput at
        Synergy's default proportional point (spec §2.4); None without a sensitivity."""
        if self.sensitivity is None:
            return None
        floor = self.sensitivity.speed(DEFAULT_CPUS_PER_GPU, DEFAULT_MEM_GB_PER_GPU)
        c, m = self.sensitivity.best_case(floor)
        return self.gang, c * self.gang, m * self.gang


@dataclass(frozen=True)
class SlowdownPerf:
    """rate = 1 / S(G): work is seconds on an ideal placement."""

    slowdown_model: SlowdownModel = field(default_factory=LocalityModel)
    rated_per_gang: ClassVar[bool] = True  # work is per whole gang: no throughput curve

    def rate(self, placement: Placement) -> float:
        return 1.0 / self.slowdown_model.slowdown(placement)


@dataclass(frozen=True)
class GavelModel:
    """Measured steps/s per worker type, consolidated and unconsolidated (module docstring)."""

    job_type: str
    scale_factor: int
    rates: Mapping[str, float]  # worker type (or "<type>_unconsolidated") -> steps/s
    placement_blind: bool = False  # Gavel's own simulator: consolidated rate wherever it runs
    rated_per_gang: ClassVar[bool] = True  # one reading per (job type, scale factor)

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
    synergy_sensitivity: bool = False,
) -> list[SimJob]:
    """SimJobs for trace jobs of any format (``TraceJob.source`` picks the model).

    ``gavel_placement_blind`` uses the consolidated Gavel rate wherever a gang runs, as Gavel's
    own simulator does (it never reads the ``_unconsolidated`` readings).
    ``synergy_sensitivity`` gives Synergy jobs their measured CPU/memory sensitivity and
    iteration time (:class:`SynergyPerf`, module docstring)."""
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
        elif j.source == "synergy" and synergy_sensitivity:
            perf, model = synergy_perf(j.model), j.model
            work = float(j.total_steps or 0) * SYNERGY_MODELS[j.model][0]
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
