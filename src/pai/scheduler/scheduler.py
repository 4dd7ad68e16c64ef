"""The HiveD scheduler: VCs guaranteed with their topology, idle cells shared opportunistically.

Pure and deterministic: no clock, no I/O, no randomness; every choice follows a documented order
(buckets then rank in `NodePicker`, (bad nodes, opportunistic leaves, slot) for free cells, file
order for chains and VCs). The caller serialises calls and persists what it needs (`Allocation`).

A guaranteed group is first placed in its VC's own view (`VcView`): the VC's cells and its own
guaranteed groups only, as on a private cluster; first using free cells only, then, if that fails,
treating the VC's lower-priority groups as preemptible. The chosen VC cells are then mapped to
physical cells: already-bound cells keep their binding, unbound VC cells get free physical cells by
buddy allocation (`buddy.TentativeFree`), which never breaks any VC's guarantee. Physical cells
used by opportunistic groups are taken when needed: those groups become victims. Free cells with
the fewest opportunistic leaves are taken first; among those, given `work_at_risk` (what a
running group would lose if preempted now), the cells whose groups lose the least.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TypeVar, cast

from pai.cluster.model import ClusterConfig
from pai.scheduler import reasons
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.fragmentation import FragmentationPolicy
from pai.scheduler.gpushare import SharePolicy
from pai.scheduler.invariants import verify
from pai.scheduler.mapping import WorkAtRisk
from pai.scheduler.picker import FREE, NOT_AVAILABLE, PREEMPTIBLE, LeafLayout, pick_leaves
from pai.scheduler.sharing import SharingState
from pai.scheduler.snapshot import build_snapshot
from pai.scheduler.types import (
    OPPORTUNISTIC_PRIORITY,
    Allocation,
    Bind,
    ClusterSnapshot,
    Decision,
    GroupRequest,
    GroupState,
    Placement,
    PodPlacement,
    Preempt,
    RebuildResult,
    Wait,
    WaitKind,
    WaitReason,
)
from pai.scheduler.views import VcView


class PlacementError(ValueError):
    """`allocate` was called with a placement the scheduler did not offer or cannot honour."""


class Scheduler(SharingState):
    """HiveD over one cluster. Not thread-safe: the caller serialises calls."""

    overflow = False
    """Whether a guaranteed group that must wait in its VC runs on idle cells instead, as an
    opportunistic group (`pai.scheduler.pai`); a caller holding a group back from its VC's
    cells may still offer it as opportunistic then."""

    @property
    def reserves_after_s(self) -> float:
        """How long a group waits in its VC before the policy reserves cells for it (the
        first such group of the VC that it is asked about); infinity: never."""
        return math.inf

    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        work_at_risk: WorkAtRisk | None = None,
        share_policy: SharePolicy | None = None,
    ) -> None:
        """`share_policy` places tasks that share GPUs (default: PAI's, which learns the
        workload and keeps fragmentation low)."""
        self.cluster = cluster
        self.work_at_risk = work_at_risk
        self.share_policy = share_policy or FragmentationPolicy()
        self._capacity = CapacityIndex(cluster)
        self._reset()

    # == public API ==============================================================================

    def schedule(self, request: GroupRequest) -> Decision:
        """Decide for one group: Bind (call `allocate` next), Preempt (cells reserved) or Wait."""
        existing = self._groups.get(request.name)
        if existing is not None:
            if existing.state is GroupState.ALLOCATED:
                return Bind(existing.placement)
            if all(leaf.bad_nodes == 0 for leaf in existing.reserved_leaves()):
                victims = self._victims_of(existing)
                if victims:
                    return Preempt(victims, existing.placement)
                self._offer = (existing.request, existing.placement)
                return Bind(existing.placement)
            self._vacate(existing)  # its reserved cells went bad: decide afresh
            del self._groups[existing.name]
            self._settle(existing)
        refusal = self._capacity.refusal(request)
        if refusal is not None:
            return Wait(reasons.unschedulable(refusal))
        if request.shares:
            decision = self._schedule_shares(request)
        elif request.opportunistic:
            decision = self._schedule_opportunistic(request)
        else:
            decision = self._schedule_guaranteed(request)
        self._flush()
        if isinstance(decision, Bind):
            self._offer = (request, decision.placement)
        return decision

    def allocate(self, group_name: str, placement: Placement) -> None:
        """Commit the Bind just returned for `group_name` (a preemptor's, once victims are gone)."""
        existing = self._groups.get(group_name)
        if existing is not None:
            if existing.placement != placement:
                raise PlacementError(f"group '{group_name}' already holds another placement")
            if existing.state is GroupState.PREEMPTING:
                victims = self._victims_of(existing)
                if victims:
                    raise PlacementError(
                        f"group '{group_name}' still waits for {', '.join(victims)} to stop"
                    )
                if existing.request.shares:
                    self._pool_reserved(existing)
                    return
                for leaf in existing.leaves:
                    self._set_leaf(leaf, existing, None)
                existing.state = GroupState.ALLOCATED
                self._flush()
            return
        if self._offer is None or self._offer[0].name != group_name or self._offer[1] != placement:
            raise PlacementError(
                f"allocate('{group_name}') must directly follow the Bind decision for it"
            )
        request = self._offer[0]
        self._offer = None
        if request.shares:
            plan, self._share_offer = self._share_offer, None
            assert plan is not None and plan.request is request
            self._allocate_shares(plan)
            return
        leaves = self._resolve(placement)
        if isinstance(leaves, str):
            raise PlacementError(leaves)
        for leaf in leaves:
            if leaf.holder is not None:
                raise PlacementError(f"{leaf.node.name if leaf.node else leaf} is in use")
        self._cancel_preemptors_on(leaves, request.priority)
        group = self._new_group(request, placement)
        if not self._occupy(group, leaves, reserve=False):
            raise PlacementError(f"placement of '{group_name}' no longer fits its VC")
        self._groups[group_name] = group
        self._settle(group)

    def release(self, group_name: str) -> None:
        """The group finished or was stopped (or, if it was preempting, gave up): free its cells."""
        group = self._groups.pop(group_name, None)
        if self._offer is not None and self._offer[0].name == group_name:
            self._offer = None
        if group is None:
            return
        if group.shared:
            self._leave_shares(group)
            self._flush()
            return
        self._vacate(group)
        self._settle(group)

    def set_node_health(self, node: str, healthy: bool) -> None:
        """Mark a node good or bad. Running groups stay where they are; new ones avoid it."""
        info = self._nodes.get(node)
        if info is None:
            raise KeyError(f"unknown node '{node}'")
        if info.healthy == healthy:
            return
        info.healthy = healthy
        delta = -1 if healthy else 1
        changed = [*info.cell.walk(), *info.cell.ancestors()]
        chain_state = self._chains[info.cell.chain.name]
        for cell in changed:
            cell.bad_nodes += delta
            if cell.in_free:
                chain_state.free.rekey(cell)
            if cell.virtual is not None:
                view = cell.virtual.view
                for view_node in view.view_nodes_under(cell.virtual):
                    self._dirty_v[view_node] = view
        self._dirty_p[info.cell] = chain_state.physical_view
        if healthy:
            chain_state.bad_nodes.pop(node, None)
            bound = info.cell.virtual
            if bound is not None and bound.root is not bound:
                self._unbind_idle(bound)
        else:
            chain_state.bad_nodes[node] = info
            self._bind_bad_node(info.cell)
        self._rebalance_doomed(chain_state)
        self._flush()

    def rebuild(self, allocations: Iterable[Allocation]) -> RebuildResult:
        """Forget everything and restore running groups (e.g. after a restart).

        Guaranteed groups are restored before opportunistic ones, each in name order, so the
        result does not depend on the order given; node health is kept.
        """
        bad = [name for name, info in self._nodes.items() if not info.healthy]
        self._reset()
        downgraded: list[str] = []
        rejected: dict[str, str] = {}
        ordered = sorted(
            allocations,
            key=lambda a: (a.opportunistic or a.request.opportunistic, a.request.name),
        )
        for allocation in ordered:
            request, placement = allocation.request, allocation.placement
            if request.shares:
                downgrade, problem = self._restore_shares(allocation)
                if problem is not None:
                    rejected[request.name] = problem
                elif downgrade:
                    downgraded.append(request.name)
                continue
            leaves = self._resolve(placement)
            if isinstance(leaves, str):
                rejected[request.name] = leaves
                continue
            taken = next((leaf for leaf in leaves if leaf.holder is not None), None)
            if request.name in self._groups or taken is not None:
                holder = taken.holder.name if taken is not None and taken.holder else request.name
                rejected[request.name] = f"its cells are already used by '{holder}'"
                continue
            group = self._new_group(request, placement)
            group.downgraded = allocation.opportunistic and not request.opportunistic
            if not self._occupy(group, leaves, reserve=False):
                group.downgraded = True
                self._occupy(group, leaves, reserve=False)
                downgraded.append(request.name)
            self._groups[request.name] = group
            self._flush()
        self._claim_spares()
        for name in bad:
            self.set_node_health(name, False)
        return RebuildResult(tuple(downgraded), rejected)

    def snapshot(self) -> ClusterSnapshot:
        return build_snapshot(self)

    def check_invariants(self) -> None:
        """Recount everything from scratch and compare with the incremental state (for tests)."""
        verify(self)

    # == deciding =================================================================================

    def _schedule_guaranteed(self, request: GroupRequest) -> Decision:
        if request.pinned_cell_id is not None:
            views = [self._pinned_views[request.pinned_cell_id]]
        else:
            views = [
                self._views[(request.vc, chain)]
                for chain in self._capacity.guaranteed_chains(request)
            ]
        waits: list[WaitReason] = []
        for view in views:
            outcome = self._place_in_view(request, view)
            if not isinstance(outcome, WaitReason):
                return outcome
            waits.append(outcome)
        return Wait(_first_reason(waits))

    def _place_in_view(self, request: GroupRequest, view: VcView) -> Bind | Preempt | WaitReason:
        state = self._chains[view.chain.name]
        order = sorted(range(len(request.pods)), key=lambda i: (request.pods[i].leaf_cells, i))
        sizes = [request.pods[i].leaf_cells for i in order]
        demand = sum(sizes)
        bad_node: str | None = None
        for pass_priority in (OPPORTUNISTIC_PRIORITY, request.priority):
            if pass_priority >= 0 and all(p >= pass_priority for p in view.by_priority):
                continue  # nothing to preempt: the same as the first pass
            if _free_at(view.total_leaves, view.by_priority, pass_priority) < demand:
                continue
            pick = view.picker.place(
                sizes,
                pass_priority,
                lambda domain, level: self._floating_capacity(state, domain, level),
            )
            if pick.nodes is None:
                if pick.bad_node is not None:
                    bound = cast(VirtualCell, pick.bad_node.ref).physical
                    bad_node = bound.node.name if bound is not None and bound.node else bad_node
                continue
            chosen = _choose_leaves(
                [cast(VirtualCell, node.ref) for node in pick.nodes],
                sizes,
                view.layout_of,
                partial(_virtual_leaf_state, priority=pass_priority),
            )
            lazy = sorted(
                {
                    vleaf.holder.name: vleaf.holder
                    for pod in chosen
                    for vleaf in pod
                    if vleaf.holder is not None
                    and vleaf.holder.request.lazy_preemption
                    and vleaf.holder.state is GroupState.ALLOCATED
                    and not any(leaf.reserver for leaf in vleaf.holder.leaves)
                }.values(),
                key=lambda group: group.name,
            )
            for group in lazy:
                self._downgrade(group)
            domain = (
                pick.domain
                if pick.domain is not None and pick.domain < self._physical_count
                else None
            )
            mapped = self._map_to_physical(state, chosen, domain)
            if mapped is None:
                for group in lazy:
                    self._upgrade(group)
                self._flush()
                bad_node = bad_node or next(iter(sorted(state.bad_nodes)), "unknown")
                continue
            cell_types = [view.chain.type_at(pod[0].root.level) for pod in chosen]
            placement, flat = _placement(request, view.chain.name, order, mapped, cell_types)
            return self._finish(request, placement, flat, tuple(g.name for g in lazy))
        return self._guaranteed_wait(request, view, sizes, bad_node)

    def _finish(
        self,
        request: GroupRequest,
        placement: Placement,
        leaves: list[PhysicalCell],
        downgraded: tuple[str, ...],
    ) -> Bind | Preempt:
        victims = {name for leaf in leaves if leaf.holder is not None for name in leaf.holder.stops}
        if not victims:
            return Bind(placement, downgraded)
        self._cancel_preemptors_on(leaves, request.priority)
        group = self._new_group(request, placement)
        group.state = GroupState.PREEMPTING
        reserved = self._occupy(group, leaves, reserve=True)
        assert reserved, "a mapped placement can always be reserved"
        self._groups[request.name] = group
        self._rebalance_doomed(self._chains[placement.chain])
        return Preempt(tuple(sorted(victims)), placement, downgraded)

    def _schedule_opportunistic(self, request: GroupRequest) -> Decision:
        order = sorted(range(len(request.pods)), key=lambda i: (request.pods[i].leaf_cells, i))
        sizes = [request.pods[i].leaf_cells for i in order]
        waits: list[WaitReason] = []
        for chain_name in self._capacity.opportunistic_chains(request):
            state = self._chains[chain_name]
            picker = state.physical_view.picker
            pick = (
                picker.place(sizes, OPPORTUNISTIC_PRIORITY)
                if picker.free_leaves >= sum(sizes)
                else None
            )
            if pick is None or pick.nodes is None:
                sku = self.cluster.chain_sku(chain_name)
                if pick is not None and pick.bad_node is not None:
                    node = cast(PhysicalCell, pick.bad_node.ref).node
                    assert node is not None
                    waits.append(reasons.bad_nodes("the cluster", [node.name]))
                else:
                    waits.append(
                        reasons.opportunistic(
                            sku, state.leaves, picker.free_leaves, sum(sizes), picker.largest_free()
                        )
                    )
                continue
            chosen = _choose_leaves(
                [cast(PhysicalCell, node.ref) for node in pick.nodes],
                sizes,
                state.physical_view.layout_of,
                _physical_leaf_state,
            )
            placement, _ = _placement(request, chain_name, order, chosen, [None] * len(chosen))
            return Bind(placement)
        return Wait(_first_reason(waits))

    def _guaranteed_wait(
        self, request: GroupRequest, view: VcView, sizes: list[int], bad_node: str | None
    ) -> WaitReason:
        sku = self.cluster.chain_sku(view.chain.name)
        owner = f"VC '{view.vc}'" if view.pinned_id is None else f"pinned cell '{view.pinned_id}'"
        demand = sum(sizes)
        preemptible = _free_at(view.total_leaves, view.by_priority, request.priority)
        if preemptible < demand:
            used_by = {group.name: count for group, count in view.group_leaves.items()}
            free = view.total_leaves - view.used
            return reasons.vc_quota(owner, sku, view.total_leaves, used_by, demand, free)
        if bad_node is not None:
            return reasons.bad_nodes(owner, [bad_node])
        return reasons.topology(
            owner,
            sku,
            sizes,
            view.chain.leaves_per_cell(view.chain.node_level),
            view.total_leaves - view.used,
            view.picker.largest_free(),
        )


CellT = TypeVar("CellT", PhysicalCell, VirtualCell)


def _choose_leaves(
    nodes: Sequence[CellT],
    sizes: Sequence[int],
    layout_of: Callable[[CellT], LeafLayout],
    state_of: Callable[[CellT], int],
) -> list[list[CellT]]:
    """Leaves for each pod on the node the picker gave it (several pods may share a node)."""
    states: dict[CellT, list[int]] = {}
    chosen: list[list[CellT]] = []
    for node, size in zip(nodes, sizes, strict=True):
        if node not in states:
            states[node] = [state_of(leaf) for leaf in node.leaves]
        positions = pick_leaves(layout_of(node), states[node], size)
        assert positions is not None, "the picker guaranteed enough leaves"
        for position in positions:
            states[node][position] = NOT_AVAILABLE
        chosen.append([node.leaves[position] for position in positions])
    return chosen


def _placement(
    request: GroupRequest,
    chain: str,
    order: Sequence[int],
    leaves_by_rank: Sequence[Sequence[PhysicalCell]],
    cell_types: Sequence[str | None],
) -> tuple[Placement, list[PhysicalCell]]:
    """The placement in the request's pod order (pods were placed smallest first, `order`),
    and its physical leaves in the same order as the placement lists them."""
    pods: dict[int, PodPlacement] = {}
    pod_leaves: dict[int, list[PhysicalCell]] = {}
    for rank, pod_index in enumerate(order):
        pod = request.pods[pod_index]
        leaves = sorted(leaves_by_rank[rank], key=lambda leaf: leaf.leaf_index)
        node = leaves[0].node
        assert node is not None
        pod_leaves[pod_index] = leaves
        pods[pod_index] = PodPlacement(
            pod.role,
            pod.index,
            node.name,
            node.address,
            tuple(leaf.leaf_index for leaf in leaves),
            cell_types[rank],
        )
    indices = range(len(request.pods))
    placement = Placement(chain, tuple(pods[i] for i in indices))
    return placement, [leaf for i in indices for leaf in pod_leaves[i]]


def _virtual_leaf_state(leaf: VirtualCell, priority: int) -> int:
    """In a VC's view: free, or preemptible by a group of `priority` (lower-priority holder)."""
    if leaf.holder is None:
        return FREE
    if priority >= 0 and leaf.holder.priority < priority:
        return PREEMPTIBLE
    return NOT_AVAILABLE


def _physical_leaf_state(leaf: PhysicalCell) -> int:
    """For opportunistic groups: only leaves nobody holds or reserves."""
    return FREE if leaf.holder is None and leaf.reserver is None else NOT_AVAILABLE


def _free_at(total: int, by_priority: dict[int, int], priority: int) -> int:
    if priority < 0:
        return total - sum(by_priority.values())
    return total - sum(count for p, count in by_priority.items() if p >= priority)


def _first_reason(waits: list[WaitReason]) -> WaitReason:
    if not waits:
        return WaitReason(WaitKind.UNSCHEDULABLE, "No cells can hold this job.", {})
    first = waits[0]
    if len(waits) == 1:
        return first
    others = [{"kind": str(wait.kind), "message": wait.message} for wait in waits[1:]]
    return WaitReason(first.kind, first.message, {**first.details, "other_chains": others})
