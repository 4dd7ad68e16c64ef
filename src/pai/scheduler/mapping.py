"""Mapping VC cells to physical cells, HiveD's way: bound cells keep their binding, unbound
ones get free cells of the same shape by buddy allocation, packed into one rack when a group
needs several. Only decides: nothing changes until the caller occupies what it was given.
"""

from __future__ import annotations

from collections.abc import Callable

from pai.scheduler.buddy import TentativeFree, usable
from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.state import CellState, ChainState

WorkAtRisk = Callable[[str], float]
"""The work a running group (by name) would lose if it were preempted now, e.g. its GPU-seconds
since its last checkpoint; any unit, as long as it is the same for every group."""


class CellMapping(CellState):
    work_at_risk: WorkAtRisk | None

    def _map_to_physical(
        self, state: ChainState, chosen: list[list[VirtualCell]], domain: int | None
    ) -> list[list[PhysicalCell]] | None:
        """Physical leaves for the chosen VC leaves, without changing anything (HiveD's mapping:
        bound cells keep their binding; unbound ones get free cells of the same shape)."""
        at_risk = self._opportunistic_work_in if self.work_at_risk is not None else None
        tentative = TentativeFree(state.free, at_risk)
        assigned: dict[VirtualCell, PhysicalCell] = {}
        taken: set[PhysicalCell] = set()
        within = self._multi_node_cells.get(domain) if domain is not None else None
        if within is None:
            within = self._domain_for_floating(state, chosen)

        def physical_of(cell: VirtualCell) -> PhysicalCell | None:
            return cell.physical or assigned.get(cell)

        result: list[list[PhysicalCell]] = []
        for pod in chosen:
            leaves: list[PhysicalCell] = []
            for vleaf in pod:
                if physical_of(vleaf) is None:
                    unbound = [vleaf]
                    while (
                        unbound[-1].parent is not None and physical_of(unbound[-1].parent) is None
                    ):
                        unbound.append(unbound[-1].parent)
                    for vcell in reversed(unbound):
                        parent = vcell.parent
                        if parent is None:
                            target = tentative.choose(vcell.level, within=within)
                        else:
                            parent_physical = physical_of(parent)
                            assert parent_physical is not None
                            target = _free_child(parent_physical, taken, tentative.rank)
                        if target is None:
                            return None
                        assigned[vcell] = target
                        taken.add(target)
                found = physical_of(vleaf)
                assert found is not None
                leaves.append(found)
            result.append(leaves)
        return result

    def _opportunistic_work_in(self, cell: PhysicalCell) -> float:
        """What the opportunistic groups running in `cell` would lose if a VC took it: a cell
        bound to a VC is, sooner or later, all needed by it."""
        assert self.work_at_risk is not None
        holders = {
            name
            for leaf in cell.at_level(1)
            if leaf.holder is not None and leaf.reserver is None
            for name in leaf.holder.stops
        }
        return sum(self.work_at_risk(name) for name in holders)

    def _domain_for_floating(
        self, state: ChainState, chosen: list[list[VirtualCell]]
    ) -> PhysicalCell | None:
        """Rack packing for VC cells not bound yet: the fullest lowest multi-node cell (e.g. a
        rack) that can take all of them, when the group needs more than one."""
        floating = {vleaf.root for pod in chosen for vleaf in pod if vleaf.root.physical is None}
        if len(floating) < 2 or not state.lowest_domains:
            return None
        levels = {root.level for root in floating}
        if len(levels) != 1:
            return None
        level = levels.pop()
        if level > state.chain.node_level:
            return None
        best: tuple[int, int] | None = None
        best_cell = None
        for cell in state.lowest_domains:
            available = state.free.obtainable(cell, level)
            if available >= len(floating) and (best is None or (available, cell.id) < best):
                best, best_cell = (available, cell.id), cell
        return best_cell

    def _floating_capacity(self, state: ChainState, domain: int, level: int) -> int:
        cell = self._multi_node_cells.get(domain)
        return state.free.obtainable(cell, level) if cell is not None else 0


def _free_child(
    parent: PhysicalCell,
    taken: set[PhysicalCell],
    rank: Callable[[PhysicalCell], tuple[float, ...]],
) -> PhysicalCell | None:
    candidates = [
        child
        for child in parent.children
        if child.virtual is None and child not in taken and usable(child)
    ]
    return min(candidates, key=rank) if candidates else None
