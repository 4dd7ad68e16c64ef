"""Buddy cell allocation: the free cells of a chain, split on demand and merged on release.

VC cells float: a VC cell is bound to a physical cell of its level only while something runs
in it. `FreeLists` holds the physical cells nobody has bound (HiveD's free lists), ordered by
(bad nodes, opportunistic leaves, slot) so that choosing a cell avoids bad hardware and disturbs
the fewest opportunistic jobs. `need[level]` counts the VC cells not bound yet.

A caller that knows what a preemption costs gives `TentativeFree` a `WorkAtRisk`: among free
cells with as few opportunistic leaves, it then takes the one whose jobs lose the least work (e.g.
those that saved a checkpoint most recently) instead of the lowest slot.

Safety (every VC can always get all its cells) is the top-down walk of the cluster-file check
applied to the current free cells: `feasible`. Taking the lowest-level free cell (plain buddy)
always keeps it true; any other choice (another rack, to pack a group, or away from bad nodes) is
only made after checking it, on a `TentativeFree` overlay, which a decision can throw away.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Sequence

from pai.cluster.model import Chain
from pai.scheduler.cells import PhysicalCell

FreeKey = tuple[int, int, int]  # (bad nodes, opportunistic leaves, slot)
WorkAtRisk = Callable[[PhysicalCell], float]
"""The work the opportunistic jobs running in a cell would lose if a VC took it now."""


def free_key(cell: PhysicalCell) -> FreeKey:
    return (cell.bad_nodes, cell.opp, cell.slot)


def usable(cell: PhysicalCell) -> bool:
    """Whether a VC can be given `cell`: healthy if single-node, not entirely bad if larger."""
    if cell.is_multi_node:
        return cell.bad_nodes < cell.node_count
    return cell.bad_nodes == 0


def feasible(chain: Chain, free: Sequence[int], need: Sequence[int]) -> bool:
    """Can the free cells still host every unbound VC cell? (exact: cells of a level are alike)"""
    available = 0
    for level in range(chain.top_level, 0, -1):
        available += free[level]
        left = available - need[level]
        if left < 0:
            return False
        if level > 1:
            available = left * chain.child_numbers[level - 1]
    return True


class FreeLists:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        levels = chain.top_level + 1
        self.counts = [0] * levels
        self.need = [0] * levels
        self._keys: list[list[FreeKey]] = [[] for _ in range(levels)]
        self._cells: list[dict[FreeKey, PhysicalCell]] = [{} for _ in range(levels)]
        self._key_of: dict[int, FreeKey] = {}

    def add(self, cell: PhysicalCell) -> None:
        key = free_key(cell)
        insort(self._keys[cell.level], key)
        self._cells[cell.level][key] = cell
        self._key_of[cell.id] = key
        cell.in_free = True
        self.counts[cell.level] += 1
        self._count_in_domains(cell, 1)

    def remove(self, cell: PhysicalCell) -> None:
        key = self._key_of.pop(cell.id)
        keys = self._keys[cell.level]
        del keys[bisect_left(keys, key)]
        del self._cells[cell.level][key]
        cell.in_free = False
        self.counts[cell.level] -= 1
        self._count_in_domains(cell, -1)

    def rekey(self, cell: PhysicalCell) -> None:
        """Re-sort a free cell after its bad-node or opportunistic count changed."""
        if self._key_of.get(cell.id) != free_key(cell):
            self.remove(cell)
            self.add(cell)

    def _count_in_domains(self, cell: PhysicalCell, delta: int) -> None:
        holder: PhysicalCell | None = cell
        while holder is not None:
            if holder.free_counts is not None:
                holder.free_counts[cell.level] += delta
            holder = holder.parent

    def cells_at(self, level: int) -> Iterator[PhysicalCell]:
        """Free cells of `level`, best first (do not change the free cells while iterating)."""
        cells = self._cells[level]
        for key in self._keys[level]:
            yield cells[key]

    def all_cells(self) -> list[PhysicalCell]:
        return [
            cell for level in range(1, self.chain.top_level + 1) for cell in self.cells_at(level)
        ]

    def take(self, cell: PhysicalCell) -> None:
        """Remove `cell` from the free cells, splitting the free cell that contains it."""
        path = [cell]
        while not path[-1].in_free:
            parent = path[-1].parent
            if parent is None:
                raise ValueError(f"{cell} is not free")
            path.append(parent)
        self.remove(path[-1])
        for upper, lower in zip(reversed(path[1:]), reversed(path[:-1]), strict=True):
            for child in upper.children:
                if child is not lower:
                    self.add(child)

    def give_back(self, cell: PhysicalCell) -> None:
        """Return `cell`, merging it with its buddies while all of them are free."""
        self.add(cell)
        parent = cell.parent
        while parent is not None and all(child.in_free for child in parent.children):
            for child in parent.children:
                self.remove(child)
            self.add(parent)
            parent = parent.parent

    def obtainable(self, within: PhysicalCell, level: int) -> int:
        """How many level-`level` cells the free cells inside multi-node `within` could give."""
        assert within.free_counts is not None
        return sum(
            within.free_counts[upper] * self.chain.cells_per_cell(upper, level)
            for upper in range(level, self.chain.top_level + 1)
        )


class TentativeFree:
    """A decision's private view of the free cells: takes here do not touch `FreeLists`."""

    def __init__(self, free: FreeLists, at_risk: WorkAtRisk | None = None) -> None:
        self.free = free
        self.chain = free.chain
        self.at_risk = at_risk
        self.removed: set[PhysicalCell] = set()
        self.added: dict[int, list[PhysicalCell]] = {}
        self.count_delta = [0] * (self.chain.top_level + 1)
        self.need_delta = [0] * (self.chain.top_level + 1)

    def is_free(self, cell: PhysicalCell) -> bool:
        if cell.in_free:
            return cell not in self.removed
        return cell in self.added.get(cell.level, ())

    def free_ancestor(self, cell: PhysicalCell) -> PhysicalCell | None:
        current: PhysicalCell | None = cell
        while current is not None:
            if self.is_free(current):
                return current
            current = current.parent
        return None

    def candidates(self, level: int) -> Iterator[PhysicalCell]:
        real = (
            (free_key(cell), cell.id, cell)
            for cell in self.free.cells_at(level)
            if cell not in self.removed
        )
        extra = sorted((free_key(cell), cell.id, cell) for cell in self.added.get(level, ()))
        for _, _, cell in heapq.merge(real, extra):
            yield cell

    def rank(self, cell: PhysicalCell) -> tuple[float, ...]:
        """Which cell to take first: healthy, fewest opportunistic leaves, least work they would
        lose, lowest slot (without `at_risk`, just `free_key`). Taking fewer leaves first
        matters more than their work: ranking by work alone preempted more often and lost more
        on the Philly trace."""
        if self.at_risk is None:
            return free_key(cell)
        return (cell.bad_nodes, cell.opp, self.at_risk(cell) if cell.opp else 0.0, cell.slot)

    def _ranked(self, cells: Iterable[PhysicalCell]) -> Iterator[PhysicalCell]:
        """`cells` (in `free_key` order) in `rank` order: runs of cells with the same bad nodes
        and opportunistic leaves re-sorted by work at risk, and only once the walk reaches them,
        i.e. when a choice would preempt."""
        if self.at_risk is None:
            yield from cells
            return
        run: list[PhysicalCell] = []
        for cell in cells:
            if run and (cell.bad_nodes, cell.opp) != (run[0].bad_nodes, run[0].opp):
                yield from sorted(run, key=self.rank)
                run = []
            if cell.opp:
                run.append(cell)
            else:
                yield cell
        yield from sorted(run, key=self.rank)

    def _unfree(self, cell: PhysicalCell) -> None:
        if cell.in_free:
            self.removed.add(cell)
        else:
            self.added[cell.level].remove(cell)
        self.count_delta[cell.level] -= 1

    def _refree(self, cell: PhysicalCell) -> None:
        self.added.setdefault(cell.level, []).append(cell)
        self.count_delta[cell.level] += 1

    def take_for_vc_cell(self, cell: PhysicalCell) -> bool:
        """Tentatively bind `cell` to an unbound VC cell of its level; False (and no change) when
        that would leave some VC unable to get its cells."""
        holder = self.free_ancestor(cell)
        assert holder is not None, f"{cell} is not free"
        path = [cell]
        while path[-1] is not holder:
            parent = path[-1].parent
            assert parent is not None
            path.append(parent)
        self._unfree(holder)
        for upper, lower in zip(reversed(path[1:]), reversed(path[:-1]), strict=True):
            for child in upper.children:
                if child is not lower:
                    self._refree(child)
        self.need_delta[cell.level] -= 1
        free = [
            real + delta for real, delta in zip(self.free.counts, self.count_delta, strict=True)
        ]
        need = [real + delta for real, delta in zip(self.free.need, self.need_delta, strict=True)]
        if feasible(self.chain, free, need):
            return True
        self.need_delta[cell.level] += 1
        for upper, lower in zip(reversed(path[1:]), reversed(path[:-1]), strict=True):
            for child in upper.children:
                if child is not lower:
                    self._unfree(child)
        if holder.in_free:
            self.removed.discard(holder)
            self.count_delta[holder.level] += 1
        else:
            self._refree(holder)
        return False

    def choose(
        self,
        level: int,
        accept: Callable[[PhysicalCell], bool] = usable,
        within: PhysicalCell | None = None,
    ) -> PhysicalCell | None:
        """Take a free cell of `level` for an unbound VC cell: inside `within` when possible,
        else plain buddy order (lowest free level first, best key first)."""
        if within is not None:
            for candidate in self._candidates_within(within, level):
                target = self._descend(candidate, level, accept)
                if target is not None and self.take_for_vc_cell(target):
                    return target
        for upper in range(level, self.chain.top_level + 1):
            for candidate in self._ranked(self.candidates(upper)):
                target = self._descend(candidate, level, accept)
                if target is None:
                    continue
                if self.take_for_vc_cell(target):
                    return target
                break  # every cell of this level changes the counts alike: try a higher level
        return None

    def _candidates_within(self, within: PhysicalCell, level: int) -> list[PhysicalCell]:
        found: list[PhysicalCell] = []
        stack = [within]
        while stack:
            cell = stack.pop()
            if self.is_free(cell):
                found.append(cell)
            elif cell.level > level:
                stack.extend(cell.children)
        found.sort(key=lambda cell: (cell.level, *self.rank(cell)))
        return found

    def _descend(
        self, cell: PhysicalCell, level: int, accept: Callable[[PhysicalCell], bool]
    ) -> PhysicalCell | None:
        """The best level-`level` cell inside free `cell` that `accept` allows."""
        if cell.level == level:
            return cell if accept(cell) else None
        for child in sorted(cell.children, key=self.rank):
            found = self._descend(child, level, accept)
            if found is not None:
                return found
        return None
