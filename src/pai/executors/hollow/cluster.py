"""The cluster of `pai up --engine hollow --hollow-nodes N` without a cluster file.

N identical nodes named `hollow-00001`, `hollow-00002`, ..., in racks of RACK_SIZE, addressed
as machines of a data centre are: rack r, slot s has 10.(64 + r // 256).(r % 256).(s + 1), in
10.64.0.0/10. Full racks are rack cells (a gang that fits in a rack is kept in one, as on a real
cluster); the nodes of a last, partial rack are node cells of their own. The VC `default` owns
everything.
"""

from __future__ import annotations

from typing import Any

from pai.cluster.detect import DEFAULT_VC
from pai.cluster.model import ClusterConfig
from pai.cluster.parse import load_cluster

RACK_SIZE = 20
MOST_NODES = 100_000
DEFAULT_GPUS = 8
CPUS_PER_LEAF = 8
MEMORY_GB_PER_LEAF = 64
SKU = "HOLLOW-GPU"
CPU_SKU = "HOLLOW-CPU"
NODE = "HOLLOW-NODE"
RACK = "HOLLOW-RACK"


def node_name(number: int) -> str:
    """The name of node `number` (0-based)."""
    return f"hollow-{number + 1:05d}"


def node_address(number: int) -> str:
    rack, slot = divmod(number, RACK_SIZE)
    return f"10.{64 + rack // 256}.{rack % 256}.{slot + 1}"


def hollow_cluster(
    nodes: int,
    *,
    gpus: int = DEFAULT_GPUS,
    cpus: int | None = None,
    memory_gb: int | None = None,
) -> ClusterConfig:
    """`nodes` nodes of `gpus` GPUs, `cpus` CPUs (default: CPUS_PER_LEAF per GPU, or as many
    as that of one 8-GPU node without GPUs) and `memory_gb` GiB (MEMORY_GB_PER_LEAF per leaf
    cell); see the module docstring."""
    return load_cluster(hollow_cluster_document(nodes, gpus=gpus, cpus=cpus, memory_gb=memory_gb))


def hollow_cluster_document(
    nodes: int, *, gpus: int, cpus: int | None, memory_gb: int | None
) -> dict[str, Any]:
    if not 1 <= nodes <= MOST_NODES:
        raise ValueError(f"--hollow-nodes: between 1 and {MOST_NODES} nodes, got {nodes}")
    if gpus < 0:
        raise ValueError(f"--hollow-gpus: a number of GPUs >= 0, got {gpus}")
    cpus = cpus if cpus is not None else CPUS_PER_LEAF * (gpus or DEFAULT_GPUS)
    leaves = gpus or cpus
    if cpus < leaves or cpus < 1:
        raise ValueError(f"--hollow-cpus: at least one CPU per GPU ({leaves}), got {cpus}")
    memory_gb = memory_gb if memory_gb is not None else MEMORY_GB_PER_LEAF * leaves
    if memory_gb * 1024 < leaves:
        raise ValueError(f"--hollow-memory-gb: too little for {leaves} leaf cells: {memory_gb}")
    sku = {"gpu": 1 if gpus else 0, "cpu": cpus // leaves, "memory": memory_gb * 1024 // leaves}
    racks, rest = divmod(nodes, RACK_SIZE)
    node_cell = [
        {"cellAddress": node_name(number), "nodeAddress": node_address(number)}
        for number in range(nodes)
    ]
    physical: list[dict[str, Any]] = [
        {"cellType": RACK, "cellChildren": node_cell[rack * RACK_SIZE : (rack + 1) * RACK_SIZE]}
        for rack in range(racks)
    ]
    physical += [{"cellType": NODE, **cell} for cell in node_cell[racks * RACK_SIZE :]]
    virtual = [{"cellType": RACK, "cellNumber": racks}] if racks else []
    virtual += [{"cellType": NODE, "cellNumber": rest}] if rest else []
    sku_name = SKU if gpus else CPU_SKU
    return {
        "physicalCluster": {
            "skuTypes": {sku_name: sku},
            "cellTypes": {
                NODE: {"childCellType": sku_name, "childCellNumber": leaves, "isNodeLevel": True},
                RACK: {"childCellType": NODE, "childCellNumber": RACK_SIZE},
            },
            "physicalCells": physical,
        },
        "virtualClusters": {DEFAULT_VC: {"virtualCells": virtual}},
    }
