"""A job the controller is working on: its state machine plus what the scheduler knows of it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pai.orchestrator import framework as fw
from pai.protocol import JobSpec
from pai.scheduler.types import (
    Allocation,
    GpuShare,
    GroupRequest,
    Placement,
    PodPlacement,
    PodRequest,
    WaitReason,
)


@dataclass
class ActiveJob:
    """One unfinished job, held in memory by the controller (the store has the same, durably)."""

    id: int
    username: str
    name: str
    submitted_at: datetime
    spec: JobSpec
    machine: fw.Job
    groups: list[GroupRequest]
    allocations: dict[str, Allocation] = field(default_factory=dict)
    wait_reason: WaitReason | None = None

    @property
    def framework_name(self) -> str:
        return f"{self.username}~{self.name}"

    @property
    def priority(self) -> int:
        return self.groups[0].priority if self.groups else 0

    def group_of(self, task: fw.TaskKey) -> GroupRequest:
        for group in self.groups:
            if any((pod.role, pod.index) == task for pod in group.pods):
                return group
        raise KeyError(f"{self.framework_name}: no group holds task {task}")

    def group_named(self, name: str) -> GroupRequest:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"{self.framework_name}: no group named {name}")

    def pending_groups(self) -> list[GroupRequest]:
        """Groups whose every task waits for cells and that hold none yet."""
        waiting = set(fw.tasks_awaiting_placement(self.machine))
        return [
            group
            for group in self.groups
            if group.name not in self.allocations
            and all((pod.role, pod.index) in waiting for pod in group.pods)
        ]

    def group_idle(self, group: GroupRequest) -> bool:
        """No task of the group runs any more: its cells can go back to the scheduler."""
        return not any(self.machine.tasks[(pod.role, pod.index)].alive for pod in group.pods)


@dataclass(frozen=True)
class VcJobs:
    running: int = 0
    waiting: int = 0


class VcTally:
    """Running and waiting jobs per VC, updated job by job: a pass changes a few jobs of a
    queue that may hold thousands, and recounting them all on every pass made the cost of a
    submission grow with the queue."""

    def __init__(self) -> None:
        self._counted: dict[int, tuple[str, bool]] = {}  # job id -> (VC, waiting)
        self._counts: Counter[tuple[str, bool]] = Counter()

    def update(self, job: ActiveJob) -> None:
        """Count `job` as it is now (a finished job is no longer counted)."""
        before = self._counted.pop(job.id, None)
        if before is not None:
            self._counts[before] -= 1
        if not job.machine.finished:
            now = (job.spec.virtual_cluster, fw.job_shown_state(job.machine) == "WAITING")
            self._counted[job.id] = now
            self._counts[now] += 1

    def per_vc(self) -> dict[str, VcJobs]:
        vcs = {vc for vc, _ in self._counts}
        return {
            vc: VcJobs(running=self._counts[(vc, False)], waiting=self._counts[(vc, True)])
            for vc in sorted(vcs)
            if self._counts[(vc, False)] or self._counts[(vc, True)]
        }


def task_key(job: ActiveJob, task: fw.TaskKey) -> str:
    """The executor's key of the current attempt of a task: unique across jobs and attempts."""
    current = job.machine.tasks[task]
    return (
        f"j{job.id}-a{job.machine.attempt.attempt_id}-{task[0]}-{task[1]}"
        f"-t{current.current.attempt_id}"
    )


def allocation_to_dict(allocation: Allocation) -> dict[str, Any]:
    request, placement = allocation.request, allocation.placement
    return {
        "request": {
            "name": request.name,
            "vc": request.vc,
            "priority": request.priority,
            "pods": [_pod_request_to_list(pod) for pod in request.pods],
            "skuType": request.sku_type,
            "pinnedCellId": request.pinned_cell_id,
            "lazyPreemption": request.lazy_preemption,
        },
        "placement": {
            "chain": placement.chain,
            "pods": [
                {
                    "role": pod.role,
                    "index": pod.index,
                    "node": pod.node,
                    "address": pod.address,
                    "leaves": list(pod.leaf_indices),
                    "cellType": pod.cell_type,
                    **share_fields(pod.share),
                }
                for pod in placement.pods
            ],
        },
        "opportunistic": allocation.opportunistic,
    }


def allocation_from_dict(data: dict[str, Any]) -> Allocation:
    request, placement = data["request"], data["placement"]
    return Allocation(
        request=GroupRequest(
            name=request["name"],
            vc=request["vc"],
            priority=request["priority"],
            pods=tuple(_pod_request_from_list(pod) for pod in request["pods"]),
            sku_type=request["skuType"],
            pinned_cell_id=request["pinnedCellId"],
            lazy_preemption=request["lazyPreemption"],
        ),
        placement=Placement(
            chain=placement["chain"],
            pods=tuple(
                PodPlacement(
                    role=pod["role"],
                    index=pod["index"],
                    node=pod["node"],
                    address=pod["address"],
                    leaf_indices=tuple(pod["leaves"]),
                    cell_type=pod["cellType"],
                    share=_share_from_dict(pod),
                )
                for pod in placement["pods"]
            ),
        ),
        opportunistic=data["opportunistic"],
    )


def _pod_request_to_list(pod: PodRequest) -> list[Any]:
    """`[role, index, cells]`, and for a pod sharing a GPU its share, CPU and memory."""
    if pod.share is None:
        return [pod.role, pod.index, pod.leaf_cells]
    share = share_fields(pod.share)
    return [pod.role, pod.index, pod.leaf_cells, share, pod.cpu_milli, pod.memory_mb]


def _pod_request_from_list(items: list[Any]) -> PodRequest:
    role, index, cells, *sharing = items
    if not sharing:
        return PodRequest(role, index, cells)
    share, cpu_milli, memory_mb = sharing
    return PodRequest(role, index, cells, _share_from_dict(share), cpu_milli, memory_mb)


def share_fields(share: GpuShare | None) -> dict[str, int]:
    """A pod's share of its GPU as stored (`gpuMilli`, `gpuMemoryMB`); nothing for whole GPUs."""
    if share is None:
        return {}
    return {"gpuMilli": share.milli, "gpuMemoryMB": share.memory_mb}


def _share_from_dict(data: dict[str, Any]) -> GpuShare | None:
    if "gpuMilli" not in data:
        return None
    return GpuShare(data["gpuMilli"], data.get("gpuMemoryMB", 0))
