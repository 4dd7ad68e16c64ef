"""Sharing each VC between its users in a replay, by the controller's rules: fair share orders
waiting jobs of one priority by their users' recent GPU time, limits per user hold jobs back
from their VC's cells (`pai.orchestrator.fairness` does the same for the controller).

A replayed job is one group; its user is the trace's (`pai.sim.users` assigns users to traces
that have none). Only guaranteed groups count against a limit; a job held back may still
overflow onto idle cells as an opportunistic job where the policy overflows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from pai.cluster.model import ClusterConfig, UserLimit
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.fairshare import DEFAULT_HALF_LIFE_S, UsageLedger, first_starving
from pai.scheduler.userlimits import Use, effective_limit, over_limit
from pai.sim.queue import Order


def limit_each_user(cluster: ClusterConfig, share: float) -> ClusterConfig:
    """The cluster with every VC's `userLimit` set to `share` of its guaranteed GPUs (at
    least one), for what-if replays of limits on clusters whose file sets none."""
    if not 0 < share <= 1:
        raise ValueError(f"the limit's share of a VC must be in (0, 1], got {share:g}")
    capacity = CapacityIndex(cluster)
    vcs = {}
    for name, spec in cluster.virtual_clusters.items():
        gpus = sum(
            chain.leaves * cluster.chain_sku(key).gpu
            for key, chain in capacity.vcs.get(name, {}).items()
        )
        limit = UserLimit(gpus=float(max(1, math.ceil(share * gpus))))
        vcs[name] = dataclasses.replace(spec, user_limit=limit)
    return dataclasses.replace(cluster, virtual_clusters=vcs)


Rank = tuple[int, bool, float, float, int]
"""(-priority, not the VC's first starving job, the user's recent use, submission time, trace
position): smaller goes first (`pai.scheduler.fairshare.first_starving`)."""


class UserSharing:
    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        half_life_s: float | None,
        limits: bool,
        starving_after_s: float = math.inf,
    ) -> None:
        self.fair = half_life_s is not None
        self.limits = limits
        self._cluster = cluster
        self._ledger = UsageLedger(half_life_s or DEFAULT_HALF_LIFE_S)
        self._starving_after_s = starving_after_s

    def first_starving(self, heads: Iterable[tuple[Order, str]], now: float) -> set[int]:
        """Trace positions of the jobs fair share puts first, from the queue's (order, VC)."""
        entries = ((order[2], vc, -order[0], order[1], order[2]) for order, vc in heads)
        return first_starving(entries, now, self._starving_after_s)

    def rank(self, order: Order, vc: str, user: str, first: set[int], now: float) -> Rank:
        recent = self._ledger.recent_gpu_seconds(vc, user, now)
        return (order[0], order[2] not in first, recent, order[1], order[2])

    def held_back(self, vc: str, user: str, gpus: int) -> bool:
        """Whether a job of `gpus` GPUs would pass its user's limit in the VC."""
        if not self.limits:
            return False
        limit = effective_limit(self._cluster.virtual_clusters[vc].user_limit, {})
        if limit.limit.unlimited:
            return False
        held = self._ledger.held(vc, user)
        return over_limit(user, vc, limit, held, Use(gpus, 0, 1)) is not None

    def started(
        self, name: str, vc: str, user: str, gpus: int, *, guaranteed: bool, now: float
    ) -> None:
        self._ledger.hold(
            name, job=name, vc=vc, user=user, use=Use(gpus), guaranteed=guaranteed, now=now
        )

    def ended(self, name: str, now: float) -> bool:
        """The job's group ended; whether it counted against its user's limit."""
        guaranteed = bool(self._ledger.guaranteed(name))
        self._ledger.release(name, now)
        return guaranteed
