"""Faults on the real cluster with lease AMs running: the AM killed, the ResourceManager
restarted, a container that outlives its lease. What YARN reports is what is asserted."""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import psutil
import pytest
from support import wait_for
from support.yarn import (
    KNOBS,
    Arbiter,
    final,
    gpus_by_machine,
    submit_job,
    yarn_app,
    yarn_gpus_by_node,
)

from yarn_bridge.rm import RMClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def am_process(yarn_id: str) -> psutil.Process:
    """The lease AM's JVM of ``yarn_id`` (its working directory is its AM container's)."""
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if "org.yarnarbiter.am.LeaseApplicationMaster" in " ".join(p.info["cmdline"] or ()) \
                    and yarn_id in p.cwd():  # fmt: skip
                return p
    raise AssertionError(f"no AM process for {yarn_id}")


def holds_as_leased(rm_url: str, arb: Arbiter, app_id: str) -> dict[str, int] | None:
    leased = gpus_by_machine(arb.leases(app_id))
    return leased if leased and yarn_gpus_by_node(rm_url) == leased else None


def test_an_am_killed_frees_its_leases(yarn_cluster, arbiter: Arbiter, am_jar: Path) -> None:
    rm_url = yarn_cluster.rm_url
    yarn_id, app_id = submit_job(yarn_cluster, arbiter, am_jar, "sleep 600", 4)
    wait_for("containers as leased", lambda: holds_as_leased(rm_url, arbiter, app_id), 120)
    am_process(yarn_id).send_signal(signal.SIGKILL)
    app = wait_for("YARN to end the app", lambda: final(rm_url, yarn_id), timeout=90)
    assert app["finalStatus"] == "FAILED"  # one attempt (submit's default): the app is over
    wait_for("the arbiter to free its leases", lambda: not arbiter.leases(app_id), timeout=30)
    wait_for("YARN to release its containers", lambda: yarn_gpus_by_node(rm_url) == {}, 60)


def test_an_rm_restart_keeps_leases_and_containers(
    yarn_cluster, arbiter: Arbiter, am_jar: Path, tmp_path: Path
) -> None:
    """Work-preserving recovery: the RM comes back with the app and its containers; the AM
    re-registers; the arbiter revokes nothing and the job is never restarted."""
    rm_url = yarn_cluster.rm_url
    started, done = tmp_path / "started", tmp_path / "done"
    job = f'echo "$CONTAINER_ID" >> {started}; while [ ! -e {done} ]; do sleep 0.2; done'
    yarn_id, app_id = submit_job(yarn_cluster, arbiter, am_jar, job, 4)
    before = wait_for("containers as leased",
                      lambda: holds_as_leased(rm_url, arbiter, app_id), 120)  # fmt: skip
    wait_for("the job to start", lambda: started.exists() and started.read_text().strip())
    starts = started.read_text().split()
    yarn_cluster.kill("rm1")
    gaps = []
    t0 = time.monotonic()
    yarn_cluster.restart("rm1")
    # Throughout the outage and after it, the app keeps a lease on its GPUs.
    while time.monotonic() - t0 < 5:
        gaps += [] if arbiter.leases(app_id) else [time.monotonic() - t0]
        time.sleep(0.2)
    wait_for("the AM re-registered and its containers recovered",
             lambda: yarn_app(rm_url, yarn_id)["state"] == "RUNNING"
             and yarn_gpus_by_node(rm_url) == before, timeout=90)  # fmt: skip
    assert not gaps, f"the app held no lease {len(gaps)} times after the RM restart"
    assert gpus_by_machine(arbiter.leases(app_id)) == before
    assert started.read_text().split() == starts, "the restart restarted the job"
    done.touch()
    app = wait_for("the app to finish", lambda: final(rm_url, yarn_id), timeout=60)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app["diagnostics"]


def test_a_container_outliving_its_lease_is_killed(
    yarn_cluster, am_jar: Path, tmp_path: Path
) -> None:
    """An AM that keeps its containers after its lease ended (``--hold-seconds 600``) is
    killed by the enforcer once the slack is over, and the GPUs go to the app that waited."""
    rm_url = yarn_cluster.rm_url
    wait_for("no GPU in use (the previous test's apps gone)",
             lambda: yarn_gpus_by_node(rm_url) == {}, timeout=60)  # fmt: skip
    arb = Arbiter(tmp_path, rm_url, "--enforce-slack-seconds", "2", **KNOBS)
    try:
        wait_for("the arbiter", arb.state, timeout=60)
        hog, hog_app = submit_job(yarn_cluster, arb, am_jar, "sleep 600", 8,
                                  "--sidecar-arg=--hold-seconds=600")  # fmt: skip
        wait_for("the hog to hold all 8 GPUs",
                 lambda: sum(yarn_gpus_by_node(rm_url).values()) == 8, timeout=120)  # fmt: skip
        _, other_app = submit_job(yarn_cluster, arb, am_jar, "sleep 600", 4)
        # The hog's renewals are refused (another app waits), its lease ends, it keeps the
        # containers: the enforcer kills it in YARN after the 2 s slack.
        app = wait_for("the enforcer to kill the hog", lambda: final(rm_url, hog), timeout=120)
        assert app["state"] == "KILLED", app
        assert "kill:" + hog in arb.log_path.read_text()  # the action is logged with its id
        wait_for("the waiting app to get containers on its leases",
                 lambda: holds_as_leased(rm_url, arb, other_app), timeout=120)  # fmt: skip
        wait_for("the hog's leases freed", lambda: not arb.leases(hog_app), timeout=30)
    finally:
        with RMClient(rm_url) as rm:
            for yid in arb.submitted:
                if not rm.app(yid).is_final:
                    rm.kill_app(yid)
        arb.stop()


def test_while_no_arbiter_is_alive_yarn_runs_on_and_the_arbiter_resumes(
    yarn_cluster, am_jar: Path, tmp_path: Path
) -> None:
    """The arbiter killed (no standby): YARN keeps the app RUNNING, its containers go when its
    lease runs out (the sidecar cannot renew, nobody grants), and the arbiter restarted on its
    journal and port gets the app's Agent back and leases it GPUs again."""
    rm_url = yarn_cluster.rm_url
    wait_for("no GPU in use (the previous test's apps gone)",
             lambda: yarn_gpus_by_node(rm_url) == {}, timeout=60)  # fmt: skip
    arb = Arbiter(tmp_path, rm_url, **KNOBS)
    back: Arbiter | None = None
    try:
        wait_for("the arbiter", arb.state, timeout=60)
        yarn_id, app_id = submit_job(yarn_cluster, arb, am_jar, "sleep 600", 4)
        wait_for("containers as leased", lambda: holds_as_leased(rm_url, arb, app_id), 120)
        arb.proc.send_signal(signal.SIGKILL)
        arb.proc.wait()
        wait_for("YARN to get the GPUs back as the lease runs out",
                 lambda: yarn_gpus_by_node(rm_url) == {}, timeout=60)  # fmt: skip
        assert yarn_app(rm_url, yarn_id)["state"] == "RUNNING"  # nothing killed it
        back = Arbiter(tmp_path, rm_url, port=arb.port, fresh=False, **KNOBS)
        back.submitted = arb.submitted
        wait_for("the arbiter back", back.state, timeout=60)
        wait_for("containers as leased again, by the returned arbiter",
                 lambda: holds_as_leased(rm_url, back, app_id), timeout=120)  # fmt: skip
        assert yarn_app(rm_url, yarn_id)["state"] == "RUNNING"
    finally:
        with RMClient(rm_url) as rm:
            for yid in arb.submitted:
                if not rm.app(yid).is_final:
                    rm.kill_app(yid)
        for a in (back, arb):
            if a is not None:
                a.stop()
