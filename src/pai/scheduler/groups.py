"""The scheduler's record of a group that holds cells (allocated) or reserves them (preempting)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.scheduler.types import OPPORTUNISTIC_PRIORITY, GroupRequest, GroupState, Placement

if TYPE_CHECKING:
    from pai.scheduler.cells import PhysicalCell, VirtualCell
    from pai.scheduler.views import VcView


class GroupRecord:
    """`leaves[i]` is the physical leaf of the i-th leaf of the placement (pods in order);
    `vleaves[i]` the VC leaf it counts against (None when opportunistic). A victim keeps pointing
    at VC leaves a preemptor has taken over, so a cancelled preemption can hand them back."""

    __slots__ = ("downgraded", "leaves", "name", "placement", "request", "state", "view", "vleaves")

    def __init__(self, request: GroupRequest, placement: Placement, state: GroupState) -> None:
        self.request = request
        self.name = request.name
        self.placement = placement
        self.state = state
        self.downgraded = False  # lazily preempted: keeps running as opportunistic
        self.leaves: list[PhysicalCell] = []
        self.vleaves: list[VirtualCell | None] = []
        self.view: VcView | None = None

    def __repr__(self) -> str:
        return f"GroupRecord({self.name})"

    @property
    def priority(self) -> int:
        return OPPORTUNISTIC_PRIORITY if self.downgraded else self.request.priority

    @property
    def opportunistic(self) -> bool:
        return self.priority < 0
