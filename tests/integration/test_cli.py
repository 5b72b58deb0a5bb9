"""The ``yarn-arbiter`` command line: demo rounds, cluster listing, clear errors."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from arbiter.auction import Rounding
from arbiter.cluster import load_cluster
from arbiter.rounds import check_invariants
from yarn_arbiter.cli import main, run_demo


def test_demo_prints_rounds_and_keeps_invariants() -> None:
    """make demo's job: Themis rounds on the 64-GPU testbed, printed as tables."""
    out = io.StringIO()
    state = run_demo(
        load_cluster("themis-testbed"),
        apps=24,
        rounds=3,
        fairness_knob=0.8,
        lease_seconds=600,
        seed=7,
        rounding=Rounding.LEASE_TIME,
        out=out,
    )
    text = out.getvalue()
    check_invariants(state)
    assert state.round == 3
    # f = 0.8 with 24 apps: ceil(0.2 * 24) = 5 apps bid in the first round (spec B.6).
    assert "round 1 at t = 0 s: 64 GPUs offered, 5 of 24 apps bid" in text
    assert text.count("\nround ") == 3
    for c in re.findall(r"  (\d\.\d{3})  ", text):
        assert 0.0 < float(c) <= 1.0


def test_demo_count_rounding_and_small_cluster() -> None:
    out = io.StringIO()
    state = run_demo(
        load_cluster("themis-sim-168"),
        apps=6,
        rounds=2,
        fairness_knob=1.0,
        lease_seconds=60,
        seed=1,
        rounding=Rounding.COUNT,
        out=out,
    )
    check_invariants(state)
    assert "1 of 6 apps bid" in out.getvalue()  # f = 1: a single app bids (T:1302)


def test_console_script_demo_runs() -> None:
    """The installed entry point works end to end (what `make demo` runs)."""
    proc = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "rounds", "--rounds", "2", "--apps", "8"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "round 2" in proc.stdout


def test_cluster_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster"]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"themis-testbed\s+64 GPUs\s+20 machines", listing)
    assert re.search(r"themis-sim-256\s+256 GPUs\s+60 machines", listing)
    assert main(["cluster", "themis-sim-168"]) == 0
    assert "168 GPUs, 38 machines" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rounds", "--cluster", "no-such-cluster"], "not a shipped spec"),
        (["rounds", "--apps", "0"], "--apps must be >= 1"),
        (["rounds", "--fairness-knob", "1.5"], "fairness knob f must be in [0, 1]"),
        (["demo", "--on", "standalone", "--cluster", "no-such-cluster"], "not a shipped spec"),
        (["demo", "--on", "standalone", "--seconds", "0"], "must be positive"),
        (["cluster", "missing.yaml"], "no such file"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_help_explains_the_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["rounds", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--cluster", "--fairness-knob", "--lease-seconds", "--rounding", "--seed"):
        assert flag in text


@pytest.mark.slow
def test_live_demo_serves_and_ams_finish() -> None:
    """make demo: a real arbiter, example AMs bidding over gRPC, a closing table."""
    from yarn_arbiter.live_demo import run_live_demo

    out = io.StringIO()
    ams = run_live_demo(
        load_cluster("themis-testbed"), apps=3, seconds=30, lease_seconds=2.0, out=out
    )
    text = out.getvalue()
    assert "app" in text and "leases auction/leftover" in text
    assert sum(a.finished for a in ams) >= 1
    for a in ams:
        assert a.agent.history, a.name  # every AM won some lease
        assert not a.agent.errors, a.agent.errors
        if a.finished:
            assert 0 < a.final_rho < 10


def test_config_lists_every_key_with_its_source(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from arbiter.config import SCHEMA

    conf = tmp_path / "arbiter.conf"
    conf.write_text("arbiter.lease.seconds = 120  # two minutes\n")
    monkeypatch.setenv("ARBITER_THEMIS_FAIRNESS_KNOB", "0.9")
    assert main(["config", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    for key in SCHEMA:
        assert key in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines()[2:]}
    assert lines["arbiter.lease.seconds"][1:3] == ["120.0", str(conf)]
    assert lines["arbiter.themis.fairness-knob"][1:4] == [
        "0.9", "$ARBITER_THEMIS_FAIRNESS_KNOB", "ARBITER_THEMIS_FAIRNESS_KNOB",
    ]  # fmt: skip
    assert lines["arbiter.policy"][1:3] == ["themis", "default"]
    # a filter keeps only matching keys
    assert main(["config", "fairness"]) == 0
    out = capsys.readouterr().out
    assert "arbiter.themis.fairness-knob" in out and "arbiter.lease.seconds" not in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("arbiter.lease.seconds = -3\n", "arbiter.lease.seconds = '-3' is not a number > 0"),
        ("arbiter.lease.secnds = 3\n", "arbiter.lease.secnds"),
        ("just words\n", "expected 'key = value'"),
    ],
)
def test_config_rejects_a_bad_file_like_serve(
    tmp_path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    assert main(["config", "--config", str(conf)]) == 2
    assert message in capsys.readouterr().err
