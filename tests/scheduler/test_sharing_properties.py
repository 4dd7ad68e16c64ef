"""Random sequences of sharing and whole-GPU groups, completions, preemptions, node failures
and restarts keep HiveD's promises and the sharing's books straight."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from scheduler_helpers import gpu_cluster, group

from pai.scheduler import (
    Allocation,
    Bind,
    GroupRequest,
    Placement,
    PodRequest,
    Preempt,
    Scheduler,
    Wait,
    WaitKind,
)
from pai.scheduler.types import GpuShare

# 2 racks x 3 nodes x 8 GPUs (4 CPUs, 32 GiB each): VC a owns a rack, b a floating node and a
# pinned node, c two sockets (half a node), as in test_scheduler_properties.
CLUSTER = gpu_cluster(
    2,
    3,
    {
        "a": {"racks": 1},
        "b": {
            "virtualCells": [{"cellType": "RACK.NODE", "cellNumber": 1}],
            "pinnedCells": [{"pinnedCellId": "b-pinned"}],
        },
        "c": {"sockets": 2},
    },
    pinned={"r1-n2": "b-pinned"},
)
NODES = [node.name for node in CLUSTER.nodes]
SHARE_OF_A_GPU_CPU = 4000  # the SKU's CPU per GPU, in thousandths


class SharingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.scheduler = Scheduler(CLUSTER)
        self.requests: dict[str, GroupRequest] = {}
        self.placements: dict[str, Placement] = {}
        self.preemptors: dict[str, tuple[str, ...]] = {}
        self.bad: set[str] = set()
        self.counter = 0

    def _name(self, vc: str) -> str:
        self.counter += 1
        return f"u~{vc}{self.counter}/default"

    @rule(
        vc=st.sampled_from(["a", "b", "c"]),
        priority=st.sampled_from([-1, 10, 100]),
        milli=st.lists(st.sampled_from([0, 100, 250, 500, 750, 1000]), min_size=1, max_size=3),
        cpu=st.sampled_from([1000, 4000, 6000]),
    )
    def submit_shares(self, vc: str, priority: int, milli: list[int], cpu: int) -> None:
        pods = tuple(
            PodRequest("worker", index, 1, GpuShare(size), cpu, 1024)
            for index, size in enumerate(milli)
        )
        request = GroupRequest(self._name(vc), vc, priority, pods)
        guaranteed = self._has_room_for_one_share(request)
        decision = self.scheduler.schedule(request)
        if guaranteed:
            assert not isinstance(decision, Wait), (request, decision)
        self._record(request, decision)

    @rule(
        vc=st.sampled_from(["a", "b", "c"]),
        priority=st.sampled_from([-1, 10, 100]),
        sizes=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=2),
    )
    def submit_whole(self, vc: str, priority: int, sizes: list[int]) -> None:
        request = group(self._name(vc), vc, priority, *sizes)
        self._record(request, self.scheduler.schedule(request))

    def _has_room_for_one_share(self, request: GroupRequest) -> bool:
        """One guaranteed task asking no more CPU than one GPU's share, in a VC (without pinned
        cells) with a GPU free in its cells on healthy hardware: it must not wait."""
        if request.vc == "b" or request.priority < 0 or len(request.pods) > 1 or self.bad:
            return False
        if request.pods[0].cpu_milli > SHARE_OF_A_GPU_CPU:
            return False
        return self.scheduler.snapshot().vcs[request.vc].free_leaves > 0

    def _record(self, request: GroupRequest, decision: Bind | Preempt | Wait) -> None:
        if isinstance(decision, Preempt):
            assert request.priority >= 0, "an opportunistic group never preempts"
            self.preemptors[request.name] = decision.victims
            self.requests[request.name] = request
        elif isinstance(decision, Bind):
            self.scheduler.allocate(request.name, decision.placement)
            self.requests[request.name] = request
            self.placements[request.name] = decision.placement
            for pod, asked in zip(decision.placement.pods, request.pods, strict=True):
                assert pod.share == asked.share
        else:
            assert request.name not in self.scheduler.snapshot().groups

    @precondition(lambda self: bool(self.requests))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.requests)))
        self.scheduler.release(name)
        del self.requests[name]
        self.preemptors.pop(name, None)

    @precondition(lambda self: bool(self.preemptors))
    @rule(data=st.data())
    def preemption_completes(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.preemptors)))
        for victim in self.preemptors.pop(name):
            if victim in self.requests:
                self.scheduler.release(victim)
                del self.requests[victim]
                self.preemptors.pop(victim, None)
        decision = self.scheduler.schedule(self.requests[name])
        if isinstance(decision, Bind):
            self.scheduler.allocate(name, decision.placement)
            self.placements[name] = decision.placement
        elif isinstance(decision, Preempt):
            self.preemptors[name] = decision.victims
        else:
            assert decision.reason.kind is not WaitKind.UNSCHEDULABLE
            del self.requests[name]  # its reservation was cancelled by a higher priority

    @rule(node=st.sampled_from(NODES), healthy=st.booleans())
    def node_health(self, node: str, healthy: bool) -> None:
        self.scheduler.set_node_health(node, healthy)
        (self.bad.discard if healthy else self.bad.add)(node)

    @precondition(lambda self: not self.preemptors)
    @rule()
    def restart(self) -> None:
        """A scheduler rebuilt from the running groups has the same tasks on the same GPUs."""
        before = self.scheduler.snapshot()
        allocations = [
            Allocation(
                self.requests[name],
                self.placements[name],
                opportunistic=state.priority < 0 <= self.requests[name].priority,
            )
            for name, state in before.groups.items()
        ]
        rebuilt = Scheduler(CLUSTER)
        for node in sorted(self.bad):
            rebuilt.set_node_health(node, False)
        result = rebuilt.rebuild(allocations)
        assert not result.rejected and not result.downgraded
        assert _tasks_on_gpus(rebuilt) == _tasks_on_gpus(self.scheduler)
        assert rebuilt.snapshot().groups == before.groups
        self.scheduler = rebuilt

    @invariant()
    def books_are_straight(self) -> None:
        self.scheduler.check_invariants()
        snapshot = self.scheduler.snapshot()
        for node in snapshot.nodes:
            for leaf in node.leaves:
                if not leaf.shared:
                    continue
                assert 0 <= (leaf.free_milli or 0) <= 1000
                groups = {share.group for share in leaf.shares}
                vcs = {snapshot.groups[name].vc for name in groups}
                priorities = {snapshot.groups[name].priority for name in groups}
                assert len(priorities) <= 1, (node.name, leaf)  # one class per GPU
                if priorities and min(priorities) >= 0:
                    assert len(vcs) == 1, (node.name, leaf)  # guaranteed: one VC per GPU


def _tasks_on_gpus(scheduler: Scheduler) -> dict[tuple[str, int], set[tuple[str, str, int]]]:
    return {
        (node.name, leaf.index): {(s.group, s.role, s.index) for s in leaf.shares}
        for node in scheduler.snapshot().nodes
        for leaf in node.leaves
        if leaf.shares
    }


SharingMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSharing = SharingMachine.TestCase
