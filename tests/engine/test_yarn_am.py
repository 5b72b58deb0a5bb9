"""The lease AM: GPU leases become real YARN containers.

Without a cluster: the line protocol (:mod:`yarn_bridge.am_protocol`), the sidecar's
reconciliation (:mod:`yarn_bridge.lease_am`: renewals keep containers, revocations and ended
leases release them) and what ``yarn-arbiter submit`` sends for the lease AM.

On a real local YARN (``yarn_cluster``, marked ``yarn``): ``yarn-arbiter serve --rm-url`` runs
the arbiter beside the RM, ``yarn-arbiter submit --command`` submits the Java AM
(``java/am``, built here if needed), and the RM's REST API must show containers holding
``yarn.io/gpu`` on exactly the leased nodes, as many as leased; renewals keep them, a revocation
(a drained machine) releases that machine's container at once, and the app finishes
FINISHED/SUCCEEDED with its leases freed.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from support import REPO, wait_for
from support.yarn import (
    Arbiter,
    am_log,
    app_gpus,
    final,
    gpus_by_machine,
    gpus_by_node,
    submit_job,
    yarn_app,
    yarn_gpus_by_node,
)

from arbiter.agent import HeldLease
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from yarn_bridge.am_protocol import (
    ENV_LOCAL_RESOURCES,
    ENV_SIDECAR,
    Acquire,
    Allocated,
    Completed,
    Finish,
    LeaseContainers,
    NodeLost,
    ProtocolError,
    Release,
    Shutdown,
    Started,
    encode,
    parse_am_line,
    parse_sidecar_line,
)
from yarn_bridge.bridge_cli import add_parsers
from yarn_bridge.lease_am import LeaseSidecar, gpu_index, parse_args
from yarn_bridge.local_hadoop import kill_orphan_containers
from yarn_bridge.submit import (
    AM_MAIN_CLASS,
    DEFAULT_APPLICATION_CLASSPATH,
    LeaseAM,
    SubmitError,
    SubmitSpec,
    application_classpath,
    build_submission,
    default_am_jar,
    local_resources,
)

T = TypeVar("T")


# -- the protocol ------------------------------------------------------------------------------

MESSAGES = [
    Acquire("l1@n1:8041#1", "n1:8041", 2, 2048, 2, (0, 3), "python train.py --lr 0.1 'a b'"),
    Acquire("l2@n2#2", "n2", 0, 512, 1, (), "true"),
    Release("l1@n1:8041#1"),
    Finish("SUCCEEDED", "the job exited 0 in container_1_0001_01_000002"),
    Finish("FAILED", ""),
    Allocated("l1@n1:8041#1", "container_1_0001_01_000002", "n1:8041"),
    Started("l1@n1:8041#1", "container_1_0001_01_000002"),
    Completed("l1@n1:8041#1", "container_1_0001_01_000002", -105, "Container killed by the AM."),
    Completed("l1", "container_1_0001_01_000003", 0, ""),
    NodeLost("n1:8041"),
    Shutdown(),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg) -> None:
    line = encode(msg)
    assert line.endswith("\n") and line.count("\n") == 1
    parse = parse_sidecar_line if isinstance(msg, Acquire | Release | Finish) else parse_am_line
    assert parse(line) == msg
    assert parse(line.rstrip("\n")) == msg  # the newline is optional on input


@pytest.mark.parametrize(
    ("parse", "line", "error"),
    [
        (parse_am_line, "", "empty line"),
        (parse_am_line, "STARTED l1", "unknown message 'STARTED l1'"),
        (
            parse_am_line,
            "ALLOCATED\tl1\tcontainer_1",
            "ALLOCATED has 4 tab-separated fields, got 3",
        ),
        (
            parse_am_line,
            "COMPLETED\tl1\tc1\tminus-one\t",
            "exit status 'minus-one' is not an integer",
        ),
        (parse_am_line, "NODE_LOST\t", "node id is empty"),
        (parse_am_line, "NODE_LOST\tn 1", "node id 'n 1' holds white space"),
        (parse_am_line, "HELLO\tthere", "unknown message 'HELLO'"),
        (
            parse_sidecar_line,
            "ACQUIRE\tl1\tn1\t2\t1024\t1\t0\tx",
            "ACQUIRE of 2 GPUs names indices [0]",
        ),
        (
            parse_sidecar_line,
            "ACQUIRE\tl1\tn1\t1\t1024\t1\tz\tx",
            "GPU index 'z' is not an integer",
        ),
        (parse_sidecar_line, "ACQUIRE\tl1\tn1\t1\t0\t1\t0\tx", "memory_mb >= 1"),
        (parse_sidecar_line, "ACQUIRE\tl1\tn1\t1\t1024\t1\t0\t", "command is empty"),
        (parse_sidecar_line, "FINISH\tKILLED\tbye", "FINISH status 'KILLED'"),
        (parse_sidecar_line, "RELEASE", "RELEASE has 2 tab-separated fields, got 1"),
    ],
)
def test_malformed_lines_are_clear_errors(parse, line: str, error: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(error)):
        parse(line)


@pytest.mark.parametrize("bad", ["a\tb", "a\nb", "a\rb"])
def test_tabs_and_line_breaks_cannot_be_encoded(bad: str) -> None:
    with pytest.raises(ProtocolError, match="tab or a line break"):
        encode(Acquire("l1", "n1", 1, 1024, 1, (0,), f"echo {bad}"))
    with pytest.raises(ProtocolError, match="tab or a line break"):
        encode(Release(bad))
    with pytest.raises(ProtocolError, match="tab or a line break"):
        encode(Completed("l1", "c1", 1, bad))


def test_lease_containers_speaks_over_pipes() -> None:
    """LeaseContainers over two real pipes: lines out, callbacks in, in order, thread-safe."""
    to_am_r, to_am_w = os.pipe()
    to_side_r, to_side_w = os.pipe()
    inbox = os.fdopen(to_side_r, "r", encoding="utf-8")
    outbox = os.fdopen(to_am_w, "w", encoding="utf-8")
    seen: list[object] = []
    closed = threading.Event()
    lc = LeaseContainers(
        inbox, outbox, on_allocated=seen.append, on_started=seen.append,
        on_completed=seen.append, on_node_lost=seen.append, on_shutdown=seen.append,
        on_closed=closed.set,
    ).start()  # fmt: skip
    threads = [
        threading.Thread(target=lc.acquire, args=(f"l{k}", "n1:1", (k,), "run it"),
                         kwargs={"memory_mb": 1024, "vcores": 1})
        for k in range(8)
    ]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lc.release("l3")
    with pytest.raises(ProtocolError):
        lc.release("bad\tkey")  # refused before anything is written
    am_in = os.fdopen(to_am_r, "r", encoding="utf-8")
    lines = [am_in.readline() for _ in range(9)]
    assert sorted(parse_sidecar_line(x).lease_id for x in lines[:8]) == [f"l{k}" for k in range(8)]
    assert parse_sidecar_line(lines[8]) == Release("l3")
    am_out = os.fdopen(to_side_w, "w", encoding="utf-8")
    replies = [m for m in MESSAGES if not isinstance(m, Acquire | Release | Finish)]
    for m in replies:
        am_out.write(encode(m))
    am_out.write("NONSENSE\tline\n")  # logged and skipped
    am_out.close()  # the AM is gone
    assert closed.wait(5) and lc.closed.is_set()
    assert seen == replies
    lc.finish("SUCCEEDED", "all\tdone\nnow")  # message cleaned to one field
    assert parse_sidecar_line(am_in.readline()) == Finish("SUCCEEDED", "all done now")
    outbox.close()
    assert lc.release("l1") is False  # a closed stream is not an error


# -- the sidecar's reconciliation (no arbiter, no AM) ------------------------------------------


def _sidecar(*extra: str) -> tuple[LeaseSidecar, io.StringIO]:
    args = parse_args(["--gpus", "6", "--command", "train", "--arbiter", "127.0.0.1:1",
                       "--hold-seconds", "2", *extra])  # fmt: skip
    out = io.StringIO()
    return LeaseSidecar(args, io.StringIO(), out), out


def _lines(out: io.StringIO) -> list:
    msgs = [parse_sidecar_line(x) for x in out.getvalue().splitlines()]
    out.seek(0)
    out.truncate()
    return msgs


def _grant(s: LeaseSidecar, lease: HeldLease, old: str | None = None) -> None:
    with s.agent._lock:
        s.agent.leases.pop(old, None)
        s.agent.leases[lease.lease_id] = lease
    s._on_allocation([lease])


A = [f"nA:1/s0/g{k}" for k in range(4)]
B = [f"nB:2/s0/g{k}" for k in range(2)]


def test_leases_become_acquires_renewals_keep_them_revocations_release() -> None:
    s, out = _sidecar()
    now = time.time()
    _grant(s, HeldLease("L1", frozenset(A + B), now - 1, now + 10, "auction"))
    s.reconcile(now)
    acq = {m.node_id: m for m in _lines(out)}
    assert set(acq) == {"nA:1", "nB:2"}
    assert acq["nA:1"].gpu_indices == (0, 1, 2, 3) and acq["nA:1"].gpus == 4
    assert (acq["nB:2"].memory_mb, acq["nB:2"].vcores, acq["nB:2"].command) == (2048, 2, "train")
    assert all(m.lease_id.startswith("L1@") for m in acq.values())
    for m in acq.values():
        s._allocated(Allocated(m.lease_id, f"c-{m.node_id}", m.node_id))
        s._started(Started(m.lease_id, f"c-{m.node_id}"))
    assert len(s.latencies) == 2

    # A renewal: the same GPUs in a new lease. Nothing changes in YARN.
    _grant(s, HeldLease("L2", frozenset(A + B), now, now + 20, "auction"), old="L1")
    s.reconcile(now + 1)
    assert _lines(out) == []

    # A revocation of B's GPUs (under a lease id the Agent never saw): B's container goes now.
    s._on_revocation(HeldLease("cut", frozenset(B), 0.0, 30.0, "auction"), 30.0)
    s.reconcile(now + 2)
    assert _lines(out) == [Release(acq["nB:2"].lease_id)]
    s._completed(Completed(acq["nB:2"].lease_id, "c-nB:2", -105, "killed"))  # ours: ignored
    assert s.failures == 0 and s.outcome is None

    # The lease ends unrenewed: the container is held --hold-seconds for a re-grant, then goes.
    s.renew_tried.add("L2")
    s.reconcile(now + 21)
    assert _lines(out) == []
    s.reconcile(now + 23.5)
    assert _lines(out) == [Release(acq["nA:1"].lease_id)]
    assert s.containers == {}

    # Won again in an auction: asked for anew; B stays revoked until a grant names it again.
    _grant(s, HeldLease("L3", frozenset(A + B), now + 24, now + 40, "auction"))
    s.reconcile(now + 25)
    again = _lines(out)
    assert sorted(m.node_id for m in again) == ["nA:1", "nB:2"]  # the new grant names B again


def test_a_re_grant_within_the_hold_keeps_the_container_and_exit_0_finishes() -> None:
    s, out = _sidecar()
    now = time.time()
    _grant(s, HeldLease("L1", frozenset(A), now - 1, now + 5, "auction"))
    s.reconcile(now)
    [acq] = _lines(out)
    s._started(Started(acq.lease_id, "c1"))
    s.renew_tried.add("L1")
    s.reconcile(now + 5.5)  # ended: held
    _grant(s, HeldLease("L2", frozenset(A), now + 6, now + 16, "auction"))
    s.reconcile(now + 6.1)  # the same GPUs again: kept
    assert _lines(out) == []
    s._completed(Completed(acq.lease_id, "c1", 1, "oops"))
    assert s.failures == 1 and s.outcome is None
    s.reconcile(now + 6.2)  # still leased: asked again
    [again] = _lines(out)
    assert again.gpu_indices == (0, 1, 2, 3) and again.lease_id != acq.lease_id
    s._started(Started(again.lease_id, "c2"))
    s._completed(Completed(again.lease_id, "c2", 0, ""))
    assert s.outcome == ("SUCCEEDED", "the job exited 0 in c2")


def test_node_lost_keeps_the_node_out_until_a_new_grant() -> None:
    s, out = _sidecar()
    now = time.time()
    _grant(s, HeldLease("L1", frozenset(A), now - 1, now + 30, "auction"))
    s.reconcile(now)
    [acq] = _lines(out)
    s._started(Started(acq.lease_id, "c1"))
    s._node_lost(NodeLost("nA:1"))
    s._completed(Completed(acq.lease_id, "c1", -100, "node lost"))  # YARN's doing
    assert s.failures == 0
    s.reconcile(now + 1)
    assert _lines(out) == []  # no container asked on a lost node
    _grant(s, HeldLease("L2", frozenset(A), now + 2, now + 30, "auction"))
    s.reconcile(now + 2)
    assert [m.node_id for m in _lines(out)] == ["nA:1"]


def test_gpu_index_and_sidecar_arguments() -> None:
    assert gpu_index("localhost:18041/s0/g3") == 3
    with pytest.raises(ValueError, match="not <machine>"):
        gpu_index("gpu-7")
    cmd = 'echo "$CUDA_VISIBLE_DEVICES" it\'s'
    b64 = base64.b64encode(cmd.encode()).decode()
    args = parse_args(["--gpus", "2", "--command-b64", b64])
    assert args.command == cmd
    for bad in (["--gpus", "0", "--command", "x"], ["--gpus", "1", "--command", "a\tb"],
                ["--gpus", "1", "--command-b64", "%%%"], ["--gpus", "1"]):  # fmt: skip
        with pytest.raises(SystemExit):
            parse_args(bad)


# -- what submit sends ---------------------------------------------------------------------


def test_submission_runs_the_lease_am_and_ships_files(tmp_path: Path) -> None:
    jar = tmp_path / "yarn-arbiter-am.jar"
    jar.write_bytes(b"PK jar")
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    venv = tmp_path / "venv.tar.gz"
    venv.write_bytes(b"\x1f\x8b tar")
    job = 'python train.py --out "$HOME/x" it\'s'
    am = LeaseAM(jar=str(jar), classpath=("/etc/hadoop", "/opt/hadoop/lib/*"),
                 python="./venv.tar.gz/bin/python", work_gpu_seconds=120,
                 sidecar_args=("--hold-seconds=5",))  # fmt: skip
    spec = SubmitSpec(name="n", command=job, max_gpus=4, files=(str(data),),
                      archives=(str(venv),), lease_am=am)  # fmt: skip
    spec.validate()
    resources = local_resources(spec)
    sub = build_submission(
        spec, yarn_app_id="application_1_0001", arbiter_app_id="app-1", token="secret",
        arbiter_address="arb:1", resources=resources,
    )  # fmt: skip
    assert sub.command.startswith(f"$JAVA_HOME/bin/java -Xmx256m {AM_MAIN_CLASS} 1><LOG_DIR>/")
    env = dict(sub.environment)
    assert env["CLASSPATH"] == "./*:/etc/hadoop:/opt/hadoop/lib/*"
    argv = shlex.split(env[ENV_SIDECAR])
    assert argv[:3] == ["./venv.tar.gz/bin/python", "-m", "yarn_bridge.lease_am"]
    assert argv[argv.index("--gpus") + 1] == "4" and argv[-1] == "--hold-seconds=5"
    assert argv[argv.index("--work-gpu-seconds") + 1] == "120"
    b64 = argv[argv.index("--command-b64") + 1]
    assert base64.b64decode(b64).decode() == job
    assert parse_args(argv[3:]).command == job  # what the sidecar will read
    assert not set(env[ENV_SIDECAR]) & set('"$`\\')  # safe in the launch script's export
    assert set(sub.local_resources) == {"yarn-arbiter-am.jar", "data.csv", "venv.tar.gz"}
    res = sub.local_resources["venv.tar.gz"]
    st = venv.stat()
    assert (res.type, res.size, res.timestamp) == ("ARCHIVE", st.st_size, st.st_mtime_ns // 10**6)
    assert res.resource == venv.as_uri() and res.resource.startswith("file:///")
    assert sub.local_resources["data.csv"].type == "FILE"
    shipped = env[ENV_LOCAL_RESOURCES].split(",")  # to the job containers: not the AM jar
    assert [x.split("=", 1)[0] for x in shipped] == ["data.csv", "venv.tar.gz"]
    assert (
        shipped[1] == f"venv.tar.gz=ARCHIVE:{st.st_size}:{st.st_mtime_ns // 10**6}:{venv.as_uri()}"
    )
    body = sub.to_json()
    entries = {e["key"]: e["value"] for e in body["am-container-spec"]["local-resources"]["entry"]}
    assert entries["venv.tar.gz"]["type"] == "ARCHIVE" and entries["data.csv"]["size"] == 4

    # The user's own AM, as before: its command as given, files shipped, no lease-AM env.
    own = SubmitSpec(name="n", command="my-am --x", max_gpus=1, files=(str(data),))
    sub = build_submission(own, yarn_app_id="a", arbiter_app_id="app-1", token="t",
                           arbiter_address="arb:1", resources=local_resources(own))  # fmt: skip
    assert sub.command == "my-am --x" and set(sub.local_resources) == {"data.csv"}
    assert ENV_SIDECAR not in sub.environment and "CLASSPATH" not in sub.environment


def test_submit_errors_and_the_classpath(tmp_path: Path) -> None:
    jar = tmp_path / "am.jar"
    jar.write_bytes(b"PK")
    for spec, error in (
        (SubmitSpec(name="n", command="x", max_gpus=1, lease_am=LeaseAM(jar=str(tmp_path / "no"))),
         "does not exist: build it with"),
        (SubmitSpec(name="n", command="a\tb", max_gpus=1, lease_am=LeaseAM(jar=str(jar))),
         "tabs or line breaks"),
        (SubmitSpec(name="n", command="x", max_gpus=1,
                    lease_am=LeaseAM(jar=str(jar), python="$HOME/py")), "--python"),
        (SubmitSpec(name="n", command="x", max_gpus=1, env={ENV_SIDECAR: "x"}), "cannot set"),
    ):  # fmt: skip
        with pytest.raises(SubmitError, match=error):
            spec.validate()
    with pytest.raises(SubmitError, match=r"--file .*/missing\.txt"):
        local_resources(SubmitSpec(name="n", command="x", max_gpus=1,
                                   files=(str(tmp_path / "missing.txt"),)))  # fmt: skip
    same = tmp_path / "sub"
    same.mkdir()
    (same / "am.jar").write_bytes(b"x")
    with pytest.raises(SubmitError, match=re.escape("two local resources are named 'am.jar'")):
        local_resources(SubmitSpec(name="n", command="x", max_gpus=1, files=(str(jar),),
                                   archives=(str(same / "am.jar"),)))  # fmt: skip

    conf = tmp_path / "conf"
    conf.mkdir()
    assert application_classpath({"HADOOP_CONF_DIR": str(conf)}) == DEFAULT_APPLICATION_CLASSPATH
    (conf / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.application.classpath</name>"
        "<value>/c/conf, /c/jars/*\n</value></property></configuration>"
    )
    assert application_classpath({"HADOOP_CONF_DIR": str(conf)}) == ("/c/conf", "/c/jars/*")
    assert application_classpath({}) == DEFAULT_APPLICATION_CLASSPATH
    assert default_am_jar({}) == str(REPO / "java" / "am" / "target" / "yarn-arbiter-am.jar")
    assert default_am_jar({"YARN_ARBITER_AM_JAR": "/x.jar"}) == "/x.jar"

    import argparse

    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers())
    with pytest.raises(SystemExit):  # one of --command / --am-command, not both
        parser.parse_args(["submit", "--gpus", "1", "--command", "a", "--am-command", "b"])
    with pytest.raises(SystemExit):
        parser.parse_args(["submit", "--gpus", "1"])


# -- on a real YARN ------------------------------------------------------------------------------


@pytest.mark.yarn
@pytest.mark.slow
def test_leases_become_yarn_containers_end_to_end(
    yarn_cluster, arbiter: Arbiter, am_jar: Path, tmp_path: Path
) -> None:
    rm_url, arb = yarn_cluster.rm_url, arbiter
    started = tmp_path / "started.txt"  # one line per container start
    done = tmp_path / "done"
    (tmp_path / "data.txt").write_text("shipped\n")  # --file and --archive reach the jobs
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "inner.txt").write_text("unpacked\n")
    subprocess.run(["tar", "czf", str(tmp_path / "pkg.tar.gz"), "-C", str(tmp_path / "pkg"), "."],
                   check=True)  # fmt: skip
    job = (
        'echo "$CONTAINER_ID $YARN_ARBITER_LEASE_ID $CUDA_VISIBLE_DEVICES $(cat data.txt) '
        f'$(cat pkg.tar.gz/inner.txt) token=${{YARN_ARBITER_APP_TOKEN:-none}}" >> {started}; '
        f"while [ ! -e {done} ]; do sleep 0.1; done"
    )
    t_submit = time.monotonic()
    yarn_id, app_id = submit_job(yarn_cluster, arb, am_jar, job, 6, "--work-gpu-seconds", "600",
                                 "--file", str(tmp_path / "data.txt"),
                                 "--archive", str(tmp_path / "pkg.tar.gz"))  # fmt: skip

    # Leases -> containers: YARN's GPUs per node equal the leased GPUs per machine.
    def matched() -> tuple[dict[str, int], dict] | None:
        app = yarn_app(rm_url, yarn_id)
        assert app["state"] not in ("FINISHED", "FAILED", "KILLED"), app.get("diagnostics")
        leased = gpus_by_machine(arb.leases(app_id))
        if leased and yarn_gpus_by_node(rm_url) == leased and app_gpus(app) == sum(leased.values()):
            return leased, app
        return None

    leased, app = wait_for("YARN containers holding the leased GPUs", matched, timeout=120)
    t_running = time.monotonic() - t_submit
    assert sum(leased.values()) >= 1 and set(leased) <= set(yarn_cluster.node_ids)
    assert app["runningContainers"] == 1 + len(leased)  # the AM + one per leased machine

    def job_starts() -> list[str]:
        return started.read_text().splitlines() if started.exists() else []

    lines = wait_for("every container to start its job",
                     lambda: len(job_starts()) == len(leased) and job_starts())  # fmt: skip
    cvd = sorted(len(line.split()[2].split(",")) for line in lines)
    assert cvd == sorted(leased.values())  # CUDA_VISIBLE_DEVICES: that machine's GPUs
    # Shipped files are there; the app's arbiter token stays with the AM.
    assert all(line.split()[3:] == ["shipped", "unpacked", "token=none"] for line in lines)
    print(f"\nsubmit -> containers holding the leased GPUs: {t_running:.2f} s; {leased}")

    # Renewals (5 s leases) keep the containers: three renewals, no restart.
    for _ in range(3):
        before = {x.lease_id for x in arb.leases(app_id)}
        wait_for("a renewal", lambda b=before: not {x.lease_id for x in arb.leases(app_id)} & b,
                 timeout=30)  # fmt: skip
    assert job_starts() == lines, "a renewal restarted a container"
    assert gpus_by_machine(arb.leases(app_id)) == leased
    assert yarn_gpus_by_node(rm_url) == leased

    # A revocation: drain one leased machine with no grace. The AM releases that machine's
    # container (the app keeps running on the other); nobody kills the app.
    victim = min(leased, key=lambda m: (leased[m], m))
    t0 = time.monotonic()
    arb.call("DrainNode", pb.DrainNodeRequest(machine=victim, grace_seconds=0))
    wait_for(f"YARN to free {victim}'s GPUs", lambda: victim not in yarn_gpus_by_node(rm_url),
             timeout=20)  # fmt: skip
    t_release = time.monotonic() - t0
    rest = {m: n for m, n in leased.items() if m != victim}
    assert yarn_gpus_by_node(rm_url) == rest
    app = yarn_app(rm_url, yarn_id)
    assert app["state"] == "RUNNING" and app_gpus(app) == sum(rest.values())
    assert app["runningContainers"] == 1 + len(rest)
    assert job_starts() == lines  # the other containers were not touched
    print(f"drain {victim} -> its GPUs free in YARN: {t_release:.2f} s")

    # The job exits 0: the app finishes SUCCEEDED and its leases are freed.
    t0 = time.monotonic()
    done.touch()
    app = wait_for("the app to finish", lambda: final(rm_url, yarn_id), timeout=60)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app["diagnostics"]
    wait_for("the leases to be freed", lambda: not arb.leases(app_id), timeout=30)
    wait_for("YARN's GPUs to be free", lambda: yarn_gpus_by_node(rm_url) == {}, timeout=30)
    print(f"job done -> app FINISHED/SUCCEEDED, leases freed: {time.monotonic() - t0:.2f} s")
    running = [x for x in am_log(yarn_cluster, yarn_id).splitlines() if "running " in x]
    print("\n".join(running))  # the sidecar's lease -> container running latencies


@pytest.mark.yarn
@pytest.mark.slow
def test_a_job_that_keeps_failing_fails_the_app(
    yarn_cluster, arbiter: Arbiter, am_jar: Path
) -> None:
    yarn_id, app_id = submit_job(yarn_cluster, arbiter, am_jar, "echo trying; exit 3", 2,
                                 "--sidecar-arg=--max-failures=1")  # fmt: skip
    app = wait_for("the app to end", lambda: final(yarn_cluster.rm_url, yarn_id), timeout=90)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "FAILED")
    assert "the job failed 2 times; last exit 3" in app["diagnostics"]
    wait_for("the leases to be freed", lambda: not arbiter.leases(app_id), timeout=30)
    assert yarn_gpus_by_node(yarn_cluster.rm_url) == {}


@pytest.mark.yarn
@pytest.mark.slow
def test_a_lost_node_ends_its_container_and_the_app_goes_on(
    yarn_cluster, arbiter: Arbiter, am_jar: Path, tmp_path: Path
) -> None:
    rm_url = yarn_cluster.rm_url
    done, started = tmp_path / "done", tmp_path / "started"
    job = f'echo "$CONTAINER_ID" >> {started}; while [ ! -e {done} ]; do sleep 0.1; done'
    yarn_id, app_id = submit_job(yarn_cluster, arbiter, am_jar, job, 8)

    def on_both_nodes() -> dict[str, int] | None:
        leased = gpus_by_machine(arbiter.leases(app_id))
        return leased if len(leased) == 2 and yarn_gpus_by_node(rm_url) == leased else None

    wait_for("containers on both nodes", on_both_nodes, timeout=120)
    wait_for("both jobs to start", lambda: started.exists() and
             len(started.read_text().split()) == 2)  # fmt: skip
    attempt = httpx.get(f"{rm_url}/ws/v1/cluster/apps/{yarn_id}/appattempts", timeout=5).json()
    am_node = attempt["appAttempts"]["appAttempt"][-1]["nodeId"]
    [victim] = [n for n in yarn_cluster.node_ids if n != am_node]
    name = yarn_cluster.nm_name(victim)
    yarn_cluster.kill_nm(int(name.removeprefix("nm")))
    try:
        # LOST after the NodeManager liveness expiry: the watcher takes its GPUs away (the
        # survivor keeps its machine name, host:port, so its lease is untouched), the AM hears
        # NODE_LOST, and the app holds GPUs on the surviving node only, as leased.
        def survivor_only() -> bool:
            leased = gpus_by_node(arbiter.leases(app_id), [am_node])
            return set(leased) == {am_node} and yarn_gpus_by_node(rm_url) == leased

        wait_for(f"{victim}'s GPUs to leave the leases and YARN", survivor_only, timeout=60)
        assert yarn_app(rm_url, yarn_id)["state"] == "RUNNING"
        heard = f"NODE_LOST {victim}"
        wait_for(heard, lambda: heard in am_log(yarn_cluster, yarn_id), timeout=30)
        # No churn on the survivor: its container was never restarted (one start per node).
        assert len(started.read_text().split()) == 2
        # The dead NodeManager's job container outlived it (its own session); the launcher
        # finds it by working directory and ends it.
        orphans = kill_orphan_containers(yarn_cluster.workdir, node=name)
        assert orphans, "the lost node's container process should have outlived its NM"
        assert not kill_orphan_containers(yarn_cluster.workdir, node=name)
    finally:
        yarn_cluster.start_nm(int(name.removeprefix("nm")))
    done.touch()
    app = wait_for("the app to finish", lambda: final(rm_url, yarn_id), timeout=60)
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app["diagnostics"]


def test_a_bracket_runs_trials_phase_by_phase(tmp_path: Path) -> None:
    """The Hyperband workload: one command per free lease part, the better half kept after
    each phase by the trials' recorded losses, done after the last phase."""
    import numpy as np

    from yarn_bridge.lease_am import Bracket

    b = Bracket(4, 100, tmp_path, python="py")
    assert b.phases == (100, 200, 400)
    cmds = {f"k{i}": b.next_command(f"k{i}") for i in range(5)}
    assert cmds["k4"] is None  # four trials, four parts: a fifth part waits
    assert "--samples 100" in cmds["k0"] and "trial-0.npz" in cmds["k0"]
    for k, loss in enumerate((0.9, 0.2, 0.5, 0.1)):
        np.savez(b.checkpoint(k), w=np.zeros(2), done=100, loss=loss)
    b.release("k0")  # a container lost before its job ended: the trial is free again
    assert "trial-0.npz" in (b.next_command("k5") or "")
    assert not b.exited("k1", 3)  # a failed job is not done; its trial is free again
    assert "trial-1.npz" in (b.next_command("k6") or "")
    for key in ("k5", "k6", "k2", "k3"):
        assert not b.exited(key, 0)
    assert b.phase == 1 and [k for k, _ in b.trials] == [3, 1]  # the two lowest losses
    assert "--samples 200" in (b.next_command("a") or "")
    assert "--samples 200" in (b.next_command("b") or "")
    assert not b.exited("a", 0) and not b.exited("b", 0)
    assert b.phase == 2 and [k for k, _ in b.trials] == [3]
    assert b.get_num_phases() == 3 and b.get_jobs_remaining(["g"])  # the estimator's view
    assert b.exited("c", 0) is False  # not a container of the bracket
    assert "--samples 400" in (b.next_command("c") or "")
    assert b.exited("c", 0)


@pytest.mark.yarn
@pytest.mark.slow
def test_a_hyperband_bracket_runs_on_yarn(
    yarn_cluster, arbiter: Arbiter, am_jar: Path, tmp_path: Path
) -> None:
    """The Hyperband example on the real cluster: every trial of every phase is a job in a
    container on the app's leased GPUs, and the app finishes when the bracket does."""
    import numpy as np

    from arbiter.examples.train_job import checkpoint_loss

    trials = tmp_path / "trials"
    yarn_id, app_id = submit_job(yarn_cluster, arbiter, am_jar, "unused", 8,
                                 "--sidecar-arg=--hyperband=4:512",
                                 f"--sidecar-arg=--trials-dir={trials}")  # fmt: skip
    app = wait_for("the bracket to finish", lambda: final(yarn_cluster.rm_url, yarn_id),
                   timeout=240)  # fmt: skip
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app["diagnostics"]
    done = {}
    for k in range(4):
        with np.load(trials / f"trial-{k}.npz") as ck:
            done[k] = int(ck["done"])
    # 4 trials to 512 samples, the best 2 on to 1024, the best 1 on to 2048
    assert sorted(d >= 2048 for d in done.values()) == [False, False, False, True]
    assert sum(d >= 1024 for d in done.values()) == 2
    best = max(done, key=done.__getitem__)
    assert checkpoint_loss(trials / f"trial-{best}.npz") < float("inf")
    log = am_log(yarn_cluster, yarn_id)
    assert log.count("trial done in") >= 6 and "bracket done: best trial" in log
    wait_for("the leases to be freed", lambda: not arbiter.leases(app_id), timeout=30)
