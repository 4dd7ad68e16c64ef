"""A shared cluster for replaying the ITP trace, whose ten source clusters become ten VCs.

The ITP release has no machine list and no quotas, so both are derived from the trace:

- Size: all nodes have 8 GPUs (every ITP job size is 1-8 GPUs or a multiple of 8), and there
  are just enough of them for the trace's offered load (GPU-hours over GPU capacity times the
  submission span) to be `target_load`. The default, 0.43, is the Philly replay's offered load
  per VC over each VC's active period, so both evaluations run at a comparable load; it yields
  336 nodes (2,688 GPUs), close to Philly's 2,490.
- Racks of 8 nodes: a rack of 64 GPUs holds the trace's largest jobs (64 GPUs).
- VC quotas: each VC's share of the trace's GPU-hours, so every VC sees the same load relative
  to its quota, with at least the nodes its largest job needs.
"""

from __future__ import annotations

import math
from collections import defaultdict

from pai.sim.clusters.topology import ClusterFile, make_cluster
from pai.sim.traces import Trace, load_itp

ITP_TARGET_LOAD = 0.43
ITP_RACK_SIZE = 8
ITP_GPUS_PER_NODE = 8


def itp_cluster(
    trace: Trace | None = None,
    *,
    target_load: float = ITP_TARGET_LOAD,
    rack_size: int = ITP_RACK_SIZE,
) -> ClusterFile:
    """The shared cluster file for an ITP trace (the shipped one by default)."""
    if not 0 < target_load <= 1:
        raise ValueError(f"target load must be in (0, 1], got {target_load}")
    jobs = trace if trace is not None else load_itp()
    if not jobs.span_s:
        raise ValueError(f"trace {jobs.name!r} has no time span to size a cluster by")
    hours = jobs.gpu_hours_by_vc()
    mean_busy_gpus = sum(hours.values()) * 3600.0 / jobs.span_s
    nodes = math.ceil(mean_busy_gpus / (target_load * ITP_GPUS_PER_NODE))
    nodes = math.ceil(nodes / rack_size) * rack_size
    largest: defaultdict[str, int] = defaultdict(int)
    for job in jobs:
        largest[job.vc] = max(largest[job.vc], job.gpus)
    min_nodes = {vc: max(1, math.ceil(g / ITP_GPUS_PER_NODE)) for vc, g in largest.items()}
    return make_cluster(nodes, ITP_GPUS_PER_NODE, rack_size, hours, min_nodes=min_nodes)
