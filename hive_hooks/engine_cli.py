"""``qoop-hive engine start|stop|status|jars`` and ``qoop-hive beeline``: a local HiveServer2
that outlives the command (the Spark Thrift Server, or Apache Hive's own on Tez), and Hive's
BeeLine from the Hive jars.

* **engine start** runs ``python -m hive_hooks.engine`` in its own session (so it outlives this
  command and Ctrl-C here does not reach it), waits until it accepts connections, prints the JDBC
  URL and writes ``qoop-hive-engine.json`` (pids, port, URL) in the work dir. **engine stop**
  sends SIGTERM to that process group (the engine stops its JVM), then to the JVM's group if it
  is still there, SIGKILL after a grace period; a pid is only signalled if its command line is
  still the engine's (no stray kill after pid reuse). Both are idempotent.
* **engine start --on-yarn** runs ``python -m hive_hooks.yarn_engine`` instead: the same server
  with its executors in YARN containers (``--hadoop-conf-dir``, queue ``--yarn-queue``), sized by
  the shares of the queries it runs; the pid file also records its control endpoint
  (``control``), which ``--engine-control HOST:PORT`` gives a query run so its share is pushed
  there (:mod:`hive_hooks.yarn_engine`). ``--engine hive`` runs
  ``python -m hive_hooks.hive_engine`` (:mod:`hive_hooks.hive_engine`).
* **engine status** exits with 3 when no engine runs (LSB).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from hive_hooks.beeline.args import Parser, hostport, parse_args
from hive_hooks.beeline.errors import (
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
)
from hive_hooks.errors import DRIVER_ERRORS

__all__ = [
    "PID_FILE",
    "build_engine_parser",
    "default_workdir",
    "engine_jars",
    "engine_start",
    "engine_status",
    "engine_stop",
    "run_beeline",
    "run_engine",
]

PID_FILE = "qoop-hive-engine.json"
ENGINE_LOG = "qoop-hive-engine.log"


def default_workdir() -> Path:
    """``engine/`` in ``qoop.hive.home`` (``$QOOP_HIVE_HOME``, else ``~/.qoop-hive``;
    :mod:`hive_hooks.settings`)."""
    from hive_hooks.settings import replanner_home

    return replanner_home() / "engine"


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _cmdline(pid: int) -> str:
    """The command line of ``pid``, "" if it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


_ENGINE_MARKERS = ("hive_hooks.engine", "hive_hooks.yarn_engine", "hive_hooks.hive_engine")
# the JVM: Spark's Thrift Server, our PySpark driver (yarn), Hive's own HiveServer2
_JVM_MARKERS = ("HiveThriftServer2", "hive_hooks.yarn_engine", "service.server.HiveServer2")


def _is_engine(pid: int | None, markers: tuple[str, ...]) -> bool:
    """True if ``pid`` runs and its command line is still the engine's (not a reused pid)."""
    if not pid or not _pid_alive(pid):
        return False
    cmdline = _cmdline(pid)
    return any(m in cmdline for m in markers)


def _read_pidfile(workdir: Path) -> dict[str, Any] | None:
    """The work dir's pid file, None if there is none (or it is unreadable)."""
    try:
        return json.loads((workdir / PID_FILE).read_text())
    except (OSError, ValueError):
        return None


def _engine_running(workdir: Path) -> dict[str, Any] | None:
    """The pid file of the work dir's engine if it runs, else None."""
    info = _read_pidfile(workdir)
    if info and (
        _is_engine(info.get("pid"), _ENGINE_MARKERS)
        or _is_engine(info.get("jvm_pid"), _JVM_MARKERS)
    ):
        return info
    return None


def _tail(path: Path, n: int = 15) -> str:
    """The last ``n`` lines of a log."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def engine_start(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``engine start`` (module docstring); prints the JDBC URL."""
    from arbiter.localhost import free_port
    from hive_hooks.engine import port_is_open

    workdir = Path(args.workdir).expanduser().resolve()
    if info := _engine_running(workdir):
        print(f"already running: {info['url']}  (pid {info['pid']})", file=out)
        return EXIT_OK
    port = args.port or free_port()
    if port_is_open(port):
        raise CliError(f"port 127.0.0.1:{port} is already in use")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / ENGINE_LOG
    if args.engine == "hive":
        module = "hive_hooks.hive_engine"
    else:
        module = "hive_hooks.yarn_engine" if args.on_yarn else "hive_hooks.engine"
    cmd = [sys.executable, "-m", module, "--port", str(port), "--dir", str(workdir)]
    cmd += ["--driver-memory", args.driver_memory, "--timeout", str(args.timeout)]
    control = None
    if args.engine == "hive":
        if args.on_yarn:
            conf_dir = args.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
            if not conf_dir:
                raise CliError("--on-yarn needs --hadoop-conf-dir or HADOOP_CONF_DIR", EXIT_USAGE)
            cmd += ["--tez", "yarn", "--hadoop-conf-dir", str(Path(conf_dir).expanduser())]
        cmd += ["--queue", args.yarn_queue]
        if args.hooks_arbiter:
            cmd += ["--arbiter", args.hooks_arbiter]
            if args.service_token_file:
                token = Path(args.service_token_file).expanduser().resolve()
                if not token.is_file():
                    raise CliError(f"--service-token-file {token}: no such file", EXIT_USAGE)
                cmd += ["--service-token-file", str(token)]
    elif args.on_yarn:
        conf_dir = args.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
        if not conf_dir:
            raise CliError("--on-yarn needs --hadoop-conf-dir or HADOOP_CONF_DIR", EXIT_USAGE)
        control = free_port()
        cmd += ["--hadoop-conf-dir", str(Path(conf_dir).expanduser().resolve())]
        cmd += ["--queue", args.yarn_queue, "--control-port", str(control)]
        cmd += ["--max-executors", str(args.max_executors)]
    with open(log, "ab") as logf:
        logf.write(f"\n--- {dt.datetime.now().isoformat(timespec='seconds')} start\n".encode())
        logf.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    url = f"jdbc:hive2://127.0.0.1:{port}/default;auth=noSasl"
    info = {"pid": proc.pid, "jvm_pid": None, "port": port, "url": url, "workdir": str(workdir)}
    if control is not None:
        info["control"] = f"127.0.0.1:{control}"
    info["started_at"] = dt.datetime.now().isoformat(timespec="seconds")
    _write_pidfile(workdir, info)
    if not args.silent:
        print(f"starting HiveServer2 in {workdir} (log {log}) ...", file=err, flush=True)
    t0 = time.monotonic()
    try:
        info["jvm_pid"] = _wait_started(proc, port, log, args.timeout + 15)
    except BaseException:  # failed, timed out or Ctrl-C: leave nothing running
        _stop(workdir, info)
        raise
    _write_pidfile(workdir, info)
    if not args.silent:
        print(f"ready in {time.monotonic() - t0:.1f} s (pid {proc.pid})", file=err, flush=True)
    if control is not None and not args.silent:
        print(f"on YARN; share control at {info['control']}", file=err, flush=True)
    print(url, file=out, flush=True)
    return EXIT_OK


def _wait_started(
    proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float
) -> int | None:
    """Wait until the engine accepts connections; its JVM pid (from the engine's ready line,
    None if the line is not there but a connection opens)."""
    from hive_hooks.engine import port_is_open

    ready = re.compile(rf"ready in [\d.]+ s: jdbc:hive2://127\.0\.0\.1:{port}/\S+.*pid (\d+)")
    deadline = time.monotonic() + timeout
    connected_at: float | None = None  # no ready line yet, but a client got in
    while True:
        m = ready.search(_tail(log, 40))
        if port_is_open(port):
            if m:
                return int(m.group(1))
            if connected_at is None:
                from pyhive import hive

                with contextlib.suppress(*DRIVER_ERRORS):  # not ready yet
                    hive.connect(host="127.0.0.1", port=port, auth="NOSASL").close()
                    connected_at = time.monotonic()
            elif time.monotonic() - connected_at > 10:  # the engine printed no ready line
                return None
        if proc.poll() is not None:
            raise CliError(
                f"the engine exited with code {proc.returncode} while starting; log: {log}\n"
                f"{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise CliError(f"the engine did not start in {timeout:.0f} s; log: {log}")
        time.sleep(0.5)


def _write_pidfile(workdir: Path, info: dict[str, Any]) -> None:
    """Replace the pid file atomically."""
    tmp = workdir / (PID_FILE + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    tmp.replace(workdir / PID_FILE)


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process group led by ``pid``, and ``pid`` itself."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` is gone; False if it still runs after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _stop(workdir: Path, info: dict[str, Any]) -> list[int]:
    """Stop the engine of a pid file (module docstring); the pids that were signalled."""
    stopped = []
    for key, marker, grace in (
        ("pid", _ENGINE_MARKERS, 45.0),
        ("jvm_pid", _JVM_MARKERS, 15.0),
    ):
        pid = info.get(key)
        if not _is_engine(pid, marker):
            continue
        _signal_group(pid, signal.SIGTERM)
        if not _wait_gone(pid, grace):
            _signal_group(pid, signal.SIGKILL)
            _wait_gone(pid, 10.0)
        stopped.append(pid)
    (workdir / PID_FILE).unlink(missing_ok=True)
    return stopped


def engine_stop(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``engine stop``: stop the engine of the work dir, if one runs (idempotent)."""
    workdir = Path(args.workdir).expanduser().resolve()
    info = _read_pidfile(workdir)
    if info is None:
        print(f"no engine running in {workdir} (no {PID_FILE})", file=out)
        return EXIT_OK
    stopped = _stop(workdir, info)
    if not stopped:
        print(f"no engine running in {workdir} (stale {PID_FILE} removed)", file=out)
    else:
        print(f"stopped the engine on port {info.get('port')} (pid {stopped[0]})", file=out)
    return EXIT_OK


def engine_jars(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Fetch Hive's jars (Maven Central, once) and build the Hive hooks' jar."""
    from hive_hooks.hive_engine import build_hooks_jar, ensure_hive_jars
    from yarn_bridge.local_hadoop import HadoopError

    def say(m: str) -> None:
        print(m, file=err, flush=True)

    try:
        jars = ensure_hive_jars(progress=say)
        hooks = build_hooks_jar(progress=say)
    except HadoopError as e:
        raise CliError(str(e)) from e
    print(f"Hive jars: {jars}\nhooks jar: {hooks}", file=out)
    return EXIT_OK


def run_beeline(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``qoop-hive beeline ARGS``: Hive's BeeLine (from the Hive jar cache) with ARGS, e.g.
    ``-u 'jdbc:hive2://127.0.0.1:10001/default;auth=noSasl' -e 'SELECT 1'``; its exit status."""
    from hive_hooks.hive_engine import beeline_command, ensure_hive_jars
    from yarn_bridge.local_hadoop import HadoopError

    try:
        jars = ensure_hive_jars(progress=lambda m: print(m, file=err, flush=True))
    except HadoopError as e:
        raise CliError(str(e)) from e
    cmd = beeline_command(None, *argv, jars=jars)
    if out is sys.stdout and err is sys.stderr:  # a terminal user: BeeLine takes over
        os.execv(cmd[0], cmd)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out.write(proc.stdout)
    err.write(proc.stderr)
    return proc.returncode


def engine_status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``engine status``: running, starting or not running (exit status 3)."""
    from hive_hooks.engine import port_is_open

    workdir = Path(args.workdir).expanduser().resolve()
    info = _engine_running(workdir)
    if info is None:
        stale = " (stale pid file)" if _read_pidfile(workdir) else ""
        print(f"not running{stale}: {workdir}", file=out)
        return EXIT_NOT_RUNNING
    accepting = port_is_open(int(info["port"]))
    state = "running" if accepting else "starting (port not open yet)"
    print(
        f"{state}: {info['url']}  (pid {info['pid']}, JVM pid {info.get('jvm_pid') or '?'}, "
        f"since {info.get('started_at', '?')}, work dir {workdir})",
        file=out,
    )
    return EXIT_OK


def build_engine_parser() -> Parser:
    """The parser of ``qoop-hive engine``."""
    p = Parser(
        prog=f"{PROG} engine",
        description="A local HiveServer2 (NOSASL, 127.0.0.1 only): the Spark Thrift Server from "
        "the pyspark wheel, or with --engine hive Apache Hive's own on Tez. start returns once "
        "it accepts connections and prints its JDBC URL; it keeps running after the command "
        "exits, until engine stop. Tables live in the work dir and survive a restart.",
        epilog=f"examples:\n  {PROG} engine start --port 10000 --workdir /tmp/hs2\n"
        f"  {PROG} engine start --engine hive --port 10001 --workdir /tmp/hive\n"
        f"  {PROG} engine start --engine hive --on-yarn --hadoop-conf-dir "
        "/tmp/yarn/etc/client --workdir /tmp/hive\n"
        f"  {PROG} engine status --workdir /tmp/hs2\n"
        f"  {PROG} engine stop --workdir /tmp/hs2\n"
        f"  {PROG} engine jars   (fetch Hive's jars and build the hooks jar ahead of time)\n\n"
        "exit status: 0 ok; 1 failed to start; 3 status: not running.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("start", "stop", "status", "jars"))
    p.add_argument(
        "--engine",
        choices=("spark", "hive"),
        default="spark",
        help="start: spark = the Spark Thrift Server (light, the default); hive = Apache Hive "
        "4.0.1's HiveServer2 on Tez (jars fetched from Maven Central on first use)",
    )
    p.add_argument(
        "--hooks-arbiter",
        type=hostport,
        metavar="HOST:PORT",
        help="start, --engine hive: load the Hive hooks, which register every query with this "
        "arbiter (so plain beeline queries count in its share)",
    )
    p.add_argument(
        "--service-token-file",
        metavar="FILE",
        help="--hooks-arbiter: the credential the arbiter issued to query services "
        "(arbiter.query.service-token-file)",
    )
    workdir = default_workdir()
    p.add_argument(
        "--workdir",
        default=str(workdir),
        metavar="DIR",
        help=f"warehouse, metastore, logs and pid file (default {workdir})",
    )
    p.add_argument("--port", type=int, help="start: TCP port (default: a free one)")
    p.add_argument("--driver-memory", default="1g", help="start: JVM heap (default 1g)")
    p.add_argument(
        "--timeout", type=float, default=180.0, help="start: seconds to wait (default 180)"
    )
    p.add_argument("--silent", action="store_true", help="print only the JDBC URL")
    p.add_argument(
        "--on-yarn",
        action="store_true",
        help="start: spark: executors in YARN containers, sized by the queries' shares; "
        "hive: Tez AMs and tasks in YARN containers",
    )
    p.add_argument(
        "--hadoop-conf-dir",
        metavar="DIR",
        help="--on-yarn: YARN client conf (default $HADOOP_CONF_DIR)",
    )
    p.add_argument("--yarn-queue", default="analytics", help="--on-yarn: queue (default analytics)")
    p.add_argument(
        "--max-executors", type=int, default=8, help="--on-yarn: executor cap (default 8)"
    )
    return p


def run_engine(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``qoop-hive engine ACTION ...``: its exit status."""
    args = parse_args(build_engine_parser(), argv, out)
    action = {
        "start": engine_start,
        "stop": engine_stop,
        "status": engine_status,
        "jars": engine_jars,
    }
    return action[args.action](args, out, err)
