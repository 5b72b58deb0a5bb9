"""The web console in a real browser: Debian's headless Chromium, driven through its
chromedriver by Selenium, loads the console of a running ``yarn-arbiter serve`` whose cluster
comes from a ResourceManager (the emulator over HTTP) and on which Hyperband AMs bid in Themis
auctions, and shows what the arbiter and the AMs themselves say. A screenshot is kept
(``console.png`` in the test's tmp directory, path printed; also copied to
``$YARN_ARBITER_ARTEFACTS`` when set)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import httpx
import pytest
from support import free_port, wait_for

from arbiter.examples.hyperband_am import HyperbandAM
from hive_hooks.share import ArbiterShare
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from qoop_planner.model import Share
from yarn_bridge.emulator import RMEmulator

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ADMIN = "console-test-admin"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()) and not os.environ.get("CI"),
        reason="needs Debian's chromium and chromium-driver (make installs them)",
    ),
]


def _browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def _leases(port: int) -> list[pb.Lease]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        return list(
            rpc.AdminStub(ch)
            .ListLeases(pb.ListLeasesRequest(), metadata=[("x-admin-token", ADMIN)], timeout=5)
            .leases
        )


def test_console_shows_the_live_arbiter_in_chromium(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    (tmp_path / "admin").write_text(ADMIN + "\n")
    rm = RMEmulator(nodes=2, gpus_per_node=4)
    rm_url = rm.start()
    port, http_port = free_port(), free_port()
    env = {
        **os.environ,
        "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin"),
        "ARBITER_AUCTION_WORKER_PROCESS": "false",
        "ARBITER_LEASE_SECONDS": "120",  # leases outlive the test: what the page shows holds
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.1",
        "ARBITER_BID_DEADLINE_SECONDS": "1",
    }
    cmd = [
        sys.executable,
        "-m",
        "yarn_arbiter.cli",
        "serve",
        "--rm-url",
        rm_url,
        "--port",
        str(port),
        "--journal",
        str(tmp_path / "j.db"),
        "--policy",
        "themis",
        "--metrics-port",
        str(http_port),
        "--rm-poll-seconds",
        "0.5",
    ]
    with (tmp_path / "serve.log").open("ab") as log:
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{http_port}"
    ams: list[HyperbandAM] = []
    driver = None
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
    try:
        wait_for("the arbiter to be ready", lambda: _get(base + "/readyz") == 200)
        ams = [
            HyperbandAM(
                f"127.0.0.1:{port}",
                name=f"hb-{k}",
                max_gpu_demand=(4, 3, 2)[k],
                cluster_gpus=8,
                n_avg=3.0,
                iters_per_phase=(10**6, 10**6, 10**6),
                seed=k,
            ).start()
            for k in range(3)
        ]
        held = wait_for("every AM to hold GPUs", lambda: all(a.agent.held() for a in ams) and ams)
        leases = wait_for("the leases to settle", lambda: _settled(port, held))
        holder = {g: lease.app_id for lease in leases for g in lease.gpu_ids}
        app_ids = {a.agent.app_id for a in ams}

        driver = _browser(profile)
        driver.get(base + "/")
        wait_for(
            "the page to render the apps",
            lambda: len(driver.find_elements(By.CSS_SELECTOR, "#apps-body tr[data-app]")) == 3,
        )
        # the cluster as the RM reports it: two nodes, 4 GPUs each, in one rack
        gpus = driver.find_elements(By.CSS_SELECTOR, "#racks span.gpu[data-gpu]")
        assert len(gpus) == 8
        shown = {g.get_attribute("data-gpu"): g.get_attribute("data-holder") for g in gpus}
        # who holds each GPU, as the Admin API lists the leases
        wait_for("the page to show the leases", lambda: _holders(driver) == holder)
        assert set(holder.values()) <= app_ids and set(shown) == set(_all_gpus(driver))
        leased = driver.find_elements(By.CSS_SELECTOR, "#racks span.gpu.leased")
        assert len(leased) == len(holder)
        title = leased[0].get_attribute("title")
        assert "lease of round" in title and "ends in" in title
        # apps: names, GPUs held (as each AM itself counts them), ρ and its history
        rows = {
            r.get_attribute("data-app"): r
            for r in driver.find_elements(By.CSS_SELECTOR, "#apps-body tr[data-app]")
        }
        assert set(rows) == app_ids
        for am in ams:
            cells = rows[am.agent.app_id].find_elements(By.TAG_NAME, "td")
            assert cells[1].text == am.name
            assert int(cells[4].text) == len(am.agent.held())
            assert cells[7].text == "open"
        wait_for(
            "a ρ history line",
            lambda: driver.find_elements(By.CSS_SELECTOR, "#apps-body svg.spark polyline"),
        )
        # the auction log: rounds with bidders that are these apps, winners marked
        rounds = wait_for(
            "an auction in the log",
            lambda: driver.find_elements(By.CSS_SELECTOR, "#auctions-body .round"),
        )
        text = " ".join(r.text for r in rounds)
        assert "GPUs offered" in text and "hidden payment" in text
        bidders = {
            c.text
            for c in driver.find_elements(By.CSS_SELECTOR, "#auctions-body tbody tr td:first-child")
        }
        assert bidders and bidders <= app_ids
        # QOOP's share and a query's plan switch, as its replanner reports it
        query = ArbiterShare(f"127.0.0.1:{port}", user="carol")
        query.begin("tpch-q5")
        try:
            wait_for(
                "the query in |J|",
                lambda: "|J| = 1" in driver.find_element(By.ID, "queries-now").text,
            )
            query.report_switch(3.0, "q5-p0", "q5-p1", Share(4.0, 2048.0), ("s4",), ("s1", "s2"))
            row = wait_for(
                "the plan switch in the page",
                lambda: driver.find_elements(By.CSS_SELECTOR, "#switch-body tr[data-job]"),
            )[0]
            cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
            assert cells[1] == "tpch-q5 (carol)" and cells[3] == "q5-p0 \u2192 q5-p1"
            assert cells[4] == "4.0 vcores, 2048 MB" and cells[5:] == ["1", "2"]
        finally:
            query.end("tpch-q5")
        wait_for(
            "the query to leave |J|",
            lambda: "|J| = 0" in driver.find_element(By.ID, "queries-now").text,
        )
        # the RM as the bridge sees it, and the health badge
        bridge = driver.find_element(By.ID, "bridge-body")
        assert rm_url in bridge.text and "yarn-bridge" in bridge.text
        assert bridge.find_element(By.CSS_SELECTOR, "td[data-key=ready]").text == "true"
        assert driver.find_element(By.ID, "health").text == "healthy, ready"
        shot = tmp_path / "console.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        print(f"console screenshot: {shot}")
        artefacts = os.environ.get("YARN_ARBITER_ARTEFACTS")
        if artefacts:
            Path(artefacts).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(artefacts) / "console.png")
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        for am in ams:
            am.stop()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        finally:
            server.kill()
            rm.stop()


def _get(url: str) -> int:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return 0


def _settled(port: int, ams: list[HyperbandAM]) -> list[pb.Lease] | None:
    """The Admin API's live leases, once they are exactly what the AMs hold."""
    leases = _leases(port)
    by_app: dict[str, set[str]] = {}
    for lease in leases:
        by_app.setdefault(lease.app_id, set()).update(lease.gpu_ids)
    mine = {a.agent.app_id: set(a.agent.held()) for a in ams}
    return leases if by_app == {k: v for k, v in mine.items() if v} else None


def _all_gpus(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        g.get_attribute("data-gpu")
        for g in driver.find_elements(By.CSS_SELECTOR, "#racks span.gpu[data-gpu]")
    ]


def _holders(driver) -> dict[str, str]:
    from selenium.webdriver.common.by import By

    return {
        g.get_attribute("data-gpu"): g.get_attribute("data-holder")
        for g in driver.find_elements(By.CSS_SELECTOR, "#racks span.gpu.leased")
    }
