"""Tasks sharing GPUs, as their owners see it: packing, the VC's cells, CPU and memory, preemption,
restarts and refusals."""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_helpers import bind, decide, gpu_cluster, group, preempt, wait

from pai.cluster import load_cluster
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
from pai.scheduler.fragmentation import FragmentationPolicy
from pai.scheduler.types import GpuShare


def small_cluster(
    gpus_per_node: int = 2, nodes: int = 2, vcs: dict[str, Any] | None = None
) -> Scheduler:
    """Nodes n0, n1 ... of `gpus_per_node` GPUs with 4 CPUs, 8 GiB and 16 GiB of GPU memory per
    GPU; by default VC a owns n0's cell and VC b n1's (node-level cells)."""
    owned = vcs or {
        "a": {"virtualCells": [{"cellType": "NODE", "cellNumber": 1}]},
        "b": {"virtualCells": [{"cellType": "NODE", "cellNumber": nodes - 1}]},
    }
    return Scheduler(
        load_cluster(
            {
                "skuTypes": {"G": {"gpu": 1, "cpu": 4, "memory": "8Gi", "gpuMemory": "16Gi"}},
                "cellTypes": {
                    "NODE": {
                        "childCellType": "G",
                        "childCellNumber": gpus_per_node,
                        "isNodeLevel": True,
                    }
                },
                "physicalCells": [
                    {"cellType": "NODE", "cellAddress": f"n{i}"} for i in range(nodes)
                ],
                "virtualClusters": owned,
            }
        )
    )


def shares(
    name: str,
    vc: str,
    priority: int,
    *milli: int,
    cpu: int = 1000,
    memory: int = 1024,
    gpu_memory: int = 0,
) -> GroupRequest:
    """A group of one task per share, each on `milli` thousandths of a GPU."""
    pods = tuple(
        PodRequest("worker", index, 1, GpuShare(size, gpu_memory), cpu, memory)
        for index, size in enumerate(milli)
    )
    return GroupRequest(name, vc, priority, pods)


def gpu_of(placement: Placement, pod: int = 0) -> tuple[str, int]:
    where = placement.pods[pod]
    (index,) = where.leaf_indices
    return where.node, index


def shared(scheduler: Scheduler) -> dict[tuple[str, int], dict[str, int]]:
    """(node, GPU) -> {group: thousandths} for every shared GPU."""
    found = {}
    for node in scheduler.snapshot().nodes:
        for leaf in node.leaves:
            if leaf.shared:
                found[(node.name, leaf.index)] = {s.group: s.milli for s in leaf.shares}
    return found


def test_a_quarter_and_a_half_share_one_gpu_and_are_told_their_share() -> None:
    scheduler = small_cluster(gpus_per_node=1)
    quarter = bind(scheduler, shares("u~quarter/default", "a", 10, 250))
    half = bind(scheduler, shares("u~half/default", "a", 10, 500))

    assert gpu_of(quarter) == gpu_of(half) == ("n0", 0)
    assert quarter.pods[0].share == GpuShare(250) and half.pods[0].share == GpuShare(500)
    (leaf,) = next(n for n in scheduler.snapshot().nodes if n.name == "n0").leaves
    assert leaf.free_milli == 250 and leaf.group is None
    assert [(s.group, s.milli) for s in leaf.shares] == [
        ("u~half/default", 500),
        ("u~quarter/default", 250),
    ]


def test_a_gpu_holds_shares_up_to_a_whole_gpu_then_the_next_task_waits() -> None:
    scheduler = small_cluster(gpus_per_node=1)
    bind(scheduler, shares("u~a/default", "a", 10, 500))
    bind(scheduler, shares("u~b/default", "a", 10, 500))

    waiting = wait(scheduler, shares("u~c/default", "a", 10, 1))

    assert waiting.reason.kind is WaitKind.VC_QUOTA
    assert "VC 'a' has 0 of 1 GPU free to share" in waiting.reason.message


def test_shares_pack_onto_the_gpu_they_fill_best() -> None:
    scheduler = small_cluster(gpus_per_node=4, nodes=2)
    first = bind(scheduler, shares("u~j1/default", "a", 10, 700))
    bind(scheduler, shares("u~j2/default", "a", 10, 500))
    topping = bind(scheduler, shares("u~j3/default", "a", 10, 300))

    assert gpu_of(topping) == gpu_of(first)  # 0.3 fills the GPU 0.7 left, not the 0.5's
    assert shared(scheduler)[gpu_of(first)] == {"u~j1/default": 700, "u~j3/default": 300}


def test_sharing_stays_inside_the_vcs_cells_and_a_shared_gpu_counts_as_the_vcs() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    mine = bind(scheduler, shares("u~a1/default", "a", 10, 250))
    theirs = bind(scheduler, shares("u~b1/default", "b", 10, 250))

    assert mine.nodes != theirs.nodes  # each VC's cell is a node of its own
    vcs = scheduler.snapshot().vcs
    assert (vcs["a"].used_leaves, vcs["a"].free_leaves) == (1, 1)
    assert (vcs["b"].used_leaves, vcs["b"].free_leaves) == (1, 1)
    for gpu, members in shared(scheduler).items():
        assert len({name.split("~")[1][0] for name in members}) == 1, gpu


def test_tasks_of_different_priorities_never_share_a_gpu() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    low = bind(scheduler, shares("u~low/default", "a", 10, 250))
    high = bind(scheduler, shares("u~high/default", "a", 100, 250))

    assert gpu_of(low) != gpu_of(high)


def test_the_last_task_leaving_gives_the_gpu_back_to_the_vc() -> None:
    scheduler = small_cluster(gpus_per_node=1)
    bind(scheduler, shares("u~a/default", "a", 10, 250))
    bind(scheduler, shares("u~b/default", "a", 10, 250))

    scheduler.release("u~a/default")
    scheduler.check_invariants()
    assert scheduler.snapshot().vcs["a"].used_leaves == 1
    scheduler.release("u~b/default")
    scheduler.check_invariants()

    assert scheduler.snapshot().vcs["a"].used_leaves == 0
    assert bind(scheduler, group("u~whole/default", "a", 10, 1)).pods[0].share is None


def test_cpu_of_a_shared_gpu_is_pooled_and_a_hungry_task_claims_another_gpu() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    hungry = bind(scheduler, shares("u~hungry/default", "a", 10, 250, cpu=6000))

    claimed = shared(scheduler)
    assert len(claimed) == 2  # 6 CPUs need the shares of two GPUs (4 CPUs each)
    assert {node for node, _ in claimed} == set(hungry.nodes)
    assert sorted(len(members) for members in claimed.values()) == [0, 1]
    assert scheduler.snapshot().vcs["a"].free_leaves == 0
    # the claimed GPU stays usable by sharing tasks of the VC ...
    bind(scheduler, shares("u~light/default", "a", 10, 500, cpu=1000))
    # ... but a whole-GPU task of the VC cannot have it, nor CPU beyond the node's
    assert isinstance(decide(scheduler, group("u~whole/default", "a", 10, 1)), Wait)
    too_much = wait(scheduler, shares("u~more/default", "a", 10, 100, cpu=2000))
    assert too_much.reason.kind is WaitKind.TOPOLOGY


def test_a_task_asking_more_cpu_than_a_node_has_is_refused_before_it_queues() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)

    refused = wait(scheduler, shares("u~big/default", "a", 10, 250, cpu=9000))

    assert refused.reason.kind is WaitKind.UNSCHEDULABLE
    assert "asks for 9 CPUs" in refused.reason.message


def test_gpu_memory_is_shared_out_to_what_the_sku_declares() -> None:
    scheduler = small_cluster(gpus_per_node=1, nodes=2)
    bind(scheduler, shares("u~a/default", "a", 10, 250, gpu_memory=12 * 1024))

    waiting = wait(scheduler, shares("u~b/default", "a", 10, 250, gpu_memory=8 * 1024))
    assert waiting.reason.kind is WaitKind.TOPOLOGY  # compute is free, memory is not
    refused = wait(scheduler, shares("u~c/default", "a", 10, 250, gpu_memory=32 * 1024))
    assert refused.reason.kind is WaitKind.UNSCHEDULABLE
    assert "16384 MB" in refused.reason.message


def test_a_sku_of_two_gpus_per_leaf_cannot_be_shared() -> None:
    cluster = gpu_cluster(1, 1, {"a": {"nodes": 1}})
    doubled = load_cluster(
        {
            "skuTypes": {"PAIR": {"gpu": 2, "cpu": 4, "memory": "8Gi"}},
            "cellTypes": {
                "NODE": {"childCellType": "PAIR", "childCellNumber": 2, "isNodeLevel": True}
            },
            "physicalCells": [{"cellType": "NODE", "cellAddress": "n0"}],
            "virtualClusters": {"a": {"virtualCells": [{"cellType": "NODE", "cellNumber": 1}]}},
        }
    )
    assert isinstance(Scheduler(cluster).schedule(shares("u~ok/default", "a", 10, 500)), Bind)

    refused = Scheduler(doubled).schedule(shares("u~no/default", "a", 10, 500))

    assert isinstance(refused, Wait) and refused.reason.kind is WaitKind.UNSCHEDULABLE
    assert "cannot be shared" in refused.reason.message


def test_a_vc_takes_its_gpu_back_from_opportunistic_sharers_preempting_all_of_them() -> None:
    scheduler = small_cluster(gpus_per_node=1, nodes=2)
    (busy,) = bind(scheduler, group("u~b/default", "b", 10, 1)).nodes  # VC b's own GPU
    scavengers = [bind(scheduler, shares(f"u~o{i}/default", "b", -1, 400)) for i in range(2)]
    (idle,) = {gpu_of(p) for p in scavengers}  # VC a's idle GPU, shared by both
    assert idle[0] != busy

    decision = preempt(scheduler, shares("u~mine/default", "a", 10, 250))

    assert decision.victims == ("u~o0/default", "u~o1/default")
    assert gpu_of(decision.placement) == idle
    waiting_for_victims = scheduler.schedule(shares("u~mine/default", "a", 10, 250))
    assert isinstance(waiting_for_victims, Preempt)
    for victim in decision.victims:
        scheduler.release(victim)
    scheduler.check_invariants()
    placement = bind(scheduler, shares("u~mine/default", "a", 10, 250))
    assert placement == decision.placement
    assert shared(scheduler) == {idle: {"u~mine/default": 250}}


def test_a_higher_priority_whole_task_preempts_every_task_sharing_the_gpu() -> None:
    scheduler = small_cluster(gpus_per_node=1, nodes=2)
    bind(scheduler, shares("u~s1/default", "a", 10, 300))
    bind(scheduler, shares("u~s2/default", "a", 10, 300))

    decision = preempt(scheduler, group("u~prod/default", "a", 100, 1))

    assert decision.victims == ("u~s1/default", "u~s2/default")


def test_a_guaranteed_task_claiming_cpu_preempts_the_opportunistic_task_on_the_claim() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    (theirs,) = bind(scheduler, group("u~b/default", "b", 10, 2)).nodes
    squatter = bind(scheduler, group("u~squat/default", "b", -1, 1))
    assert squatter.nodes != (theirs,)  # on VC a's idle node

    decision = preempt(scheduler, shares("u~hungry/default", "a", 10, 250, cpu=6000))

    assert decision.victims == ("u~squat/default",)
    scheduler.release("u~squat/default")
    bind(scheduler, shares("u~hungry/default", "a", 10, 250, cpu=6000))
    assert len(shared(scheduler)) == 2  # its GPU and the one it claimed for CPU


def test_a_gang_of_sharing_tasks_is_placed_whole_or_not_at_all() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    gang = bind(scheduler, shares("u~gang/default", "a", 10, 600, 600, 300))

    assert len({gpu_of(gang, i) for i in range(3)}) == 2  # 0.6 + 0.3 share, 0.6 alone
    assert isinstance(decide(scheduler, shares("u~more/default", "a", 10, 500, 500)), Wait)
    assert shared(scheduler).keys() == {gpu_of(gang, i) for i in range(3)}


def test_sharing_tasks_avoid_unhealthy_nodes() -> None:
    scheduler = small_cluster(
        gpus_per_node=1,
        nodes=3,
        vcs={"a": {"virtualCells": [{"cellType": "NODE", "cellNumber": 3}]}},
    )
    scheduler.set_node_health("n0", False)
    scheduler.set_node_health("n1", False)

    placement = bind(scheduler, shares("u~s/default", "a", 10, 500))

    assert placement.nodes == ("n2",)


def test_a_rebuilt_scheduler_restores_every_shared_gpu() -> None:
    scheduler = small_cluster(gpus_per_node=2, nodes=2)
    requests = [
        shares("u~a1/default", "a", 10, 600),
        shares("u~a2/default", "a", 10, 300),
        shares("u~a3/default", "a", 10, 250, cpu=6000),
        shares("u~o1/default", "a", -1, 500),
    ]
    placements = {request.name: bind(scheduler, request) for request in requests}
    before = shared(scheduler)

    rebuilt = small_cluster(gpus_per_node=2, nodes=2)
    result = rebuilt.rebuild(Allocation(request, placements[request.name]) for request in requests)

    rebuilt.check_invariants()
    assert not result.rejected and not result.downgraded
    assert {gpu: members for gpu, members in shared(rebuilt).items() if members} == {
        gpu: members for gpu, members in before.items() if members
    }
    assert len(shared(rebuilt)) == len(before)  # the hungry task's claim is made again
    assert rebuilt.snapshot().vcs == scheduler.snapshot().vcs


def test_a_policy_learns_the_workload_from_the_tasks_it_places() -> None:
    policy = FragmentationPolicy()
    scheduler = Scheduler(gpu_cluster(1, 1, {"a": {"nodes": 1}}), share_policy=policy)
    before = policy.version

    for index in range(4):
        bind(scheduler, shares(f"u~j{index}/default", "a", 10, 250))

    assert policy.version > before
    assert {kind[1] for kind in policy.fragmentation.kinds} == {250}


@pytest.mark.parametrize("share", [0, 1001, -5])
def test_a_share_outside_one_gpu_is_refused(share: int) -> None:
    scheduler = small_cluster()

    decision = scheduler.schedule(shares("u~odd/default", "a", 10, share))

    if share == 0:  # a task on no GPU at all may still sit with sharing tasks
        assert isinstance(decision, Bind)
    else:
        assert isinstance(decision, Wait) and decision.reason.kind is WaitKind.UNSCHEDULABLE
