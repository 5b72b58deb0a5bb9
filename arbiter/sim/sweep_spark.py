"""A sweep's cells as Spark tasks: ``local[*]`` by default, ``--master yarn`` on a cluster.

The shell around :mod:`arbiter.sim.sweep` for an existing engine (ARCHITECTURE, "scale out on
existing engines"). Choices made here:

* **One Spark job per cell, submitted from as many driver threads as the job has task slots.**
  A cell's result reaches the driver the moment it finishes, which is what makes the sweep
  resumable cell by cell (the driver stores it at once) and its progress exact; one job over all
  cells would return nothing until the last one ends. A job's overhead (tens of ms) is small
  next to a cell (seconds to hours).
* **Everything a task needs is shipped**, so executors on other hosts need only Python and the
  project's third-party dependencies: the ``arbiter`` and ``protos`` packages as a zip
  (``addPyFile``), with whatever else the cells' kind names in ``ship()`` (QOOP's replays: the
  ``qoop_planner`` package and the benchmark's modules), and each input file (``addFile``,
  named by a hash of its path so two traces called ``workload-6.csv`` do not collide).
* **A task rebuilds its cell** from the cell's JSON and its class's import path
  (``module:Class``), so any :class:`arbiter.sim.sweep.SweepCell` kind runs here, not only
  the simulator's.
* **Python workers are reused** (Spark's default), so the isolated denominators that
  :func:`arbiter.sim.sweep.run_cell` caches per job set serve every policy of that set that
  lands on the same worker.
* On YARN the executors are in the ``--queue`` (default ``default``) with Spark's jars from the
  wheel (``spark.yarn.jars=local:...``, the machines share the install), and the driver stays
  here (client mode) so progress and results are local.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import queue
import shutil
import sys
import threading
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from arbiter.sim.run import resolve_trace
from arbiter.sim.sweep import SUMMARY_FIELDS, SweepCell, SweepError, SweepStore

__all__ = ["SparkSweep", "package_zip"]

_PACKAGES = ("arbiter", "protos")


def package_zip(dest: Path, extra: Iterable[Path] = ()) -> Path:
    """A zip of the packages a task imports (sources and shipped data, no caches): ``arbiter``,
    ``protos`` and ``extra`` (package folders, or single modules put at the zip's top)."""
    root = Path(__file__).resolve().parents[2]
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder in [*(root / pkg for pkg in _PACKAGES), *extra]:
            folder = Path(folder).resolve()
            if folder.is_file():
                zf.write(folder, folder.name)
                continue
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(folder.parent))
    return dest


def kind_path(cell: SweepCell) -> str:
    """``module:Class`` of the cell's kind, for the executor to import."""
    cls = type(cell)
    if cls.__module__ == "__main__":
        raise SweepError(
            f"cell kind {cls.__qualname__} is defined in __main__: an executor cannot import "
            "it; define it in a module of its own"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _cell_class(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _shipped_name(path: Path) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return f"{digest}-{path.name}"


def _task(doc: dict[str, Any], kind: str, shipped: dict[str, str]) -> dict[str, Any]:
    """What runs on an executor: the cell, with its input files from SparkFiles."""
    from pyspark import SparkFiles

    cell = _cell_class(kind).from_json(doc)
    row = cell.run({path: SparkFiles.get(name) for path, name in shipped.items()})
    # Where it ran: YARN names the container in its environment (empty in local mode).
    row["container"] = os.environ.get("CONTAINER_ID", "")
    return row


class SparkSweep:
    """A Spark session for one sweep (``with SparkSweep(...) as s: s.run(cells, store)``)."""

    def __init__(
        self,
        master: str = "local[*]",
        *,
        workdir: Path,
        queue_name: str = "default",
        executors: int | None = None,
        conf: dict[str, str] | None = None,
    ) -> None:
        self.master = master
        self.workdir = Path(workdir)
        self.queue_name = queue_name
        self.executors = executors
        self.conf = dict(conf or {})
        self.spark: Any = None
        self._shipped_modules: set[str] = set()

    def spark_conf(self) -> dict[str, str]:
        conf = {
            "spark.app.name": "yarn-arbiter-sweep",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.python.worker.reuse": "true",
            "spark.scheduler.mode": "FAIR",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executorEnv.PYTHONHASHSEED": "0",
        }
        if self.master.startswith("yarn"):
            import pyspark

            if not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
                raise SweepError(
                    "--master yarn needs HADOOP_CONF_DIR (or --hadoop-conf-dir): the folder "
                    "with the cluster's yarn-site.xml (for the local YARN: the etc/client "
                    "folder `yarn-arbiter hadoop status` prints)"
                )
            jars = Path(pyspark.__file__).parent / "jars"
            conf.update({
                "spark.submit.deployMode": "client",
                "spark.yarn.queue": self.queue_name,
                "spark.yarn.jars": f"local:{jars}/*",
                "spark.yarn.tags": "yarn-arbiter-sweep",
                "spark.executor.cores": "1",
                "spark.executor.memory": "512m",
                "spark.executor.memoryOverhead": "512m",  # the Python worker lives here
                "spark.yarn.am.memory": "512m",
                "spark.yarn.am.memoryOverhead": "512m",
                "spark.dynamicAllocation.enabled": "false",
                "spark.executor.instances": str(self.executors or 2),
            })  # fmt: skip
        conf.update(self.conf)
        return conf

    def __enter__(self) -> SparkSweep:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise SweepError(
                "the Spark engine needs pyspark (pip install 'yarn-arbiter[hive]'); "
                "--engine serial runs without it"
            ) from None
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(self.master)
        for key, value in self.spark_conf().items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def _ship_modules(self, cells: Sequence[SweepCell]) -> None:
        """The packages zip, once per distinct set of extra modules the cells' kinds name."""
        extra = sorted({str(Path(p).resolve()) for c in cells for p in c.ship()})
        tag = hashlib.sha256("\n".join(extra).encode()).hexdigest()[:10]
        if tag in self._shipped_modules:
            return
        dest = package_zip(self.workdir / f"arbiter-sweep-{tag}.zip", [Path(p) for p in extra])
        self.spark.sparkContext.addPyFile(str(dest))
        self._shipped_modules.add(tag)

    def __exit__(self, *exc: object) -> None:
        if self.spark is not None:
            self.spark.stop()
            self.spark = None

    @property
    def slots(self) -> int:
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def run(
        self,
        cells: Sequence[SweepCell],
        store: SweepStore,
        *,
        on_row: Callable[[dict[str, Any]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Run the cells ``store`` has not finished; each row is stored as it arrives."""
        sc = self.spark.sparkContext
        todo = [c for c in cells if not store.done(c)]
        if not todo:
            return []
        kinds = {c.key: kind_path(c) for c in todo}  # a kind no executor can import: fail here
        self._ship_modules(todo)
        shipped: dict[str, str] = {}
        for cell in todo:
            for given in cell.inputs():
                if given not in shipped:
                    path = resolve_trace(given)
                    name = _shipped_name(path)
                    if name not in shipped.values():
                        staged = self.workdir / name
                        if not staged.exists():
                            shutil.copyfile(path, staged)  # Spark ships files, not links
                        sc.addFile(str(staged))
                    shipped[given] = name
        pending: queue.SimpleQueue[SweepCell | None] = queue.SimpleQueue()
        for cell in todo:
            pending.put(cell)
        rows: list[dict[str, Any]] = []
        lock = threading.Lock()
        failures: list[BaseException] = []

        def worker() -> None:
            while True:
                cell = pending.get()
                if cell is None:
                    return
                doc, kind = cell.to_json(), kinds[cell.key]
                files = {given: shipped[given] for given in cell.inputs()}
                try:
                    sc.setJobGroup(cell.key, cell.describe())
                    row = (
                        sc.parallelize([doc], 1)
                        .map(lambda d, k=kind, f=files: _task(d, k, f))
                        .collect()[0]
                    )
                except Exception as exc:  # broad: a Spark failure of one cell is its row
                    row = {
                        **cell.header(), "status": "failed",
                        "error": f"Spark: {str(exc).splitlines()[0][:300]}",
                    }  # fmt: skip
                with lock:
                    try:
                        store.put(row)
                        rows.append(row)
                        if on_row is not None:
                            on_row(row)
                    except BaseException as exc:  # broad: handed to the caller below
                        failures.append(exc)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(self.slots)]
        for _ in threads:
            pending.put(None)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        return rows

    def write_parquet(self, rows: Sequence[dict[str, Any]], dest: Path) -> Path:
        """The rows as one Parquet dataset: the metrics and ``seed``/``wall_s`` as doubles,
        the rest (names, knobs, status, the cell's JSON) as strings."""
        from pyspark.sql.types import DoubleType, StringType, StructField, StructType

        numeric = {*SUMMARY_FIELDS, "seed", "wall_s"}
        keys = sorted({k for r in rows for k in r})
        schema = StructType([
            StructField(k, DoubleType() if k in numeric else StringType(), True) for k in keys
        ])  # fmt: skip
        data = [
            tuple(_column(r.get(k), k in numeric) for k in keys) for r in rows
        ]  # fmt: skip
        frame = self.spark.createDataFrame(data, schema)
        frame.coalesce(1).write.mode("overwrite").parquet(str(dest))
        return dest


def _column(value: Any, numeric: bool) -> Any:
    if value is None:
        return None
    if numeric:
        return float(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)
