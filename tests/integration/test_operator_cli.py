"""What an operator meets first, run as they would run it: ``serve`` refuses to guess a
cluster, keeps its journal in a state directory, warns when the RM has no GPUs and logs
readable lines without the HTTP library's chatter; ``--version`` on every command; a closed
pipe ends ``yarn-arbiter config`` quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import free_port, wait_for

from yarn_arbiter.cli import build_parser
from yarn_bridge.emulator import RMEmulator

CLI = [sys.executable, "-m", "yarn_arbiter.cli"]


def env_without_cluster(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HADOOP_", "YARN_"))}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["ARBITER_AUCTION_WORKER_PROCESS"] = "false"
    return env


def test_serve_without_a_cluster_names_the_choices(tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "serve", "--port", "0"], env=env_without_cluster(tmp_path),
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 2
    for choice in ("--rm-url", "--hadoop-conf", "--cluster", "--demo"):
        assert choice in r.stderr
    assert not (tmp_path / "state" / "yarn-arbiter" / "arbiter-journal.db").exists()


def test_version_everywhere() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = sorted(sub.choices)
    assert {"serve", "submit", "admin", "config", "app"} <= set(commands)
    for argv in (["--version"], *([c, "--version"] for c in commands)):
        r = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("yarn-arbiter "), (argv, r.stderr)
    r = subprocess.run([sys.executable, "-m", "hive_hooks.cli", "--version"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0 and r.stdout.startswith("qoop-hive ")


def test_config_into_a_closed_pipe_is_quiet() -> None:
    r = subprocess.run(f"{sys.executable} -m yarn_arbiter.cli config | head -1", shell=True,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.stdout.startswith("key") and "Traceback" not in r.stderr and r.stderr == ""


@pytest.mark.slow
def test_serve_on_an_rm_without_gpus(tmp_path: Path) -> None:
    """The journal goes to the state directory, the missing GPUs are said plainly, and the
    log holds readable JSON lines and no per-request httpx line."""
    rm = RMEmulator(nodes=2, gpus_per_node=0)
    url = rm.start()
    env = env_without_cluster(tmp_path)
    port = free_port()
    cmd = [*CLI, "serve", "--rm-url", url, "--port", str(port), "--rm-poll-seconds",
           "0.2", "--log-format", "json"]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("ab") as fh:
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=fh)
    try:
        journal = tmp_path / "state" / "yarn-arbiter" / "arbiter-journal.db"
        wait_for("the journal in the state directory", journal.exists)
        wait_for("a few RM polls", lambda: log.read_text().count("YARN bridge") >= 1)
        wait_for("the no-GPU warning", lambda: "no RUNNING NodeManager with yarn.io/gpu"
                 in log.read_text())  # fmt: skip
        # admin finds the token serve generated in the state directory
        r = subprocess.run([*CLI, "admin", "--address", f"127.0.0.1:{port}", "state"], env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert r.returncode == 0 and "GPUs 0" in r.stdout, r.stderr
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        server.kill()
        rm.stop()
    text = log.read_text()
    assert (journal.parent / "arbiter-journal.db.admin-token").exists()
    assert "yarn-arbiter: warning:" in text
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    assert not any(r["logger"].startswith("httpx") for r in records)
    assert any("serving cluster yarn (0 GPUs)" in r["message"] for r in records)


def test_bash_completion_follows_the_parser(tmp_path: Path) -> None:
    script = subprocess.run([*CLI, "completion", "bash"], capture_output=True, text=True,
                            timeout=60, check=True).stdout  # fmt: skip
    (tmp_path / "c.sh").write_text(script)
    probe = tmp_path / "probe.sh"
    probe.write_text(
        f"source {tmp_path / 'c.sh'}\n"
        't() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); '
        '_yarn_arbiter; echo "${COMPREPLY[*]}"; }\n'
        "t yarn-arbiter se\nt yarn-arbiter admin --token-file f und\n"
        "t yarn-arbiter serve --rm-u\nt yarn-arbiter app ''\n"
    )
    lines = subprocess.run(["bash", str(probe)], capture_output=True, text=True, timeout=60,
                           check=True).stdout.splitlines()  # fmt: skip
    assert lines[0] == "serve" and lines[1] == "undrain"
    assert lines[2].split() == ["--rm-url", "--rm-user"]
    assert {"list", "status", "kill"} <= set(lines[3].split())


def test_deployment_files_load_as_serve_reads_them() -> None:
    import configparser
    import shlex

    from arbiter.config import load_config
    from yarn_arbiter.cli import config_schemas

    deploy = Path(__file__).resolve().parents[2] / "deploy"
    config = load_config(deploy / "arbiter-site.xml", environ={}, schemas=config_schemas())
    assert config["arbiter.lease.seconds"] == 600 and config["arbiter.metrics.port"] == 8089
    assert config["arbiter.journal.path"] == "arbiter-journal.db"  # default: serve moves it
    # `<final>`: the environment cannot change the policy
    env = {"ARBITER_POLICY": "fifo"}
    assert load_config(deploy / "arbiter-site.xml", environ=env,
                       schemas=config_schemas())["arbiter.policy"] == "themis"  # fmt: skip
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.read(deploy / "systemd" / "yarn-arbiter.service")
    assert unit["Service"]["StateDirectory"] == "yarn-arbiter"
    argv = shlex.split(unit["Service"]["ExecStart"])
    assert argv[0].endswith("/yarn-arbiter") and argv[1] == "serve"
    args = build_parser().parse_args(argv[1:])
    assert args.config == "/etc/yarn-arbiter/arbiter-site.xml" and args.hadoop_conf
    assert (Path(__file__).resolve().parents[2] / "LICENSE").read_text().count("Apache License")
