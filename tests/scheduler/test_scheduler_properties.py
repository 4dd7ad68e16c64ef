"""Random sequences of submissions, completions and node failures keep HiveD's promises."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from scheduler_helpers import gpu_cluster, group

from pai.scheduler import (
    Allocation,
    Bind,
    ClusterSnapshot,
    GroupRequest,
    Placement,
    Preempt,
    Scheduler,
    Wait,
    WaitKind,
)

# 2 racks x 3 nodes x 8 GPUs: VC a owns a rack, b one floating node plus a pinned node,
# c two sockets (half a node). The split is exactly feasible, so safety is tight.
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
VCS = ["a", "b", "c"]


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.scheduler = Scheduler(CLUSTER)
        self.requests: dict[str, GroupRequest] = {}
        self.placements: dict[str, Placement] = {}
        self.preemptors: dict[str, tuple[str, ...]] = {}
        self.bad: set[str] = set()
        self.counter = 0

    def _name(self) -> str:
        self.counter += 1
        return f"g{self.counter}"

    @rule(
        vc=st.sampled_from(VCS),
        priority=st.sampled_from([-1, 10, 100]),
        sizes=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3),
        lazy=st.booleans(),
        pinned=st.booleans(),
    )
    def submit(self, vc: str, priority: int, sizes: list[int], lazy: bool, pinned: bool) -> None:
        pinned_id = "b-pinned" if pinned and vc == "b" and priority >= 0 else None
        request = group(
            self._name(), vc, priority, *sizes, lazy_preemption=lazy, pinned_cell_id=pinned_id
        )
        must_place = priority >= 0 and pinned_id is None and self._fits_in_free_vc_cells(request)
        opportunistic_groups = {
            name for name, g in self.scheduler.snapshot().groups.items() if g.priority < 0
        }
        decision = self.scheduler.schedule(request)
        if must_place:
            assert not isinstance(decision, Wait), (request, decision)
        if isinstance(decision, Preempt):
            assert priority >= 0, "an opportunistic group never preempts"
            if must_place:
                assert set(decision.victims) <= opportunistic_groups | set(decision.downgraded)
            self.preemptors[request.name] = decision.victims
            self.requests[request.name] = request
        elif isinstance(decision, Bind):
            self.scheduler.allocate(request.name, decision.placement)
            self.requests[request.name] = request
            self.placements[request.name] = decision.placement
            assert len(decision.placement.pods) == len(sizes)
            for pod, size in zip(decision.placement.pods, sizes, strict=True):
                assert len(pod.leaf_indices) == size
        else:
            assert request.name not in self.scheduler.snapshot().groups

    def _fits_in_free_vc_cells(self, request: GroupRequest) -> bool:
        """Whole-node pods with that many free VC nodes, or one GPU with one free VC GPU."""
        if self.bad:
            return False
        vc = self.scheduler.snapshot().vcs[request.vc]
        non_pinned_free = vc.free_leaves - self._free_pinned_leaves(request.vc)
        sizes = [pod.leaf_cells for pod in request.pods]
        if sizes == [1]:
            return non_pinned_free >= 1
        free_nodes = vc.free_cells.get("NODE", 0) - (1 if self._pinned_node_free(request.vc) else 0)
        return all(size == 8 for size in sizes) and free_nodes >= len(sizes)

    def _free_pinned_leaves(self, vc: str) -> int:
        if vc != "b":
            return 0
        node = next(n for n in self.scheduler.snapshot().nodes if n.name == "r1-n2")
        guaranteed = [
            leaf for leaf in node.leaves if leaf.priority is not None and leaf.priority >= 0
        ]
        return 8 - len(guaranteed)

    def _pinned_node_free(self, vc: str) -> bool:
        return vc == "b" and self._free_pinned_leaves(vc) == 8

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
        """The controller stops the victims, then schedules the preemptor again."""
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
        if healthy:
            self.bad.discard(node)
        else:
            self.bad.add(node)

    @precondition(lambda self: not self.preemptors)
    @rule()
    def restart(self) -> None:
        """A new scheduler rebuilt from the running groups is indistinguishable from the old."""
        before = self.scheduler.snapshot()
        rebuilt = self.rebuilt(before)
        assert rebuilt.snapshot() == before
        self.scheduler = rebuilt

    def rebuilt(self, before: ClusterSnapshot) -> Scheduler:
        """A new scheduler rebuilt from the groups running in `before`, as a restart does."""
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
        return rebuilt
        self.requests = {name: self.requests[name] for name in before.groups}

    @invariant()
    def state_is_consistent(self) -> None:
        self.scheduler.check_invariants()
        snapshot = self.scheduler.snapshot()
        for name, state in snapshot.groups.items():
            assert state.leaves == self.requests[name].leaf_cells, name
        seen = [
            (node.name, leaf.index)
            for node in snapshot.nodes
            for leaf in node.leaves
            if leaf.group is not None
        ]
        assert len(seen) == len(set(seen))


SchedulerMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestScheduler = SchedulerMachine.TestCase
