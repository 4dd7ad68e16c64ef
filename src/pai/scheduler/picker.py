"""Topology-aware placement of a group's pods onto nodes, and of each pod onto leaves of a node.

This is the reusable heart of every placement policy (HiveD's VC views and opportunistic view here;
a quota-admission policy can drive `NodePicker` over physical nodes the same way):

- `NodePicker` keeps candidate nodes in buckets ordered by (healthy first, most packed first,
  least penalised first, larger first) and by a stable `rank` within a bucket. Placing pods
  (sorted ascending) walks that order greedily, HiveD's `findNodesForPods`; because every node of
  a bucket has the same free count, a bucket that cannot take the next pod is skipped whole, so a
  decision visits about as many nodes as it places pods, not all nodes.
- Going beyond HiveD, a group that spans nodes is then re-placed inside the lowest multi-node cell
  (a rack, then a row ...) that can hold it, choosing the fullest such cell that fits (best fit),
  and falls back to the spanning placement when none can.
- `pick_leaves` chooses the leaves of one pod inside a node so that their lowest common ancestor
  is as low as possible (a PCIe pair before a socket before the whole node), free leaves before
  preemptible ones.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BucketKey = tuple[int, int, int, int, int]
# (domain id, level of a floating node) -> how many floating nodes of that level the domain can take
FloatingCapacity = Callable[[int, int], int]


class PickerNode:
    """A candidate node as the picker sees it. Owners change the public fields, then `refresh`.

    `used` counts leaves in use at any priority; `by_priority` the same split by priority (needed
    only for passes that may preempt). `pack` is what packing prefers more of and `penalty` what it
    avoids (e.g. guaranteed leaves, for opportunistic placement). `domains[d]` is the id of the
    enclosing multi-node cell at depth d (0 = lowest, e.g. the rack), or None for a floating node
    that is not yet anywhere (a VC cell not bound to hardware). `rank` breaks ties; it must be
    unique within a picker. `version` counts refreshes, so callers can tell when what they
    derived from the node is out of date.
    """

    __slots__ = (
        "_indexed",
        "by_priority",
        "domains",
        "healthy",
        "level",
        "pack",
        "penalty",
        "rank",
        "ref",
        "total",
        "used",
        "version",
    )

    def __init__(self, ref: object, rank: int, total: int, level: int) -> None:
        self.ref = ref
        self.rank = rank
        self.total = total
        self.level = level
        self.used = 0
        self.pack = 0
        self.penalty = 0
        self.healthy = True
        self.domains: tuple[int, ...] | None = None
        self.by_priority: dict[int, int] = {}
        self.version = 0
        self._indexed: tuple[BucketKey, int, tuple[int, ...] | None, int] | None = None

    def key(self) -> BucketKey:
        return (0 if self.healthy else 1, -self.pack, self.penalty, -self.total, self.used)

    def free_at(self, priority: int) -> int:
        """Leaves a group of `priority` may take: free ones, plus lower-priority ones when >= 0."""
        if priority < 0:
            return self.total - self.used
        return self.total - sum(n for p, n in self.by_priority.items() if p >= priority)


@dataclass(frozen=True)
class Pick:
    """Nodes for the pods (in the ascending order they were given), or why there are none."""

    nodes: tuple[PickerNode, ...] | None
    bad_node: PickerNode | None = None
    domain: int | None = None


class NodePicker:
    def __init__(self, domain_depth: int) -> None:
        self.domain_depth = domain_depth
        self._keys: list[BucketKey] = []
        self._buckets: dict[BucketKey, list[int]] = {}
        self._nodes: dict[int, PickerNode] = {}
        self._members: list[dict[int, set[int]]] = [{} for _ in range(domain_depth)]
        self._domain_free: list[dict[int, int]] = [{} for _ in range(domain_depth)]
        self._floating: dict[BucketKey, list[int]] = {}
        self.free_leaves = 0  # leaves free at any priority, over all nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def largest_free(self) -> int:
        """Most free leaves (any priority) on one healthy node."""
        return max((-key[3] - key[4] for key in self._keys if key[0] == 0), default=0)

    def refresh(self, node: PickerNode) -> None:
        """Re-index a node after its fields changed (or index it the first time)."""
        node.version += 1
        self._unindex(node)
        key = node.key()
        free = node.total - node.used
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = []
            insort(self._keys, key)
        insort(bucket, node.rank)
        self._nodes[node.rank] = node
        if node.domains is None:
            if self.domain_depth:
                insort(self._floating.setdefault(key, []), node.rank)
        else:
            for depth, domain in enumerate(node.domains):
                self._members[depth].setdefault(domain, set()).add(node.rank)
                totals = self._domain_free[depth]
                totals[domain] = totals.get(domain, 0) + free
        self.free_leaves += free
        node._indexed = (key, node.rank, node.domains, free)

    def remove(self, node: PickerNode) -> None:
        self._unindex(node)

    def _unindex(self, node: PickerNode) -> None:
        if node._indexed is None:
            return
        key, rank, domains, free = node._indexed
        bucket = self._buckets[key]
        del bucket[bisect_left(bucket, rank)]
        if not bucket:
            del self._buckets[key]
            del self._keys[bisect_left(self._keys, key)]
        del self._nodes[rank]
        if domains is None:
            if self.domain_depth:
                floating = self._floating[key]
                del floating[bisect_left(floating, rank)]
                if not floating:
                    del self._floating[key]
        else:
            for depth, domain in enumerate(domains):
                members = self._members[depth][domain]
                members.discard(rank)
                totals = self._domain_free[depth]
                if members:
                    totals[domain] -= free
                else:
                    del self._members[depth][domain]
                    del totals[domain]
        self.free_leaves -= free
        node._indexed = None

    # -- placing pods on nodes -----------------------------------------------------------------

    def place(
        self,
        sizes: Sequence[int],
        priority: int,
        floating_capacity: FloatingCapacity | None = None,
    ) -> Pick:
        """Nodes for pods of `sizes` (ascending), taking leaves free at `priority`."""
        spanning = self._walk_buckets(sizes, priority)
        if spanning.nodes is None or self.domain_depth == 0:
            return spanning
        if len({node.rank for node in spanning.nodes}) == 1:
            return spanning
        for depth in range(self.domain_depth):
            domains = {node.domains[depth] if node.domains else None for node in spanning.nodes}
            if len(domains) == 1 and None not in domains:
                return spanning  # already inside one cell of this level
            packed = self._place_within(depth, sizes, priority, floating_capacity)
            if packed is not None:
                return packed
            if depth == 0 and floating_capacity is not None:
                floating = self._place_floating(sizes, priority)
                if floating is not None:
                    return floating
        return spanning

    def _place_floating(self, sizes: Sequence[int], priority: int) -> Pick | None:
        """Only floating nodes: they are not anywhere yet, so whoever binds them can still put
        them all in one cell (e.g. a rack with that many free nodes)."""
        candidates = [
            self._nodes[rank]
            for key in sorted(self._floating)
            for rank in self._floating[key][: len(sizes)]
        ]
        picked = _walk_list(candidates, sizes, priority)
        return Pick(picked) if picked is not None and len(set(picked)) > 1 else None

    def _walk_buckets(self, sizes: Sequence[int], priority: int) -> Pick:
        """HiveD's greedy walk over all nodes in order, skipping buckets that cannot help."""
        picked: list[PickerNode] = []
        needed = len(sizes)
        uniform = priority < 0  # all nodes of a bucket then have the same free count
        for key in self._keys:
            unhealthy = key[0] == 1
            for rank in self._buckets[key]:
                node = self._nodes[rank]
                free = node.free_at(priority)
                if free < sizes[len(picked)]:
                    if uniform:
                        break
                    continue
                if unhealthy:
                    return Pick(None, bad_node=node)
                while len(picked) < needed and free >= sizes[len(picked)]:
                    free -= sizes[len(picked)]
                    picked.append(node)
                if len(picked) == needed:
                    return Pick(tuple(picked))
        return Pick(None)

    def _place_within(
        self,
        depth: int,
        sizes: Sequence[int],
        priority: int,
        floating_capacity: FloatingCapacity | None,
    ) -> Pick | None:
        """Best-fit search over the cells of one multi-node level. Floating nodes (all alike,
        unused) may join a cell up to what `floating_capacity` says the cell can still give."""
        demand = sum(sizes)
        floating = list(self._floating.items()) if floating_capacity is not None else []
        candidates: list[tuple[int, int, list[int]]] = []
        for domain, members in self._members[depth].items():
            if priority < 0:
                free = self._domain_free[depth][domain]
            else:
                free = sum(self._nodes[rank].free_at(priority) for rank in members)
            caps = []
            for key, ranks in floating:
                assert floating_capacity is not None
                cap = min(len(ranks), floating_capacity(domain, self._nodes[ranks[0]].level))
                caps.append(cap)
                free += cap * (-key[3] - key[4])
            if free >= demand:
                candidates.append((free, domain, caps))
        candidates.sort(key=lambda candidate: (candidate[0], candidate[1]))
        for _, domain, caps in candidates:
            inside = [self._nodes[rank] for rank in self._members[depth][domain]]
            for (_, ranks), cap in zip(floating, caps, strict=True):
                inside += [self._nodes[rank] for rank in ranks[:cap]]
            inside.sort(key=lambda node: (node.key(), node.rank))
            picked = _walk_list(inside, sizes, priority)
            if picked is not None:
                return Pick(picked, domain=domain)
        return None


def _walk_list(
    nodes: Sequence[PickerNode], sizes: Sequence[int], priority: int
) -> tuple[PickerNode, ...] | None:
    picked: list[PickerNode] = []
    for node in nodes:
        free = node.free_at(priority)
        if free < sizes[len(picked)] or not node.healthy:
            continue
        while len(picked) < len(sizes) and free >= sizes[len(picked)]:
            free -= sizes[len(picked)]
            picked.append(node)
        if len(picked) == len(sizes):
            return tuple(picked)
    return None


# -- placing one pod on leaves of a node ---------------------------------------------------------

NOT_AVAILABLE, FREE, PREEMPTIBLE = 0, 1, 2


class LeafLayout:
    """The cells of one node shape as leaf-position ranges per level (level 1 = single leaves)."""

    def __init__(self, child_numbers: Sequence[int], level: int) -> None:
        """`child_numbers[i]` = children of a level-(i+1) cell; the node shape is at `level`."""
        sizes = [1]
        for lower in range(2, level + 1):
            sizes.append(sizes[-1] * child_numbers[lower - 1])
        self.leaf_count = sizes[-1]
        self.levels: list[list[tuple[int, int]]] = [
            [(start, start + size) for start in range(0, self.leaf_count, size)] for size in sizes
        ]


def pick_leaves(layout: LeafLayout, states: Sequence[int], count: int) -> list[int] | None:
    """Positions of `count` leaves with the lowest common ancestor, free before preemptible.

    `states[i]` is NOT_AVAILABLE, FREE or PREEMPTIBLE for leaf position i. Among the cells of the
    lowest level that can hold the pod, prefer the one needing fewest preemptions, then the one
    with fewest available leaves (best fit, keeping larger free cells whole).
    """
    for ranges in layout.levels:
        if ranges[0][1] - ranges[0][0] < count:
            continue
        best: tuple[int, int, int, int] | None = None
        for start, end in ranges:
            free = sum(1 for i in range(start, end) if states[i] == FREE)
            available = free + sum(1 for i in range(start, end) if states[i] == PREEMPTIBLE)
            if available >= count:
                candidate = (max(0, count - free), available, start, end)
                if best is None or candidate < best:
                    best = candidate
        if best is not None:
            return _take(layout, states, best[2], best[3], count)
    return None


def _take(layout: LeafLayout, states: Sequence[int], start: int, end: int, count: int) -> list[int]:
    """Take `count` leaves in [start, end), filling the sub-cells with most free leaves first."""
    size = end - start
    if size == 1:
        return [start]
    child_size = next(
        ranges[0][1] - ranges[0][0]
        for ranges in reversed(layout.levels)
        if ranges[0][1] - ranges[0][0] < size
    )
    children = []
    for child_start in range(start, end, child_size):
        child_end = child_start + child_size
        free = sum(1 for i in range(child_start, child_end) if states[i] == FREE)
        available = free + sum(1 for i in range(child_start, child_end) if states[i] == PREEMPTIBLE)
        if available:
            children.append((-free, -available, child_start, child_end, available))
    children.sort()
    taken: list[int] = []
    for _, _, child_start, child_end, available in children:
        if len(taken) == count:
            break
        taken += _take(layout, states, child_start, child_end, min(available, count - len(taken)))
    return taken
