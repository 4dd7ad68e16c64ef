"""Where a waiting job stands in its VC's queue, and why: told with its wait reason.

The controller tries waiting jobs by priority, then (with fair share) by their users' recent
use, then by submission (`pai.orchestrator.fairness`). This counts, at the moment it is asked,
the VC's waiting jobs that come before the job in that order: those waiting for cells, not
those held back by their user's limit or already placed and preparing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.orchestrator.fairness import FairnessState
from pai.scheduler.requests import DEFAULT_PRIORITY_CLASS, PRIORITY_OF_CLASS
from pai.scheduler.types import WaitKind
from pai.server.vcusers import recent_uses
from pai.store.models import JobRow

QUEUED = frozenset(
    kind.value
    for kind in (
        WaitKind.VC_QUOTA,
        WaitKind.TOPOLOGY,
        WaitKind.BAD_NODES,
        WaitKind.OPPORTUNISTIC_CAPACITY,
    )
)
"""Wait kinds of jobs that wait for cells, in the queue's order."""


QueueKey = tuple[int, float, datetime, int]
"""(-priority, the user's recent use, submission time, job id): smaller goes first."""


@dataclass(frozen=True)
class QueuePlace:
    position: int
    """1: the next job of its VC to be tried."""
    waiting: int
    order: str
    """Why jobs go in this order."""

    @property
    def sentence(self) -> str:
        return f"Position {self.position} of {self.waiting} waiting in the VC: {self.order}."


def queue_place(
    session: Session, row: JobRow, fairness: FairnessState, now: float | None = None
) -> QueuePlace | None:
    """The job's place in its VC's queue; None unless it waits for cells."""
    if row.state != "WAITING" or _kind(row.wait_reason) not in QUEUED:
        return None
    now = time.time() if now is None else now
    fair = fairness.half_life_s is not None
    recent = recent_uses(fairness, row.virtual_cluster, now) if fair else {}

    def key(user: str, priority_class: str, submitted: datetime, job_id: int) -> QueueKey:
        priority = PRIORITY_OF_CLASS.get(priority_class, PRIORITY_OF_CLASS[DEFAULT_PRIORITY_CLASS])
        return (-priority, recent.get(user, 0.0), submitted, job_id)

    mine = key(row.username, row.priority_class, row.submitted_at, row.id)
    queued = [
        key(user, priority_class, submitted, job_id)
        for job_id, user, priority_class, submitted, reason in session.execute(
            select(
                JobRow.id,
                JobRow.username,
                JobRow.priority_class,
                JobRow.submitted_at,
                JobRow.wait_reason,
            ).where(JobRow.virtual_cluster == row.virtual_cluster, JobRow.state == "WAITING")
        )
        if _kind(reason) in QUEUED
    ]
    order = (
        "higher priorities go first, then users with less recent GPU time (fair share), "
        "then earlier submissions"
        if fair
        else "higher priorities go first, then earlier submissions"
    )
    return QueuePlace(sum(1 for other in queued if other < mine) + 1, len(queued), order)


def _kind(reason: object) -> object:
    return reason.get("kind") if isinstance(reason, dict) else None
