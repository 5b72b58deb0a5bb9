"""``yarn-arbiter simulate`` / ``compare``: the JSON keys of a summary, CSV, plots, errors."""

from __future__ import annotations

import csv
import json
import math

import pytest

from arbiter.policies import POLICIES
from yarn_arbiter.cli import main

GAVEL = ["--trace", "gavel/max_min_fairness.trace", "--cluster", "gavel:4:4:4"]


def test_simulate_writes_the_documented_json_and_csv(tmp_path, capsys) -> None:
    out, rows = tmp_path / "run.json", tmp_path / "jobs.csv"
    code = main(["simulate", *GAVEL, "--policy", "fifo", "--round-s", "360",
                 "--json", str(out), "--csv", str(rows)])  # fmt: skip
    assert code == 0
    doc = json.loads(out.read_text())
    for key in ("avg_jct_s", "p99_jct_s", "max_rho", "makespan_s", "gpu_time_s",
                "utilization", "jobs"):  # fmt: skip
        assert key in doc, key
    assert doc["jobs"] == 96 and doc["finished"] == 96
    assert doc["p99_jct_s"] >= doc["median_jct_s"] > 0
    assert doc["max_rho"] >= doc["avg_rho"] > 0
    assert 0 < doc["utilization"] <= 1
    per_job = doc["per_job"]
    assert len(per_job) == 96
    avg = sum(j["jct_s"] for j in per_job) / 96
    assert math.isclose(avg, doc["avg_jct_s"])
    with open(rows) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 96 and {"job_id", "jct_s", "rho", "gpu_time_s"} <= set(table[0])
    printed = capsys.readouterr().out
    assert "fifo" in printed and "96/96" in printed


def test_compare_prints_one_table_and_plots(tmp_path, capsys) -> None:
    plots, out = str(tmp_path / "plots"), str(tmp_path / "c.json")
    code = main(["compare", *GAVEL, "--policies", "fifo,las,isolated", "--round-s", "360",
                 "--plot", plots, "--json", out])  # fmt: skip
    assert code == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[2:]] == ["fifo", "las", "isolated"]
    for name in ("rho_cdf.png", "jct_cdf.png", "utilization.png"):
        png = tmp_path / "plots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = json.loads((tmp_path / "c.json").read_text())["runs"]
    iso = next(r for r in runs if r["policy"] == "isolated")
    assert iso["max_rho"] == pytest.approx(1.0)  # the denominator of ρ is itself


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "no/such.trace", "--cluster", "gavel:4:4:4", "--policy", "fifo"],
         "no such file"),
        (["--trace", "gavel/max_min_fairness.trace", "--cluster", "gavel:4:4", "--policy",
          "fifo"], "gavel:V:P:K"),
        (["--trace", "gavel/max_min_fairness.trace", "--cluster", "gavel:4:4:4", "--policy",
          "fifo", "--window", "0:10"], "philly"),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_error(args, message, capsys) -> None:
    assert main(["simulate", *args]) == 2
    assert message in capsys.readouterr().err


def test_unknown_policy_in_compare(capsys) -> None:
    assert main(["compare", *GAVEL, "--policies", "fifo,nope"]) == 2
    assert "unknown policies ['nope']" in capsys.readouterr().err


def test_format_is_detected_from_the_file(tmp_path, capsys) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,0,10,vgg19,100,0\n1,2,0,10,vgg11,50,0\n"
    )
    assert main(["simulate", "--trace", str(trace), "--cluster", "nodes:1:2",
                 "--policy", "fifo", "--json", str(tmp_path / "o.json")]) == 0  # fmt: skip
    doc = json.loads((tmp_path / "o.json").read_text())
    # FIFO on 2 GPUs: job 0 (1 GPU) runs 0-100; job 1 needs both and waits: 100-150.
    assert doc["avg_jct_s"] == pytest.approx((100 + 150) / 2)
    assert doc["makespan_s"] == pytest.approx(150)


def test_compare_synergy_with_cpu_mem_sensitivity(capsys) -> None:
    """With measured CPU/memory sensitivities, synergy-tune beats the GPU-proportional fifo on
    the shipped Synergy trace's makespan (the paper's static-trace claim, 1.38x there)."""
    from yarn_arbiter.cli import main

    rc = main(
        ["compare", "--trace", "synergy/static_100job_6_3_1100.0.csv", "--cluster",
         "nodes:4:8:24:500", "--policies", "fifo,synergy-tune", "--cpu-mem-sensitivity",
         "--no-progress"]
    )  # fmt: skip
    assert rc == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    makespan = {p: float(r[9].replace(",", "")) for p, r in rows.items()}
    assert makespan["fifo"] / makespan["synergy-tune"] > 1.2


TINY_POLLUX = (
    "name,time,application,num_replicas,batch_size\n"
    "cifar10-0,0,cifar10,4,2048\n"
    "ncf-1,10,ncf,1,1024\n"
    "cifar10-2,20,cifar10,2,1024\n"
    "ncf-3,30,ncf,1,1024\n"
    "yolov3-4,40,yolov3,2,16\n"
    "ncf-5,50,ncf,1,1024\n"
)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_simulate_runs_every_registered_policy(policy: str, tmp_path) -> None:
    """``yarn-arbiter simulate --policy X`` runs every registered policy to the end on a tiny
    Pollux trace (measured throughput curves, so afs-l/-p run elastic)."""
    trace, out = tmp_path / "tiny.csv", tmp_path / "out.json"
    trace.write_text(TINY_POLLUX)
    code = main(["simulate", "--trace", str(trace), "--cluster", "nodes:2:4", "--policy", policy,
                 "--no-progress", "--json", str(out)])  # fmt: skip
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["jobs"] == 6 and doc["finished"] == 6
    assert doc["avg_jct_s"] > 0 and 0 < doc["utilization"] <= 1
