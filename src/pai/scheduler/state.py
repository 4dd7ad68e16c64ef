"""The scheduler's cell bookkeeping: who holds which leaf, which VC cell is bound where.

`CellState` keeps every counter, binding and free list consistent under the primitive changes a
decision is made of (occupy, vacate, downgrade, bind, release), so that deciding (`Scheduler`) never
has to recount. `Scheduler.check_invariants` recounts everything to prove it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import Any

from pai.cluster.model import Chain, ClusterConfig
from pai.scheduler.buddy import FreeLists, TentativeFree, free_key
from pai.scheduler.cells import (
    CellIds,
    NodeInfo,
    PhysicalCell,
    VirtualCell,
    build_physical_tree,
)
from pai.scheduler.groups import GroupRecord
from pai.scheduler.types import GroupRequest, GroupState, Placement
from pai.scheduler.views import PhysicalView, VcView


class ChainState:
    """Everything the scheduler keeps for one chain."""

    def __init__(self, chain: Chain, tops: list[PhysicalCell]) -> None:
        self.chain = chain
        self.tops = tops
        self.free = FreeLists(chain)
        self.node_cells = [cell for top in tops for cell in top.at_level(chain.node_level)]
        self.leaves = sum(cell.leaf_count for cell in self.node_cells)
        self.physical_view = PhysicalView(chain, self.node_cells)
        self.views: list[VcView] = []  # non-pinned VC views, in file order
        self.root_levels: list[int] = []  # levels of the VCs' cells, highest first
        self.bad_nodes: dict[str, NodeInfo] = {}
        self.doomed = 0
        self.lowest_domains = [cell for top in tops for cell in top.at_level(chain.node_level + 1)]


class CellState:
    """The mutable state of a scheduler over one cluster (see the module docstring)."""

    cluster: ClusterConfig
    # The last Bind offered: `allocate` commits exactly that (the caller must call it next).
    _offer: tuple[GroupRequest, Placement] | None

    # == state ===================================================================================

    def _reset(self) -> None:
        cluster = self.cluster
        ids = CellIds()
        self._chains: dict[str, ChainState] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._multi_node_cells: dict[int, PhysicalCell] = {}
        pinned_cells: dict[str, PhysicalCell] = {}
        for chain in cluster.chains.values():
            slots = [0] * (chain.top_level + 1)
            tops: list[PhysicalCell] = []
            for spec in cluster.physical_cells:
                if spec.cell_type != chain.name:
                    continue
                top = build_physical_tree(spec, chain, ids, slots)
                for cell_spec, cell in zip(spec.walk(), top.walk(), strict=True):
                    if cell_spec.node_name is not None:
                        assert cell_spec.node_address is not None
                        info = NodeInfo(cell_spec.node_name, cell_spec.node_address, cell)
                        self._nodes[info.name] = info
                        for inner in cell.walk():
                            inner.node = info
                    if cell.is_multi_node:
                        self._multi_node_cells[cell.id] = cell
                    if cell.pinned_id is not None:
                        pinned_cells[cell.pinned_id] = cell
                tops.append(top)
            state = ChainState(chain, tops)
            for top in tops:
                state.free.add(top)
            self._chains[chain.name] = state
        for cell in pinned_cells.values():
            self._chains[cell.chain.name].free.take(cell)
        self._physical_count = ids.next()
        self._views: dict[tuple[str, str], VcView] = {}
        self._pinned_views: dict[str, VcView] = {}
        self._groups: dict[str, GroupRecord] = {}
        self._offer = None
        self._dirty_v: dict[VirtualCell, VcView] = {}
        self._dirty_p: dict[PhysicalCell, PhysicalView] = {}
        for vc in cluster.virtual_clusters.values():
            for chain in cluster.chains.values():
                levels = [
                    chain.level_of(cell.cell_type)
                    for cell in vc.virtual_cells
                    if cell.chain == chain.name
                    for _ in range(cell.number)
                ]
                if levels:
                    view = VcView(vc.name, chain, levels, ids)
                    state = self._chains[chain.name]
                    for level in levels:
                        state.free.need[level] += 1
                    state.views.append(view)
                    state.root_levels = sorted({*state.root_levels, *levels}, reverse=True)
                    self._views[(vc.name, chain.name)] = view
            for pinned_id in vc.pinned_cells:
                cell = pinned_cells[pinned_id]
                view = VcView(vc.name, cell.chain, [cell.level], ids, pinned_id=pinned_id)
                self._bind(view.roots[0], cell)
                self._pinned_views[pinned_id] = view
        self._flush()

    def _flush(self) -> None:
        """Re-index the picker entries of every node touched since the last flush. Entries are
        all taken out first: a physical cell may have moved from one VC cell to another, and
        ranks follow physical cells, so re-inserting one by one could collide."""
        for vcell, view in self._dirty_v.items():
            view.picker.remove(view.nodes[vcell])
        for vcell, view in self._dirty_v.items():
            view.sync(vcell)
        for pcell, physical_view in self._dirty_p.items():
            physical_view.sync(pcell)
        self._dirty_v.clear()
        self._dirty_p.clear()

    def _settle(self, group: GroupRecord) -> None:
        """After cells changed hands: keep doomed bad cells right, then re-index."""
        self._rebalance_doomed(self._chains[group.placement.chain])
        self._flush()

    def _set_leaf(
        self, leaf: PhysicalCell, holder: GroupRecord | None, reserver: GroupRecord | None
    ) -> None:
        was_used, was_opp = leaf.used, leaf.opp
        leaf.holder, leaf.reserver = holder, reserver
        used = 1 if holder is not None or reserver is not None else 0
        opp = 1 if holder is not None and reserver is None and holder.opportunistic else 0
        used_delta, opp_delta = used - was_used, opp - was_opp
        if not used_delta and not opp_delta:
            return
        free = self._chains[leaf.chain.name].free
        cell: PhysicalCell | None = leaf
        while cell is not None:
            cell.used += used_delta
            cell.opp += opp_delta
            if opp_delta and cell.in_free:
                free.rekey(cell)
            cell = cell.parent
        assert leaf.node is not None
        self._dirty_p[leaf.node.cell] = self._chains[leaf.chain.name].physical_view

    def _set_holder(self, vleaf: VirtualCell, group: GroupRecord | None) -> None:
        previous = vleaf.holder
        if previous is group:
            return
        view = vleaf.view
        view_node = view.view_node_of(vleaf)
        node = view.nodes[view_node]
        if previous is not None:
            for counts in (view.by_priority, node.by_priority):
                _decrement(counts, previous.priority)
            _decrement(view.group_leaves, previous)
        if group is not None:
            for counts in (view.by_priority, node.by_priority):
                counts[group.priority] = counts.get(group.priority, 0) + 1
            view.group_leaves[group] = view.group_leaves.get(group, 0) + 1
        vleaf.holder = group
        delta = (group is not None) - (previous is not None)
        if delta:
            view.used += delta
            cell: VirtualCell | None = vleaf
            while cell is not None:
                cell.used += delta
                cell = cell.parent
        self._dirty_v[view_node] = view

    def _bind(self, vcell: VirtualCell, pcell: PhysicalCell) -> None:
        vcell.physical = pcell
        pcell.virtual = vcell
        view = vcell.view
        if vcell.root is vcell and view.pinned_id is None:
            roots = view.unbound[vcell.level]
            del roots[bisect_left(roots, vcell.id, key=_cell_id)]
            self._chains[vcell.chain.name].free.need[vcell.level] -= 1
        self._touch_view_nodes(vcell)

    def _unbind(self, vcell: VirtualCell) -> None:
        assert vcell.physical is not None
        vcell.physical.virtual = None
        vcell.physical = None
        view = vcell.view
        if vcell.root is vcell and view.pinned_id is None:
            insort(view.unbound[vcell.level], vcell, key=_cell_id)
            self._chains[vcell.chain.name].free.need[vcell.level] += 1
        self._touch_view_nodes(vcell)

    def _touch_view_nodes(self, vcell: VirtualCell) -> None:
        view = vcell.view
        if vcell.level >= vcell.chain.node_level or vcell in view.nodes:
            for view_node in view.view_nodes_under(vcell):
                self._dirty_v[view_node] = view

    def _unbind_idle(self, vcell: VirtualCell | None) -> None:
        """Undo bindings nothing runs under any more, climbing up; return a root's cell to the
        free cells (buddy merge). Pinned and doomed roots stay bound, and so does a bad node
        below a bound cell, so that the VC keeps seeing it as bad."""
        while vcell is not None and vcell.physical is not None:
            if vcell.used > 0:
                return
            if vcell.root is vcell:
                if vcell.view.pinned_id is None and not vcell.doomed:
                    self._release_root(vcell)
                return
            if vcell.level == vcell.chain.node_level and vcell.physical.bad_nodes > 0:
                return
            if any(child.physical is not None for child in vcell.children):
                return
            parent = vcell.parent
            self._unbind(vcell)
            vcell = parent

    def _release_root(self, root: VirtualCell) -> None:
        bound = [cell for cell in root.walk() if cell.physical is not None and cell is not root]
        for cell in reversed(bound):
            self._unbind(cell)
        physical = root.physical
        assert physical is not None
        self._unbind(root)
        self._chains[root.chain.name].free.give_back(physical)

    def _bind_root(self, root: VirtualCell, pcell: PhysicalCell) -> None:
        self._chains[root.chain.name].free.take(pcell)
        self._bind(root, pcell)
        if pcell.bad_nodes and pcell.is_multi_node:
            for node_cell in pcell.at_level(pcell.chain.node_level):
                if node_cell.bad_nodes:
                    self._bind_bad_node(node_cell)

    def _bind_bad_node(self, node_cell: PhysicalCell) -> None:
        """Show a bad node to the VC whose bound cell contains it, by binding it (unused)."""
        if node_cell.virtual is not None:
            return
        path = [node_cell]
        anchor = node_cell.parent
        while anchor is not None and anchor.virtual is None:
            path.append(anchor)
            anchor = anchor.parent
        if anchor is None or anchor.virtual is None:
            return
        vcell: VirtualCell = anchor.virtual
        for pcell in reversed(path):
            child = next((c for c in vcell.children if c.physical is None), None)
            if child is None:
                return
            self._bind(child, pcell)
            vcell = child

    # == groups: occupying and vacating cells =====================================================

    def _new_group(self, request: GroupRequest, placement: Placement) -> GroupRecord:
        group = GroupRecord(request, placement, GroupState.ALLOCATED)
        if not request.opportunistic:
            if request.pinned_cell_id is not None:
                group.view = self._pinned_views.get(request.pinned_cell_id)
            else:
                group.view = self._views.get((request.vc, placement.chain))
        return group

    def _resolve(self, placement: Placement) -> list[PhysicalCell] | str:
        leaves: list[PhysicalCell] = []
        for pod in placement.pods:
            info = self._nodes.get(pod.node)
            if info is None:
                return f"unknown node '{pod.node}'"
            if info.cell.chain.name != placement.chain:
                return f"node '{pod.node}' is not in chain '{placement.chain}'"
            for index in pod.leaf_indices:
                leaf = info.leaf_by_index.get(index)
                if leaf is None:
                    return f"node '{pod.node}' has no leaf cell {index}"
                leaves.append(leaf)
        shares = any(pod.share is not None for pod in placement.pods)
        if not shares and len(set(leaves)) != len(leaves):
            return "the placement uses a leaf cell twice"
        return leaves

    def _occupy(self, group: GroupRecord, leaves: list[PhysicalCell], reserve: bool) -> bool:
        """Hold (or, for a preemptor, reserve) `leaves`, binding VC cells as needed. On failure
        nothing is left changed and False is returned."""
        group.leaves, group.vleaves = [], []
        view = group.view
        if view is None and not group.opportunistic:
            return False
        position = 0
        for pod in group.placement.pods:
            pod_leaves = leaves[position : position + len(pod.leaf_indices)]
            position += len(pod.leaf_indices)
            root_level = None
            if not group.opportunistic:
                assert view is not None
                if pod.cell_type is None or pod.cell_type not in view.chain.types:
                    self._vacate(group)
                    return False
                root_level = view.chain.level_of(pod.cell_type)
            for leaf in pod_leaves:
                vleaf = None
                if root_level is not None:
                    assert view is not None
                    vleaf = self._virtual_leaf_for(leaf, view, root_level)
                    holder = vleaf.holder if vleaf is not None else None
                    allowed = holder is None or (reserve and holder.priority < group.priority)
                    if vleaf is None or not allowed:
                        self._vacate(group)
                        return False
                    self._set_holder(vleaf, group)
                group.leaves.append(leaf)
                group.vleaves.append(vleaf)
                if reserve:
                    self._set_leaf(leaf, leaf.holder, group)
                else:
                    self._set_leaf(leaf, group, None)
        return True

    def _virtual_leaf_for(
        self, leaf: PhysicalCell, view: VcView, root_level: int
    ) -> VirtualCell | None:
        """The VC leaf `leaf` counts against, binding VC cells down from the lowest bound one."""
        path = [leaf]
        while path[-1].level < root_level and path[-1].parent is not None:
            path.append(path[-1].parent)
        anchor = next((i for i, cell in enumerate(path) if cell.virtual is not None), None)
        if anchor is None:
            top = path[-1]
            root = view.first_unbound(root_level)
            if root is None or top.level != root_level:
                return None
            free = self._chains[view.chain.name].free
            if not inside_free(top) or not TentativeFree(free).take_for_vc_cell(top):
                return None
            self._bind_root(root, top)
            anchor = len(path) - 1
        vcell = path[anchor].virtual
        assert vcell is not None
        if vcell.view is not view:
            return None
        for pcell in reversed(path[:anchor]):
            if pcell.virtual is not None:
                vcell = pcell.virtual
                continue
            child = next((c for c in vcell.children if c.physical is None), None)
            if child is None:
                self._unbind_idle(vcell)
                return None
            self._bind(child, pcell)
            vcell = child
        return vcell

    def _vacate(self, group: GroupRecord) -> None:
        """Give up everything `group` holds or reserves; a cancelled preemptor hands reserved
        cells back to the victims still running on them."""
        for leaf, vleaf in zip(group.leaves, group.vleaves, strict=True):
            if leaf.reserver is group:
                victim = leaf.holder
                self._set_leaf(leaf, victim, None)
                if vleaf is not None and vleaf.holder is group:
                    if (
                        victim is not None
                        and not victim.opportunistic
                        and victim.view is vleaf.view
                    ):
                        self._set_holder(vleaf, victim)
                    else:
                        self._set_holder(vleaf, None)
                        self._unbind_idle(vleaf)
                continue
            if leaf.holder is group:
                self._set_leaf(leaf, None, leaf.reserver)
            if vleaf is not None and vleaf.holder is group:
                self._set_holder(vleaf, None)
                self._unbind_idle(vleaf)
        group.leaves, group.vleaves = [], []
        for claim in group.claims:
            self._vacate(claim)
        group.claims = []

    def _downgrade(self, group: GroupRecord) -> None:
        """Lazy preemption: the group keeps its physical cells but no longer counts against its
        VC, i.e. it becomes opportunistic."""
        for vleaf in group.vleaves:
            if vleaf is not None and vleaf.holder is group:
                self._set_holder(vleaf, None)
                self._unbind_idle(vleaf)
        group.vleaves = [None] * len(group.leaves)
        group.downgraded = True
        for leaf in group.leaves:
            self._set_leaf(leaf, leaf.holder, leaf.reserver)

    def _upgrade(self, group: GroupRecord) -> None:
        """Undo `_downgrade` (the preemptor that caused it could not be placed after all)."""
        leaves = group.leaves
        for leaf in leaves:
            self._set_leaf(leaf, None, leaf.reserver)
        group.downgraded = False
        if not self._occupy(group, leaves, reserve=False):
            group.downgraded = True
            self._occupy(group, leaves, reserve=False)

    def _victims_of(self, group: GroupRecord) -> tuple[str, ...]:
        names = {
            name
            for leaf in group.reserved_leaves()
            if leaf.holder is not None
            for name in leaf.holder.stops
        }
        return tuple(sorted(names))

    def _cancel_preemptors_on(self, leaves: Sequence[PhysicalCell], priority: int) -> None:
        """Preemptors of lower priority give up the reservations they have on `leaves`."""
        preemptors: dict[str, GroupRecord] = {}
        for leaf in leaves:
            if leaf.reserver is not None:
                preemptor = leaf.reserver.owner or leaf.reserver
                preemptors[preemptor.name] = preemptor
        self._cancel(preemptors, priority)

    def _cancel(self, preemptors: dict[str, GroupRecord], priority: int) -> None:
        """Preempting groups (of lower priority than `priority`) give up and wait again."""
        for name in sorted(preemptors):
            preemptor = preemptors[name]
            assert preemptor.priority < priority
            self._vacate(preemptor)
            del self._groups[name]

    # == bad hardware ===========================================================================

    def _rebalance_doomed(self, state: ChainState) -> None:
        """HiveD's doomed bad cells: when bad hardware leaves too few healthy free cells for a
        VC's unbound cells, bind some of them to bad cells, so the VC's own view shows the loss
        (and its jobs wait with a clear reason) instead of promising cells it cannot get.

        Recomputed from scratch each time (release all, then doom top-down, VCs in file order),
        so the result depends only on the current state, not on the order things happened in.
        """
        if not state.bad_nodes and not state.doomed:
            return
        for view in state.views:
            for root in view.doomed:
                root.doomed = False
                self._unbind_idle(root)
            view.doomed.clear()
        state.doomed = 0
        if not state.bad_nodes:
            return
        for level in state.root_levels:
            for view in state.views:
                while len(view.unbound.get(level, ())) > self._healthy_free(state, level):
                    target = self._bad_free_cell(state, level)
                    spare = view.first_unbound(level)
                    if target is None or spare is None:
                        break
                    self._bind_root(spare, target)
                    spare.doomed = True
                    view.doomed.append(spare)
                    state.doomed += 1

    def _healthy_free(self, state: ChainState, level: int) -> int:
        chain = state.chain
        total = sum(
            state.free.counts[upper] * chain.cells_per_cell(upper, level)
            for upper in range(level, chain.top_level + 1)
        )
        return total - len(self._bad_free_cells(state, level))

    def _bad_free_cells(self, state: ChainState, level: int) -> list[PhysicalCell]:
        """Free (obtainable) cells of `level` that contain a bad node, best first."""
        found: dict[PhysicalCell, None] = {}
        for name in sorted(state.bad_nodes):
            node_cell = state.bad_nodes[name].cell
            if level > state.chain.node_level:
                cell = node_cell.ancestor_at(level)
                if inside_free(cell):
                    found[cell] = None
            elif inside_free(node_cell):
                for cell in node_cell.at_level(level):
                    found[cell] = None
            else:
                for inner in node_cell.walk():
                    if inner.in_free and inner.level >= level:
                        for cell in inner.at_level(level):
                            found[cell] = None
        return sorted(found, key=free_key)

    def _bad_free_cell(self, state: ChainState, level: int) -> PhysicalCell | None:
        for cell in self._bad_free_cells(state, level):
            if TentativeFree(state.free).take_for_vc_cell(cell):
                return cell
        return None


def inside_free(cell: PhysicalCell) -> bool:
    current: PhysicalCell | None = cell
    while current is not None:
        if current.in_free:
            return True
        current = current.parent
    return False


def _decrement(counts: dict[Any, int], key: object) -> None:
    counts[key] -= 1
    if not counts[key]:
        del counts[key]


def _cell_id(cell: VirtualCell) -> int:
    return cell.id
