"""Sharing a VC between its users, for the controller: the order of waiting jobs (fair share)
and the limits per user.

The controller keeps this in step with its jobs (`sync` after anything changed a job's
allocations), orders its waiting jobs with `queue`, and asks `held_back` before it lets the
scheduler place a job's groups in the VC's cells. The rules themselves are in
`pai.scheduler.fairshare` and `pai.scheduler.userlimits`; this module knows jobs, the store's
group limits and what the API shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from pai.cluster.model import ClusterConfig, UserLimit
from pai.orchestrator.active import ActiveJob
from pai.scheduler.fairshare import (
    DEFAULT_HALF_LIFE_S,
    UsageLedger,
    UserKey,
    first_starving,
)
from pai.scheduler.types import Allocation, GroupRequest, WaitReason
from pai.scheduler.userlimits import (
    EffectiveLimit,
    Use,
    effective_limit,
    group_use,
    over_limit,
)
from pai.store.models import JobRow
from pai.store.userlimits import limits_version, member_limits

HISTORY_HALF_LIVES = 8
"""After a restart, jobs that ended up to this many half-lives ago count in recent use (older
ones would weigh less than 1/256 of what they did)."""


@dataclass(frozen=True)
class UserShare:
    """One user's use of one VC, as the API shows it."""

    user: str
    gpus: float
    """GPUs the user's guaranteed jobs hold in the VC (what the limit counts)."""
    cpus: float
    jobs: int
    """Guaranteed jobs holding cells in the VC."""
    gpus_held: float
    """All GPUs the user's jobs of the VC hold, opportunistic ones included."""
    recent_gpu_seconds: float
    """At `FairnessState.as_of`; what fair share orders by."""


@dataclass(frozen=True)
class FairnessState:
    """What the controller knows of each VC's users after its last pass."""

    half_life_s: float | None = None
    """None: fair share is off (first come, first served)."""
    as_of: float = 0.0
    vcs: dict[str, tuple[UserShare, ...]] = field(default_factory=dict)


class JobFairness:
    """The controller's fair share and limits per user (see the module docstring)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        half_life_s: float | None,
        starving_after_s: float = math.inf,
    ) -> None:
        """`starving_after_s`: the policy's starvation bound (`Scheduler.reserves_after_s`)."""
        self._cluster = cluster
        self.half_life_s = half_life_s
        self._starving_after_s = starving_after_s
        self._ledger = UsageLedger(half_life_s or DEFAULT_HALF_LIFE_S)
        self._held: dict[int, set[str]] = {}  # job id -> its groups in the ledger
        self._group_limits: dict[UserKey, dict[str, UserLimit]] = {}
        self._version: object = None

    # -- keeping in step ---------------------------------------------------------------------------

    def read_limits(self, session: Session) -> bool:
        """Read the groups' limits and who they apply to, when they may have changed; True if
        they did (waiting jobs held back may fit now)."""
        version = limits_version(session)
        if version == self._version:
            return False
        self._version = version
        limits: dict[UserKey, dict[str, UserLimit]] = {}
        for row in member_limits(session):
            per_user = limits.setdefault((row.virtual_cluster, row.username), {})
            per_user[row.groupname] = UserLimit(row.gpus, row.cpus, row.jobs)
        changed = limits != self._group_limits
        self._group_limits = limits
        return changed

    def restore(self, session: Session, now: float) -> None:
        """After a restart: the recent use of every user, from the jobs in the store (GPUs from
        the first launch to the end, or to now for jobs still running)."""
        cutoff = datetime.fromtimestamp(now, UTC) - timedelta(
            seconds=HISTORY_HALF_LIVES * self._ledger.half_life_s
        )
        rows = session.execute(
            select(
                JobRow.virtual_cluster,
                JobRow.username,
                JobRow.total_gpus,
                JobRow.launched_at,
                JobRow.completed_at,
            ).where(
                JobRow.launched_at.is_not(None),
                or_(JobRow.completed_at.is_(None), JobRow.completed_at >= cutoff),
            )
        ).all()
        for vc, user, gpus, launched, completed in rows:
            if launched is None:
                continue
            end = completed.timestamp() if completed is not None else now
            self._ledger.add_past_use(vc, user, gpus, launched.timestamp(), end, now)

    def sync(self, jobs: Iterable[ActiveJob], now: float) -> None:
        """Count what these jobs hold now: groups placed or released, lazily preempted."""
        for job in jobs:
            allocations = {} if job.machine.finished else job.allocations
            known = self._held.pop(job.id, set())
            for name in known - allocations.keys():
                self._ledger.release(name, now)
            for name, allocation in allocations.items():
                guaranteed = counts_as_guaranteed(allocation)
                if self._ledger.holds(name):
                    self._ledger.set_guaranteed(name, guaranteed)
                else:
                    self._ledger.hold(
                        name,
                        job=job.framework_name,
                        vc=job.spec.virtual_cluster,
                        user=job.username,
                        use=self._use(allocation.request),
                        guaranteed=guaranteed,
                        now=now,
                    )
            if allocations:
                self._held[job.id] = set(allocations)

    # -- deciding ----------------------------------------------------------------------------------

    def queue(self, jobs: Iterable[ActiveJob], now: float) -> list[ActiveJob]:
        """The jobs in the order they are offered to the scheduler: higher priority first;
        then, with fair share, the first starving job of each VC (`first_starving`) and users
        with less recent GPU time in the job's VC; then first come, first served (retries keep
        their place)."""
        if self.half_life_s is None:
            return sorted(jobs, key=lambda job: (-job.priority, job.submitted_at, job.id))
        waiting = list(jobs)
        first = first_starving(
            (
                (
                    job.id,
                    job.spec.virtual_cluster,
                    job.priority,
                    job.submitted_at.timestamp(),
                    job.id,
                )
                for job in waiting
            ),
            now,
            self._starving_after_s,
        )

        def key(job: ActiveJob) -> tuple[int, bool, float, datetime, int]:
            vc, user = job.spec.virtual_cluster, job.username
            recent = self._ledger.recent_gpu_seconds(vc, user, now)
            return (-job.priority, job.id not in first, recent, job.submitted_at, job.id)

        return sorted(waiting, key=key)

    def held_back(self, job: ActiveJob) -> WaitReason | None:
        """Why the job's waiting groups may not take cells of its VC now (its user's limit
        there), or None. Opportunistic jobs are never held back."""
        if job.priority < 0:
            return None
        vc = job.spec.virtual_cluster
        limit = self.limit_of(vc, job.username)
        if limit.limit.unlimited:
            return None
        demand = Use()
        for group in job.pending_groups():
            demand += self._use(group)
        if not any(self._ledger.guaranteed(name) for name in self._held.get(job.id, ())):
            demand += Use(jobs=1)
        return over_limit(job.username, vc, limit, self._ledger.held(vc, job.username), demand)

    def limit_of(self, vc: str, user: str) -> EffectiveLimit:
        spec = self._cluster.virtual_clusters.get(vc)
        default = spec.user_limit if spec is not None else UserLimit()
        return effective_limit(default, self._group_limits.get((vc, user), {}))

    # -- showing -----------------------------------------------------------------------------------

    def state(self, now: float) -> FairnessState:
        vcs: dict[str, list[UserShare]] = {}
        for vc, user in self._ledger.users():
            held = self._ledger.held(vc, user)
            recent = self._ledger.recent_gpu_seconds(vc, user, now)
            gpus = self._ledger.gpus_held(vc, user)
            if recent < 1.0 and not gpus and not held.jobs:
                continue  # forgotten by now
            vcs.setdefault(vc, []).append(
                UserShare(
                    user,
                    _rounded(held.gpus),
                    _rounded(held.cpus),
                    held.jobs,
                    _rounded(gpus),
                    round(recent, 1),
                )
            )
        return FairnessState(
            self.half_life_s, now, {vc: tuple(users) for vc, users in sorted(vcs.items())}
        )

    def _use(self, request: GroupRequest) -> Use:
        if request.sku_type is not None:
            sku = self._cluster.sku_types[request.sku_type]
        else:
            sku = self._cluster.vc_sku_types[request.vc][0]
        return group_use(request, sku)


def counts_as_guaranteed(allocation: Allocation) -> bool:
    """Whether a running group holds cells of its VC: not opportunistic, not lazily preempted
    and not overflowed onto idle cells (whose pods count against no VC cell)."""
    return (
        not allocation.opportunistic
        and not allocation.request.opportunistic
        and all(pod.cell_type is not None for pod in allocation.placement.pods)
    )


def _rounded(value: float) -> float:
    return round(value, 3) if math.isfinite(value) else value
