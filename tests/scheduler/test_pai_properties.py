"""Random arrivals and ends under the `pai` policy keep its promises at every step:

- a reservation is never pushed back by a job that started while it stood (a job that cannot
  end before the reserved start only ever takes spare cells);
- opportunistic jobs never make a guaranteed job wait: whenever one waits, it waits on a cluster
  holding only the guaranteed jobs as well.

Jobs declare their run times truthfully and end exactly then, as the estimates assume.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from scheduler_helpers import gpu_cluster, group

from pai.scheduler import Allocation, Bind, GroupRequest, Preempt, Scheduler, Wait
from pai.scheduler.pai import RESERVED_FOR, PaiScheduler

CLUSTER = gpu_cluster(1, 4, {"a": {"nodes": 2}, "b": {"nodes": 2}})
MINUTE = 60.0


class PaiMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.declared: dict[str, float] = {}
        self.scheduler = PaiScheduler(
            CLUSTER,
            clock=lambda: self.now,
            run_time=lambda request: self.declared.get(request.name),
            starvation_after_s=10 * MINUTE,
        )
        self.waiting: list[GroupRequest] = []
        self.running: dict[str, tuple[Allocation, float]] = {}  # name -> (allocation, end)
        self.counter = 0

    @rule(
        vc=st.sampled_from(["a", "b"]),
        sizes=st.sampled_from([(1,), (2,), (4,), (8,), (8, 8)]),
        minutes=st.integers(1, 120),
    )
    def submit(self, vc: str, sizes: tuple[int, ...], minutes: int) -> None:
        self.counter += 1
        request = group(f"g{self.counter}", vc, 10, *sizes)
        self.declared[request.name] = minutes * MINUTE
        self.waiting.append(request)
        self._pass()

    @rule(minutes=st.integers(1, 60))
    def advance(self, minutes: int) -> None:
        self.now += minutes * MINUTE
        for name, (_, end) in sorted(self.running.items(), key=lambda item: item[1][1]):
            if end <= self.now:
                del self.running[name]
                self.scheduler.release(name)
        self._pass()

    @invariant()
    def consistent(self) -> None:
        self.scheduler.check_invariants()

    def _pass(self) -> None:
        for request in list(self.waiting):
            self._offer(request)

    def _offer(self, request: GroupRequest) -> None:
        book = self.scheduler.book
        view = (request.vc, CLUSTER.virtual_clusters[request.vc].virtual_cells[0].chain)
        before = book.reservations.get(view)
        if before is not None:
            free = self._free(view)
            start_before, _ = book.estimate(view, before.leaves, free, self.now)
            spare_before = book.spare(view, before.leaves, free, start_before, self.now)
        decision = self.scheduler.schedule(request)
        if isinstance(decision, Preempt):
            for victim in decision.victims:  # opportunistic jobs stop at once and queue again
                allocation, _ = self.running.pop(victim)
                self.scheduler.release(victim)
                self.waiting.append(replace(allocation.request, priority=10))
            decision = self.scheduler.schedule(request)
            assert isinstance(decision, Bind), decision
        if isinstance(decision, Wait):
            if RESERVED_FOR not in decision.reason.details:
                self._check_waits_without_opportunistic_jobs(request)
            return
        self.scheduler.allocate(request.name, decision.placement)
        self.waiting.remove(request)
        held = self.scheduler.snapshot().groups[request.name]
        opportunistic = held.priority < 0
        allocated = replace(request, priority=held.priority)
        end = self.now + self.declared[request.name]
        self.running[request.name] = (Allocation(allocated, decision.placement), end)
        if before is None or before.group == request.name or opportunistic:
            return
        free_after = self._free(view)
        if free_after < before.leaves:  # else the reserved cells are free still (estimates
            # count cells): the reservation could start now, and its estimate would only guess
            # at the shape it lacks with the next end
            start_after, _ = book.estimate(view, before.leaves, free_after, self.now)
            assert start_after <= start_before, (request.name, before)
        if end > start_before:  # cannot end in time: only spare cells may take it
            assert spare_before >= request.leaf_cells, (request.name, before)

    def _check_waits_without_opportunistic_jobs(self, request: GroupRequest) -> None:
        alone = Scheduler(CLUSTER)
        alone.rebuild(
            allocation
            for allocation, _ in self.running.values()
            if not allocation.request.opportunistic
        )
        assert isinstance(alone.schedule(request), Wait), request.name

    def _free(self, view: tuple[str, str]) -> int:
        return self.scheduler._free_leaves(view)


PaiMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPaiPolicy = PaiMachine.TestCase


def test_a_job_in_the_spare_cells_leaves_the_reservation_its_start() -> None:
    """Found by the machine above: when every job of VC `a` has ended, a long 8-GPU job queued
    ahead of the reservation's holder takes the 8 cells the reservation does not need, and the
    holder still starts in the same pass."""
    machine = PaiMachine()
    for _ in range(7):
        machine.submit(vc="a", sizes=(1,), minutes=1)
    machine.submit(vc="a", sizes=(8,), minutes=38)
    machine.advance(minutes=18)
    machine.submit(vc="a", sizes=(1,), minutes=1)
    machine.submit(vc="b", sizes=(1,), minutes=1)
    machine.submit(vc="a", sizes=(1,), minutes=20)
    machine.submit(vc="a", sizes=(8,), minutes=20)  # g12: runs on idle cells of `b`
    machine.submit(vc="a", sizes=(8,), minutes=1)  # g13: waits, then runs there too
    machine.advance(minutes=19)
    machine.submit(vc="b", sizes=(8, 8), minutes=1)  # `b` takes its cells back from both
    machine.submit(vc="a", sizes=(1,), minutes=1)
    assert machine.scheduler.book.reservations[("a", "RACK")].group == "g13"

    machine.advance(minutes=1)

    assert {name: end for name, (_, end) in machine.running.items()} == {
        "g12": machine.now + 20 * MINUTE,
        "g13": machine.now + MINUTE,
    }
