"""From a trace job to what PAI schedules: one gang (affinity group) of pods, each on one node.

A trace records how many GPUs a job used, not how it was split into processes. A replay splits it
the way a data-parallel job is written: the fewest identical workers that each fit on one node of
the job's VC. On 8-GPU nodes a 16-GPU job is 2 pods of 8, a 12-GPU job 2 pods of 6, a 20-GPU job
4 pods of 5 (20 GPUs cannot be split into 3 equal pods), and a job of at most 8 GPUs is one pod.
"Fit on one node" uses the largest cell a pod of that VC may use (HiveD's rule): a VC owning only
4-GPU sockets gets pods of at most 4 GPUs. One leaf cell is one GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pai.cluster.model import ClusterConfig
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.requests import DEFAULT_PRIORITY_CLASS, PRIORITY_OF_CLASS
from pai.scheduler.types import GroupRequest, PodRequest
from pai.sim.traces import Trace
from pai.sim.traces.building import shifted

ROLE = "worker"
GUARANTEED_PRIORITY = PRIORITY_OF_CLASS[DEFAULT_PRIORITY_CLASS]
"""Trace jobs carry no priority: they all get the default job priority class's."""


class ClusterMismatchError(ValueError):
    """The trace cannot be replayed on the cluster (a VC it lacks, a leaf that is not a GPU)."""


def pod_sizes(gpus: int, largest_pod: int) -> tuple[int, ...]:
    """The fewest equal pods of at most `largest_pod` GPUs that add up to `gpus`."""
    if gpus < 1 or largest_pod < 1:
        raise ValueError(
            f"need at least one GPU and pods of at least one, got {gpus}, {largest_pod}"
        )
    count = math.ceil(gpus / largest_pod)
    while gpus % count:
        count += 1
    return (gpus // count,) * count


def group_request(
    name: str, vc: str, sizes: tuple[int, ...], priority: int = GUARANTEED_PRIORITY
) -> GroupRequest:
    pods = tuple(PodRequest(ROLE, index, size) for index, size in enumerate(sizes))
    return GroupRequest(name, vc, priority, pods)


def largest_pods(cluster: ClusterConfig, vcs: Iterable[str]) -> dict[str, int]:
    """Per VC, the most GPUs one pod can get (its largest cell up to node level).

    Raises `ClusterMismatchError` for a VC the cluster lacks or one owning cells whose leaf is
    not exactly one GPU, since trace GPUs are replayed as leaf cells.
    """
    wanted = sorted(set(vcs))
    missing = [vc for vc in wanted if vc not in cluster.virtual_clusters]
    if missing:
        known = ", ".join(cluster.virtual_clusters) or "none"
        raise ClusterMismatchError(
            f"the cluster has no VC named {', '.join(missing)} (its VCs: {known}); "
            "select the trace's VCs that it has, or use a cluster file made for this trace"
        )
    capacity = CapacityIndex(cluster)
    largest: dict[str, int] = {}
    for vc in wanted:
        chains = capacity.vcs[vc]
        for chain in chains:
            sku = cluster.chain_sku(chain)
            if sku.gpu != 1:
                raise ClusterMismatchError(
                    f"VC {vc} owns cells of SKU {sku.name}, whose leaf cell has {sku.gpu} GPUs; "
                    "a replay needs SKUs of exactly one GPU per leaf cell"
                )
        if not chains:
            raise ClusterMismatchError(f"VC {vc} owns no cells (pinned cells are not replayed)")
        largest[vc] = max(c.largest_node for c in chains.values())
    return largest


def scale_load(trace: Trace, factor: float) -> Trace:
    """The trace with jobs arriving `factor` times as fast (submission times divided by it),
    for what-if studies at a higher (or lower) load; run times are unchanged."""
    if not factor > 0:
        raise ValueError(f"the load factor must be > 0, got {factor}")
    if factor == 1:
        return trace
    origin = trace.jobs[0].submit_time_s if trace.jobs else 0.0
    jobs = tuple(
        shifted(job, (origin + (job.submit_time_s - origin) / factor) - job.submit_time_s)
        for job in trace.jobs
    )
    assumption = (
        f"arrivals {factor:g}x as fast as recorded (submission times divided by {factor:g})"
    )
    assumptions = [*trace.metadata.get("assumptions", []), assumption]
    return Trace(trace.name, jobs, {**trace.metadata, "assumptions": assumptions})
