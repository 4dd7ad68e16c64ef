"""The two kinds of cluster view placement runs on.

- `VcView`: one VC's cells of one chain (or one pinned cell): the VC sees only its own guaranteed
  groups, so its placement is the one it would get on a private cluster of its cells. Nodes of
  the view are the VC's node-level cells, plus VC cells smaller than a node (e.g. a socket).
- `PhysicalView`: every node of a chain, for opportunistic groups (and any quota-style policy).

Each keeps a `NodePicker` whose fields the scheduler refreshes after every change.
"""

from __future__ import annotations

from pai.cluster.model import Chain
from pai.scheduler.cells import CellIds, PhysicalCell, VirtualCell, build_virtual_tree
from pai.scheduler.groups import GroupRecord
from pai.scheduler.picker import LeafLayout, NodePicker, PickerNode

# Ranks order tied nodes: bound nodes by their physical cell, unbound nodes under a bound cell by
# that cell, free-floating ones last. Using physical identities makes decisions independent of
# which (interchangeable) VC cell happened to be bound, so a rebuilt scheduler decides alike.
RANK_UNDER_BOUND = 1 << 30
RANK_FLOATING = 1 << 62
LOCAL_INDEX_BITS = 20


class VcView:
    def __init__(
        self,
        vc: str,
        chain: Chain,
        root_levels: list[int],
        ids: CellIds,
        pinned_id: str | None = None,
    ) -> None:
        self.vc = vc
        self.chain = chain
        self.pinned_id = pinned_id
        self.name = vc if pinned_id is None else f"{vc} (pinned cell '{pinned_id}')"
        self.roots: list[VirtualCell] = [
            build_virtual_tree(self, level, ids, [0] * (chain.top_level + 1))
            for level in root_levels
        ]
        self.unbound: dict[int, list[VirtualCell]] = {}
        self.doomed: list[VirtualCell] = []  # roots bound to bad cells only to show they are lost
        if pinned_id is None:
            for root in self.roots:
                self.unbound.setdefault(root.level, []).append(root)
        self.total_leaves = sum(root.leaf_count for root in self.roots)
        self.used = 0
        self.by_priority: dict[int, int] = {}
        self.group_leaves: dict[GroupRecord, int] = {}
        self.picker = NodePicker(chain.top_level - chain.node_level)
        self.nodes: dict[VirtualCell, PickerNode] = {}
        self.layouts: dict[int, LeafLayout] = {}
        for root in self.roots:
            view_nodes = (
                [root]
                if root.level <= chain.node_level
                else list(_at_level(root, chain.node_level))
            )
            for cell in view_nodes:
                self.nodes[cell] = PickerNode(cell, 0, cell.leaf_count, cell.level)
                if cell.level not in self.layouts:
                    self.layouts[cell.level] = LeafLayout(chain.child_numbers, cell.level)
        for cell in self.nodes:
            self.sync(cell)

    def layout_of(self, cell: VirtualCell) -> LeafLayout:
        return self.layouts[cell.level]

    def view_node_of(self, cell: VirtualCell) -> VirtualCell:
        while cell.level < self.chain.node_level and cell.parent is not None:
            cell = cell.parent
        return cell

    def view_nodes_under(self, cell: VirtualCell) -> list[VirtualCell]:
        if cell in self.nodes:
            return [cell]
        if cell.level < self.chain.node_level:
            return [self.view_node_of(cell)]
        return list(_at_level(cell, self.chain.node_level))

    def sync(self, cell: VirtualCell) -> None:
        """Bring the picker's entry for view node `cell` up to date."""
        node = self.nodes[cell]
        node.used = cell.used
        node.pack = cell.used  # pack across priorities: fill the VC's busiest nodes first
        node.healthy = cell.physical is None or cell.physical.bad_nodes == 0
        node.rank = view_rank(cell)
        node.domains = self._domains(cell)
        self.picker.refresh(node)

    def _domains(self, cell: VirtualCell) -> tuple[int, ...] | None:
        chain = self.chain
        if cell.root is cell and cell.physical is None:
            return None  # floating: buddy allocation decides where it lands
        domains = []
        for level in range(chain.node_level + 1, chain.top_level + 1):
            ancestor = cell.ancestor_at(level)
            if ancestor is not None:
                domains.append(ancestor.physical.id if ancestor.physical else ancestor.id)
            else:
                root_physical = cell.root.physical
                assert root_physical is not None
                domains.append(root_physical.ancestor_at(level).id)
        return tuple(domains)

    def first_unbound(self, level: int) -> VirtualCell | None:
        roots = self.unbound.get(level)
        return roots[0] if roots else None


class PhysicalView:
    def __init__(self, chain: Chain, node_cells: list[PhysicalCell]) -> None:
        self.chain = chain
        self.picker = NodePicker(chain.top_level - chain.node_level)
        self.layout = LeafLayout(chain.child_numbers, chain.node_level)
        self.nodes: dict[PhysicalCell, PickerNode] = {}
        for cell in node_cells:
            node = PickerNode(cell, cell.id, cell.leaf_count, cell.level)
            node.domains = tuple(ancestor.id for ancestor in cell.ancestors())
            self.nodes[cell] = node
            self.sync(cell)

    def layout_of(self, cell: PhysicalCell) -> LeafLayout:
        return self.layout

    def sync(self, cell: PhysicalCell) -> None:
        node = self.nodes[cell]
        node.used = cell.used
        node.pack = cell.opp  # opportunistic pods pack together ...
        node.penalty = cell.used - cell.opp  # ... away from guaranteed ones
        node.healthy = cell.bad_nodes == 0
        self.picker.refresh(node)


def view_rank(cell: VirtualCell) -> int:
    if cell.physical is not None:
        return cell.physical.id
    anchor = cell.parent
    while anchor is not None and anchor.physical is None:
        anchor = anchor.parent
    if anchor is not None and anchor.physical is not None:
        return RANK_UNDER_BOUND + (anchor.physical.id << LOCAL_INDEX_BITS) + cell.local_index
    return RANK_FLOATING + cell.id


def _at_level(cell: VirtualCell, level: int) -> list[VirtualCell]:
    if cell.level == level:
        return [cell]
    return [found for child in cell.children for found in _at_level(child, level)]
