"""What the controller stores of a running group is enough to rebuild the scheduler's state,
shared GPUs included, after a restart."""

from __future__ import annotations

import json
from pathlib import Path

from pai.cluster import cluster_from_file
from pai.orchestrator.active import allocation_from_dict, allocation_to_dict
from pai.scheduler import Allocation, Bind, GroupRequest, PodRequest, Scheduler
from pai.scheduler.types import GpuShare

CLUSTER = cluster_from_file(Path(__file__).parents[2] / "examples" / "clusters" / "gpu-share.yaml")


def running(scheduler: Scheduler, request: GroupRequest) -> Allocation:
    decision = scheduler.schedule(request)
    assert isinstance(decision, Bind), decision
    scheduler.allocate(request.name, decision.placement)
    return Allocation(request, decision.placement)


def test_stored_sharing_groups_come_back_on_the_same_gpu_with_the_same_shares() -> None:
    scheduler = Scheduler(CLUSTER)
    stored = [
        running(
            scheduler,
            GroupRequest(
                f"u~{name}/default",
                "default",
                10,
                (PodRequest("main", 0, 1, GpuShare(milli, memory), 1000, 512),),
            ),
        )
        for name, milli, memory in (("quarter", 250, 4096), ("half", 500, 0))
    ]

    rows = [json.loads(json.dumps(allocation_to_dict(allocation))) for allocation in stored]
    restored = [allocation_from_dict(row) for row in rows]
    rebuilt = Scheduler(CLUSTER)
    result = rebuilt.rebuild(restored)

    assert restored == stored
    assert not result.rejected and not result.downgraded
    assert rebuilt.snapshot() == scheduler.snapshot()
    (leaf,) = rebuilt.snapshot().nodes[0].leaves
    assert leaf.free_milli == 250


def test_groups_stored_before_sharing_existed_still_load() -> None:
    whole = allocation_to_dict(
        running(
            Scheduler(CLUSTER),
            GroupRequest("u~w/default", "default", 10, (PodRequest("main", 0, 1),)),
        )
    )

    assert whole["request"]["pods"] == [["main", 0, 1]]
    assert "gpuMilli" not in whole["placement"]["pods"][0]
    assert allocation_from_dict(whole).placement.pods[0].share is None
