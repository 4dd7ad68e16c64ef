"""The HiveD scheduling algorithm: pure, deterministic, no clock and no I/O.

Entry point: `Scheduler(cluster)`; see `pai.scheduler.scheduler` for the algorithm and
`pai.scheduler.picker` for the placement heuristics other policies can reuse.
"""

from pai.scheduler.admission import CapacityIndex
from pai.scheduler.scheduler import PlacementError, Scheduler
from pai.scheduler.types import (
    MAX_PRIORITY,
    OPPORTUNISTIC_PRIORITY,
    Allocation,
    Bind,
    ClusterSnapshot,
    Decision,
    GroupRequest,
    GroupSnapshot,
    GroupState,
    LeafUsage,
    NodeSnapshot,
    Placement,
    PodPlacement,
    PodRequest,
    Preempt,
    RebuildResult,
    VcSnapshot,
    Wait,
    WaitKind,
    WaitReason,
)

__all__ = [
    "MAX_PRIORITY",
    "OPPORTUNISTIC_PRIORITY",
    "Allocation",
    "Bind",
    "CapacityIndex",
    "ClusterSnapshot",
    "Decision",
    "GroupRequest",
    "GroupSnapshot",
    "GroupState",
    "LeafUsage",
    "NodeSnapshot",
    "Placement",
    "PlacementError",
    "PodPlacement",
    "PodRequest",
    "Preempt",
    "RebuildResult",
    "Scheduler",
    "VcSnapshot",
    "Wait",
    "WaitKind",
    "WaitReason",
]
