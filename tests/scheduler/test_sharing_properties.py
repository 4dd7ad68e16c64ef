"""Random sequences of sharing and whole-GPU groups, completions, preemptions, node failures
and restarts keep HiveD's promises and the sharing's books straight.

The machine is test_scheduler_properties' (same cluster: VC a owns a rack, b a floating node and
a pinned node, c two sockets; whole-GPU groups, completions, preemptions and node failures), with
groups of tasks sharing GPUs added."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from test_scheduler_properties import SchedulerMachine

from pai.scheduler import Bind, GroupRequest, PodRequest, Preempt, Scheduler, Wait
from pai.scheduler.types import GpuShare

SHARE_OF_A_GPU_CPU = 4000  # the SKU's CPU per GPU, in thousandths


class SharingMachine(SchedulerMachine):
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
        request = GroupRequest(self._name(), vc, priority, pods)
        guaranteed = self._has_room_for_one_share(request)
        decision = self.scheduler.schedule(request)
        if guaranteed:
            assert not isinstance(decision, Wait), (request, decision)
        if isinstance(decision, Preempt):
            assert priority >= 0, "an opportunistic group never preempts"
            self.preemptors[request.name] = decision.victims
            self.requests[request.name] = request
        elif isinstance(decision, Bind):
            self.scheduler.allocate(request.name, decision.placement)
            self.requests[request.name] = request
            self.placements[request.name] = decision.placement
            assert [pod.share for pod in decision.placement.pods] == [p.share for p in pods]
        else:
            assert request.name not in self.scheduler.snapshot().groups

    def _has_room_for_one_share(self, request: GroupRequest) -> bool:
        """One guaranteed task asking no more CPU than one GPU's share, in a VC (without pinned
        cells) with a GPU free in its cells on healthy hardware: it must not wait."""
        if request.vc == "b" or request.priority < 0 or len(request.pods) > 1 or self.bad:
            return False
        if request.pods[0].cpu_milli > SHARE_OF_A_GPU_CPU:
            return False
        return self.scheduler.snapshot().vcs[request.vc].free_leaves > 0

    @precondition(lambda self: not self.preemptors)
    @rule()
    def restart(self) -> None:
        """A scheduler rebuilt from the running groups has the same tasks on the same GPUs
        (the GPUs claimed for CPU may be others of the same nodes)."""
        before = self.scheduler.snapshot()
        rebuilt = self.rebuilt(before)
        assert _tasks_on_gpus(rebuilt) == _tasks_on_gpus(self.scheduler)
        assert rebuilt.snapshot().groups == before.groups
        self.scheduler = rebuilt
        self.requests = {name: self.requests[name] for name in before.groups}

    @invariant()
    def state_is_consistent(self) -> None:
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
