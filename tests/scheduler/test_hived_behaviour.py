"""Each HiveD behaviour, as a VC owner or a user would notice it."""

from __future__ import annotations

from pathlib import Path

import pytest
from scheduler_helpers import bind, decide, gpu_cluster, group, preempt, rack_of, wait

from pai.cluster import cluster_from_file
from pai.scheduler import (
    Allocation,
    Bind,
    GroupState,
    PlacementError,
    Preempt,
    Scheduler,
    Wait,
    WaitKind,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"
WHOLE_NODE = tuple(range(8))


def four_nodes(**vcs: dict[str, int]) -> Scheduler:
    return Scheduler(gpu_cluster(1, 4, vcs or {"a": {"nodes": 2}, "b": {"nodes": 2}}))


def test_vc_safety_an_owner_always_gets_its_node_back_from_opportunistic_jobs() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("b1", "b", 10, 8))
    bind(scheduler, group("b2", "b", 10, 8))
    scavenger = bind(scheduler, group("o", "b", -1, 8, 8))  # takes VC a's idle nodes
    over_quota = wait(scheduler, group("b3", "b", 10, 8))
    assert over_quota.reason.kind is WaitKind.VC_QUOTA
    decision = preempt(scheduler, group("a1", "a", 10, 8))
    assert decision.victims == ("o",)
    (pod,) = decision.placement.pods
    assert pod.leaf_indices == WHOLE_NODE
    assert pod.node in scavenger.nodes
    assert scheduler.snapshot().groups["o"].state is GroupState.BEING_PREEMPTED
    scheduler.release("o")
    assert bind(scheduler, group("a1", "a", 10, 8)) == decision.placement
    second = bind(scheduler, group("a2", "a", 10, 8))
    assert second.pods[0].leaf_indices == WHOLE_NODE


def test_topology_guarantee_small_jobs_pack_so_a_whole_node_stays_free() -> None:
    scheduler = four_nodes()
    first = bind(scheduler, group("a-small1", "a", 10, 4))
    second = bind(scheduler, group("a-small2", "a", 10, 4))
    assert first.nodes == second.nodes
    whole = bind(scheduler, group("a-big", "a", 10, 8))
    assert whole.nodes != first.nodes
    b_nodes = {node for i in range(9) for node in bind(scheduler, group(f"b{i}", "b", 10, 1)).nodes}
    assert len(b_nodes) == 2
    assert not b_nodes & {*first.nodes, *whole.nodes}


def test_a_vc_owning_a_rack_gets_four_nodes_of_one_rack() -> None:
    scheduler = Scheduler(cluster_from_file(EXAMPLES / "two-racks.yaml"))
    vision = bind(scheduler, group("vision-job", "vision", 10, 8, 8))
    bind(scheduler, group("speech-job", "speech", 10, 4))
    nlp = bind(scheduler, group("nlp-job", "nlp", 10, 8, 8, 8, 8))
    assert len({rack_of(node) for node in nlp.nodes}) == 1
    assert len(set(nlp.nodes)) == 4
    assert not set(nlp.nodes) & set(vision.nodes)


def test_gang_is_all_or_nothing_and_a_waiting_gang_holds_nothing() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("a1", "a", 10, 8))
    waiting = wait(scheduler, group("a-gang", "a", 10, 8, 8))
    assert waiting.reason.kind is WaitKind.VC_QUOTA
    assert scheduler.snapshot().vcs["a"].used_gpus == 8
    bind(scheduler, group("a2", "a", 10, 8))  # the smaller job behind it is not blocked


def test_requests_that_can_never_fit_are_refused_with_the_reason() -> None:
    scheduler = four_nodes()
    too_many = wait(scheduler, group("g", "a", 10, 8, 8, 8))
    assert too_many.reason.kind is WaitKind.UNSCHEDULABLE
    assert too_many.reason.message == "The job needs 24 GPUs but VC 'a' has 16 in total."
    too_big = wait(scheduler, group("g", "a", 10, 16))
    assert too_big.reason.message == (
        "A task needs 16 GPUs on one node but the largest cell of VC 'a' holds 8."
    )
    unknown_vc = wait(scheduler, group("g", "zz", 10, 1)).reason.message
    assert unknown_vc == "Unknown virtual cluster 'zz' (VCs: a, b)."
    unknown_sku = wait(scheduler, group("g", "a", 10, 1, sku_type="A100")).reason.message
    assert unknown_sku == "Unknown SKU type 'A100' (SKU types: V100)."


def test_topology_wait_explains_fragmentation() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("a1", "a", 10, 6))
    bind(scheduler, group("a2", "a", 10, 6))
    decision = wait(scheduler, group("a3", "a", 10, 4))
    assert decision.reason.kind is WaitKind.TOPOLOGY
    assert decision.reason.message == (
        "needs 4 GPUs on one node; the 4 free GPUs of VC 'a' are split across nodes "
        "(at most 2 free on one node)."
    )
    three = four_nodes(a={"nodes": 3}, b={"nodes": 1})
    for name, size in (("a1", 4), ("a2", 5), ("a3", 5)):
        bind(three, group(name, "a", 10, size))
    whole = wait(three, group("a4", "a", 10, 8))
    assert whole.reason.message == (
        "needs a whole 8-GPU node; the 10 free GPUs of VC 'a' are split across nodes "
        "(at most 4 free on one node)."
    )
    assert whole.reason.details["largest_free_on_one_node"] == 4


def test_vc_quota_wait_names_the_groups_using_it() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("vision-user~job1", "a", 10, 8))
    bind(scheduler, group("vision-user~job2", "a", 10, 4, 4))
    decision = wait(scheduler, group("vision-user~job3", "a", 10, 8))
    assert decision.reason.message == (
        "VC 'a' has 16 of 16 GPUs in use by vision-user~job1 (8), vision-user~job2 (8); "
        "this job needs 8 and only 0 are free (none it may preempt)."
    )
    assert decision.reason.details["groups"] == {"vision-user~job1": 8, "vision-user~job2": 8}


def test_priority_preemption_takes_whole_lower_priority_groups_only() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("low", "a", 10, 8, 8))
    decision = preempt(scheduler, group("high", "a", 100, 8))
    assert decision.victims == ("low",)
    scheduler.release("low")
    bind(scheduler, group("high", "a", 100, 8))
    bind(scheduler, group("mid", "a", 100, 8))
    same = wait(scheduler, group("peer", "a", 100, 8))
    assert same.reason.kind is WaitKind.VC_QUOTA
    assert set(same.reason.details["groups"]) == {"high", "mid"}  # type: ignore[arg-type]


def test_stateful_preemption_reserves_cells_and_higher_priority_cancels_lower_preemptors() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("low1", "a", 10, 8))
    bind(scheduler, group("low2", "a", 10, 8))
    first = preempt(scheduler, group("p1", "a", 50, 8))
    second = preempt(scheduler, group("p2", "a", 50, 8))
    assert {first.victims, second.victims} == {("low1",), ("low2",)}
    assert first.placement.nodes != second.placement.nodes
    again = scheduler.schedule(group("p1", "a", 50, 8))
    assert again == first  # still reserved, still waiting for its victim
    top = preempt(scheduler, group("p3", "a", 100, 8, 8))
    assert top.victims == ("low1", "low2")
    groups = scheduler.snapshot().groups
    assert "p1" not in groups and "p2" not in groups
    assert groups["p3"].state is GroupState.PREEMPTING
    assert wait(scheduler, group("p1", "a", 50, 8)).reason.kind is WaitKind.VC_QUOTA
    scheduler.release("low1")
    assert isinstance(scheduler.schedule(group("p3", "a", 100, 8, 8)), Preempt)
    scheduler.release("low2")
    assert bind(scheduler, group("p3", "a", 100, 8, 8)) == top.placement


def test_a_preemptor_whose_reserved_node_fails_is_placed_again() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("low", "a", 10, 8, 8))
    first = preempt(scheduler, group("high", "a", 100, 8))
    scheduler.set_node_health(first.placement.nodes[0], False)
    again = preempt(scheduler, group("high", "a", 100, 8))
    assert again.victims == ("low",)
    assert again.placement.nodes != first.placement.nodes
    with pytest.raises(KeyError, match="unknown node 'nowhere'"):
        scheduler.set_node_health("nowhere", False)


def test_cancelled_preemption_gives_cells_back_to_the_victim() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("low", "a", 10, 8, 8))
    preempt(scheduler, group("high", "a", 100, 8))
    scheduler.release("high")  # the preemptor was stopped before its victim finished
    scheduler.check_invariants()
    snapshot = scheduler.snapshot()
    assert snapshot.groups["low"].state is GroupState.ALLOCATED
    assert snapshot.vcs["a"].groups == {"low": 16}


def test_opportunistic_jobs_scavenge_idle_cells_never_preempt_and_are_preempted() -> None:
    scheduler = four_nodes()
    bind(scheduler, group("a1", "a", 10, 8))
    scavenger = bind(scheduler, group("o", "a", -1, 8, 8))  # beyond VC a's own quota
    snapshot = scheduler.snapshot()
    assert snapshot.vcs["a"].opportunistic_gpus == 16
    assert snapshot.vcs["a"].used_gpus == 8
    full = wait(scheduler, group("o2", "b", -1, 8, 8))
    assert full.reason.kind is WaitKind.OPPORTUNISTIC_CAPACITY
    assert full.reason.message == (
        "no room for this opportunistic job: 8 of 32 V100 GPUs are idle and it needs 16."
    )
    free_node = bind(scheduler, group("b1", "b", 10, 8))  # an idle node first: no victim
    assert free_node.nodes[0] not in scavenger.nodes
    decision = preempt(scheduler, group("b2", "b", 10, 8))
    assert decision.victims == ("o",)


def test_opportunistic_pods_keep_away_from_guaranteed_ones() -> None:
    scheduler = four_nodes()
    guaranteed = bind(scheduler, group("a1", "a", 10, 2))
    opportunistic = bind(scheduler, group("o", "b", -1, 2))
    assert opportunistic.nodes != guaranteed.nodes
    packed = bind(scheduler, group("o2", "b", -1, 2))
    assert packed.nodes == opportunistic.nodes


def test_pinned_cells_are_used_only_when_asked_for() -> None:
    scheduler = Scheduler(cluster_from_file(EXAMPLES / "two-racks.yaml"))
    pinned = "vision-pinned-node"
    placed = bind(scheduler, group("p", "vision", 10, 8, pinned_cell_id=pinned))
    assert placed.nodes == ("r1-n3",)
    others = bind(scheduler, group("v", "vision", 10, 8, 8))
    assert "r1-n3" not in others.nodes
    full = wait(scheduler, group("p2", "vision", 10, 1, pinned_cell_id=pinned))
    assert full.reason.message.startswith(
        "pinned cell 'vision-pinned-node' has 8 of 8 GPUs in use by p"
    )
    foreign = wait(scheduler, group("x", "nlp", 10, 1, pinned_cell_id=pinned))
    assert foreign.reason.message == (
        "Pinned cell 'vision-pinned-node' does not belong to VC 'nlp'."
    )
    oppo = wait(scheduler, group("x", "vision", -1, 1, pinned_cell_id=pinned))
    assert oppo.reason.message == "An opportunistic job cannot ask for a pinned cell."


def test_bad_nodes_are_avoided_and_running_groups_stay() -> None:
    scheduler = four_nodes()
    running = bind(scheduler, group("a1", "a", 10, 8))
    scheduler.set_node_health(running.nodes[0], False)
    scheduler.check_invariants()
    snapshot = scheduler.snapshot()
    node = next(n for n in snapshot.nodes if n.name == running.nodes[0])
    assert not node.healthy and node.used_leaves == 8
    fresh = bind(scheduler, group("b1", "b", 10, 8))
    assert fresh.nodes != running.nodes
    scheduler.release("a1")
    placed = bind(scheduler, group("a2", "a", 10, 8))
    assert placed.nodes[0] != running.nodes[0]


def test_doomed_bad_cells_show_the_vc_what_bad_hardware_costs_it() -> None:
    scheduler = four_nodes()
    for node in ("r0-n1", "r0-n2", "r0-n3"):
        scheduler.set_node_health(node, False)
    scheduler.check_invariants()
    # Only r0-n0 is healthy: each VC can count on at most one of its two nodes.
    assert scheduler.snapshot().vcs["a"].free_cells["NODE"] == 1
    gang = wait(scheduler, group("a-gang", "a", 10, 8, 8))
    assert gang.reason.kind is WaitKind.BAD_NODES
    assert gang.reason.details["nodes"][0] in {"r0-n1", "r0-n2", "r0-n3"}  # type: ignore[index]
    assert bind(scheduler, group("a1", "a", 10, 8)).nodes == ("r0-n0",)
    blocked = wait(scheduler, group("b1", "b", 10, 8))
    assert blocked.reason.kind is WaitKind.BAD_NODES
    assert scheduler.snapshot().vcs["b"].free_cells.get("NODE", 0) == 0
    scheduler.set_node_health("r0-n2", True)
    scheduler.check_invariants()
    assert bind(scheduler, group("b1", "b", 10, 8)).nodes == ("r0-n2",)
    for node in ("r0-n1", "r0-n3"):
        scheduler.set_node_health(node, True)
    scheduler.check_invariants()
    assert scheduler.snapshot().vcs["a"].free_cells["NODE"] == 1


def test_lazy_preemption_downgrades_instead_of_killing_when_there_is_room() -> None:
    scheduler = Scheduler(gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}}))
    lazy = bind(scheduler, group("low", "a", 10, 8, lazy_preemption=True))
    decision = decide(scheduler, group("high", "a", 100, 8))
    assert isinstance(decision, Bind)
    assert decision.downgraded == ("low",)
    assert decision.placement.nodes != lazy.nodes
    scheduler.allocate("high", decision.placement)
    snapshot = scheduler.snapshot()
    assert snapshot.groups["low"].priority == -1
    assert snapshot.vcs["a"].groups == {"high": 8}
    assert snapshot.vcs["a"].opportunistic_gpus == 8
    assert preempt(scheduler, group("b1", "b", 10, 8)).victims == ("low",)


def test_lazy_preemption_still_preempts_when_the_cluster_is_full() -> None:
    scheduler = Scheduler(gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}}))
    bind(scheduler, group("b1", "b", 10, 8))
    bind(scheduler, group("low", "a", 10, 8, lazy_preemption=True))
    decision = preempt(scheduler, group("high", "a", 100, 8))
    assert decision.victims == ("low",)
    assert decision.downgraded == ("low",)


def test_a_multi_node_group_is_packed_into_one_rack() -> None:
    scheduler = Scheduler(gpu_cluster(2, 4, {"a": {"nodes": 6}, "b": {"nodes": 2}}))
    singles = [bind(scheduler, group(f"a{i}", "a", 10, 8)).nodes[0] for i in range(3)]
    assert {rack_of(node) for node in singles} == {"r0"}  # buddy allocation keeps r1 whole
    gang = bind(scheduler, group("a-gang", "a", 10, 8, 8))
    assert {rack_of(node) for node in gang.nodes} == {"r1"}


def test_a_gang_leaves_a_full_rack_for_an_empty_one() -> None:
    scheduler = Scheduler(gpu_cluster(2, 4, {"a": {"nodes": 5}, "b": {"nodes": 3}}))
    for name in ("b1", "b2", "b3"):
        bind(scheduler, group(name, "b", 10, 8))
    partial = bind(scheduler, group("a1", "a", 10, 4))  # the last free node of rack r0
    assert rack_of(partial.nodes[0]) == "r0"
    gang = bind(scheduler, group("a-gang", "a", 10, 4, 8))
    assert {rack_of(node) for node in gang.nodes} == {"r1"}


def test_opportunistic_gangs_are_packed_into_one_rack_or_else_span() -> None:
    scheduler = Scheduler(gpu_cluster(2, 4, {"a": {"nodes": 8}}))
    bind(scheduler, group("a1", "a", 10, 8))
    packed = bind(scheduler, group("o1", "a", -1, 8, 8, 8, 8))
    assert len({rack_of(node) for node in packed.nodes}) == 1
    scheduler.release("o1")
    spanning = bind(scheduler, group("o2", "a", -1, 8, 8, 8, 8, 8))
    assert len({rack_of(node) for node in spanning.nodes}) == 2


def test_leaves_inside_a_node_keep_the_lowest_common_ancestor() -> None:
    scheduler = Scheduler(gpu_cluster(1, 1, {"a": {"nodes": 1}}))
    assert bind(scheduler, group("pair", "a", 10, 2)).pods[0].leaf_indices == (0, 1)
    assert bind(scheduler, group("socket", "a", 10, 4)).pods[0].leaf_indices == (4, 5, 6, 7)
    assert bind(scheduler, group("one", "a", 10, 1)).pods[0].leaf_indices == (2,)
    scheduler.release("pair")
    assert bind(scheduler, group("pair2", "a", 10, 2)).pods[0].leaf_indices == (0, 1)


def test_allocate_must_follow_the_bind_it_commits() -> None:
    scheduler = four_nodes()
    decision = scheduler.schedule(group("a1", "a", 10, 8))
    assert isinstance(decision, Bind)
    with pytest.raises(PlacementError):
        scheduler.allocate("other", decision.placement)
    scheduler.allocate("a1", decision.placement)
    scheduler.allocate("a1", decision.placement)  # idempotent
    scheduler.release("a1")
    scheduler.release("a1")
    assert scheduler.snapshot().vcs["a"].used_gpus == 0


def _scripted(scheduler: Scheduler) -> list[Allocation]:
    """A history with packing, opportunistic use, lazy preemption and a finished group; returns
    what a controller would have persisted for the groups still running."""
    running: dict[str, Allocation] = {}
    for request in (
        group("a1", "a", 100, 4),
        group("a2", "a", 100, 2, 2),
        group("b1", "b", 100, 8),
        group("low", "a", 10, 8, lazy_preemption=True),
    ):
        running[request.name] = Allocation(request, bind(scheduler, request))
    scheduler.release("a1")
    del running["a1"]
    for request in (group("a3", "a", 100, 8), group("a4", "a", 100, 8), group("o1", "b", -1, 1, 1)):
        decision = decide(scheduler, request)
        assert isinstance(decision, Bind), decision
        scheduler.allocate(request.name, decision.placement)
        running[request.name] = Allocation(request, decision.placement)
        for name in decision.downgraded:
            running[name] = Allocation(running[name].request, running[name].placement, True)
    assert any(allocation.opportunistic for allocation in running.values())
    return list(running.values())


def test_rebuild_restores_the_same_state_and_the_same_future_decisions() -> None:
    cluster = gpu_cluster(2, 4, {"a": {"nodes": 3}, "b": {"racks": 1}, "c": {"sockets": 2}})
    live = Scheduler(cluster)
    allocations = _scripted(live)
    restored = Scheduler(cluster)
    result = restored.rebuild(reversed(allocations))
    restored.check_invariants()
    assert result.downgraded == () and not result.rejected
    assert restored.snapshot() == live.snapshot()
    assert restored.rebuild(allocations) == result  # idempotent
    assert restored.snapshot() == live.snapshot()
    for request in (
        group("n1", "a", 10, 8),
        group("n2", "c", 10, 4),
        group("n3", "b", 10, 8, 8),
        group("n4", "a", -1, 8, 8),
    ):
        expected = live.schedule(request)
        assert restored.schedule(request) == expected
        if isinstance(expected, Bind):
            live.allocate(request.name, expected.placement)
            restored.allocate(request.name, expected.placement)
    assert restored.snapshot() == live.snapshot()


def test_rebuild_reports_groups_it_cannot_restore() -> None:
    cluster = gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}})
    live = Scheduler(cluster)
    placement = bind(live, group("a1", "a", 10, 8))
    ghost = placement.pods[0].__class__(**{**placement.pods[0].__dict__, "node": "nowhere"})
    restored = Scheduler(cluster)
    result = restored.rebuild(
        [
            Allocation(group("a1", "a", 10, 8), placement),
            Allocation(group("a2", "a", 10, 8), placement),
            Allocation(group("g", "a", 10, 8), placement.__class__(placement.chain, (ghost,))),
        ]
    )
    assert result.rejected == {
        "a2": "its cells are already used by 'a1'",
        "g": "unknown node 'nowhere'",
    }
    assert isinstance(restored.schedule(group("a3", "a", 10, 8)), Wait)
