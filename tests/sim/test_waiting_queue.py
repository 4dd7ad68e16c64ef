"""The waiting queue: queue order, lanes, no head-of-line blocking, and what unblocks a lane."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pai.sim.queue import CLUSTER, FailureLog, Scope, WaitingQueue, dominates, vc_scope

Item = tuple[str, str, int, tuple[int, ...]]  # name, vc, priority, shape


def push(
    queue: WaitingQueue[Item], name: str, vc: str, priority: int, submit: float, *shape: int
) -> None:
    item = (name, vc, priority, shape)
    queue.push(item, (-priority, submit, len(queue)), (vc, priority, shape), shape)


def offered(
    queue: WaitingQueue[Item], decide: Callable[[Item], Sequence[Scope] | None]
) -> list[str]:
    seen: list[str] = []

    def attempt(item: Item) -> Sequence[Scope] | None:
        seen.append(item[0])
        return decide(item)

    queue.run_pass(attempt)
    return seen


def test_a_larger_shape_dominates_a_smaller_one() -> None:
    assert dominates((8,), (4,))
    assert dominates((8, 8), (8,))
    assert dominates((2, 8, 8), (4, 8))
    assert not dominates((4,), (8,))
    assert not dominates((8,), (4, 4))  # fewer pods may still fit where two cannot
    assert not dominates((2, 2), (1, 4))


def test_heads_are_offered_by_priority_then_submission() -> None:
    queue: WaitingQueue[Item] = WaitingQueue()
    push(queue, "late-low", "a", 10, 5.0, 1)
    push(queue, "early-low", "b", 10, 1.0, 2)
    push(queue, "high", "a", 100, 9.0, 4)

    assert offered(queue, lambda item: None) == ["high", "early-low", "late-low"]
    assert len(queue) == 0
    assert queue.smallest_waiting_pod() is None


def test_a_blocked_lane_does_not_block_other_lanes_and_keeps_its_jobs() -> None:
    queue: WaitingQueue[Item] = WaitingQueue()
    push(queue, "big1", "a", 10, 0.0, 8)
    push(queue, "big2", "a", 10, 1.0, 8)
    push(queue, "small", "a", 10, 2.0, 1)

    def decide(item: Item) -> Sequence[Scope] | None:
        return [vc_scope("a")] if item[3] == (8,) else None

    # big2 is never offered: it waits behind big1 in the same lane, and gets the same answer.
    assert offered(queue, decide) == ["big1", "small"]
    assert len(queue) == 2
    assert queue.smallest_waiting_pod() == 8
    assert offered(queue, decide) == []  # nothing released: not asked again


def test_a_release_in_the_scope_unblocks_the_lane_and_order_is_kept() -> None:
    queue: WaitingQueue[Item] = WaitingQueue()
    push(queue, "first", "a", 10, 0.0, 8)
    push(queue, "second", "a", 10, 1.0, 8)
    offered(queue, lambda item: [vc_scope("a")])

    queue.released(vc_scope("b"))
    assert offered(queue, lambda item: None) == []
    queue.released(vc_scope("a"))
    assert offered(queue, lambda item: None) == ["first", "second"]


def test_a_lane_waiting_on_several_scopes_wakes_on_any_of_them() -> None:
    queue: WaitingQueue[Item] = WaitingQueue()
    push(queue, "job", "a", 10, 0.0, 8)
    offered(queue, lambda item: [vc_scope("a"), CLUSTER])

    queue.released(CLUSTER)
    assert offered(queue, lambda item: None) == ["job"]


def test_failures_imply_failures_of_larger_requests_until_released() -> None:
    log = FailureLog()
    log.record(vc_scope("a"), (4,), 10, opportunistic=False)
    log.record(CLUSTER, (2,), -1, opportunistic=True)

    assert log.known_to_fail("a", (8,), 10, False) == vc_scope("a")
    assert log.known_to_fail("a", (2,), 10, False) is None  # smaller: may fit
    assert log.known_to_fail("a", (8,), 100, False) is None  # higher priority may preempt
    assert log.known_to_fail("b", (8,), 10, False) is None  # another VC's cells
    assert log.known_to_fail("b", (4,), -1, True) == CLUSTER  # physical: any VC
    assert log.known_to_fail("b", (4,), 10, False) is None  # guaranteed is not opportunistic

    log.forget(vc_scope("a"))
    assert log.known_to_fail("a", (8,), 10, False) is None
