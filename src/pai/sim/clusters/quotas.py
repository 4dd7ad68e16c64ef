"""Turning VC shares into whole-node quotas across node pools, guided by what each VC runs."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

from pai.sim.clusters.apportion import apportion
from pai.sim.clusters.topology import NodePool
from pai.sim.traces import Trace

PoolSplit = Literal["demand", "proportional"]


def _pool_needed(gpus: int, pools: Sequence[NodePool]) -> NodePool:
    """The pool a job runs in: the smallest whose nodes hold it, else (multi-node) the largest."""
    return next((pool for pool in pools if gpus <= pool.gpus_per_node), pools[-1])


def node_quotas(
    pools: Sequence[NodePool],
    shares: Mapping[str, float],
    trace: Trace,
    split: PoolSplit = "demand",
) -> dict[str, dict[str, int]]:
    """Whole nodes of each pool for each VC, so that VC GPU totals follow `shares`.

    Every node is given to some VC (quotas add up to the cluster, as queue capacities add up to
    100% in a quota scheduler). How a VC's GPUs are split across pools:

    - ``"demand"``: the pools with smaller nodes are shared out in proportion to each VC's share
      times the fraction of its GPU-hours spent in jobs that fit those nodes; the largest-node
      pool then tops every VC up to its share. A VC thus gets the hardware its jobs can use: an
      8-GPU job cannot run on 2-GPU nodes.
    - ``"proportional"``: every pool is shared out by `shares` alone, the same mix for all VCs.

    Either way each VC gets enough largest-pool nodes for its largest job, or that job could
    never run as guaranteed.
    """
    if split not in ("demand", "proportional"):
        raise ValueError(f"unknown pool split {split!r}; use 'demand' or 'proportional'")
    ordered = sorted(pools, key=lambda pool: pool.gpus_per_node)
    total_gpus = sum(pool.gpus for pool in ordered)
    target = {vc: share * total_gpus for vc, share in shares.items()}

    hours_in_pool: defaultdict[str, defaultdict[str, float]] = defaultdict(
        lambda: defaultdict(float)
    )
    largest_job: defaultdict[str, int] = defaultdict(int)
    for job in trace:
        hours_in_pool[job.vc][_pool_needed(job.gpus, ordered).gpu_type] += job.gpu_seconds
        largest_job[job.vc] = max(largest_job[job.vc], job.gpus)

    def demand_fraction(vc: str, pool: NodePool) -> float:
        hours = hours_in_pool.get(vc)
        if not hours or not sum(hours.values()):
            return pool.gpus / total_gpus
        return hours[pool.gpu_type] / sum(hours.values())

    quotas: dict[str, dict[str, int]] = {vc: {} for vc in shares}
    assigned_gpus: defaultdict[str, float] = defaultdict(float)
    for pool in ordered:
        is_largest = pool is ordered[-1]
        if split == "proportional":
            weights = dict(shares)
        elif is_largest:
            weights = {vc: max(target[vc] - assigned_gpus[vc], 0.0) for vc in shares}
        else:
            weights = {vc: target[vc] * demand_fraction(vc, pool) for vc in shares}
        minimums = (
            {vc: math.ceil(largest_job[vc] / pool.gpus_per_node) for vc in shares}
            if is_largest
            else None
        )
        for vc, count in apportion(len(pool.node_names), weights, minimums).items():
            quotas[vc][pool.gpu_type] = count
            assigned_gpus[vc] += count * pool.gpus_per_node
    return quotas
