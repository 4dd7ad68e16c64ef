"""The waiting groups of a replay, and what is known about why they wait.

A replay must ask the scheduler about waiting groups after every event, in (priority desc,
submission asc) order, and a group that does not fit must not block smaller ones behind it
(HiveD has no head-of-line blocking). Asking about every waiting group after every event would
take hours on a 100,000-job trace, so two facts cut the questions down:

- Groups of one VC with the same priority and the same pod sizes get the same answer: they wait
  in one *lane* (FIFO by queue order), and only a lane's head is ever asked about.
- A group that found no room keeps finding none, and so does any group that needs at least as
  much (as many pods or more, each at least as large), until cells are released in the *scope*
  of the failure: the group's VC (its guaranteed cells) or the whole cluster (physical cells).
  `FailureLog` remembers such failures; a lane whose head is known to fail is *blocked* until
  something is released in a scope it waits on.

Both are sound for any policy that places a larger request only where a smaller one also fits,
which HiveD's and the quota baseline's greedy packing do.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, TypeVar

Scope = Hashable
"""What a release can change: `vc_scope(name)` or `CLUSTER`."""
CLUSTER: Scope = ("cluster",)
Shape = tuple[int, ...]
"""Pod sizes of a group, ascending."""
Order = tuple[int, float, int]
"""Queue order: (-priority, submission time, trace position); smaller goes first."""

ItemT = TypeVar("ItemT")


def vc_scope(vc: str) -> Scope:
    return ("vc", vc)


def user_scope(vc: str, user: str) -> Scope:
    """What a job held back by its user's limit in `vc` waits on: that user's groups there."""
    return ("user", vc, user)


def dominates(shape: Shape, smaller: Shape) -> bool:
    """A group of `shape` needs at least what one of `smaller` needs: as many pods or more, and
    its largest pods each at least as large as the other's pods."""
    extra = len(shape) - len(smaller)
    if extra < 0:
        return False
    return all(mine >= theirs for mine, theirs in zip(shape[extra:], smaller, strict=True))


class FailureLog:
    """Requests that found no room, valid until something is released in their scope."""

    def __init__(self) -> None:
        # (scope, opportunistic) -> failed (shape, priority) pairs
        self._failures: dict[tuple[Scope, bool], list[tuple[Shape, int]]] = {}
        self._scopes_of_vc: dict[str, tuple[Scope, Scope]] = {}

    def record(self, scope: Scope, shape: Shape, priority: int, opportunistic: bool) -> None:
        self._failures.setdefault((scope, opportunistic), []).append((shape, priority))

    def known_to_fail(
        self, vc: str, shape: Shape, priority: int, opportunistic: bool
    ) -> Scope | None:
        """The scope of a recorded failure that implies this request fails too, or None."""
        scopes = self._scopes_of_vc.get(vc)
        if scopes is None:
            scopes = self._scopes_of_vc[vc] = (vc_scope(vc), CLUSTER)
        for scope in scopes:
            for failed_shape, failed_priority in self._failures.get((scope, opportunistic), ()):
                if priority <= failed_priority and dominates(shape, failed_shape):
                    return scope
        return None

    def forget(self, scope: Scope) -> None:
        self._failures.pop((scope, False), None)
        self._failures.pop((scope, True), None)


class _Lane(Generic[ItemT]):
    __slots__ = ("block", "id", "items", "smallest_pod")

    def __init__(self, lane_id: int, smallest_pod: int) -> None:
        self.id = lane_id
        self.smallest_pod = smallest_pod
        self.items: list[tuple[Order, ItemT]] = []  # a heap by queue order
        self.block = 0  # 0: not blocked; otherwise the id of the block in force


class WaitingQueue(Generic[ItemT]):
    """Waiting items in lanes (see the module docstring); `run_pass` offers lane heads in order."""

    def __init__(self) -> None:
        self._lanes: dict[Hashable, _Lane[ItemT]] = {}
        self._ready: set[_Lane[ItemT]] = set()
        self._blocked_on: dict[Scope, list[tuple[_Lane[ItemT], int]]] = {}
        self._block_ids = itertools.count(1)
        self._smallest_pods: Counter[int] = Counter()
        self.failures = FailureLog()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, item: ItemT, order: Order, lane_key: Hashable, shape: Shape) -> None:
        """Queue `item`; items with the same `lane_key` must share `shape` and priority."""
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane(len(self._lanes), shape[0])
        heapq.heappush(lane.items, (order, item))
        if not lane.block:
            self._ready.add(lane)
        self._smallest_pods[lane.smallest_pod] += 1
        self._size += 1

    def heads(self) -> Iterator[tuple[Order, ItemT]]:
        """The first item of every lane that is not blocked: what a pass will offer first."""
        for lane in self._ready:
            yield lane.items[0]

    def smallest_waiting_pod(self) -> int | None:
        """The smallest pod of any waiting group (None when nothing waits)."""
        return min(self._smallest_pods) if self._smallest_pods else None

    def run_pass(
        self,
        attempt: Callable[[ItemT], Sequence[Scope] | None],
        rank: Callable[[Order, ItemT], Any] | None = None,
    ) -> None:
        """Offer the head of every unblocked lane, best queue order first (or, given `rank`,
        smallest rank first: e.g. fair share's, which changes with time). `attempt` returns
        None when the item left the queue (placed), or the scopes whose release may let it in;
        its lane is then blocked until one of them is released."""

        def key(lane: _Lane[ItemT]) -> Any:
            return lane.items[0][0] if rank is None else rank(*lane.items[0])

        candidates = [(key(lane), lane.id, lane) for lane in self._ready]
        heapq.heapify(candidates)
        while candidates:
            _, _, lane = heapq.heappop(candidates)
            scopes = attempt(lane.items[0][1])
            if scopes is None:
                heapq.heappop(lane.items)
                self._size -= 1
                self._smallest_pods[lane.smallest_pod] -= 1
                if not self._smallest_pods[lane.smallest_pod]:
                    del self._smallest_pods[lane.smallest_pod]
                if lane.items:
                    heapq.heappush(candidates, (key(lane), lane.id, lane))
                else:
                    self._ready.discard(lane)
            else:
                self._block(lane, scopes)

    def released(self, scope: Scope) -> None:
        """Cells were released in `scope`: failures there no longer hold."""
        self.failures.forget(scope)
        for lane, block in self._blocked_on.pop(scope, ()):
            if lane.block == block:
                lane.block = 0
                if lane.items:
                    self._ready.add(lane)

    def _block(self, lane: _Lane[ItemT], scopes: Sequence[Scope]) -> None:
        if not scopes:
            raise ValueError("a waiting item needs a scope whose release may let it in")
        lane.block = next(self._block_ids)
        for scope in set(scopes):
            self._blocked_on.setdefault(scope, []).append((lane, lane.block))
        self._ready.discard(lane)
