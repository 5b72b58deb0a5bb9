"""Trace readers on every shipped public file: counts and shapes from ../shared/data/README.md."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from arbiter.datasets import data_root
from arbiter.traces import (
    TraceError,
    gavel_throughput,
    load_gavel_throughputs,
    read_philly,
    read_trace,
)

DATA = data_root()


def test_philly_whole_trace() -> None:
    """GPUs per job 76,627x1, 1,818x2, 1,870x4, 1,643x8, 199x16, 67x32 (data README).

    The data README says 82,248 jobs; the file has 82,249 lines = a header, 82,247 jobs and a
    trailing empty line, so 82,247 is the right count (7x12, 7x24, 6x64, 3x128 complete it).
    The README says 10 virtual clusters; the file holds 15 ids, 4 of them with under 10 jobs.
    """
    jobs = read_trace(DATA / "philly" / "philly.csv", "philly")
    assert len(jobs) == 82_247
    gpus = Counter(j.num_gpus for j in jobs)
    assert (gpus[1], gpus[2], gpus[4], gpus[8], gpus[16], gpus[32]) == (
        76_627, 1_818, 1_870, 1_643, 199, 67,
    )  # fmt: skip
    per_vc = Counter(j.queue for j in jobs)
    assert len(per_vc) == 15 and sum(n < 10 for n in per_vc.values()) == 4
    assert per_vc["6214e9"] == 41_226
    assert jobs[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(jobs))


def test_philly_window_and_target_load() -> None:
    path = DATA / "philly" / "philly.csv"
    week = (0.0, 7 * 86_400.0)
    windowed = read_philly(path, time_window=week)
    assert windowed and all(0 <= j.arrival_s < 7 * 86_400 for j in windowed)
    sampled = read_philly(path, time_window=week, target_load=0.5, cluster_gpus=64, seed=3)
    load = sum(j.gpu_time_s for j in sampled) / (7 * 86_400 * 64)
    assert 0.45 < load <= 0.5  # filled up to the target, within one job
    again = read_philly(path, time_window=week, target_load=0.5, cluster_gpus=64, seed=3)
    assert [j.job_id for j in again] == [j.job_id for j in sampled]


@pytest.mark.parametrize(
    ("folder", "count"), [("workloads", 160), ("workloads-0.5", 80), ("workloads-1.5", 240)]
)
def test_pollux_workloads(folder: str, count: int) -> None:
    """8 workloads x 3 load levels: 160 jobs at 1.0x load, so 80 at 0.5x and 240 at 1.5x."""
    for k in range(1, 9):
        jobs = read_trace(DATA / "pollux" / folder / f"workload-{k}.csv", "pollux")
        assert len(jobs) == count
        assert {j.model for j in jobs} <= {
            "bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3",
        }  # fmt: skip


def test_gavel_trace_and_throughputs() -> None:
    """max_min_fairness.trace: 96 jobs, 59x1, 19x2, 18x4 GPUs."""
    jobs = read_trace(DATA / "gavel" / "max_min_fairness.trace", "gavel")
    assert len(jobs) == 96
    assert Counter(j.num_gpus for j in jobs) == {1: 59, 2: 19, 4: 18}
    table = load_gavel_throughputs(DATA / "gavel" / "simulation_throughputs.json")
    for j in jobs[:10]:
        for worker in ("v100", "p100", "k80"):
            assert gavel_throughput(table, worker, j.model, j.num_gpus) > 0
    with pytest.raises(TraceError, match="no throughput"):
        gavel_throughput(table, "v100", "No Such Model", 1)


def test_synergy_and_tiresias() -> None:
    synergy = read_trace(DATA / "synergy" / "static_100job_6_3_1100.0.csv", "synergy")
    assert len(synergy) == 100 and all(j.total_steps > 0 for j in synergy)
    tiresias = read_trace(DATA / "tiresias" / "60_job.csv", "tiresias")
    assert len(tiresias) == 60
    assert tiresias[1].num_gpus == 8 and tiresias[1].model == "vgg11"  # 2nd row of the CSV


def test_malformed_files_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\na,1,bert,2,64\nb,x,bert,2,64\n")
    with pytest.raises(TraceError, match=r"w\.csv:3: field 'time'"):
        read_trace(bad, "pollux")
    bad.write_text("name,time,application,num_replicas,batch_size\na,1,bert,0,64\n")
    with pytest.raises(TraceError, match="must be >= 1 GPU"):
        read_trace(bad, "pollux")
    bad.write_text("name,time,application,num_replicas,batch_size\na,1,bert\n")
    with pytest.raises(TraceError, match="expected 5 fields"):
        read_trace(bad, "pollux")
    with pytest.raises(TraceError, match="unknown trace format"):
        read_trace(bad, "slurm")
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(tmp_path / "none.csv", "pollux")
