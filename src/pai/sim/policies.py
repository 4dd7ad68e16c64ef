"""The scheduling policies a replay compares, behind one small interface.

Every policy is something with `schedule(group) -> Bind | Preempt | Wait`, `allocate(group,
placement)` right after a Bind, and `release(group)` when the group ends: exactly the calls the
controller makes on PAI's scheduler. For HiveD it *is* PAI's scheduler, `pai.scheduler.Scheduler`.

- ``hived``: PAI's scheduler; every job is guaranteed in its VC's cells.
- ``hived-oppo``: the same, and a job that finds no room in its VC's cells runs as an
  opportunistic job on idle cells of any VC if there are some, until a guaranteed job needs them
  (it is then preempted, and retried keeping its place in the queue).
- ``pai``: PAI's default, `pai.scheduler.pai.PaiScheduler`: HiveD's guarantees, the same
  overflow, jobs that resume from their last checkpoint when preempted (one every
  `DEFAULT_CHECKPOINT_INTERVAL_S` of run time), and reservations with backfill for jobs that
  waited longer than the starvation bound.
- ``quota``: the capacity-scheduler baseline, `pai.sim.quota.QuotaScheduler`.
- ``private``: PAI's scheduler on `pai.sim.private.private_cluster`, each VC alone on its share.

Any of them may share each VC between its users as the controller does
(`pai.orchestrator.fairness`): ``+fair`` orders waiting jobs of one priority by their users'
recent GPU time (fair share, half-life `DEFAULT_HALF_LIFE_S`), ``+limits`` holds back jobs past
their user's limit (the cluster's `userLimit`s). ``pai+fair+limits`` is both on top of ``pai``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from pai.cluster import ClusterConfig, load_cluster
from pai.scheduler import Scheduler
from pai.scheduler.fairshare import DEFAULT_HALF_LIFE_S
from pai.scheduler.pai import PaiScheduler
from pai.scheduler.types import Decision, GroupRequest, Placement, WaitKind, WaitReason
from pai.sim.private import private_cluster
from pai.sim.queue import CLUSTER, Scope, vc_scope
from pai.sim.quota import QuotaScheduler


class GroupScheduler(Protocol):
    def schedule(self, request: GroupRequest) -> Decision: ...

    def allocate(self, group_name: str, placement: Placement) -> None: ...

    def release(self, group_name: str) -> None: ...


@dataclass(frozen=True)
class Policy:
    """A scheduler to replay through, on the cluster it was built for.

    `overflow`: jobs that wait in their VC may run opportunistically on idle cells.
    `checkpoint_interval_s`: jobs save their work this often and a preempted job resumes from
    its last save (None: it restarts from scratch).
    `vc_waits`: the wait kinds of guaranteed groups that only a release in their own VC can end
    (HiveD's VC safety: other VCs never take a VC's cells). Any other wait ends, at the earliest,
    with a release anywhere in the cluster.
    `fair_share_half_life_s`: waiting jobs of one priority go by their users' recent use
    (None: first come, first served). `user_limits`: the cluster's limits per user hold.
    """

    name: str
    scheduler: GroupScheduler
    cluster: ClusterConfig
    overflow: bool = False
    vc_waits: frozenset[WaitKind] = frozenset()
    checkpoint_interval_s: float | None = None
    fair_share_half_life_s: float | None = None
    user_limits: bool = False

    @property
    def shares_vcs_between_users(self) -> bool:
        return self.fair_share_half_life_s is not None or self.user_limits

    def checkpointed(self, ran_s: float) -> float:
        """Of an attempt that ran `ran_s` before preemption, the work its checkpoints saved."""
        interval = self.checkpoint_interval_s
        return 0.0 if not interval else (ran_s // interval) * interval

    def wait_scope(self, request: GroupRequest, reason: WaitReason) -> Scope:
        if not request.opportunistic and reason.kind in self.vc_waits:
            return vc_scope(request.vc)
        return CLUSTER


HIVED_VC_WAITS = frozenset({WaitKind.VC_QUOTA, WaitKind.TOPOLOGY})


def _hived(cluster: ClusterConfig) -> Policy:
    return Policy("hived", Scheduler(cluster), cluster, vc_waits=HIVED_VC_WAITS)


def _hived_oppo(cluster: ClusterConfig) -> Policy:
    return Policy("hived-oppo", Scheduler(cluster), cluster, True, HIVED_VC_WAITS)


DEFAULT_CHECKPOINT_INTERVAL_S = 1800.0
"""How often a replayed `pai` job saves its work: every 30 minutes of run time."""


def _pai(cluster: ClusterConfig) -> Policy:
    scheduler = PaiScheduler(cluster, overflow=False)  # the replay offers the overflow request
    return Policy(
        "pai",
        scheduler,
        cluster,
        overflow=True,
        vc_waits=HIVED_VC_WAITS,
        checkpoint_interval_s=DEFAULT_CHECKPOINT_INTERVAL_S,
    )


def _quota(cluster: ClusterConfig) -> Policy:
    return Policy(
        "quota", QuotaScheduler(cluster), cluster, vc_waits=frozenset({WaitKind.VC_QUOTA})
    )


def _private(cluster: ClusterConfig) -> Policy:
    private = load_cluster(private_cluster(cluster), source="private clusters")
    return Policy("private", Scheduler(private), private, vc_waits=HIVED_VC_WAITS)


POLICIES: dict[str, Callable[[ClusterConfig], Policy]] = {
    "hived": _hived,
    "hived-oppo": _hived_oppo,
    "pai": _pai,
    "quota": _quota,
    "private": _private,
}
"""Policy name -> how to build it for a cluster."""


SHARING = ("fair", "limits")
"""What `+` adds to a policy's name: fair share, limits per user."""


def make_policy(name: str, cluster: ClusterConfig) -> Policy:
    """`hived`, `pai`, ... optionally with `+fair` and/or `+limits` (`pai+fair+limits`)."""
    base, *sharing = name.split("+")
    build = POLICIES.get(base)
    unknown = [part for part in sharing if part not in SHARING]
    if build is None or unknown or len(set(sharing)) != len(sharing):
        raise ValueError(
            f"unknown policy {name!r}; policies: {', '.join(POLICIES)}, each optionally with "
            f"{' and '.join('+' + part for part in SHARING)}"
        )
    policy = build(cluster)
    if not sharing:
        return policy
    return replace(
        policy,
        name=name,
        fair_share_half_life_s=DEFAULT_HALF_LIFE_S if "fair" in sharing else None,
        user_limits="limits" in sharing,
    )


def known_policy(name: str) -> bool:
    base, *sharing = name.split("+")
    return base in POLICIES and all(part in SHARING for part in sharing)
