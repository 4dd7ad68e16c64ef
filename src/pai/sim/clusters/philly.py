"""The Philly cluster for replaying the Philly trace: its machines, racks and VC quotas.

Machines come from Philly's ``cluster_machine_list`` (231 nodes of 8 GPUs with 24 GB and 321
nodes of 2 GPUs with 12 GB: 2,490 GPUs, two chains). VC sizes come from the Helios authors'
reconstruction (11 VCs, quotas in 8-GPU nodes adding up to 352 nodes, more than the machine list
holds); the per-VC trace has a twelfth VC that list lacks. The mapping:

1. Each listed VC keeps its share of the listed nodes; a VC of the trace that is not listed gets
   its share of the trace's GPU-hours (and the listed VCs share the rest).
2. Shares are applied to the real 2,490 GPUs and turned into whole nodes of each chain by
   `node_quotas` (by default following each VC's job-size mix), so that every quota is a whole
   cell and the whole cluster is assigned.

Racks: the machine list has no rack data. 8-GPU nodes are grouped in racks of 7 (231 = 33 x 7;
HiveD needs every rack of a chain to be the same size, and a 7-node rack is the smallest even
split whose 56 GPUs hold the trace's largest job, 48 GPUs). The 2-GPU nodes form a chain of bare
nodes: jobs that fit them are 1-2 GPU jobs, which never span machines, so a rack level would
give them nothing.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path

from pai.sim.clusters.quotas import PoolSplit, node_quotas
from pai.sim.clusters.topology import ClusterFile, NodePool, build_cluster
from pai.sim.traces import Trace, load_philly_vc
from pai.sim.traces.locations import PHILLY_MACHINE_LIST, PHILLY_VC_QUOTAS, shipped_file
from pai.sim.traces.reading import iter_csv_rows

PHILLY_RACK_SIZE = 7
"""Nodes per rack in the 8-GPU chain (see the module docstring for why)."""


def _natural_key(name: str) -> tuple[object, ...]:
    """Sort key that orders m2 before m10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def read_machine_list(
    path: str | Path | None = None, *, rack_sizes: Mapping[int, int | None] | None = None
) -> list[NodePool]:
    """Node pools from a Philly machine list (the shipped one by default), one per node shape.

    A pool's GPU type is named after the GPU memory (``GPU-24GB``), with the GPU count appended
    when two shapes share a memory size. `rack_sizes` maps GPUs per node to nodes per rack
    (default: racks of `PHILLY_RACK_SIZE` for 8-GPU nodes, bare nodes otherwise). Machines
    without GPUs are left out.
    """
    source = Path(path) if path is not None else shipped_file(PHILLY_MACHINE_LIST)
    racks = {8: PHILLY_RACK_SIZE} if rack_sizes is None else dict(rack_sizes)
    shapes: defaultdict[tuple[int, str], list[str]] = defaultdict(list)
    for row in iter_csv_rows(source, ("machineId", "number of GPUs"), ("single GPU mem",)):
        gpus = row.integer("number of GPUs", minimum=0)
        if gpus:
            shapes[gpus, row.optional_text("single GPU mem") or ""].append(row.text("machineId"))
    memory_users = Counter(memory for _, memory in shapes)
    pools = []
    for (gpus, memory), names in sorted(shapes.items(), reverse=True):
        gpu_type = f"GPU-{memory}" if memory else "GPU"
        if memory_users[memory] > 1:
            gpu_type += f"-X{gpus}"
        pools.append(
            NodePool(gpu_type, gpus, tuple(sorted(names, key=_natural_key)), racks.get(gpus))
        )
    return pools


def read_vc_node_quotas(path: str | Path | None = None) -> dict[str, int]:
    """VC name -> quota in nodes, from a ``vc,node num`` file (by default the shipped one)."""
    source = Path(path) if path is not None else shipped_file(PHILLY_VC_QUOTAS)
    quotas: dict[str, int] = {}
    for row in iter_csv_rows(source, ("vc", "node num")):
        vc = row.text("vc")
        if vc in quotas:
            raise row.error(f"VC {vc} is listed twice")
        quotas[vc] = row.integer("node num", minimum=0)
    return quotas


def vc_shares(trace: Trace, listed_nodes: Mapping[str, int]) -> dict[str, float]:
    """Each VC's fraction of the cluster: listed VCs by their node quotas, the trace's unlisted
    VCs by their fraction of the trace's GPU-hours (taken from the listed VCs' total)."""
    hours = trace.gpu_hours_by_vc()
    total_hours = sum(hours.values())
    unlisted = {vc: h / total_hours for vc, h in hours.items() if vc not in listed_nodes}
    listed_total = sum(listed_nodes.values())
    if not listed_total:
        raise ValueError("the VC quota list gives no nodes to any VC")
    remaining = 1.0 - sum(unlisted.values())
    shares = {vc: remaining * n / listed_total for vc, n in listed_nodes.items()}
    return dict(sorted({**shares, **unlisted}.items()))


def philly_cluster(
    trace: Trace | None = None,
    *,
    machine_list: str | Path | None = None,
    vc_quota_list: str | Path | None = None,
    split: PoolSplit = "demand",
    rack_size: int = PHILLY_RACK_SIZE,
) -> ClusterFile:
    """The Philly cluster file (shipped machine list, VC list and per-VC trace by default)."""
    pools = read_machine_list(machine_list, rack_sizes={8: rack_size})
    jobs = trace if trace is not None else load_philly_vc()
    shares = vc_shares(jobs, read_vc_node_quotas(vc_quota_list))
    return build_cluster(pools, node_quotas(pools, shares, jobs, split))
