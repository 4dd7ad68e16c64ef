"""Requests that can never be placed, found from the cluster file alone, before they queue."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pai.cluster.model import ClusterConfig
from pai.scheduler.reasons import amount
from pai.scheduler.types import (
    GPU_MILLI,
    MAX_PRIORITY,
    OPPORTUNISTIC_PRIORITY,
    GroupRequest,
    PodRequest,
)

MEMO_SIZE = 4096
"""Kinds of requests whose chains are remembered."""


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
        self._chain_memo: dict[
            tuple[str | None, str | None, tuple[PodRequest, ...]], list[str]
        ] = {}
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
        return self._chains_for(request, request.vc)

    def opportunistic_chains(self, request: GroupRequest) -> list[str]:
        return self._chains_for(request, None)

    def _chains_for(self, request: GroupRequest, vc: str | None) -> list[str]:
        """The chains of `vc` (None: of the cluster) with the request's SKU and room for its
        pods, remembered per kind of request (a replay asks about many alike)."""
        key = (vc, request.sku_type, request.pods)
        found = self._chain_memo.get(key)
        if found is None:
            chains = self.vcs.get(vc, {}) if vc is not None else self.cluster.chains
            found = [
                chain
                for chain in chains
                if (
                    request.sku_type is None
                    or self.cluster.chains[chain].sku_type == request.sku_type
                )
                and self.lacking(request, chain) is None
            ]
            if len(self._chain_memo) >= MEMO_SIZE:
                self._chain_memo.clear()
            self._chain_memo[key] = found
        return found

    def sku_capacity(self, sku_type: str, vc: str | None) -> Capacity:
        """The most a VC (None: the whole cluster) can ever give a group of one SKU: a group
        stays within one chain, so the largest of that SKU's chains."""
        chains = self.vcs.get(vc, {}) if vc is not None else self.chains
        held = [
            capacity
            for chain, capacity in chains.items()
            if self.cluster.chains[chain].sku_type == sku_type
        ]
        return Capacity(
            max((capacity.leaves for capacity in held), default=0),
            max((capacity.largest_node for capacity in held), default=0),
        )

    def lacking(self, request: GroupRequest, chain_name: str) -> str | None:
        """What a node of the chain can never give one of the request's pods, or None.

        A whole-cell pod must find its CPU and memory in its cells' shares; a sharing pod needs
        a shareable SKU (one GPU per leaf), the GPU memory it asks for, and at most a node's CPU
        and memory (the shares of all its GPUs).
        """
        chain = self.cluster.chains[chain_name]
        sku = self.cluster.sku_types[chain.sku_type]
        per_node = chain.leaves_per_cell(chain.node_level)
        for pod in request.pods:
            leaves = per_node if pod.share is not None else pod.leaf_cells
            if pod.share is not None:
                if not sku.shareable:
                    return f"SKU '{sku.name}' cannot be shared (its leaf cell is not one GPU)"
                if pod.share.memory_mb and pod.share.memory_mb > sku.gpu_memory_mb:
                    declared = f"{sku.gpu_memory_mb} MB" if sku.gpu_memory_mb else "no gpuMemory"
                    return (
                        f"a task asks for {pod.share.memory_mb} MB of GPU memory but the GPUs of "
                        f"SKU '{sku.name}' have {declared}"
                    )
            if pod.cpu_milli > leaves * sku.cpu * 1000 or pod.memory_mb > leaves * sku.memory_mb:
                return (
                    f"a task asks for {pod.cpu_milli / 1000:g} CPUs and {pod.memory_mb} MB but "
                    f"{leaves} leaf cell(s) of SKU '{sku.name}' give "
                    f"{leaves * sku.cpu} CPUs and {leaves * sku.memory_mb} MB"
                )
        return None

    def refusal(self, request: GroupRequest) -> str | None:
        """Why `request` can never be placed, or None when it may be."""
        cluster = self.cluster
        if not request.pods:
            return f"group '{request.name}' has no pods"
        if any(pod.leaf_cells < 1 for pod in request.pods):
            return "every pod needs at least one leaf cell"
        shares = [pod.share for pod in request.pods if pod.share is not None]
        if shares and len(shares) < len(request.pods):
            return "a group's pods either all share GPUs or none do"
        for pod in request.pods:
            if pod.share is not None and (
                pod.leaf_cells != 1 or not 0 <= pod.share.milli <= GPU_MILLI
            ):
                return "a pod sharing a GPU takes one leaf cell and 0 to 1000 thousandths of it"
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
            if not options:
                return self._lacking_everywhere(request, list(cluster.chains))
            return _shape_refusal(request, options, "the cluster", cluster)
        options = {chain: self.vcs[request.vc][chain] for chain in self.guaranteed_chains(request)}
        if not options:
            if self.vcs[request.vc] and (
                request.sku_type is None
                or any(
                    cluster.chains[chain].sku_type == request.sku_type
                    for chain in self.vcs[request.vc]
                )
            ):
                return self._lacking_everywhere(request, list(self.vcs[request.vc]))
            if request.sku_type is not None:
                return f"VC '{request.vc}' has no cells of SKU type '{request.sku_type}'"
            return f"VC '{request.vc}' has no guaranteed cells (submit the job as opportunistic)"
        return _shape_refusal(request, options, f"VC '{request.vc}'", cluster)

    def _lacking_everywhere(self, request: GroupRequest, chains: list[str]) -> str:
        wanted = [
            chain
            for chain in chains
            if request.sku_type is None or self.cluster.chains[chain].sku_type == request.sku_type
        ]
        problem = next(
            (self.lacking(request, chain) for chain in wanted if self.lacking(request, chain)),
            None,
        )
        return problem or f"no cells of SKU type '{request.sku_type}' in the cluster"

    def _pinned_refusal(self, request: GroupRequest) -> str | None:
        pinned_id = request.pinned_cell_id
        assert pinned_id is not None
        if request.opportunistic:
            return "an opportunistic job cannot ask for a pinned cell"
        if pinned_id not in self.cluster.virtual_clusters[request.vc].pinned_cells:
            return f"pinned cell '{pinned_id}' does not belong to VC '{request.vc}'"
        chain, capacity = self.pinned[pinned_id]
        lacking = self.lacking(request, chain)
        if lacking is not None:
            return lacking
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
    needed = least_leaves(request)
    for capacity in options.values():
        if needed <= capacity.leaves and largest_pod <= capacity.largest_node:
            return None
    chain, capacity = next(iter(options.items()))
    sku = cluster.chain_sku(chain)
    noun = sku.unit_noun
    if largest_pod > capacity.largest_node:
        return (
            f"a task needs {amount(sku, largest_pod)} {noun} on one node but the largest cell "
            f"of {owner} holds {amount(sku, capacity.largest_node)}"
        )
    return (
        f"the job needs {amount(sku, needed)} {noun} but {owner} has "
        f"{amount(sku, capacity.leaves)} in total"
    )


def least_leaves(request: GroupRequest) -> int:
    """The fewest leaf cells the group can run on: its pods' cells, or, for pods sharing GPUs,
    as many GPUs as their shares add up to."""
    if not request.shares:
        return request.leaf_cells
    total = sum(pod.share.milli for pod in request.pods if pod.share is not None)
    return max(1, math.ceil(total / GPU_MILLI))
