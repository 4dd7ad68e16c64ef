"""The public snapshot of the scheduler's state: VCs, nodes and groups, for people and APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.groups import GroupRecord
from pai.scheduler.reasons import amount
from pai.scheduler.types import (
    GPU_MILLI,
    ClusterSnapshot,
    GroupSnapshot,
    GroupState,
    LeafUsage,
    NodeSnapshot,
    ShareUsage,
    VcSnapshot,
)
from pai.scheduler.views import VcView

if TYPE_CHECKING:
    from pai.scheduler.scheduler import Scheduler


def build_snapshot(scheduler: Scheduler) -> ClusterSnapshot:
    cluster = scheduler.cluster
    vcs: dict[str, VcSnapshot] = {}
    for vc in cluster.virtual_clusters.values():
        views = _views_of(scheduler, vc.name)
        guaranteed_cells: dict[str, int] = {}
        for cell in vc.virtual_cells:
            guaranteed_cells[cell.cell_type] = guaranteed_cells.get(cell.cell_type, 0) + cell.number
        for pinned_id in vc.pinned_cells:
            cell_type = cluster.pinned_cells[pinned_id].cell_type
            guaranteed_cells[cell_type] = guaranteed_cells.get(cell_type, 0) + 1
        free_cells: dict[str, int] = {}
        groups: dict[str, int] = {}
        guaranteed = used = guaranteed_gpus = used_gpus = 0
        for view in views:
            sku = cluster.chain_sku(view.chain.name)
            guaranteed += view.total_leaves
            used += view.used
            guaranteed_gpus += amount(sku, view.total_leaves)
            used_gpus += amount(sku, view.used)
            for group, count in view.group_leaves.items():
                if group.gpu is None:  # pools are listed with the nodes' shared GPUs
                    groups[group.name] = groups.get(group.name, 0) + count
            for root in view.roots:
                _count_free_cells(view, root, free_cells)
        opportunistic = opportunistic_gpus = 0
        for group in scheduler._groups.values():
            if group.request.vc == vc.name and group.opportunistic:
                opportunistic += len(group.leaves)
                opportunistic_gpus += amount(
                    cluster.chain_sku(group.placement.chain), len(group.leaves)
                )
        vcs[vc.name] = VcSnapshot(
            name=vc.name,
            guaranteed_leaves=guaranteed,
            used_leaves=used,
            free_leaves=guaranteed - used,
            guaranteed_gpus=guaranteed_gpus,
            used_gpus=used_gpus,
            free_gpus=guaranteed_gpus - used_gpus,
            guaranteed_cells=guaranteed_cells,
            free_cells=free_cells,
            opportunistic_leaves=opportunistic,
            opportunistic_gpus=opportunistic_gpus,
            groups=dict(sorted(groups.items())),
        )
    nodes = []
    for info in scheduler._nodes.values():
        leaves = tuple(
            _leaf_usage(leaf) for leaf in sorted(info.cell.leaves, key=lambda leaf: leaf.leaf_index)
        )
        nodes.append(
            NodeSnapshot(
                name=info.name,
                address=info.address,
                chain=info.cell.chain.name,
                sku_type=info.cell.chain.sku_type,
                healthy=info.healthy,
                total_leaves=info.cell.leaf_count,
                used_leaves=info.cell.used,
                free_leaves=info.cell.leaf_count - info.cell.used,
                leaves=leaves,
            )
        )
    groups_snapshot = {
        name: _group_snapshot(group) for name, group in sorted(scheduler._groups.items())
    }
    return ClusterSnapshot(vcs=vcs, nodes=tuple(nodes), groups=groups_snapshot)


def _count_free_cells(view: VcView, cell: VirtualCell, counts: dict[str, int]) -> None:
    """Cells with nothing running in them, not counting cells bound to bad hardware."""
    if cell.physical is not None and not cell.physical.healthy:
        return
    if cell.used == 0:
        cell_type = view.chain.type_at(cell.level)
        counts[cell_type] = counts.get(cell_type, 0) + 1
    for child in cell.children:
        _count_free_cells(view, child, counts)


def _views_of(scheduler: Scheduler, vc: str) -> list[VcView]:
    views = [view for (name, _), view in scheduler._views.items() if name == vc]
    return views + [view for view in scheduler._pinned_views.values() if view.vc == vc]


def _leaf_usage(leaf: PhysicalCell) -> LeafUsage:
    holder = leaf.holder
    reserved_by = leaf.reserver.name if leaf.reserver else None
    gpu = holder.gpu if holder is not None else None
    if gpu is None:
        group = holder.name if holder is not None else None
        return LeafUsage(leaf.leaf_index, group, _leaf_priority(leaf), reserved_by)
    shares = tuple(
        ShareUsage(group, role, index, ask.milli, ask.gpu_memory_mb)
        for (group, role, index), ask in sorted(gpu.members.items())
    )
    return LeafUsage(
        leaf.leaf_index,
        None,
        _leaf_priority(leaf),
        reserved_by,
        shares,
        GPU_MILLI - gpu.milli,
    )


def _leaf_priority(leaf: PhysicalCell) -> int | None:
    priorities = [group.priority for group in (leaf.holder, leaf.reserver) if group is not None]
    return max(priorities) if priorities else None


def _group_snapshot(group: GroupRecord) -> GroupSnapshot:
    preemptors = sorted(
        {
            leaf.reserver.name
            for leaf in group.leaves
            if leaf.reserver and leaf.reserver is not group
        }
    )
    victims = sorted(
        {leaf.holder.name for leaf in group.leaves if leaf.holder and leaf.holder is not group}
    )
    state = group.state
    if state is GroupState.ALLOCATED and preemptors:
        state = GroupState.BEING_PREEMPTED
    return GroupSnapshot(
        name=group.name,
        vc=group.request.vc,
        priority=group.priority,
        state=state,
        leaves=len(group.leaves),
        preemptors=tuple(preemptors),
        victims=tuple(victims),
    )
