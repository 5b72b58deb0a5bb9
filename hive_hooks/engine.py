"""A local, real HiveServer2 engine for hive_hooks: the Spark Thrift Server from the pyspark wheel.

Recipe and measurements: ``../shared/spec/local-hive-engine.md`` (sections 1 to 3). Decisions taken
from it:

* **Engine.** The PyPI ``pyspark`` package (4.3) ships ``spark-hive-thriftserver``, a real
  HiveServer2. The wheel has no ``start-thriftserver.sh``, so the server is started with
  ``$SPARK_HOME/bin/spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2``
  where ``SPARK_HOME`` is the installed ``pyspark`` package directory. spark-submit and spark-class
  ``exec`` down to ``java``, so the Popen PID is the JVM PID (spec section 2).
* **Process group.** The server runs in its own session (``start_new_session=True``), so Ctrl-C in
  the parent's terminal does not reach it and :meth:`LocalHiveServer.stop` can signal the whole
  group: SIGTERM (the JVM exits in about 2 s), then SIGKILL after a grace period. ``stop()`` is
  idempotent and is also registered with ``atexit`` so an interpreter exit leaves no JVM behind.
  :meth:`LocalHiveServer.kill` sends SIGKILL to the group at once (a crash, for tests: no
  shutdown hooks run, the metastore and the running statements are cut off mid-write).
* **Restart after a kill.** A SIGKILLed server leaves embedded Derby's lock files
  (``metastore_db/db.lck``, ``dbex.lck``) behind. Derby itself decides with an OS lock
  (``fcntl``) on ``dbex.lck``, not with the files' existence: measured, a server restarted on
  the work dir of a killed one boots, recovers the metastore from Derby's log and sees every
  table (including one made by a CTAS just before the kill). So the launcher does **not** delete
  the files (deleting them while a live JVM holds the database is how embedded Derby gets
  corrupted). What it does instead: :meth:`LocalHiveServer.start` probes that OS lock
  (:func:`metastore_in_use`) and refuses to start on a work dir whose metastore another live
  process has open (a leftover server), with a clear error, instead of a Derby boot failure
  (``XSDB6``) deep in the server log.
* **Network.** Bound to 127.0.0.1 only (``hive.server2.thrift.bind.host`` and
  ``SPARK_LOCAL_IP``), binary transport, on a free port picked by binding port 0 (or a given one).
* **Auth.** ``hive.server2.authentication=NOSASL`` on the server and ``auth='NOSASL'`` in pyhive
  (plain TBufferedTransport; no SASL library involved). A mismatch shows up as
  ``TSocket read 0 bytes``, never a hang.
* **Isolation.** Everything the server writes lives under one work dir: ``warehouse/``, the embedded
  Derby ``metastore_db/`` (+ ``derby/`` for derby.log), ``local/`` (spark.local.dir), ``tmp/``
  (java.io.tmpdir, downloaded resources), ``scratch/``, ``oplogs/`` (operation logs) and
  ``logs/server.log`` (the JVM's stdout and stderr). Without these settings Spark and Hive litter
  /tmp. Embedded Derby allows one server per ``metastore_db``, so each server needs its own work
  dir; a server restarted on the same dir sees the tables it left there.
* **Small footprint.** ``local[2]``, 1 GiB driver heap, 4 shuffle partitions, Spark UI off. RSS is
  about 400 MB after start and can grow to 1 to 2 GB under TPC workloads.
* **Readiness.** Startup takes 14 to 26 s (Derby metastore creation included). ``start()`` polls
  until the port accepts a TCP connection and then until a pyhive connection opens; if the JVM exits
  or the timeout passes, it raises :class:`HiveServerStartError` naming the log file, with its tail.

Usage::

    with LocalHiveServer() as srv:
        conn = srv.connect()
        cur = conn.cursor()
        cur.execute("SELECT 1")

Command line (foreground until Ctrl-C)::

    python -m hive_hooks.engine --port 10000 --dir /tmp/hs2
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arbiter.localhost import free_port
from hive_hooks.errors import DRIVER_ERRORS

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
HOST = "127.0.0.1"
DEFAULT_START_TIMEOUT = 180.0
LOG_TAIL_LINES = 40


class HiveServerStartError(RuntimeError):
    """A local HiveServer2 did not become reachable (exited early or timed out)."""


def port_is_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def metastore_in_use(work_dir: str | os.PathLike[str]) -> bool:
    """True if a live process holds the embedded Derby metastore of ``work_dir`` open.

    Derby takes an exclusive OS lock (``fcntl``) on ``metastore_db/dbex.lck`` while it has the
    database booted; the lock dies with the process, the file does not (module docstring).
    """
    path = Path(work_dir) / "metastore_db" / "dbex.lck"
    try:
        f = open(path, "rb+")  # noqa: SIM115 - closed below
    except OSError:
        return False
    with f:
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.lockf(f, fcntl.LOCK_UN)
        return False


def spark_home() -> Path:
    """The installed pyspark package directory, which is a complete SPARK_HOME (bin/, jars/)."""
    try:
        import pyspark
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "pyspark is not installed; install the 'hive' extra: pip install -e '.[hive]'"
        ) from e
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-submit").exists():  # pragma: no cover
        raise RuntimeError(f"{home} has no bin/spark-submit; is pyspark complete?")
    return home


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(log file not readable)"
    return "\n".join(text.splitlines()[-lines:])


class LocalHiveServer:
    """A Spark Thrift Server (HiveServer2) child process on 127.0.0.1.

    ``port=None`` picks a free port; ``work_dir=None`` uses a new temporary directory that
    :meth:`stop` removes (a given ``work_dir`` is kept, so its tables survive a restart).
    """

    what = "Spark Thrift Server"

    def __init__(
        self,
        port: int | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        driver_memory: str = "1g",
        master: str = "local[2]",
        shuffle_partitions: int = 4,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        extra_conf: dict[str, str] | None = None,
    ) -> None:
        self.port = port if port is not None else free_port()
        self._own_dir = work_dir is None
        self.work_dir = Path(
            tempfile.mkdtemp(prefix="hs2-") if work_dir is None else work_dir
        ).resolve()
        self.driver_memory = driver_memory
        self.master = master
        self.shuffle_partitions = shuffle_partitions
        self.start_timeout = start_timeout
        self.extra_conf = dict(extra_conf or {})
        self.log_path = self.work_dir / "logs" / "server.log"
        self.start_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None

    # -- properties ------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return HOST

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:hive2://{HOST}:{self.port}/default"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings of the server (work dir isolation, small footprint), then
        ``extra_conf``."""
        w = self.work_dir
        return {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(w / "local"),
            "spark.sql.warehouse.dir": str(w / "warehouse"),
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.driver.extraJavaOptions": (
                f"-Dderby.system.home={w / 'derby'} -Djava.io.tmpdir={w / 'tmp'}"
            ),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={w / 'metastore_db'};create=true"
            ),
            # Spark interrupts a statement's thread on cancel; inside the embedded Derby
            # metastore that closes a pooled connection, and a few cancels exhaust the pool and
            # hang the server (40 random cancels reproduce it). Unpooled connections do not.
            "spark.hadoop.datanucleus.connectionPoolingType": "None",
            **self.extra_conf,
        }

    def hive_conf(self) -> dict[str, str]:
        """The HiveServer2 settings: loopback, binary NOSASL transport, paths in the work dir."""
        w = self.work_dir
        return {
            "hive.server2.thrift.bind.host": HOST,
            "hive.server2.thrift.port": str(self.port),
            "hive.server2.authentication": "NOSASL",
            "hive.server2.transport.mode": "binary",
            "hive.server2.logging.operation.log.location": str(w / "oplogs"),
            "hive.exec.local.scratchdir": str(w / "scratch"),
            "hive.exec.scratchdir": str(w / "scratch" / "hdfs"),
            "hive.downloaded.resources.dir": str(w / "tmp" / "resources"),
        }

    def command(self) -> list[str]:
        """The spark-submit command line (spec section 2)."""
        cmd = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            self.master,
            "--driver-memory",
            self.driver_memory,
            "--name",
            f"hs2-{self.port}",
            "--class",
            THRIFT_SERVER_CLASS,
        ]
        for k, v in self.spark_conf().items():
            cmd += ["--conf", f"{k}={v}"]
        for k, v in self.hive_conf().items():
            cmd += ["--hiveconf", f"{k}={v}"]
        return cmd

    def start(self) -> LocalHiveServer:
        """Launch the server and block until a pyhive connection opens."""
        if self.running:
            return self
        if port_is_open(self.port):
            raise HiveServerStartError(f"port {HOST}:{self.port} is already in use")
        w = self.work_dir
        if metastore_in_use(w):
            raise HiveServerStartError(
                f"the metastore in {w} is open in another process (a server still running on "
                "this work dir?); embedded Derby allows one server per metastore_db"
            )
        for sub in ("tmp", "local", "oplogs", "scratch", "derby", "logs"):
            (w / sub).mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            self.command(),
            cwd=w,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        atexit.register(self.stop)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop(remove_dir=False)
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def environment(self) -> dict[str, str]:
        """The server process's environment: this one, with SPARK_HOME the pyspark package."""
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_LOCAL_IP"] = HOST
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _wait_ready(self, t0: float) -> None:

        deadline = t0 + self.start_timeout
        last_error: BaseException | None = None
        while True:
            assert self._proc is not None
            rc = self._proc.poll()
            if rc is not None:
                raise HiveServerStartError(
                    f"{self.what} exited with code {rc} during startup; "
                    f"log: {self.log_path}\n--- last lines ---\n{_tail(self.log_path)}"
                )
            if port_is_open(self.port):
                try:
                    self.connect().close()
                    return
                except DRIVER_ERRORS as e:  # not ready yet: pyhive, thrift or socket errors
                    last_error = e
            if time.monotonic() > deadline:
                raise HiveServerStartError(
                    f"{self.what} not reachable on {HOST}:{self.port} after "
                    f"{self.start_timeout:.0f} s (last error: {last_error!r}); "
                    f"log: {self.log_path}\n--- last lines ---\n{_tail(self.log_path)}"
                )
            time.sleep(0.5)

    def stop(self, timeout: float = 30.0, *, remove_dir: bool = True) -> None:
        """Terminate the server's whole process group; safe to call more than once."""
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self._request_stop(proc)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            # Reap anything else left in the group (the JVM normally is the whole group).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if remove_dir and self._own_dir and self.work_dir.exists():
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _request_stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Ask the server to stop: SIGTERM to its process group (the JVM stops in ~2 s)."""
        os.killpg(proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the server's whole process group (a crash: no shutdown hooks, statements cut
        off) and reap it. The work dir is kept, so :meth:`start` can restart the server on it
        (module docstring: restart after a kill). Safe to call on a stopped server."""
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # -- client ----------------------------------------------------------------------------

    def connect(self, database: str = "default", **kwargs: Any) -> Any:
        """A new pyhive ``hive.Connection`` (NOSASL) to this server."""
        from pyhive import hive

        return hive.connect(host=HOST, port=self.port, auth="NOSASL", database=database, **kwargs)

    def __enter__(self) -> LocalHiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LocalHiveServer({self.jdbc_url!r}, dir={str(self.work_dir)!r}, {state})"


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM behaves like Ctrl-C, so the JVM is stopped either way."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hive_hooks.engine",
        description="Run a local Spark Thrift Server (HiveServer2, NOSASL) until Ctrl-C.",
    )
    parser.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    parser.add_argument(
        "--dir", default=None, help="work dir, kept after exit (default: a temporary one, removed)"
    )
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    args = parser.parse_args(argv)

    srv = LocalHiveServer(
        args.port, args.dir, driver_memory=args.driver_memory, start_timeout=args.timeout
    )
    return serve_foreground(srv, "Spark Thrift Server", lambda: "")


def serve_foreground(srv: LocalHiveServer, what: str, details: Callable[[], str]) -> int:
    """Start ``srv``, say where it is (plus ``details()`` once it runs), and serve until
    Ctrl-C or SIGTERM (0) or until the server dies (1); the server is stopped either way."""
    # Restore Ctrl-C even if SIGINT was inherited as ignored (e.g. started with `&` by a shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    print(f"starting {what} in {srv.work_dir} (log: {srv.log_path}) ...", flush=True)
    try:
        srv.start()
        print(
            f"ready in {srv.start_seconds:.1f} s: {srv.jdbc_url}  (auth=noSasl, pid {srv.pid}"
            f"{details()})\npress Ctrl-C to stop",
            flush=True,
        )
        assert srv._proc is not None
        rc = srv._proc.wait()
        print(f"server exited with code {rc}; log: {srv.log_path}", file=sys.stderr)
        return 1
    except HiveServerStartError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping ...", flush=True)
        return 0
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.exit(main())
