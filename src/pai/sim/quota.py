"""The quota baseline: what a capacity scheduler (YARN's, Kubernetes quotas) gives a VC.

A VC's quota is a number of GPUs of each SKU, with no shape: a group is admitted while its VC's
GPUs in use plus the group's stay within the quota, and is then placed on any free GPUs of the
cluster. Placement is PAI's own: the same scheduler's physical view and packing heuristics
(fullest nodes first, pods kept on the closest GPUs, multi-node groups inside one rack when one
can hold them), reached through `Scheduler` with opportunistic requests, which are placed on
physical cells without any VC cells. Nothing is reserved, so a VC within its quota may still
wait: the free GPUs may be scattered over nodes (fragmentation), the sharing anomaly HiveD's
cells remove. There are no priorities, preemption or borrowing beyond the quota.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from pai.cluster.model import ClusterConfig
from pai.scheduler import reasons
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.scheduler import PlacementError, Scheduler
from pai.scheduler.types import (
    OPPORTUNISTIC_PRIORITY,
    Bind,
    Decision,
    GroupRequest,
    Placement,
    Wait,
    WaitKind,
    WaitReason,
)


class QuotaScheduler:
    """GPU-count quotas per VC and SKU over PAI's physical placement (see the module docstring).

    Same calls as `pai.scheduler.Scheduler`: `schedule`, then `allocate` right after a Bind,
    and `release` when the group ends.
    """

    def __init__(self, cluster: ClusterConfig) -> None:
        self.cluster = cluster
        self._placer = Scheduler(cluster)
        self._capacity = CapacityIndex(cluster)
        self._quota: dict[str, dict[str, int]] = {}
        for vc, chains in self._capacity.vcs.items():
            per_sku: dict[str, int] = {}
            for chain, capacity in chains.items():
                sku = cluster.chains[chain].sku_type
                per_sku[sku] = per_sku.get(sku, 0) + capacity.leaves
            self._quota[vc] = per_sku
        self._largest_node: dict[str, int] = {}
        for spec in cluster.chains.values():
            node = spec.leaves_per_cell(spec.node_level)
            self._largest_node[spec.sku_type] = max(self._largest_node.get(spec.sku_type, 0), node)
        self._groups: defaultdict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self._used: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._held: dict[str, tuple[str, str, Placement]] = {}  # group -> (vc, sku, placement)
        self._offer: tuple[GroupRequest, str, Placement] | None = None

    def quota(self, vc: str) -> dict[str, int]:
        """The VC's quota: leaf cells (GPUs) per SKU."""
        return dict(self._quota.get(vc, {}))

    def schedule(self, request: GroupRequest) -> Decision:
        held = self._held.get(request.name)
        if held is not None:
            return Bind(held[2])
        if request.opportunistic:
            return Wait(reasons.unschedulable("the quota baseline has no opportunistic jobs"))
        refusal = self._capacity.refusal(request)
        if refusal is not None:
            return Wait(reasons.unschedulable(refusal))
        sizes = sorted(pod.leaf_cells for pod in request.pods)
        topology: list[WaitReason] = []
        over_quota: list[WaitReason] = []
        for sku_name in self._skus(request):
            sku = self.cluster.sku_types[sku_name]
            if sizes[-1] > self._largest_node[sku_name]:
                continue
            groups = self._groups[(request.vc, sku_name)]
            quota = self._quota[request.vc][sku_name]
            used = self._used[(request.vc, sku_name)]
            if used + request.leaf_cells > quota:
                owner = f"VC '{request.vc}' (quota)"
                free = quota - used
                over_quota.append(
                    reasons.vc_quota(owner, sku, quota, groups, request.leaf_cells, free)
                )
                continue
            anywhere = replace(request, priority=OPPORTUNISTIC_PRIORITY, sku_type=sku_name)
            decision = self._placer.schedule(anywhere)
            if isinstance(decision, Bind):
                self._offer = (request, sku_name, decision.placement)
                return Bind(decision.placement)
            details = decision.reason.details if isinstance(decision, Wait) else {}
            topology.append(
                reasons.topology(
                    "the cluster",
                    sku,
                    sizes,
                    self._largest_node[sku_name],
                    _count(details.get("idle")),
                    _count(details.get("largest_idle_on_one_node")),
                )
            )
        waits = topology + over_quota
        if not waits:
            return Wait(WaitReason(WaitKind.UNSCHEDULABLE, "No SKU of the VC can hold this job."))
        return Wait(waits[0])

    def allocate(self, group_name: str, placement: Placement) -> None:
        """Commit the Bind just returned for `group_name`."""
        offer = self._offer
        if offer is None or offer[0].name != group_name or offer[2] != placement:
            raise PlacementError(f"allocate('{group_name}') must directly follow its Bind")
        self._offer = None
        request, sku, _ = offer
        self._placer.allocate(group_name, placement)
        self._groups[(request.vc, sku)][group_name] = request.leaf_cells
        self._used[(request.vc, sku)] += request.leaf_cells
        self._held[group_name] = (request.vc, sku, placement)

    def release(self, group_name: str) -> None:
        """The group ended: its GPUs go back to the cluster and to its VC's quota."""
        if self._offer is not None and self._offer[0].name == group_name:
            self._offer = None
        held = self._held.pop(group_name, None)
        if held is None:
            return
        vc, sku, _ = held
        self._used[(vc, sku)] -= self._groups[(vc, sku)].pop(group_name)
        self._placer.release(group_name)

    def _skus(self, request: GroupRequest) -> list[str]:
        skus = [
            self.cluster.chains[chain].sku_type
            for chain in self._capacity.guaranteed_chains(request)
        ]
        return list(dict.fromkeys(skus))


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0
