"""The nodes a sharing class may use, what each offers, and the policy's answers kept current.

Asking the policy about every node for every task would dominate a decision (a replay places
ten thousand tasks on over a thousand nodes). A `SiteIndex` keeps, per kind of task asked for
(`PodAsk`), a heap of the policy's answers; a node is asked again only once it changed (the
scheduler reports every node it re-indexes), so a decision costs about as many policy calls as
nodes changed since that kind of task was last placed. Policies that are not `pure` (random
placement), preemption passes and groups of several tasks are answered by a full scan.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from itertools import count

from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.gpushare import (
    GpuSlot,
    NodeOffer,
    PodAsk,
    Score,
    ShareClass,
    SharedGpu,
    SharePolicy,
)
from pai.scheduler.picker import PickerNode

Site = VirtualCell | PhysicalCell
"""A node as a sharing class sees it: a VC's node cell, or a physical node cell."""
Target = VirtualCell | PhysicalCell | SharedGpu
"""What a slot stands for: a free VC leaf or physical leaf (a GPU to start sharing), or a
shared GPU to join."""


class Draft:
    """A site's offer during one decision, with the concrete GPU behind each slot."""

    __slots__ = (
        "cpu_share",
        "entries",
        "memory_share",
        "offer",
        "space_cpu",
        "space_memory",
    )

    def __init__(
        self,
        entries: list[tuple[GpuSlot, Target]],
        base: NodeOffer,
        space_cpu: int,
        space_memory: int,
        cpu_share: int,
        memory_share: int,
    ) -> None:
        entries.sort(key=lambda entry: entry[0])
        self.entries = entries
        self.offer = replace(base, slots=tuple(slot for slot, _ in entries))
        self.space_cpu = space_cpu  # free in the class's space, without claiming
        self.space_memory = space_memory
        self.cpu_share = cpu_share
        self.memory_share = memory_share

    def take(self, index: int, ask: PodAsk) -> tuple[Draft, Target, list[Target]]:
        """The draft after `ask` took slot `index`: with the target and the free GPUs it claims."""
        slot, target = self.entries[index]
        space_cpu = self.space_cpu - ask.cpu_milli + (0 if slot.shared else self.cpu_share)
        space_memory = self.space_memory - ask.memory_mb + (0 if slot.shared else self.memory_share)
        needed = max(
            _claims_for(-space_cpu, self.cpu_share), _claims_for(-space_memory, self.memory_share)
        )
        entries = [*self.entries[:index], (slot.taken_by(ask), target), *self.entries[index + 1 :]]
        claims: list[Target] = []
        for position, (other, other_target) in enumerate(entries):
            if len(claims) == needed:
                break
            if not other.shared:
                claims.append(other_target)
                entries[position] = (
                    GpuSlot(other.free_milli, other.free_memory_mb, True),
                    other_target,
                )
        offer = replace(
            self.offer,
            cpu_free=self.offer.cpu_free - ask.cpu_milli,
            memory_free=self.offer.memory_free - ask.memory_mb,
        )
        after = Draft(
            entries,
            offer,
            space_cpu + needed * self.cpu_share,
            space_memory + needed * self.memory_share,
            self.cpu_share,
            self.memory_share,
        )
        return after, target, claims


def _claims_for(deficit: int, share: int) -> int:
    if deficit <= 0:
        return 0
    return math.ceil(deficit / share) if share > 0 else 0


SiteKey = tuple[Score, int, int]
"""(the policy's score, minus the node's used leaves, the node cell's id): lower is better.

The id is the VC's own node cell's for guaranteed tasks, not the physical node's it is bound
to, so a VC decides as it would alone on a private cluster of its cells (ids follow the order
cells are declared in, which a private cluster keeps): what others run on its cells, or which
free machine buddy allocation happened to bind, never changes a VC's placements."""
Answer = tuple[SiteKey, Site, Draft, int]
"""A site's best answer: its key, the site, its draft and the slot the policy chose."""


class _AskHeap:
    __slots__ = ("entries", "pending", "version")

    def __init__(self, version: int, pending: Iterable[Site]) -> None:
        self.version = version  # the policy's
        self.entries: list[tuple[SiteKey, int, Site, int, int]] = []
        self.pending = set(pending)


class SiteIndex:
    """The sites of one sharing class in one view (node cells with their picker entries),
    their drafts, and per kind of task a heap of answers."""

    MAX_ASKS = 256
    """Kinds of tasks whose heaps are kept (the least recently asked go first)."""

    def __init__(
        self,
        cls: ShareClass,
        sites: list[tuple[Site, PickerNode]],
        build: Callable[[Site], Draft | None],
    ) -> None:
        self.cls = cls
        self.sites = sites
        self.node_of = dict(sites)
        self._build = build
        self._drafts: dict[Site, tuple[int, Draft | None]] = {}
        self._heaps: dict[PodAsk, _AskHeap] = {}
        self._sequence = count()

    def touched(self, site: Site) -> None:
        """The site changed: every kind of task must ask about it again."""
        for heap in self._heaps.values():
            heap.pending.add(site)

    def draft(self, site: Site) -> Draft | None:
        """The site's current draft (None: nothing there for the class)."""
        node = self.node_of[site]
        cached = self._drafts.get(site)
        if cached is None or cached[0] != node.version:
            cached = self._drafts[site] = (
                node.version,
                self._build(site) if node.healthy else None,
            )
        return cached[1]

    def answer(self, site: Site, draft: Draft, ask: PodAsk, policy: SharePolicy) -> Answer | None:
        found = policy.choose(draft.offer, ask)
        if found is None:
            return None
        node = self.node_of[site]
        return (found[0], -node.used, site.id), site, draft, found[1]

    def best(self, ask: PodAsk, policy: SharePolicy) -> Answer | None:
        """The best site for `ask`, from the heap (pure policies only)."""
        heap = self._heaps.pop(ask, None)
        if heap is None or heap.version != policy.version:
            heap = _AskHeap(policy.version, self.node_of)
        self._heaps[ask] = heap
        if len(self._heaps) > self.MAX_ASKS:
            del self._heaps[next(iter(self._heaps))]
        for site in heap.pending:
            draft = self.draft(site)
            found = self.answer(site, draft, ask, policy) if draft is not None else None
            if found is not None:
                entry = (found[0], next(self._sequence), site, self.node_of[site].version, found[3])
                heapq.heappush(heap.entries, entry)
        heap.pending.clear()
        if len(heap.entries) > 4 * len(self.sites):
            heap.entries = [e for e in heap.entries if e[3] == self.node_of[e[2]].version]
            heapq.heapify(heap.entries)
        while heap.entries:
            key, _, site, version, slot = heap.entries[0]
            if version == self.node_of[site].version:
                draft = self.draft(site)
                assert draft is not None
                return key, site, draft, slot
            heapq.heappop(heap.entries)
        return None
