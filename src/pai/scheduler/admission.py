"""Requests that can never be placed, found from the cluster file alone, before they queue."""

from __future__ import annotations

from dataclasses import dataclass

from pai.cluster.model import ClusterConfig
from pai.scheduler.types import MAX_PRIORITY, OPPORTUNISTIC_PRIORITY, GroupRequest


@dataclass(frozen=True)
class Capacity:
    """What one VC (or pinned cell, or the whole chain) can ever offer in a chain."""

    leaves: int
    largest_node: int  # leaves of the largest cell a single pod can use


class CapacityIndex:
    _latest: CapacityIndex | None = None

    @classmethod
    def of(cls, cluster: ClusterConfig) -> CapacityIndex:
        """The index of `cluster`, built once while it stays the cluster asked about: every
        submission checks its job against it, and building it walks every cell."""
        latest = cls._latest
        if latest is None or latest.cluster is not cluster:
            latest = cls._latest = cls(cluster)
        return latest

    def __init__(self, cluster: ClusterConfig) -> None:
        self.cluster = cluster
        self.chains: dict[str, Capacity] = {}
        for chain in cluster.chains.values():
            tops = sum(1 for top in cluster.physical_cells if top.cell_type == chain.name)
            self.chains[chain.name] = Capacity(
                tops * chain.leaves_per_cell(chain.top_level),
                chain.leaves_per_cell(chain.node_level),
            )
        self.vcs: dict[str, dict[str, Capacity]] = {}
        for vc in cluster.virtual_clusters.values():
            per_chain: dict[str, Capacity] = {}
            for cell in vc.virtual_cells:
                chain = cluster.chains[cell.chain]
                level = chain.level_of(cell.cell_type)
                leaves = cell.number * chain.leaves_per_cell(level)
                largest = chain.leaves_per_cell(min(level, chain.node_level))
                before = per_chain.get(cell.chain, Capacity(0, 0))
                per_chain[cell.chain] = Capacity(
                    before.leaves + leaves, max(before.largest_node, largest)
                )
            self.vcs[vc.name] = per_chain
        self.pinned: dict[str, tuple[str, Capacity]] = {}
        for pinned_id, pinned_cell in cluster.pinned_cells.items():
            chain = cluster.chains[cluster.pinned_cell_chain(pinned_id)]
            self.pinned[pinned_id] = (
                chain.name,
                Capacity(
                    chain.leaves_per_cell(pinned_cell.level),
                    chain.leaves_per_cell(min(pinned_cell.level, chain.node_level)),
                ),
            )

    def guaranteed_chains(self, request: GroupRequest) -> list[str]:
        """The VC's chains (file order) a guaranteed, non-pinned request may use."""
        return [
            chain
            for chain in self.vcs.get(request.vc, {})
            if request.sku_type is None or self.cluster.chains[chain].sku_type == request.sku_type
        ]

    def opportunistic_chains(self, request: GroupRequest) -> list[str]:
        return [
            chain.name
            for chain in self.cluster.chains.values()
            if request.sku_type is None or chain.sku_type == request.sku_type
        ]

    def refusal(self, request: GroupRequest) -> str | None:
        """Why `request` can never be placed, or None when it may be."""
        cluster = self.cluster
        if not request.pods:
            return f"group '{request.name}' has no pods"
        if any(pod.leaf_cells < 1 for pod in request.pods):
            return "every pod needs at least one leaf cell"
        if not OPPORTUNISTIC_PRIORITY <= request.priority <= MAX_PRIORITY:
            return f"priority {request.priority} is outside -1..{MAX_PRIORITY}"
        if request.vc not in cluster.virtual_clusters:
            known = ", ".join(cluster.virtual_clusters) or "none"
            return f"unknown virtual cluster '{request.vc}' (VCs: {known})"
        if request.sku_type is not None and request.sku_type not in cluster.sku_types:
            known = ", ".join(cluster.sku_types)
            return f"unknown SKU type '{request.sku_type}' (SKU types: {known})"
        if request.pinned_cell_id is not None:
            return self._pinned_refusal(request)
        if request.opportunistic:
            options = {chain: self.chains[chain] for chain in self.opportunistic_chains(request)}
            return _shape_refusal(request, options, "the cluster", cluster)
        options = {chain: self.vcs[request.vc][chain] for chain in self.guaranteed_chains(request)}
        if not options:
            if request.sku_type is not None:
                return f"VC '{request.vc}' has no cells of SKU type '{request.sku_type}'"
            return f"VC '{request.vc}' has no guaranteed cells (submit the job as opportunistic)"
        return _shape_refusal(request, options, f"VC '{request.vc}'", cluster)

    def _pinned_refusal(self, request: GroupRequest) -> str | None:
        pinned_id = request.pinned_cell_id
        assert pinned_id is not None
        if request.opportunistic:
            return "an opportunistic job cannot ask for a pinned cell"
        if pinned_id not in self.cluster.virtual_clusters[request.vc].pinned_cells:
            return f"pinned cell '{pinned_id}' does not belong to VC '{request.vc}'"
        chain, capacity = self.pinned[pinned_id]
        sku = self.cluster.chains[chain].sku_type
        if request.sku_type is not None and request.sku_type != sku:
            return f"pinned cell '{pinned_id}' has SKU type '{sku}', not '{request.sku_type}'"
        return _shape_refusal(
            request, {chain: capacity}, f"pinned cell '{pinned_id}'", self.cluster
        )


def _shape_refusal(
    request: GroupRequest, options: dict[str, Capacity], owner: str, cluster: ClusterConfig
) -> str | None:
    if not options:
        return f"no cells of SKU type '{request.sku_type}' in the cluster"
    largest_pod = max(pod.leaf_cells for pod in request.pods)
    for capacity in options.values():
        if request.leaf_cells <= capacity.leaves and largest_pod <= capacity.largest_node:
            return None
    chain, capacity = next(iter(options.items()))
    noun = cluster.chain_sku(chain).unit_noun
    if largest_pod > capacity.largest_node:
        return (
            f"a task needs {largest_pod} {noun} on one node but the largest cell of {owner} "
            f"holds {capacity.largest_node}"
        )
    return f"the job needs {request.leaf_cells} {noun} but {owner} has {capacity.leaves} in total"
