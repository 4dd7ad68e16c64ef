"""Limits per user inside a VC: what one user's guaranteed jobs may hold there at once.

A VC is a team's share; without limits one person's sweep of two hundred jobs can hold all of
it while a colleague's single job waits. A limit caps a user's GPUs, CPUs and running jobs in
the VC. A job that would pass it waits (never refused: the limit may be raised, and the user's
other jobs end), with a reason that says who holds what.

What counts is what guaranteed groups hold in the VC's cells: a leaf cell brings its SKU's GPUs
and CPUs, a task sharing a GPU its part of the GPU and the CPUs it asked. Opportunistic jobs
(`oppo`, or guaranteed jobs that overflowed onto idle cells) neither count nor are held back:
they only use cells no guaranteed job wants and give them back the moment one does, so limiting
them would only leave GPUs idle.

Pure: the caller says what each user holds (`pai.scheduler.fairshare.UsageLedger`) and which
limit applies (`effective_limit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pai.cluster.model import SkuType, UserLimit
from pai.scheduler.types import GPU_MILLI, GroupRequest, WaitKind, WaitReason

RESOURCES = ("gpus", "cpus", "jobs")


@dataclass(frozen=True)
class Use:
    """What some groups hold, or ask for: GPUs, CPUs and (running) jobs."""

    gpus: float = 0.0
    cpus: float = 0.0
    jobs: int = 0

    def __add__(self, other: Use) -> Use:
        return Use(self.gpus + other.gpus, self.cpus + other.cpus, self.jobs + other.jobs)

    def amount(self, resource: str) -> float:
        return float(getattr(self, resource))


def group_use(request: GroupRequest, sku: SkuType) -> Use:
    """The GPUs and CPUs a group holds, or will, in cells of `sku` (no job counted)."""
    gpus = cpus = 0.0
    for pod in request.pods:
        if pod.share is not None:
            gpus += pod.share.milli / GPU_MILLI
            cpus += pod.cpu_milli / 1000
        else:
            gpus += pod.leaf_cells * sku.gpu
            cpus += pod.leaf_cells * sku.cpu
    return Use(gpus, cpus)


@dataclass(frozen=True)
class EffectiveLimit:
    """The limit a user has in a VC, and where it comes from: the VC's default (no `groups`)
    or the groups of the user that have a limit there."""

    limit: UserLimit
    groups: tuple[str, ...] = ()

    @property
    def whose(self) -> str:
        """'a user', 'a member of group 'interns'' (for messages)."""
        if not self.groups:
            return "a user"
        names = ", ".join(f"'{group}'" for group in self.groups)
        return f"a member of group {names}" if len(self.groups) == 1 else f"a member of {names}"


def effective_limit(default: UserLimit, group_limits: Mapping[str, UserLimit]) -> EffectiveLimit:
    """A user's limit in a VC: the limits of the user's groups that have one there replace the
    VC's default, and of several such groups the most generous wins, resource by resource."""
    if not group_limits:
        return EffectiveLimit(default)
    names = sorted(group_limits)
    combined = group_limits[names[0]]
    for name in names[1:]:
        combined = combined.most_generous(group_limits[name])
    return EffectiveLimit(combined, tuple(names))


LIMIT_DETAIL = "user_limit"
"""Wait-reason detail: what was exceeded, per resource (`{resource, used, limit, needs}`)."""

_UNITS = {"gpus": "GPUs", "cpus": "CPUs", "jobs": "running jobs"}


def over_limit(
    user: str, vc: str, limit: EffectiveLimit, held: Use, demand: Use
) -> WaitReason | None:
    """Why a job of `user` asking for `demand` must wait while the user holds `held` in `vc`,
    or None when it stays within `limit`."""
    exceeded = [
        resource
        for resource in RESOURCES
        if (bound := getattr(limit.limit, resource)) is not None
        and held.amount(resource) + demand.amount(resource) > bound + 1e-9
    ]
    if not exceeded:
        return None
    details: list[dict[str, object]] = [
        {
            "resource": resource,
            "used": held.amount(resource),
            "limit": float(getattr(limit.limit, resource)),
            "needs": demand.amount(resource),
        }
        for resource in exceeded
    ]
    return WaitReason(
        WaitKind.USER_LIMIT,
        _message(user, vc, limit, details),
        {"user": user, "vc": vc, "groups": list(limit.groups), LIMIT_DETAIL: details},
    )


def _message(user: str, vc: str, limit: EffectiveLimit, details: list[dict[str, object]]) -> str:
    too_large = [item for item in details if _number(item["needs"]) > _number(item["limit"])]
    if too_large:
        asks = " and ".join(
            f"{_amount(item['needs'])} {_UNITS[str(item['resource'])]}" for item in too_large
        )
        bounds = " and ".join(
            f"{_amount(item['limit'])} {_UNITS[str(item['resource'])]}" for item in too_large
        )
        return (
            f"this job needs {asks} but {limit.whose} may have at most {bounds} in VC '{vc}': "
            "it starts only once an administrator raises the limit."
        )
    uses = " and ".join(
        f"{_amount(item['used'])} of the {_amount(item['limit'])} {_UNITS[str(item['resource'])]}"
        for item in details
    )
    needs = " and ".join(
        f"{_amount(item['needs'])} {_UNITS[str(item['resource'])].removeprefix('running ')}"
        for item in details
    )
    return (
        f"{user} uses {uses} {limit.whose} may have in VC '{vc}'; this job needs {needs}. "
        f"It starts when other jobs of {user} in the VC end."
    )


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _amount(value: object) -> str:
    return f"{_number(value):g}"
