"""Cluster model: racks, machines, slots and GPUs with stable ids (Themis §5.2 / thesis §3.5).

Themis models placement with a 4-level locality hierarchy, GPU -> slot -> machine -> rack
(P:386, T:1186; spec ``qoop-themis.md`` B.11). A *slot* is the unit that shares the fastest
interconnect: on the paper's Azure testbed (NC12 / NC24, K80 boards) a slot is one K80 board
holding two GPU dies.

GPU ids are stable strings ``<machine>/s<slot>/g<index>`` so a lease, a bid row and a journal
record name the same GPU across restarts.

A cluster is declared in YAML::

    name: themis-testbed
    racks:
      - name: rack-a
        machines:
          - {prefix: nc12-a, count: 4, slots: 1, gpus_per_slot: 2, gpu_type: k80}
          - {name: big-0, slots: 4, gpus_per_slot: 2, gpu_type: v100}

Optional ``vcores`` and ``memory_mb`` per machine give the CPU/memory capacity behind QOOP's
fair-share vector (GPUs go through leases instead) and behind Synergy's CPU/memory allocation.
A machine that declares neither gets, for Synergy, :attr:`Machine.cpus` =
:data:`DEFAULT_CPUS_PER_GPU` (3) and :attr:`Machine.mem_gb` = :data:`DEFAULT_MEM_GB_PER_GPU`
(62.5) per GPU: the ratios of Synergy's ``default_cluster.ini`` (8 GPUs, 24 CPUs, 500 GB per
server; spec ``synergy.md`` §9). ``vcores`` and ``memory_mb`` themselves keep their declared
value (0 = undeclared), so QOOP's shares are unchanged. 1 GB = 1024 MB.

A machine entry with ``prefix`` and ``count`` expands to ``count`` machines named
``<prefix>-00``, ``<prefix>-01``, ...; one with ``name`` declares a single machine.

Shipped specs (``arbiter/specs``, list them with :func:`shipped_specs`):

* ``themis-testbed``: 20 machines, 8 x NC12 (1 slot x 2 K80) + 12 x NC24 (2 slots x 2 K80) =
  64 GPUs (P:384). The paper does not say how the machines are racked; we put them in two racks
  of 10 (4 NC12 + 6 NC24 each).
* ``themis-sim-168``: the simulator's cluster exactly as the footnote lists it (P:386, T:1186):
  16 x 8-GPU (4 slots x 2) + 6 x 4-GPU (4 slots x 1) + 16 x 1-GPU = **168 GPUs**.
* ``themis-sim-256``: our reading of the body text's "256-GPU heterogeneous cluster". The footnote
  sums to 168, so it is truncated or wrong. We keep its three machine types and 16 + 16 counts
  and read the 4-GPU machine count as **28** (16*8 + 28*4 + 16*1 = 256), the one change that
  reaches the stated total with only the listed machine types. Racks hold at most 8 machines of
  one type. This is an assumption, documented here and tested by GPU count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEFAULT_CPUS_PER_GPU",
    "DEFAULT_MEM_GB_PER_GPU",
    "GPU",
    "Cluster",
    "ClusterSpecError",
    "Machine",
    "load_cluster",
    "parse_cluster",
    "shipped_specs",
    "shorthand_cluster",
]


DEFAULT_CPUS_PER_GPU = 3.0  # Synergy default_cluster.ini: 24 CPUs per 8-GPU server
DEFAULT_MEM_GB_PER_GPU = 62.5  # ... and 500 GB per 8-GPU server


class ClusterSpecError(ValueError):
    """A cluster spec is malformed; the message names the offending key."""


@dataclass(frozen=True, slots=True)
class GPU:
    """One GPU and its place in the 4-level hierarchy."""

    id: str
    slot: str
    machine: str
    rack: str
    gpu_type: str = "gpu"


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    rack: str
    slots: int
    gpus_per_slot: int
    gpu_type: str
    vcores: int = 0
    memory_mb: int = 0

    @property
    def num_gpus(self) -> int:
        return self.slots * self.gpus_per_slot

    @property
    def cpus(self) -> float:
        """CPU cores for Synergy: ``vcores`` if declared, else 3 per GPU (module docstring)."""
        return float(self.vcores) if self.vcores else DEFAULT_CPUS_PER_GPU * self.num_gpus

    @property
    def mem_gb(self) -> float:
        """Memory in GB for Synergy: ``memory_mb`` / 1024 if declared, else 62.5 per GPU."""
        return self.memory_mb / 1024.0 if self.memory_mb else DEFAULT_MEM_GB_PER_GPU * self.num_gpus


@dataclass(frozen=True)
class Cluster:
    """An immutable cluster: machines in racks, GPUs in slots. Look-ups are O(1)."""

    name: str
    machines: tuple[Machine, ...]
    gpus: tuple[GPU, ...]
    _by_id: Mapping[str, GPU] = field(init=False, repr=False, compare=False)
    _index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _machine: Mapping[str, Machine] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {g.id: g for g in self.gpus}
        if len(by_id) != len(self.gpus):
            raise ClusterSpecError(f"cluster {self.name!r}: duplicate GPU ids")
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_index", {g.id: k for k, g in enumerate(self.gpus)})
        object.__setattr__(self, "_machine", {m.name: m for m in self.machines})

    def machine(self, name: str) -> Machine:
        """The machine called ``name``."""
        return self._machine[name]

    def proportional_share(self, gpu_ids: Iterable[str]) -> tuple[float, float]:
        """(CPUs, GB) that ``gpu_ids`` get GPU-proportionally: on each machine, its CPUs and
        memory times the fraction of its GPUs in the set (Synergy's baseline, spec §1)."""
        cpus = mem = 0.0
        for gid in gpu_ids:
            m = self._machine[self._by_id[gid].machine]
            cpus += m.cpus / m.num_gpus
            mem += m.mem_gb / m.num_gpus
        return cpus, mem

    def index(self, gpu_id: str) -> int:
        """Position of the GPU in cluster order (machines as declared, then slot, then GPU)."""
        return self._index[gpu_id]

    @classmethod
    def from_machines(cls, name: str, machines: Iterable[Machine]) -> Cluster:
        machines = tuple(machines)
        gpus = tuple(
            GPU(
                id=f"{m.name}/s{s}/g{k}",
                slot=f"{m.name}/s{s}",
                machine=m.name,
                rack=m.rack,
                gpu_type=m.gpu_type,
            )
            for m in machines
            for s in range(m.slots)
            for k in range(m.gpus_per_slot)
        )
        return cls(name=name, machines=machines, gpus=gpus)

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)

    @property
    def gpu_ids(self) -> frozenset[str]:
        return frozenset(self._by_id)

    @property
    def vcores(self) -> int:
        return sum(m.vcores for m in self.machines)

    @property
    def memory_mb(self) -> int:
        return sum(m.memory_mb for m in self.machines)

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.rack for m in self.machines))

    def gpu(self, gpu_id: str) -> GPU:
        try:
            return self._by_id[gpu_id]
        except KeyError:
            raise KeyError(f"unknown GPU id {gpu_id!r} in cluster {self.name!r}") from None

    def __contains__(self, gpu_id: object) -> bool:
        return gpu_id in self._by_id

    def unknown(self, gpu_ids: Iterable[str]) -> list[str]:
        """The ids in ``gpu_ids`` that are not GPUs of this cluster (sorted)."""
        return sorted(g for g in gpu_ids if g not in self._by_id)


def _int(entry: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClusterSpecError(f"{where}: '{key}' must be a positive integer, got {value!r}")
    return value


def parse_cluster(doc: Mapping[str, Any]) -> Cluster:
    """Build a :class:`Cluster` from a parsed YAML document (see module docstring)."""
    if not isinstance(doc, Mapping):
        raise ClusterSpecError("cluster spec: top level must be a mapping")
    name = doc.get("name")
    unknown_top = set(doc) - {"name", "racks", "gpu_type"}
    if unknown_top:
        raise ClusterSpecError(f"cluster spec: unknown top-level keys {sorted(unknown_top)}")
    if not isinstance(name, str) or not name:
        raise ClusterSpecError("cluster spec: 'name' must be a non-empty string")
    racks = doc.get("racks")
    if not isinstance(racks, list) or not racks:
        raise ClusterSpecError(f"cluster {name!r}: 'racks' must be a non-empty list")
    default_type = doc.get("gpu_type", "gpu")
    machines: list[Machine] = []
    seen: set[str] = set()
    for r, rack in enumerate(racks):
        where = f"cluster {name!r}: racks[{r}]"
        if not isinstance(rack, Mapping) or not isinstance(rack.get("name"), str):
            raise ClusterSpecError(f"{where}: each rack needs a string 'name'")
        if set(rack) - {"name", "machines"}:
            raise ClusterSpecError(
                f"{where}: unknown keys {sorted(set(rack) - {'name', 'machines'})}"
            )
        entries = rack.get("machines")
        if not isinstance(entries, list) or not entries:
            raise ClusterSpecError(f"{where}: 'machines' must be a non-empty list")
        for i, entry in enumerate(entries):
            mwhere = f"{where}.machines[{i}]"
            if not isinstance(entry, Mapping):
                raise ClusterSpecError(f"{mwhere}: must be a mapping")
            unknown = set(entry) - {
                "name",
                "prefix",
                "count",
                "slots",
                "gpus_per_slot",
                "gpu_type",
                "vcores",
                "memory_mb",
            }
            if unknown:
                raise ClusterSpecError(f"{mwhere}: unknown keys {sorted(unknown)}")
            slots = _int(entry, "slots", mwhere, 1)
            per_slot = _int(entry, "gpus_per_slot", mwhere)
            gpu_type = str(entry.get("gpu_type", default_type))
            vcores = int(entry.get("vcores", 0))
            memory_mb = int(entry.get("memory_mb", 0))
            if vcores < 0 or memory_mb < 0:
                raise ClusterSpecError(f"{mwhere}: 'vcores' and 'memory_mb' must be >= 0")
            if "name" in entry:
                names = [str(entry["name"])]
            elif "prefix" in entry:
                count = _int(entry, "count", mwhere)
                names = [f"{entry['prefix']}-{k:02d}" for k in range(count)]
            else:
                raise ClusterSpecError(f"{mwhere}: needs 'name' or 'prefix' + 'count'")
            for mname in names:
                if mname in seen or "/" in mname:
                    raise ClusterSpecError(f"{mwhere}: machine name {mname!r} repeated or has '/'")
                seen.add(mname)
                machines.append(
                    Machine(mname, rack["name"], slots, per_slot, gpu_type, vcores, memory_mb)
                )
    return Cluster.from_machines(name, machines)


def shorthand_cluster(spec: str) -> Cluster:
    """A cluster from a shorthand (the simulator's).

    * ``gavel:V:P:K``: V v100, P p100 and K k80 GPUs, one GPU per server (Gavel's ``-c V:P:K``
      with ``--num_gpus_per_server 1:1:1``); one rack per GPU type.
    * ``nodes:N:G``: N identical machines with G GPUs each, one slot per machine (GPUs on a
      machine share its interconnect), racks of at most 16 machines.
    * ``nodes:N:G:C:M``: the same with C CPU cores and M GB of memory per machine (Synergy's
      servers: ``nodes:4:8:24:500``); without them the Synergy defaults per GPU apply.
    """
    kind, _, rest = spec.partition(":")
    try:
        counts = [int(x) for x in rest.split(":")]
    except ValueError:
        counts = []
    if kind == "gavel" and len(counts) == 3 and all(c >= 0 for c in counts) and sum(counts) > 0:
        machines = [
            Machine(f"{gtype}-{k:03d}", f"rack-{gtype}", 1, 1, gtype)
            for gtype, n in zip(("v100", "p100", "k80"), counts, strict=True)
            for k in range(n)
        ]
        return Cluster.from_machines(spec, machines)
    if kind == "nodes" and len(counts) in (2, 4) and all(c >= 1 for c in counts):
        n, g = counts[:2]
        cpus, mem_gb = counts[2:] or (0, 0)
        machines = [
            Machine(f"node-{k:03d}", f"rack-{k // 16:02d}", 1, g, "gpu", cpus, mem_gb * 1024)
            for k in range(n)
        ]
        return Cluster.from_machines(spec, machines)
    raise ClusterSpecError(
        f"cluster shorthand {spec!r}: expected gavel:V:P:K (GPU counts, not all 0) "
        "or nodes:N:G (N machines of G GPUs, both >= 1), optionally nodes:N:G:C:M "
        "(C CPUs and M GB of memory per machine, both >= 1)"
    )


def load_cluster(spec: str | Path) -> Cluster:
    """Load a cluster from a YAML file path, a shipped spec's name, or a shorthand
    (``gavel:V:P:K``, ``nodes:N:G``; see :func:`shorthand_cluster`)."""
    if isinstance(spec, str) and spec.split(":", 1)[0] in ("gavel", "nodes") and ":" in spec:
        return shorthand_cluster(spec)
    path = Path(spec)
    if path.exists():
        text = path.read_text()
    else:
        # A shipped spec read through importlib.resources: the package may be imported from a
        # zip (a sweep's Spark executors on YARN, arbiter.sim.sweep_spark), not a folder.
        shipped = resources.files("arbiter") / "specs" / f"{spec}.yaml"
        if not shipped.is_file():
            raise ClusterSpecError(
                f"cluster spec {str(spec)!r}: no such file and not a shipped spec "
                f"(shipped: {', '.join(sorted(shipped_specs()))})"
            )
        text = shipped.read_text()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClusterSpecError(f"cluster spec {str(path)!r}: invalid YAML: {exc}") from exc
    return parse_cluster(doc)


def shipped_specs() -> dict[str, Path]:
    """Name -> path of the cluster specs shipped in ``arbiter/specs``."""
    root = resources.files("arbiter") / "specs"
    return {
        p.name.removesuffix(".yaml"): Path(str(p))
        for p in root.iterdir()
        if p.name.endswith(".yaml")
    }
