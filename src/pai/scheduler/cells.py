"""Runtime cells: the physical trees of each chain and the virtual trees each VC owns.

Cells carry the counters decisions need (used and opportunistic leaves, bad nodes), updated along
the ancestor path on every change, so no decision has to recount a subtree.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from typing import TYPE_CHECKING

from pai.cluster.model import Chain, PhysicalCellSpec

if TYPE_CHECKING:
    from pai.scheduler.groups import GroupRecord
    from pai.scheduler.views import VcView

FREE_PRIORITY = -2


class PhysicalCell:
    """A concrete cell. Leaves record the group running on them (`holder`) and the preempting group
    that reserved them (`reserver`); `in_free` marks membership of the chain's buddy free lists."""

    __slots__ = (
        "address",
        "bad_nodes",
        "chain",
        "children",
        "free_counts",
        "holder",
        "id",
        "in_free",
        "leaf_count",
        "leaf_index",
        "leaves",
        "level",
        "node",
        "node_count",
        "opp",
        "parent",
        "pinned_id",
        "reserver",
        "slot",
        "used",
        "virtual",
    )

    def __init__(
        self,
        cell_id: int,
        chain: Chain,
        level: int,
        slot: int,
        address: str,
        parent: PhysicalCell | None,
    ) -> None:
        self.id = cell_id
        self.chain = chain
        self.level = level
        self.slot = slot
        self.address = address
        self.parent = parent
        self.children: tuple[PhysicalCell, ...] = ()
        self.leaves: tuple[PhysicalCell, ...] = ()  # set for node-level cells and below
        self.leaf_count = 1
        self.node_count = 1
        self.node: NodeInfo | None = None  # the node this cell is in (None above node level)
        self.pinned_id: str | None = None
        self.leaf_index = -1
        self.in_free = False
        self.virtual: VirtualCell | None = None
        self.used = 0  # leaves held or reserved
        self.opp = 0  # leaves held by opportunistic groups (and not reserved)
        self.bad_nodes = 0
        self.free_counts: list[int] | None = None  # multi-node cells: free-list cells per level
        self.holder: GroupRecord | None = None
        self.reserver: GroupRecord | None = None

    def __repr__(self) -> str:
        return f"PhysicalCell({self.chain.type_at(self.level)} {self.address})"

    @property
    def is_multi_node(self) -> bool:
        return self.level > self.chain.node_level

    @property
    def healthy(self) -> bool:
        return self.bad_nodes == 0

    def ancestors(self) -> Iterator[PhysicalCell]:
        cell = self.parent
        while cell is not None:
            yield cell
            cell = cell.parent

    def ancestor_at(self, level: int) -> PhysicalCell:
        cell = self
        while cell.level < level:
            assert cell.parent is not None
            cell = cell.parent
        return cell

    def walk(self) -> Iterator[PhysicalCell]:
        yield self
        for child in self.children:
            yield from child.walk()

    def at_level(self, level: int) -> Iterator[PhysicalCell]:
        if self.level == level:
            yield self
        elif self.level > level:
            for child in self.children:
                yield from child.at_level(level)


class NodeInfo:
    """A machine: its node-level cell, where tasks reach it, and whether it is healthy."""

    __slots__ = ("address", "cell", "healthy", "leaf_by_index", "name")

    def __init__(self, name: str, address: str, cell: PhysicalCell) -> None:
        self.name = name
        self.address = address
        self.cell = cell
        self.healthy = True
        self.leaf_by_index = {leaf.leaf_index: leaf for leaf in cell.leaves}


class VirtualCell:
    """A cell of a VC. `root` is its preassigned ancestor (HiveD's term: a top-level VC cell);
    `physical` is its binding, made lazily while something runs under it."""

    __slots__ = (
        "chain",
        "children",
        "doomed",
        "holder",
        "id",
        "leaf_count",
        "leaves",
        "level",
        "local_index",
        "parent",
        "physical",
        "root",
        "used",
        "view",
    )

    def __init__(
        self,
        cell_id: int,
        view: VcView,
        level: int,
        parent: VirtualCell | None,
        local_index: int,
    ) -> None:
        self.id = cell_id
        self.view = view
        self.chain = view.chain
        self.level = level
        self.parent = parent
        self.root: VirtualCell = parent.root if parent is not None else self
        self.local_index = local_index  # position among the root's cells of this level
        self.children: tuple[VirtualCell, ...] = ()
        self.leaves: tuple[VirtualCell, ...] = ()
        self.leaf_count = 1
        self.physical: PhysicalCell | None = None
        self.used = 0
        self.holder: GroupRecord | None = None
        self.doomed = False  # a root bound to bad hardware only so the VC sees it is unusable

    def __repr__(self) -> str:
        return f"VirtualCell({self.view.name} {self.chain.type_at(self.level)} #{self.id})"

    def walk(self) -> Iterator[VirtualCell]:
        yield self
        for child in self.children:
            yield from child.walk()

    def ancestor_at(self, level: int) -> VirtualCell | None:
        cell: VirtualCell | None = self
        while cell is not None and cell.level < level:
            cell = cell.parent
        return cell


class CellIds:
    """One id space for physical and virtual cells, so ids can name either kind unambiguously."""

    def __init__(self) -> None:
        self._next = count()

    def next(self) -> int:
        return next(self._next)


def build_physical_tree(
    spec: PhysicalCellSpec,
    chain: Chain,
    ids: CellIds,
    slots: list[int],
    parent: PhysicalCell | None = None,
) -> PhysicalCell:
    """Create the cells of one top-level tree; `slots[level]` numbers cells per level in a chain."""
    cell = PhysicalCell(ids.next(), chain, spec.level, slots[spec.level], spec.address, parent)
    slots[spec.level] += 1
    cell.pinned_id = spec.pinned_cell_id
    if spec.leaf_index is not None:
        cell.leaf_index = spec.leaf_index
    cell.children = tuple(
        build_physical_tree(child, chain, ids, slots, cell) for child in spec.children
    )
    if cell.children:
        cell.leaf_count = sum(child.leaf_count for child in cell.children)
    if spec.level <= chain.node_level:
        cell.leaves = tuple(leaf for child in cell.children for leaf in child.leaves) or (cell,)
    if cell.is_multi_node:
        cell.node_count = sum(child.node_count for child in cell.children)
        cell.free_counts = [0] * (chain.top_level + 1)
    return cell


def build_virtual_tree(
    view: VcView,
    level: int,
    ids: CellIds,
    local_counts: list[int],
    parent: VirtualCell | None = None,
) -> VirtualCell:
    """A VC cell of `level` with its full subtree, shaped like the chain's physical cells."""
    cell = VirtualCell(ids.next(), view, level, parent, local_counts[level])
    local_counts[level] += 1
    if level > 1:
        number = view.chain.child_numbers[level - 1]
        cell.children = tuple(
            build_virtual_tree(view, level - 1, ids, local_counts, cell) for _ in range(number)
        )
        cell.leaf_count = sum(child.leaf_count for child in cell.children)
    if level <= view.chain.node_level:
        cell.leaves = tuple(leaf for child in cell.children for leaf in child.leaves) or (cell,)
    return cell
