"""A VC's users as the API shows them: what each holds against the limit that applies, the
recent use fair share orders by, and the limits themselves (the VC's default from the cluster
file, and the groups' limits administrators set)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.cluster.model import ClusterConfig, UserLimit, VirtualClusterSpec
from pai.errors import NoVirtualClusterError
from pai.orchestrator.fairness import FairnessState, UserShare
from pai.scheduler.fairshare import decayed_forward
from pai.scheduler.userlimits import effective_limit
from pai.server.views import epoch_ms
from pai.store.models import GroupUserLimit, JobCount
from pai.store.userlimits import group_limits, member_limits


class UserLimitBody(BaseModel):
    """The most one user may hold at once in a VC; a field left out (or null): no limit on it."""

    model_config = ConfigDict(extra="forbid")

    gpus: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="GPUs (a share of one counts)."
    )
    cpus: float | None = Field(default=None, ge=0, allow_inf_nan=False, description="CPUs.")
    jobs: int | None = Field(default=None, ge=0, description="Guaranteed jobs running at once.")

    @classmethod
    def of(cls, limit: UserLimit) -> UserLimitBody:
        return cls(gpus=limit.gpus, cpus=limit.cpus, jobs=limit.jobs)

    def limit(self) -> UserLimit:
        return UserLimit(self.gpus, self.cpus, self.jobs)


class GroupUserLimitInfo(UserLimitBody):
    model_config = ConfigDict(extra="ignore")

    group: str
    setBy: str = Field(description="The administrator who set it last.")
    updatedTime: int = Field(description="Epoch milliseconds.")


class VcUserLimits(BaseModel):
    default: UserLimitBody = Field(description="The VC's `userLimit` in the cluster file.")
    groups: list[GroupUserLimitInfo] = Field(
        description="Limits for the members of these groups, replacing the default (of "
        "several, the most generous applies, resource by resource)."
    )


class VcUserInfo(BaseModel):
    username: str
    gpus: float = Field(description="GPUs the user's guaranteed jobs hold in the VC.")
    cpus: float
    jobs: int = Field(description="Guaranteed jobs of the user holding cells of the VC.")
    limit: UserLimitBody
    limitGroups: list[str] = Field(description="Where the limit comes from; empty: the VC.")
    gpusHeld: float = Field(description="All GPUs the user's jobs hold, opportunistic included.")
    recentGpuHours: float = Field(
        description="GPU-hours, each weighing half as much per half-life: what fair share "
        "orders waiting jobs by (CPU-hours on cells without GPUs)."
    )
    waitingJobs: int


class VcUsers(BaseModel):
    fairShare: bool = Field(description="Whether waiting jobs go by their users' recent use.")
    halfLifeSeconds: float | None
    users: list[VcUserInfo]


def vc_spec(cluster: ClusterConfig, vc: str) -> VirtualClusterSpec:
    spec = cluster.virtual_clusters.get(vc)
    if spec is None:
        known = ", ".join(sorted(cluster.virtual_clusters))
        raise NoVirtualClusterError(f"virtual cluster '{vc}' does not exist (VCs: {known})")
    return spec


def vc_user_limits(session: Session, spec: VirtualClusterSpec) -> VcUserLimits:
    return VcUserLimits(
        default=UserLimitBody.of(spec.user_limit),
        groups=[group_limit_info(row) for row in group_limits(session, spec.name)],
    )


def group_limit_info(row: GroupUserLimit) -> GroupUserLimitInfo:
    return GroupUserLimitInfo(
        group=row.group.groupname,
        gpus=row.gpus,
        cpus=row.cpus,
        jobs=row.jobs,
        setBy=row.set_by,
        updatedTime=epoch_ms(row.updated_at),
    )


def vc_users(
    session: Session,
    spec: VirtualClusterSpec,
    fairness: FairnessState,
    now: float | None = None,
) -> VcUsers:
    """Users holding something in the VC or waiting there, by name."""
    now = time.time() if now is None else now
    shares = {share.user: share for share in fairness.vcs.get(spec.name, ())}
    waiting = dict(
        session.execute(
            select(JobCount.username, JobCount.count).where(
                JobCount.virtual_cluster == spec.name,
                JobCount.state == "WAITING",
                JobCount.count > 0,
            )
        ).all()
    )
    limits: dict[str, dict[str, UserLimit]] = {}
    for member in member_limits(session):
        if member.virtual_cluster == spec.name:
            limits.setdefault(member.username, {})[member.groupname] = UserLimit(
                member.gpus, member.cpus, member.jobs
            )
    users = []
    for name in sorted(set(shares) | set(waiting)):
        share = shares.get(name) or UserShare(name, 0, 0, 0, 0, 0)
        limit = effective_limit(spec.user_limit, limits.get(name, {}))
        users.append(
            VcUserInfo(
                username=name,
                gpus=share.gpus,
                cpus=share.cpus,
                jobs=share.jobs,
                limit=UserLimitBody.of(limit.limit),
                limitGroups=list(limit.groups),
                gpusHeld=share.gpus_held,
                recentGpuHours=round(recent_use(fairness, share, now) / 3600, 3),
                waitingJobs=waiting.get(name, 0),
            )
        )
    return VcUsers(
        fairShare=fairness.half_life_s is not None,
        halfLifeSeconds=fairness.half_life_s,
        users=users,
    )


def recent_use(fairness: FairnessState, share: UserShare, now: float) -> float:
    """The user's recent GPU-seconds at `now`, from what the controller published earlier."""
    half_life = fairness.half_life_s
    if half_life is None:
        return share.recent_gpu_seconds
    elapsed = now - fairness.as_of
    return decayed_forward(share.recent_gpu_seconds, share.gpus_held, elapsed, half_life)


def recent_uses(fairness: FairnessState, vc: str, now: float) -> Mapping[str, float]:
    """Every user's recent GPU-seconds in `vc` at `now` (users left out: none)."""
    return {share.user: recent_use(fairness, share, now) for share in fairness.vcs.get(vc, ())}
