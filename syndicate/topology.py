"""The cluster Syndicate plans for: HGX-2-like nodes (thesis §4.5.1, T:1697; Table 4.1,
T:1680-1687) and the two channels a motif can run on (T:1764, T:1804).

Per node: ``gpus_per_node`` GPUs on a non-blocking NVSwitch (150 GB/s per GPU and direction,
1.2 TB/s / 8: given), one RoCE NIC per GPU (12.5 GB/s: given), two host NICs (2 x 12.5 GB/s:
given) and PCIe switches holding ``gpus_per_switch`` GPUs and as many NICs (12 GB/s effective
per direction: open, typical Gen3 x16). The fabric behind the NICs is a non-blocking Clos
(open). Every link is one direction of one port; its capacity is in bytes per second.

The channels (spec §3.3):

* ``gpu``: NVLink inside a node, GPUDirect RDMA over the RoCE NICs across nodes (NCCL);
* ``cpu``: PCIe and host memory inside a node, TCP/IP over the host NICs across nodes (UCC).

Whether RDMA traverses the GPU's PCIe link is the open switch ``rdma_via_pcie`` (default on,
spec §6.4): on, a ``gpu`` motif and a ``cpu`` motif share the GPUs' PCIe links, so the
"non-overlapping channels" of T:1764 hold only approximately.

The link capacities and latencies below carry the spec's status: G = given by the text,
O = open (the value is the spec's proposed default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

__all__ = ["CHANNELS", "GB", "Path", "Topology", "TopologyParams", "hgx2"]

GB = 1e9
CHANNELS = ("gpu", "cpu")


@dataclass(frozen=True, slots=True)
class TopologyParams:
    """Link rates (bytes/s per direction), latencies (s) and the open modelling switches."""

    nvlink: float = 150 * GB  # G: 1.2 TB/s per node / 8 GPUs
    roce: float = 12.5 * GB  # G: 8 x 100 Gbps per node
    host_nic: float = 25 * GB  # G: 2 x 100 Gbps per node (one aggregate link per direction)
    pcie: float = 12 * GB  # O: per GPU and per PCIe switch uplink
    gpus_per_switch: int = 2  # O
    alpha_nvlink: float = 3e-6  # O
    alpha_rdma: float = 8e-6  # O
    alpha_pcie: float = 5e-6  # O
    alpha_tcp: float = 30e-6  # O
    tcp_efficiency: float = 0.8  # O
    motif_overhead: float = 20e-6  # O: λ, Gap 2.3
    # O: φ(f) = 1 + κ·max(0, f − f₀) for flows > b₀ (spec §3.4); κ is the value
    # syndicate.experiment.fit_incast finds for the default cluster.
    incast_kappa: float = 0.002
    incast_f0: float = 32.0  # O
    incast_b0: float = 8 * 1024  # O, bytes
    rdma_via_pcie: bool = True  # O
    host_nic_share: float = 1.0  # the job's share of the co-tenant-shared host NICs (§6.2)

    def __post_init__(self) -> None:
        rates = (self.nvlink, self.roce, self.host_nic, self.pcie)
        if not all(r > 0 for r in rates):
            raise ValueError(f"link rates must be > 0, got {rates}")
        if not 0 < self.tcp_efficiency <= 1 or not 0 < self.host_nic_share <= 1:
            raise ValueError("tcp_efficiency and host_nic_share must lie in (0, 1]")
        if self.incast_kappa < 0 or self.incast_f0 < 1 or self.incast_b0 < 0:
            raise ValueError("incast parameters: κ >= 0, f0 >= 1, b0 >= 0")

    def phi(self, fan_in: float) -> float:
        """The incast penalty φ(f) (spec §3.4), a divisor of a NIC's ingress capacity."""
        return 1.0 + self.incast_kappa * max(0.0, fan_in - self.incast_f0)


@dataclass(frozen=True, slots=True)
class Path:
    """The links a flow crosses, its per-round latency and the link whose ingress suffers
    incast (None inside a node)."""

    links: tuple[int, ...]
    alpha: float
    ingress: int | None


@dataclass(frozen=True)
class Topology:
    """``nodes`` x ``gpus_per_node`` GPUs; rank r of a job runs on ``gpus[r]`` (global GPU
    index ``node * gpus_per_node + local``). Links are numbered densely; :attr:`capacity`
    gives each one's rate and :attr:`endpoints` how many GPUs stand behind it (the divisor of
    a link's flow count in the incast fan-in)."""

    nodes: int
    gpus_per_node: int
    params: TopologyParams = field(default_factory=TopologyParams)
    gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("a topology needs at least one node of one GPU")
        if self.gpus_per_node % self.params.gpus_per_switch:
            raise ValueError("gpus_per_node must be a multiple of gpus_per_switch")
        total = self.nodes * self.gpus_per_node
        if not self.gpus:
            object.__setattr__(self, "gpus", tuple(range(total)))
        if len(set(self.gpus)) != len(self.gpus) or not all(0 <= g < total for g in self.gpus):
            raise ValueError(f"gpus must be distinct indices below {total}: {self.gpus}")

    # ---- ranks ---------------------------------------------------------------------------
    @property
    def n_ranks(self) -> int:
        return len(self.gpus)

    def node_of(self, rank: int) -> int:
        return self.gpus[rank] // self.gpus_per_node

    def local_of(self, rank: int) -> int:
        return self.gpus[rank] % self.gpus_per_node

    def subgraph(self, gpus: Sequence[int]) -> Topology:
        """The same cluster with the job's ranks on ``gpus`` (spec §6.2)."""
        return replace(self, gpus=tuple(gpus))

    def with_params(self, **changes: float | bool | int) -> Topology:
        return replace(self, params=replace(self.params, **changes))  # type: ignore[arg-type]

    @property
    def per_node(self) -> tuple[int, ...]:
        """The job's GPU count on each node it uses, descending (its placement class)."""
        counts: dict[int, int] = {}
        for r in range(self.n_ranks):
            counts[self.node_of(r)] = counts.get(self.node_of(r), 0) + 1
        return tuple(sorted(counts.values(), reverse=True))

    # ---- links ---------------------------------------------------------------------------
    # Per node: 8 kinds x gpus_per_node (nvl up/down, pcie up/down, roce up/down, switch
    # uplink up/down indexed by switch) and 2 host NIC links.
    @property
    def _per_node(self) -> int:
        return 8 * self.gpus_per_node + 2

    def _link(self, node: int, kind: int, index: int) -> int:
        return node * self._per_node + kind * self.gpus_per_node + index

    def _host(self, node: int, down: bool) -> int:
        return node * self._per_node + 8 * self.gpus_per_node + int(down)

    @property
    def n_links(self) -> int:
        return self.nodes * self._per_node

    @cached_property
    def capacity(self) -> tuple[float, ...]:
        p = self.params
        g = self.gpus_per_node
        per_kind = (p.nvlink, p.nvlink, p.pcie, p.pcie, p.roce, p.roce, p.pcie, p.pcie)
        node_caps = [c for c in per_kind for _ in range(g)]
        host = p.host_nic * p.tcp_efficiency * p.host_nic_share
        node_caps += [host, host]
        return tuple(node_caps) * self.nodes

    @cached_property
    def endpoints(self) -> tuple[int, ...]:
        one = [1] * (8 * self.gpus_per_node) + [self.gpus_per_node] * 2
        return tuple(one) * self.nodes

    def path(self, src: int, dst: int, channel: str, nic: int | None = None) -> Path:
        """The links of a flow from rank ``src`` to rank ``dst`` on ``channel``. ``nic`` picks
        the RoCE NIC (local index) of both ends for a striped ``gpu`` flow; by default each
        end uses its own GPU's NIC."""
        if channel not in CHANNELS:
            raise ValueError(f"unknown channel {channel!r}; expected one of {CHANNELS}")
        p = self.params
        if src == dst:
            return Path((), 0.0, None)
        ns, nd = self.node_of(src), self.node_of(dst)
        ls, ld = self.local_of(src), self.local_of(dst)
        sw_s, sw_d = ls // p.gpus_per_switch, ld // p.gpus_per_switch
        pcie_s, pcie_d = self._link(ns, 2, ls), self._link(nd, 3, ld)
        if channel == "gpu":
            if ns == nd:
                return Path((self._link(ns, 0, ls), self._link(nd, 1, ld)), p.alpha_nvlink, None)
            # A striped flow leaves through GPU ``nic``'s PCIe link and NIC, as the per-NIC
            # rings of NCCL do (their intra-node legs ride NVLink, not modelled).
            a, b = (ls, ld) if nic is None else (nic, nic)
            ingress = self._link(nd, 5, b)
            links: tuple[int, ...] = (self._link(ns, 4, a), ingress)
            if p.rdma_via_pcie:
                links = (self._link(ns, 2, a), *links, self._link(nd, 3, b))
            return Path(links, p.alpha_rdma, ingress)
        up_s, dn_d = self._link(ns, 6, sw_s), self._link(nd, 7, sw_d)
        if ns == nd:
            return Path((pcie_s, up_s, dn_d, pcie_d), p.alpha_pcie, None)
        ingress = self._host(nd, True)
        return Path(
            (pcie_s, up_s, self._host(ns, False), ingress, dn_d, pcie_d), p.alpha_tcp, ingress
        )


def hgx2(nodes: int = 16, gpus_per_node: int = 8, **params: float | bool | int) -> Topology:
    """The testbed of T:1697: 16 HGX-2 nodes of 8 V100s (128 GPUs), the job on all of them."""
    return Topology(nodes, gpus_per_node, TopologyParams(**params))  # type: ignore[arg-type]
