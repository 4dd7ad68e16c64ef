"""Fragmentation of a node's GPUs against a workload, and PAI's placement policy for shared GPUs.

The measure follows the idea of Fragmentation Gradient Descent (Weng et al., "Beware of
Fragmentation", USENIX ATC'23): free GPU capacity is a *fragment* for a kind of task when that
task cannot use it, because the node lacks the CPU it needs, or no GPU has enough left, or the
capacity sits on GPUs too small for it; a node's fragmentation is the expected fragment over the
workload's kinds of tasks, weighted by how often each kind comes. Placing a task where it raises
the node's fragmentation least keeps free capacity in shapes later tasks can use.

That measure only sees CPU once a kind of task no longer fits: a node can spend its CPU on a few
CPU-hungry tasks and keep GPUs that nothing will have the CPU to use. `FragmentationPolicy`,
PAI's own, adds what those GPUs will lack: the *stranded* GPU capacity of a node, the part of its
free GPUs that its free CPU (or memory) cannot feed at the workload's ratio of CPU (memory) to
GPU. On the Alibaba trace this is what lifts allocation above FGD's (docs/evaluation.md).

It learns the workload (kinds of tasks and how often each comes) from the tasks it is asked to
place, over a sliding window, so it needs no trace; it relearns when the window has drifted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pai.scheduler.gpushare import NodeOffer, PodAsk, Score
from pai.scheduler.types import GPU_MILLI

TaskKind = tuple[int, int, int, int]
"""(GPUs, thousandths of each GPU, CPU in thousandths of a core, memory MB); GPUs 0 for a task
that needs none, 1 for a task on part or all of one GPU."""


@dataclass(frozen=True)
class NodeState:
    """What fragmentation depends on: each GPU's free thousandths (ascending) and the node's
    free CPU and memory."""

    free: tuple[int, ...]
    cpu: int
    memory: int


class Fragmentation:
    """The expected fragment of a node over a workload of task kinds (see the module docstring).

    `memory` false leaves memory out, as the ATC'23 paper's measure does (CPU and GPU only).
    """

    def __init__(self, kinds: Iterable[tuple[TaskKind, float]], *, memory: bool = False) -> None:
        weighted = [(kind, weight) for kind, weight in kinds if weight > 0]
        total = sum(weight for _, weight in weighted) or 1.0
        self.kinds = [(*kind, weight / total) for kind, weight in weighted]
        self.memory = memory
        self._cache: dict[NodeState, float] = {}

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def of(self, state: NodeState) -> float:
        found = self._cache.get(state)
        if found is None:
            found = self._cache[state] = self._compute(state)
        return found

    def _compute(self, state: NodeState) -> float:
        free = state.free
        prefix = [0]
        for value in free:
            prefix.append(prefix[-1] + value)
        total = prefix[-1]
        whole = len(free) - bisect_left(free, GPU_MILLI)
        expected = 0.0
        for gpus, milli, cpu, memory, weight in self.kinds:
            if cpu > state.cpu or (self.memory and memory > state.memory) or gpus == 0:
                expected += weight * total
            elif gpus == 1:
                smaller = bisect_left(free, milli)
                expected += weight * (total if smaller == len(free) else prefix[smaller])
            else:
                expected += weight * (total if whole < gpus else prefix[len(free) - whole])
        return expected


class Stranding:
    """GPU capacity a node's free CPU or memory cannot feed: with `cpu_per_milli` thousandths of
    a core (and `memory_per_milli` MB) per thousandth of a GPU, the workload's ratios."""

    def __init__(self, kinds: Iterable[tuple[TaskKind, float]]) -> None:
        gpu = cpu = memory = 0.0
        for (gpus, milli, task_cpu, task_memory), weight in kinds:
            if gpus:
                gpu += weight * gpus * milli
                cpu += weight * task_cpu
                memory += weight * task_memory
        self.cpu_per_milli = cpu / gpu if gpu else 0.0
        self.memory_per_milli = memory / gpu if gpu else 0.0

    def of(self, state: NodeState) -> float:
        free = sum(state.free)
        stranded = 0.0
        if self.cpu_per_milli:
            stranded = free - state.cpu / self.cpu_per_milli
        if self.memory_per_milli:
            stranded = max(stranded, free - state.memory / self.memory_per_milli)
        return max(0.0, stranded)


def offer_state(offer: NodeOffer) -> NodeState:
    """The node as the class sees it: GPUs it cannot use count as having nothing free."""
    unusable = (0,) * (offer.gpus - len(offer.slots))
    free = unusable + tuple(slot.free_milli for slot in offer.slots)
    return NodeState(tuple(sorted(free)), offer.cpu_free, offer.memory_free)


def state_after(state: NodeState, before: int, ask: PodAsk) -> NodeState:
    """`state` once `ask` took a GPU that had `before` thousandths free."""
    free = list(state.free)
    free.remove(before)
    value = before - ask.milli
    free.insert(bisect_left(free, value), value)
    return NodeState(tuple(free), state.cpu - ask.cpu_milli, state.memory - ask.memory_mb)


def kind_of(ask: PodAsk) -> TaskKind:
    return (1 if ask.milli else 0, ask.milli, ask.cpu_milli, ask.memory_mb)


def drift(before: Counter[TaskKind], after: Counter[TaskKind]) -> float:
    """Total variation distance between two workloads (0: the same mix, 1: nothing shared)."""
    total_before, total_after = sum(before.values()) or 1, sum(after.values()) or 1
    kinds = before.keys() | after.keys()
    return sum(abs(before[k] / total_before - after[k] / total_after) for k in kinds) / 2


class FragmentationPolicy:
    """PAI's placement of tasks on shared GPUs (see the module docstring).

    A placement's score is the rise of fragmentation plus stranded capacity on its node; among
    equal scores, the GPU left with the least free first (the tightest fit).
    """

    pure = True
    WINDOW = 5000
    """Tasks the workload is learned from: the most recent ones."""
    CHECK_EVERY = 128
    """New tasks between two checks of drift (checked at 1, 2, 4 ... tasks before that)."""
    MAX_DRIFT = 0.05
    """Drift from the workload last learned beyond which it is learned again."""

    def __init__(self, kinds: Iterable[tuple[TaskKind, float]] | None = None) -> None:
        """`kinds` fixes the workload instead of learning it (tests, what-if studies)."""
        self._fixed = kinds is not None
        self._window: deque[TaskKind] = deque()
        self._counts: Counter[TaskKind] = Counter()
        self._learned: Counter[TaskKind] = Counter()
        self._seen: deque[str] = deque()
        self._seen_names: set[str] = set()
        self._observed = 0
        self.version = 0
        self._learn(kinds or ())

    def _learn(self, kinds: Iterable[tuple[TaskKind, float]]) -> None:
        workload = list(kinds)
        self.fragmentation = Fragmentation(workload)
        self.stranding = Stranding(workload)
        self.version += 1

    def observe(self, group: str, asks: Sequence[PodAsk]) -> None:
        if self._fixed or group in self._seen_names:
            return
        self._seen.append(group)
        self._seen_names.add(group)
        if len(self._seen) > self.WINDOW:
            self._seen_names.discard(self._seen.popleft())
        for ask in asks:
            kind = kind_of(ask)
            self._window.append(kind)
            self._counts[kind] += 1
            if len(self._window) > self.WINDOW:
                old = self._window.popleft()
                self._counts[old] -= 1
                if not self._counts[old]:
                    del self._counts[old]
        self._observed += 1
        due = self._observed % self.CHECK_EVERY == 0 or (
            self._observed < self.CHECK_EVERY and self._observed & (self._observed - 1) == 0
        )
        if due and drift(self._learned, self._counts) > self.MAX_DRIFT:
            self._learned = Counter(self._counts)
            self._learn((kind, float(count)) for kind, count in self._learned.items())

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        state = offer_state(offer)
        before = self.fragmentation.of(state) + self.stranding.of(state)
        best: tuple[Score, int] | None = None
        for index in usable:
            slot = offer.slots[index]
            after = state_after(state, slot.free_milli, ask)
            rise = self.fragmentation.of(after) + self.stranding.of(after) - before
            score = (round(rise, 6), slot.free_milli - ask.milli)
            if best is None or score < best[0]:
                best = (score, index)
        return best
