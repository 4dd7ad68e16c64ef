"""The scheduler's record of a group that holds cells (allocated) or reserves them (preempting)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.scheduler.types import OPPORTUNISTIC_PRIORITY, GroupRequest, GroupState, Placement

if TYPE_CHECKING:
    from pai.scheduler.cells import PhysicalCell, VirtualCell
    from pai.scheduler.gpushare import Hold, SharedGpu
    from pai.scheduler.views import VcView


class GroupRecord:
    """`leaves[i]` is the physical leaf of the i-th leaf of the placement (pods in order);
    `vleaves[i]` the VC leaf it counts against (None when opportunistic). A victim keeps pointing
    at VC leaves a preemptor has taken over, so a cancelled preemption can hand them back.

    Two kinds of records take part in GPU sharing: a *pool* (`gpu` set) holds the one leaf of a
    shared GPU; an allocated group of sharing pods holds no leaf itself, `shared[i]` being the
    GPU its i-th pod shares. While it preempts, a sharing group reserves the leaves its pods will
    start sharing like any group, the further leaves its space needs for CPU and memory through
    `claims` (pool records that become shared GPUs with it, their `owner`), and through `holds`
    the parts of shared GPUs and spaces it counts on."""

    __slots__ = (
        "claims",
        "downgraded",
        "gpu",
        "holds",
        "leaves",
        "name",
        "owner",
        "placement",
        "request",
        "shared",
        "state",
        "view",
        "vleaves",
    )

    def __init__(self, request: GroupRequest, placement: Placement, state: GroupState) -> None:
        self.request = request
        self.name = request.name
        self.placement = placement
        self.state = state
        self.downgraded = False  # lazily preempted: keeps running as opportunistic
        self.leaves: list[PhysicalCell] = []
        self.vleaves: list[VirtualCell | None] = []
        self.view: VcView | None = None
        self.gpu: SharedGpu | None = None
        self.shared: list[SharedGpu] = []
        self.claims: list[GroupRecord] = []
        self.owner: GroupRecord | None = None
        self.holds: list[Hold] = []  # what a preempting sharing group keeps for its tasks

    def reserved_leaves(self) -> list[PhysicalCell]:
        """The leaves the group holds or reserves, its claims' included."""
        return [*self.leaves, *(leaf for claim in self.claims for leaf in claim.leaves)]

    def __repr__(self) -> str:
        return f"GroupRecord({self.name})"

    @property
    def priority(self) -> int:
        return OPPORTUNISTIC_PRIORITY if self.downgraded else self.request.priority

    @property
    def opportunistic(self) -> bool:
        return self.priority < 0

    @property
    def stops(self) -> list[str]:
        """The groups that must stop for this record's cells to be free: the group itself, or,
        for a pool, the groups sharing its GPU (`SharedGpu.stops`)."""
        if self.gpu is None:
            return [self.name]
        return self.gpu.stops()
