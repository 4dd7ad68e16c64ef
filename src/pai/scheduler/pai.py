"""The `pai` policy: HiveD's guarantees, no idle cells while jobs wait, and no starving job.

On top of `Scheduler` (every guaranteed group still gets its VC's cells, preempting what runs
there opportunistically):

- *Overflow*: a guaranteed group that must wait in its VC runs as an opportunistic group on idle
  cells of any VC instead, until their owner needs them. Preemption is made cheap by the caller:
  the victim's tasks get their SIGTERM grace period, and a retried job can resume from its
  previous attempt's output.
- *Reservations with backfill* (`pai.scheduler.backfill`): a group that has waited longer than
  `starvation_after_s` in its VC gets a reservation there; other groups of the VC start only if
  they do not push its estimated start back, and its wait reason tells that start.

`clock` gives the current time (the controller's clock, or a replay's virtual one); `run_time`
what a group declares it needs (None: learned from its VC's finished groups).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from pai.cluster.model import ClusterConfig
from pai.scheduler.backfill import Reservation, ReservationBook, ViewKey, describe_start
from pai.scheduler.scheduler import Scheduler
from pai.scheduler.types import (
    OPPORTUNISTIC_PRIORITY,
    Bind,
    Decision,
    GroupRequest,
    Placement,
    Wait,
    WaitKind,
    WaitReason,
)

DEFAULT_STARVATION_AFTER_S = 3600.0
"""A group waiting longer than this in its VC gets a reservation."""

RESERVED_FOR = "reserved_for"
"""Wait-reason detail of a group held back by another group's reservation."""

RunTime = Callable[[GroupRequest], float | None]


def no_declared_run_time(request: GroupRequest) -> float | None:
    return None


class PaiScheduler(Scheduler):
    """`Scheduler` with overflow and reservations; same interface, so a drop-in replacement."""

    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        clock: Callable[[], float] = time.time,
        run_time: RunTime = no_declared_run_time,
        starvation_after_s: float = DEFAULT_STARVATION_AFTER_S,
        overflow: bool = True,
    ) -> None:
        super().__init__(cluster)
        self.clock = clock
        self.run_time = run_time
        self.overflow = overflow
        self.book = ReservationBook(starvation_after_s)

    def schedule(self, request: GroupRequest) -> Decision:
        view = self._view_key(request)
        if view is None or request.name in self._groups:
            return super().schedule(request)
        now = self.clock()
        free = self._free_leaves(view)
        blocking = self.book.blocking(
            request.name, view, request.leaf_cells, self.run_time(request), free, now
        )
        decision = (
            Wait(_reserved_reason(blocking, now))
            if blocking is not None
            else super().schedule(request)
        )
        if not isinstance(decision, Wait):
            return decision
        self.book.waits(request.name, now)
        reservation = self.book.reserve_if_starving(
            request.name, view, request.leaf_cells, free, now
        )
        if reservation is not None:
            decision = Wait(_with_estimate(decision.reason, reservation, now))
        if self.overflow and decision.reason.kind is not WaitKind.UNSCHEDULABLE:
            overflow = super().schedule(replace(request, priority=OPPORTUNISTIC_PRIORITY))
            if isinstance(overflow, Bind):
                return overflow
        return decision

    def allocate(self, group_name: str, placement: Placement) -> None:
        super().allocate(group_name, placement)
        group = self._groups[group_name]
        request = group.request
        view = None if request.opportunistic else self._view_key(request)
        self.book.started(
            group_name, view, request.leaf_cells, self.run_time(request), self.clock()
        )

    def release(self, group_name: str) -> None:
        super().release(group_name)
        self.book.ended(group_name, self.clock())

    def _view_key(self, request: GroupRequest) -> ViewKey | None:
        """The VC cells a guaranteed, non-pinned group is placed in (its first chain)."""
        if request.opportunistic or request.pinned_cell_id is not None:
            return None
        chains = self._capacity.guaranteed_chains(request)
        return (request.vc, chains[0]) if chains else None

    def _free_leaves(self, view: ViewKey) -> int:
        vc_view = self._views[view]
        return vc_view.total_leaves - vc_view.used


def _reserved_reason(reservation: Reservation, now: float) -> WaitReason:
    vc = reservation.view[0]
    start = describe_start(reservation, now)
    return WaitReason(
        WaitKind.VC_QUOTA,
        f"VC '{vc}' keeps cells for job {reservation.group}, which has waited longest; this job "
        f"may use them only if it ends before that job starts ({start}).",
        {RESERVED_FOR: reservation.group, **_start_details(reservation)},
    )


def _with_estimate(reason: WaitReason, reservation: Reservation, now: float) -> WaitReason:
    start = describe_start(reservation, now)
    message = reason.message.rstrip(".") + f"; cells are reserved for it, {start}."
    return WaitReason(reason.kind, message, {**reason.details, **_start_details(reservation)})


def _start_details(reservation: Reservation) -> dict[str, object]:
    known = reservation.start_s != float("inf")
    return {
        "estimated_start": reservation.start_s if known else None,
        "estimated_start_after": reservation.after,
    }
