"""``make demo``'s ML part on the session's real YARN: three apps submitted through
``yarn-arbiter submit`` get their leases as containers and finish SUCCEEDED."""

from __future__ import annotations

import io
import re

import pytest
from support import wait_for
from support.yarn import yarn_gpus_by_node

from yarn_arbiter.yarn_demo import DEMO_APPS, run_yarn_demo

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def test_the_demo_runs_on_the_real_yarn(yarn_cluster) -> None:
    wait_for("no GPU in use (the previous test's apps gone)",
             lambda: yarn_gpus_by_node(yarn_cluster.rm_url) == {}, timeout=60)  # fmt: skip
    out = io.StringIO()
    assert run_yarn_demo(yarn_cluster.workdir, hive=False, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "reusing the YARN running in" in text
    assert text.count("FINISHED/SUCCEEDED") == len(DEMO_APPS), text
    # Some status line shows an app whose leases and YARN containers agree, GPUs and nodes.
    rows = re.findall(r"^\s*[\d.]+\s+\S+\s+RUNNING\s+(\S.*?)\s{2,}(\S.*?)\s{2,}", text, re.M)
    assert any(leased == held and "@" in leased for leased, held in rows), text
