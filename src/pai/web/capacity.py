"""Capacity as the portal shows it: used out of total, in devices (GPUs, or the kind of a
cluster of other devices, e.g. `acc.example/npu`), or in CPU slots (leaf cells) on a cluster
without devices, read from the API's cluster view."""

from __future__ import annotations

from dataclasses import dataclass

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.server.clusterviews import ClusterView, NodeInfo, VirtualClusterInfo
from pai.server.context import ServerContext


def has_gpus(context: ServerContext) -> bool:
    """Whether the cluster has GPUs (else capacity is counted in CPU slots)."""
    cluster = context.control_plane.cluster
    return any(sku.gpu > 0 for sku in cluster.sku_types.values())


def device_unit(context: ServerContext) -> str:
    """What the cluster's devices are called: GPUs (NVIDIA's, the default kind), the one kind
    it has, or `devices` where it mixes kinds."""
    cluster = context.control_plane.cluster
    kinds = {sku.device for sku in cluster.sku_types.values() if sku.gpu > 0}
    if kinds <= {DEFAULT_DEVICE_KIND}:
        return "GPUs"
    return kinds.pop() if len(kinds) == 1 else "devices"


@dataclass(frozen=True)
class Usage:
    used: int
    total: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.used)

    @property
    def percent(self) -> int:
        return round(100 * self.used / self.total) if self.total else 0


@dataclass(frozen=True)
class Capacity:
    """One snapshot of the cluster, and the unit it is counted in."""

    view: ClusterView
    gpus: bool
    """True: counted in devices; False: in CPU slots (the cluster has no devices)."""
    device_unit: str = "GPUs"

    @classmethod
    def of(cls, context: ServerContext) -> Capacity:
        return cls(
            ClusterView.of(context.control_plane),
            gpus=has_gpus(context),
            device_unit=device_unit(context),
        )

    @property
    def unit(self) -> str:
        return self.device_unit if self.gpus else "CPU slots"

    def guaranteed(self, vc: VirtualClusterInfo) -> Usage:
        """What the VC's guaranteed jobs use of its guarantee."""
        if self.gpus:
            return Usage(vc.usedGpus, vc.guaranteedGpus)
        return Usage(vc.usedLeaves, vc.guaranteedLeaves)

    def opportunistic(self, vc: VirtualClusterInfo) -> int:
        """What the VC's opportunistic jobs use, beyond its guarantee."""
        return vc.opportunisticGpus if self.gpus else vc.opportunisticLeaves

    def node(self, node: NodeInfo) -> Usage:
        counts = node.gpus if self.gpus else node.leaves
        return Usage(counts.used, counts.total)

    def cluster(self, nodes: list[NodeInfo]) -> Usage:
        usages = [self.node(node) for node in nodes]
        return Usage(sum(usage.used for usage in usages), sum(usage.total for usage in usages))
