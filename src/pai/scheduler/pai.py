"""The `pai` policy: HiveD's guarantees, no idle cells while jobs wait, and no starving job.

On top of `Scheduler` (every guaranteed group still gets its VC's cells, preempting what runs
there opportunistically):

- *Overflow*: a guaranteed group that must wait in its VC runs as an opportunistic group on idle
  cells of any VC instead, until their owner needs them (it is then preempted and retried,
  keeping its place in the queue). What a preemption costs depends on the job: one that saves
  checkpoints loses only the work since its last one (the simulator models this).
- *Reservations with backfill* (`pai.scheduler.backfill`): a group that has waited longer than
  `starvation_after_s` in its VC gets a reservation there; other groups of the VC start only if
  they do not push its estimated start back, and its wait reason tells that start.

- *Victims that lose the least*: when a VC takes back cells that opportunistic groups use, the
  cells chosen are those whose groups lose the least work (`Scheduler.work_at_risk`). By
  default that is the work since a group started, leaf cells x seconds, i.e. the youngest
  groups go first; a caller that knows when groups saved checkpoints gives its own measure.

`clock` gives the current time (the controller's clock, or a replay's virtual one); `run_time`
what a group declares it needs (None: learned from its VC's finished groups). `overflow=False`
leaves the overflow to the caller (a replay offers the opportunistic request itself).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from pai.cluster.model import ClusterConfig
from pai.scheduler.backfill import (
    Reservation,
    ReservationBook,
    ViewKey,
    describe_start,
    job_of,
)
from pai.scheduler.gpushare import SharePolicy
from pai.scheduler.scheduler import Scheduler, WorkAtRisk
from pai.scheduler.types import (
    OPPORTUNISTIC_PRIORITY,
    Allocation,
    Bind,
    Decision,
    GroupRequest,
    GroupState,
    Placement,
    RebuildResult,
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
    """Jobs declare no run time (the job protocol has no field for it): all are learned."""
    return None


POLICIES = ("pai", "hived-oppo", "hived")
"""What a controller may run: `pai` (the default), `hived-oppo` (overflow without
reservations) and `hived` (guarantees only: jobs wait while their VC is full)."""


def build_scheduler(
    policy: str,
    cluster: ClusterConfig,
    *,
    reserve_after_s: float = DEFAULT_STARVATION_AFTER_S,
    clock: Callable[[], float] = time.time,
) -> Scheduler:
    """The controller's scheduler for a policy name of `POLICIES`."""
    if policy == "hived":
        return Scheduler(cluster)
    if policy == "hived-oppo":
        return PaiScheduler(cluster, clock=clock, starvation_after_s=math.inf)
    if policy == "pai":
        return PaiScheduler(cluster, clock=clock, starvation_after_s=reserve_after_s)
    raise ValueError(f"unknown scheduling policy {policy!r}; policies: {', '.join(POLICIES)}")


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
        work_at_risk: WorkAtRisk | None = None,
        share_policy: SharePolicy | None = None,
    ) -> None:
        super().__init__(
            cluster,
            work_at_risk=work_at_risk or self.work_since_start,
            share_policy=share_policy,
        )
        self.clock = clock
        self.run_time = run_time
        self.overflow = overflow
        self.book = ReservationBook(starvation_after_s)

    @property
    def reserves_after_s(self) -> float:
        return self.book.starvation_after_s

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

    def rebuild(self, allocations: Iterable[Allocation]) -> RebuildResult:
        """Restore running groups (see `Scheduler.rebuild`); waits and reservations start over."""
        result = super().rebuild(allocations)
        self.book = ReservationBook(self.book.starvation_after_s)
        now = self.clock()
        for name, group in sorted(self._groups.items()):
            request = group.request
            if group.state is GroupState.ALLOCATED and not group.downgraded:
                view = self._view_key(request)
                self.book.started(name, view, request.leaf_cells, self.run_time(request), now)
        return result

    def work_since_start(self, group_name: str) -> float:
        """Leaf-cell-seconds a running group has run (since the scheduler started, if it was
        rebuilt): all of it is lost if the group cannot resume from a checkpoint."""
        group = self._groups.get(group_name)
        started = self.book.started_s(group_name)
        if group is None or started is None:
            return 0.0
        return group.request.leaf_cells * (self.clock() - started)

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
        f"VC '{vc}' keeps cells for job {job_of(reservation.group)}, which has waited longest; "
        f"this job may use them only if it ends before that job starts ({start}).",
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
