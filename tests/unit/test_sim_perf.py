"""The simulator's performance model, ``arbiter.sim.perf``, against the public data itself.

Every expected value here is read from ``../shared/data`` with the standard library (``json``,
``csv``), independently of the readers under test.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict

import pytest

from arbiter.cluster import Cluster, Machine, shorthand_cluster
from arbiter.datasets import data_root
from arbiter.placement import LocalityModel, placement_of
from arbiter.policies.base import ideal_rate
from arbiter.sim.perf import (
    PHILLY_CLASSES,
    GavelModel,
    PolluxModel,
    SimJob,
    SlowdownPerf,
    philly_class,
    sim_jobs,
)
from arbiter.traces import TraceError, TraceJob, read_trace

DATA = data_root()
PROFILES = DATA / "pollux" / "profiles"
GAVEL_TABLE = json.loads((DATA / "gavel" / "simulation_throughputs.json").read_text())


def _gavel(worker: str, job_type: str, scale: int) -> float | None:
    """Steps/s straight from the JSON (None if that worker type has no reading)."""
    per = GAVEL_TABLE[worker].get(f"('{job_type}', {scale})")
    return None if per is None else float(per["null"])


def _last_iteration(model: str, batch: int) -> float:
    with open(PROFILES / model / f"validation-{batch}.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return float(rows[-1]["iteration"])


def _step_times(model: str) -> dict[tuple[tuple[int, ...], int], float]:
    """(per-machine counts sorted descending, local_bsz) -> mean step_time, from the CSV."""
    acc: dict[tuple[tuple[int, ...], int], list[float]] = defaultdict(list)
    with open(PROFILES / model / "placements.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            key = tuple(sorted((int(c) for c in row["placement"]), reverse=True))
            acc[key, int(row["local_bsz"])].append(float(row["step_time"]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _pollux(model: str, batch: int) -> PolluxModel:
    """The PolluxModel ``sim_jobs`` builds for one Pollux job of ``model`` at ``batch``."""
    job = TraceJob("p", 0.0, 1, model=model, batch_size=batch, source="pollux")
    (sim,) = sim_jobs([job], data=DATA)
    assert isinstance(sim.perf, PolluxModel)
    return sim.perf


def _gpus_on(cluster: Cluster, per_machine: dict[str, int]) -> list[str]:
    """The first ``n`` GPUs of each named machine."""
    out = []
    for machine, n in per_machine.items():
        ids = [g.id for g in cluster.gpus if g.machine == machine]
        assert len(ids) >= n
        out += ids[:n]
    return out


# --- Gavel --------------------------------------------------------------------------------


def _gavel_cluster() -> Cluster:
    """One 4-GPU v100 machine plus single-GPU v100 / p100 / k80 machines, one rack per type."""
    machines = [
        Machine("v100-big", "rack-v100", 1, 4, "v100"),
        Machine("v100-000", "rack-v100", 1, 1, "v100"),
        Machine("v100-001", "rack-v100", 1, 1, "v100"),
        Machine("p100-000", "rack-p100", 1, 1, "p100"),
        Machine("k80-000", "rack-k80", 1, 1, "k80"),
        Machine("k80-001", "rack-k80", 1, 1, "k80"),
    ]
    return Cluster.from_machines("gavel-mixed", machines)


def test_gavel_consolidated_vs_unconsolidated() -> None:
    job_type = "ResNet-18 (batch size 64)"
    cons, uncons = _gavel("v100", job_type, 2), _gavel("v100_unconsolidated", job_type, 2)
    assert cons is not None and uncons is not None and cons != uncons  # 74.14 vs 31.48
    model = GavelModel.from_table(GAVEL_TABLE, job_type, 2)
    cluster = _gavel_cluster()
    one_machine = placement_of(cluster, _gpus_on(cluster, {"v100-big": 2}))
    two_machines = placement_of(cluster, _gpus_on(cluster, {"v100-000": 1, "v100-001": 1}))
    assert model.rate(one_machine) == pytest.approx(cons, rel=1e-12)
    assert model.rate(two_machines) == pytest.approx(uncons, rel=1e-12)
    # Single-GPU jobs always read the consolidated number.
    m1 = GavelModel.from_table(GAVEL_TABLE, job_type, 1)
    for machine, worker in (("v100-000", "v100"), ("p100-000", "p100"), ("k80-000", "k80")):
        got = m1.rate(placement_of(cluster, _gpus_on(cluster, {machine: 1})))
        assert got == pytest.approx(_gavel(worker, job_type, 1), rel=1e-12)


def test_gavel_mixed_types_run_at_the_slowest() -> None:
    job_type = "ResNet-18 (batch size 64)"
    model = GavelModel.from_table(GAVEL_TABLE, job_type, 2)
    cluster = _gavel_cluster()
    v100_k80 = placement_of(cluster, _gpus_on(cluster, {"v100-000": 1, "k80-000": 1}))
    v100_p100 = placement_of(cluster, _gpus_on(cluster, {"v100-000": 1, "p100-000": 1}))
    slow_k = min(
        _gavel("v100_unconsolidated", job_type, 2), _gavel("k80_unconsolidated", job_type, 2)
    )
    slow_p = min(
        _gavel("v100_unconsolidated", job_type, 2), _gavel("p100_unconsolidated", job_type, 2)
    )
    assert model.rate(v100_k80) == pytest.approx(slow_k, rel=1e-12)
    assert model.rate(v100_p100) == pytest.approx(slow_p, rel=1e-12)
    two_v100 = placement_of(cluster, _gpus_on(cluster, {"v100-000": 1, "v100-001": 1}))
    assert model.rate(v100_k80) < model.rate(two_v100)


def test_gavel_missing_unconsolidated_falls_back_to_locality() -> None:
    """ResNet-50 (bs 64) x2 has no ``k80_unconsolidated`` reading: consolidated / S(G)."""
    job_type = "ResNet-50 (batch size 64)"
    assert _gavel("k80_unconsolidated", job_type, 2) is None
    k80 = _gavel("k80", job_type, 2)
    assert k80 is not None and k80 > 0
    model = GavelModel.from_table(GAVEL_TABLE, job_type, 2)
    cluster = _gavel_cluster()
    same_rack = placement_of(cluster, _gpus_on(cluster, {"k80-000": 1, "k80-001": 1}))
    assert model.rate(same_rack) == pytest.approx(k80 / 1.1, rel=1e-12)
    # A k80 + p100 pair is cross-rack (one rack per type): k80 / 1.3 against p100 uncons.
    cross = placement_of(cluster, _gpus_on(cluster, {"k80-000": 1, "p100-000": 1}))
    want = min(k80 / 1.3, _gavel("p100_unconsolidated", job_type, 2))
    assert model.rate(cross) == pytest.approx(want, rel=1e-12)


def test_gavel_no_throughput_is_zero_not_an_error() -> None:
    """ResNet-50 (bs 128) x2 does not fit a K80 (reading 0.0): rate 0, which placement skips."""
    job_type = "ResNet-50 (batch size 128)"
    assert _gavel("k80", job_type, 2) == 0.0
    model = GavelModel.from_table(GAVEL_TABLE, job_type, 2)
    cluster = shorthand_cluster("gavel:2:2:2")
    k80s = [g.id for g in cluster.gpus if g.gpu_type == "k80"]
    assert model.rate(placement_of(cluster, k80s)) == 0.0
    # The ideal placement on an empty cluster is two v100s (the fastest type).
    assert ideal_rate(cluster, 2, model) == pytest.approx(
        _gavel("v100_unconsolidated", job_type, 2), rel=1e-12
    )


def test_gavel_unknown_job_type() -> None:
    with pytest.raises(TraceError, match="No Such Model"):
        GavelModel.from_table(GAVEL_TABLE, "No Such Model", 1)


# --- Pollux -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "batch"),
    [("cifar10", 2048), ("cifar10", 128), ("bert", 96), ("imagenet", 3200), ("ncf", 8192)],
)
def test_pollux_work_is_last_iteration_of_the_curve(model: str, batch: int) -> None:
    job = TraceJob("p", 0.0, 4, model=model, batch_size=batch, source="pollux")
    (sim,) = sim_jobs([job], data=DATA)
    assert sim.work == _last_iteration(model, batch)


def test_pollux_cifar10_numbers_from_the_docstring() -> None:
    assert _last_iteration("cifar10", 2048) == 3178
    assert _last_iteration("cifar10", 128) == 39062
    jobs = [
        TraceJob("a", 0.0, 4, model="cifar10", batch_size=2048, source="pollux"),
        TraceJob("b", 0.0, 1, model="cifar10", batch_size=128, source="pollux"),
    ]
    assert [j.work for j in sim_jobs(jobs, data=DATA)] == [3178.0, 39062.0]


def test_pollux_unmeasured_batch_scales_the_nearest_curve() -> None:
    # Curves at 1024, 2048, 4096. B=3000: |ln(4096/3000)| = 0.31 < |ln(2048/3000)| = 0.38.
    # B=1500: |ln(2048/1500)| = 0.31 < |ln(1024/1500)| = 0.38. B=2000: 2048 is nearest.
    cases = {3000: 4096, 1500: 2048, 2000: 2048, 100: 128, 9000: 4096}
    for batch, curve in cases.items():
        job = TraceJob("p", 0.0, 1, model="cifar10", batch_size=batch, source="pollux")
        (sim,) = sim_jobs([job], data=DATA)
        want = _last_iteration("cifar10", curve) * curve / batch
        assert sim.work == pytest.approx(want, rel=1e-12), batch


def test_pollux_rate_on_measured_placements() -> None:
    """rate = 1 / step_time at the placement's per-machine counts and local batch B / n."""
    times = _step_times("cifar10")
    cluster = shorthand_cluster("nodes:6:4")
    cases = [
        # (batch, {machine: gpus}, profile key, local batch measured exactly)
        (1024, {"node-000": 1}, (1,), 1024),
        (2048, {"node-000": 1, "node-001": 1}, (1, 1), 1024),  # "11": 2 machines x 1 GPU
        (2048, {"node-000": 2}, (2,), 1024),
        (128, {"node-000": 4}, (4,), 32),
        # 2+2+1+1 GPUs: "1122", "1212", ... are one shape, the readings are averaged.
        (192, {"node-000": 2, "node-001": 2, "node-002": 1, "node-003": 1}, (2, 2, 1, 1), 32),
    ]
    for batch, where, key, local in cases:
        perf = _pollux("cifar10", batch)
        got = perf.rate(placement_of(cluster, _gpus_on(cluster, where)))
        assert got == pytest.approx(1.0 / times[key, local], rel=1e-12), (batch, where)
    # "11" beats "2" at local batch 1024 in the data (0.722 s vs 0.838 s): measured, not modelled.
    assert times[(1, 1), 1024] < times[(2,), 1024]


def test_pollux_2211_really_averages_several_rows() -> None:
    with open(PROFILES / "cifar10" / "placements.csv", newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if sorted(r["placement"]) == ["1", "1", "2", "2"] and r["local_bsz"] == "32"
        ]
    assert len({r["placement"] for r in rows}) >= 2  # e.g. 1122 and 1212
    mean = sum(float(r["step_time"]) for r in rows) / len(rows)
    cluster = shorthand_cluster("nodes:4:2")
    gpus = _gpus_on(cluster, {"node-000": 2, "node-001": 2, "node-002": 1, "node-003": 1})
    assert _pollux("cifar10", 192).rate(placement_of(cluster, gpus)) == pytest.approx(1 / mean)


def test_pollux_local_batch_beyond_the_measured_scales_linearly() -> None:
    # B=4096 on 2 GPUs of one machine: local 2048 > largest measured 1024 -> 2 x t(2, 1024).
    times = _step_times("cifar10")
    cluster = shorthand_cluster("nodes:1:4")
    got = _pollux("cifar10", 4096).rate(placement_of(cluster, _gpus_on(cluster, {"node-000": 2})))
    assert got == pytest.approx(1.0 / (2 * times[(2,), 1024]), rel=1e-12)


def test_pollux_unmeasured_placement_falls_back() -> None:
    times = _step_times("cifar10")
    # 16 GPUs as 8 machines x 2: never measured; the only measured 16-GPU shape is 4x4, times
    # the cross-machine slowdown (all 8 machines are in one rack of 16).
    cluster = shorthand_cluster("nodes:8:2")
    perf = _pollux("cifar10", 512)  # local batch 32, measured
    got = perf.rate(placement_of(cluster, cluster.gpu_ids))
    assert got == pytest.approx(1.0 / (times[(4, 4, 4, 4), 32] * 1.1), rel=1e-12)
    # 17 GPUs: no measured shape of that size -> single-GPU time at the whole batch / 17, and
    # 17 one-GPU machines span two racks (16 per rack) -> cross-rack 1.3.
    cluster = shorthand_cluster("nodes:17:1")
    perf = _pollux("cifar10", 1024)
    got = perf.rate(placement_of(cluster, cluster.gpu_ids))
    assert got == pytest.approx(17.0 / (times[(1,), 1024] * 1.3), rel=1e-12)


def test_pollux_missing_model_and_batch() -> None:
    with pytest.raises(TraceError, match="no-such-model"):
        sim_jobs([TraceJob("p", 0, 1, model="no-such-model", batch_size=64, source="pollux")])
    with pytest.raises(TraceError, match="batch size"):
        sim_jobs([TraceJob("p", 0, 1, model="cifar10", source="pollux")])


# --- Philly classes and the other formats ----------------------------------------------------


@pytest.mark.parametrize(
    ("hours", "model"),
    [
        (0.0, "ncf"),
        (0.0999, "ncf"),
        (0.1, "cifar10"),
        (0.999, "cifar10"),
        (1.0, "deepspeech2"),
        (4.99, "deepspeech2"),
        (5.0, "yolov3"),
        (24.99, "yolov3"),
        (25.0, "bert"),
        (99.99, "bert"),
        (100.0, "imagenet"),
        (1e6, "imagenet"),
    ],
)
def test_philly_class_thresholds(hours: float, model: str) -> None:
    assert philly_class(hours * 3600.0) == model


def test_philly_classes_table() -> None:
    assert [b for b, _ in PHILLY_CLASSES] == [0.1, 1.0, 5.0, 25.0, 100.0, math.inf]
    # Every class is a profiled Pollux model.
    assert all((PROFILES / m / "placements.csv").is_file() for _, m in PHILLY_CLASSES)


def _check_sim_jobs(trace: list[TraceJob], sims: list[SimJob], cluster: Cluster) -> None:
    assert len(sims) == len(trace)
    for t, s in zip(trace, sims, strict=True):
        assert (s.job_id, s.arrival_s, s.gang, s.queue) == (
            t.job_id, t.arrival_s, t.num_gpus, t.queue,
        )  # fmt: skip
        assert s.work > 0 and math.isfinite(s.work)
        if s.gang <= cluster.num_gpus:
            rate = ideal_rate(cluster, s.gang, s.perf)
            assert rate > 0 and math.isfinite(rate), s


def test_sim_jobs_gavel() -> None:
    trace = read_trace(DATA / "gavel" / "max_min_fairness.trace", "gavel")
    sims = sim_jobs(trace, data=DATA)
    _check_sim_jobs(trace, sims, shorthand_cluster("gavel:4:4:4"))
    assert len(sims) == 96
    for t, s in zip(trace, sims, strict=True):
        assert s.work == t.total_steps and s.model == t.model
        assert isinstance(s.perf, GavelModel)
        assert s.perf.rates["v100"] == _gavel("v100", t.model, t.num_gpus)


def test_sim_jobs_pollux() -> None:
    trace = read_trace(DATA / "pollux" / "workloads" / "workload-6.csv", "pollux")
    sims = sim_jobs(trace, data=DATA)
    _check_sim_jobs(trace, sims, shorthand_cluster("nodes:16:4"))
    assert len(sims) == 160
    first = sims[0]  # cifar10-0, 6 replicas, batch 2048 (workload-6.csv line 2)
    assert (first.job_id, first.model, first.gang) == ("cifar10-0", "cifar10", 6)
    assert first.work == 3178.0
    for t, s in zip(trace, sims, strict=True):
        curves = [int(p.stem.split("-")[1]) for p in (PROFILES / t.model).glob("validation-*.csv")]
        near = min(curves, key=lambda c: abs(math.log(c / t.batch_size)))
        assert s.work == pytest.approx(_last_iteration(t.model, near) * near / t.batch_size)


def test_sim_jobs_philly() -> None:
    trace = read_trace(DATA / "philly" / "philly.csv", "philly")[:3000]
    sims = sim_jobs(trace, data=DATA)
    _check_sim_jobs(trace, sims, shorthand_cluster("nodes:16:8"))
    for t, s in zip(trace, sims, strict=True):
        assert s.model == philly_class(t.duration_s * t.num_gpus)
        assert s.work == (t.duration_s if t.duration_s > 0 else 1.0)
        assert isinstance(s.perf, SlowdownPerf)
    assert len({s.model for s in sims}) >= 4


def test_sim_jobs_zero_duration_still_arrives() -> None:
    job = TraceJob("z", 5.0, 2, duration_s=0.0, queue="vc", source="philly")
    (sim,) = sim_jobs([job], data=DATA)
    assert (sim.work, sim.model, sim.queue) == (1.0, "ncf", "vc")


def test_sim_jobs_tiresias_and_synergy() -> None:
    for path, fmt, field in (
        (DATA / "tiresias" / "60_job.csv", "tiresias", "duration_s"),
        (DATA / "synergy" / "static_100job_6_3_1100.0.csv", "synergy", "total_steps"),
    ):
        trace = read_trace(path, fmt)
        sims = sim_jobs(trace, data=DATA)
        _check_sim_jobs(trace, sims, shorthand_cluster("nodes:32:4"))
        for t, s in zip(trace, sims, strict=True):
            assert s.work == getattr(t, field) and s.model == t.model
            # Locality model: 1 on one machine, 1/1.1 across machines of a rack.
            assert s.perf == SlowdownPerf(LocalityModel())
    # Tiresias 60_job.csv line 2: job 0, 1 GPU at t=0 for 164 s of vgg19.
    (first,) = [s for s in sim_jobs(read_trace(DATA / "tiresias" / "60_job.csv", "tiresias"))
                if s.job_id == "tiresias-0"]  # fmt: skip
    assert (first.gang, first.arrival_s, first.work, first.model) == (1, 0.0, 164.0, "vgg19")


def test_sim_jobs_unknown_source() -> None:
    with pytest.raises(TraceError, match="unknown trace source"):
        sim_jobs([TraceJob("x", 0, 1, duration_s=3.0, source="mystery")], data=DATA)


def test_slowdown_perf_rates() -> None:
    cluster = shorthand_cluster("nodes:20:2")
    perf = SlowdownPerf()
    one = placement_of(cluster, _gpus_on(cluster, {"node-000": 2}))
    rack = placement_of(cluster, _gpus_on(cluster, {"node-000": 1, "node-015": 1}))
    racks = placement_of(cluster, _gpus_on(cluster, {"node-000": 1, "node-016": 1}))
    assert (perf.rate(one), perf.rate(rack), perf.rate(racks)) == (1.0, 1 / 1.1, 1 / 1.3)


def test_simjob_validation() -> None:
    with pytest.raises(ValueError, match="gang"):
        SimJob("j", 0.0, 0, 10.0, SlowdownPerf())
    for work in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="work"):
            SimJob("j", 0.0, 1, work, SlowdownPerf())
    assert SimJob("j", 0.0, 1, 1.0, SlowdownPerf()).app_id == "j"


def _shapes(n: int, machines: int, per_machine: int) -> set[tuple[int, ...]]:
    """Per-machine GPU counts (descending, no zeros) of n GPUs on the given machines."""
    if n == 0:
        return {()}
    if machines == 0:
        return set()
    return {
        tuple(sorted((first, *rest), reverse=True))
        for first in range(1, min(n, per_machine) + 1)
        for rest in _shapes(n - first, machines - 1, per_machine)
    }


def test_ideal_rate_is_the_best_placement_example() -> None:
    """cifar10 at B=512 on 5 GPUs of nodes:4:4: the profile's 3+1+1 split (local batch 102.4,
    nearest measured 91) steps faster than the 4+1, 3+2, 2+2+1 splits ``ideal_rate`` considers.
    ``ideal_rate`` promises the best rate on an empty cluster (placement score 1)."""
    cluster = shorthand_cluster("nodes:4:4")
    perf = _pollux("cifar10", 512)
    spread = perf.rate(
        placement_of(cluster, _gpus_on(cluster, {"node-000": 3, "node-001": 1, "node-002": 1}))
    )
    assert ideal_rate(cluster, 5, perf) >= spread * (1 - 1e-9)


def test_ideal_rate_is_the_best_placement_pollux_sweep() -> None:
    """Every profiled model at every measured batch size, every gang 1..16 on nodes:4:4: no
    placement of the gang beats ``ideal_rate`` (else placement scores exceed 1 and a job can
    finish faster than its 'ideal' duration)."""
    cluster = shorthand_cluster("nodes:4:4")
    machines = [[g.id for g in cluster.gpus if g.machine == m.name] for m in cluster.machines]
    worse = []
    for model in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"):
        batches = sorted(int(p.stem.split("-")[1]) for p in (PROFILES / model).glob("valid*.csv"))
        for batch in batches:
            perf = _pollux(model, batch)
            for n in range(1, 17):
                ideal = ideal_rate(cluster, n, perf)
                for shape in _shapes(n, 4, 4):
                    gpus = [g for k, c in enumerate(shape) for g in machines[k][:c]]
                    rate = perf.rate(placement_of(cluster, gpus))
                    if rate > ideal * (1 + 1e-9):
                        worse.append((round(rate / ideal, 3), model, batch, n, shape))
    worse.sort(reverse=True)
    assert not worse, f"{len(worse)} placements beat ideal_rate, worst: {worse[:5]}"


def test_gavel_placement_blind_uses_the_consolidated_rate_when_spread() -> None:
    from arbiter.traces import load_gavel_throughputs

    table = load_gavel_throughputs(data_root() / "gavel" / "simulation_throughputs.json")
    job = "ResNet-18 (batch size 128)"
    cluster = shorthand_cluster("gavel:4:0:0")
    spread = placement_of(cluster, [g.id for g in cluster.gpus])
    measured = GavelModel.from_table(table, job, 4)
    blind = GavelModel.from_table(table, job, 4, placement_blind=True)
    assert measured.rate(spread) == table["v100_unconsolidated"][f"('{job}', 4)"]["null"]
    assert blind.rate(spread) == table["v100"][f"('{job}', 4)"]["null"]
    assert blind.rate(spread) > measured.rate(spread)
