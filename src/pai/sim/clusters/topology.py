"""Cluster files in HiveD's format, built from pools of identical nodes and per-VC node quotas.

Each `NodePool` becomes one cell chain: GPU leaf cells, intra-node levels (pairs of GPUs behind
a PCIe switch, pairs of switches on a CPU socket), the node, and optionally racks of nodes. VC
quotas are whole nodes: the smallest cell that keeps a multi-GPU job on one machine, and the
unit a quota scheduler would reason about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pai.sim.clusters.apportion import apportion
from pai.sim.clusters.feasibility import check_quota_feasibility

ClusterFile = dict[str, Any]
"""A cluster file as plain data (dicts, lists, str, int), ready for YAML."""

VcNodeQuotas = Mapping[str, Mapping[str, int]]
"""VC name -> GPU type of a pool -> number of that pool's nodes the VC is guaranteed."""


def intra_node_levels(gpus_per_node: int) -> list[tuple[str, int]]:
    """The cell levels inside a node, bottom-up, as (level name, child count); the last is the node.

    GPUs are paired behind PCIe switches and switches paired on CPU sockets where the count
    allows (8 = 2 sockets x 2 switches x 2 GPUs, 4 = 2 switches x 2 GPUs), which is how common
    multi-GPU servers are wired; the trace data has no finer topology to go on.
    """
    levels: list[tuple[str, int]] = []
    remaining = gpus_per_node
    for name in ("PCIE", "SOCKET"):
        if remaining >= 4 and remaining % 2 == 0:
            levels.append((name, 2))
            remaining //= 2
    levels.append(("NODE", remaining))
    return levels


@dataclass(frozen=True, slots=True)
class NodePool:
    """Identical nodes forming one cell chain; `gpu_type` names the GPU leaf cell type."""

    gpu_type: str
    gpus_per_node: int
    node_names: tuple[str, ...]
    rack_size: int | None = None
    cpus_per_gpu: int = 4
    memory_gib_per_gpu: int = 32

    def __post_init__(self) -> None:
        if "." in self.gpu_type or not self.gpu_type:
            raise ValueError(f"GPU type {self.gpu_type!r} must be non-empty and contain no '.'")
        if self.gpus_per_node < 1:
            raise ValueError(f"pool {self.gpu_type}: nodes need at least one GPU")
        if not self.node_names or len(set(self.node_names)) != len(self.node_names):
            raise ValueError(f"pool {self.gpu_type}: node names must be non-empty and unique")
        nodes = len(self.node_names)
        if self.rack_size is not None and (self.rack_size < 1 or nodes % self.rack_size):
            divisors = [d for d in range(1, nodes + 1) if nodes % d == 0]
            raise ValueError(
                f"pool {self.gpu_type}: {nodes} nodes cannot form racks of {self.rack_size} "
                f"(HiveD cells of a level are identical); rack sizes that fit: {divisors}"
            )

    @property
    def node_type(self) -> str:
        return f"{self.gpu_type}-NODE"

    @property
    def rack_type(self) -> str:
        return f"{self.gpu_type}-RACK"

    @property
    def chain(self) -> str:
        """The top-level cell type, which names the chain in HiveD."""
        return self.rack_type if self.rack_size else self.node_type

    @property
    def node_quota_cell_type(self) -> str:
        """What a VC's ``virtualCells`` entry names to reserve whole nodes of this pool."""
        return f"{self.rack_type}.{self.node_type}" if self.rack_size else self.node_type

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.node_names)

    def cell_types(self) -> dict[str, dict[str, Any]]:
        types: dict[str, dict[str, Any]] = {}
        child = self.gpu_type
        for level, count in intra_node_levels(self.gpus_per_node):
            name = f"{self.gpu_type}-{level}"
            types[name] = {"childCellType": child, "childCellNumber": count}
            child = name
        types[self.node_type]["isNodeLevel"] = True
        if self.rack_size:
            types[self.rack_type] = {
                "childCellType": self.node_type,
                "childCellNumber": self.rack_size,
            }
        return types

    def physical_cells(self) -> list[dict[str, Any]]:
        if not self.rack_size:
            return [{"cellType": self.node_type, "cellAddress": n} for n in self.node_names]
        size = self.rack_size
        return [
            {
                "cellType": self.rack_type,
                "cellAddress": f"{self.gpu_type}-rack{i // size}",
                "cellChildren": [{"cellAddress": n} for n in self.node_names[i : i + size]],
            }
            for i in range(0, len(self.node_names), size)
        ]

    def sku(self) -> dict[str, Any]:
        return {"gpu": 1, "cpu": self.cpus_per_gpu, "memory": f"{self.memory_gib_per_gpu}Gi"}


def build_cluster(pools: Sequence[NodePool], quotas: VcNodeQuotas) -> ClusterFile:
    """The cluster file for `pools` with each VC guaranteed the given nodes; checked feasible."""
    types = [pool.gpu_type for pool in pools]
    if len(set(types)) != len(types):
        raise ValueError(f"every pool needs its own GPU type, got {types}")
    by_type = {pool.gpu_type: pool for pool in pools}
    virtual_clusters: dict[str, Any] = {}
    for vc, nodes in quotas.items():
        unknown = sorted(set(nodes) - set(by_type))
        if unknown:
            raise ValueError(f"VC {vc}: no node pool with GPU type {', '.join(unknown)}")
        cells = [
            {"cellType": by_type[gpu_type].node_quota_cell_type, "cellNumber": count}
            for gpu_type, count in nodes.items()
            if count > 0
        ]
        virtual_clusters[vc] = {"virtualCells": cells}
    cell_types: dict[str, Any] = {}
    for pool in pools:
        cell_types.update(pool.cell_types())
    cluster: ClusterFile = {
        "physicalCluster": {
            "skuTypes": {pool.gpu_type: pool.sku() for pool in pools},
            "cellTypes": cell_types,
            "physicalCells": [cell for pool in pools for cell in pool.physical_cells()],
        },
        "virtualClusters": virtual_clusters,
    }
    check_quota_feasibility(cluster)
    return cluster


def make_cluster(
    nodes: int,
    gpus_per_node: int,
    rack_size: int | None,
    vc_shares: Mapping[str, float],
    *,
    gpu_type: str = "GPU",
    min_nodes: Mapping[str, int] | None = None,
) -> ClusterFile:
    """A homogeneous cluster of `nodes` nodes (named node-0, node-1, ...) whose nodes are all
    split among the VCs in proportion to `vc_shares`.

    Each VC gets at least `min_nodes[vc]` nodes, and at least one by default: a VC without cells
    could never run a guaranteed job.
    """
    pool = NodePool(gpu_type, gpus_per_node, tuple(f"node-{i}" for i in range(nodes)), rack_size)
    counts = apportion(nodes, vc_shares, {**dict.fromkeys(vc_shares, 1), **(min_nodes or {})})
    return build_cluster([pool], {vc: {gpu_type: n} for vc, n in counts.items()})
