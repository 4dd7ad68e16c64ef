"""Private clusters: each VC alone on hardware of exactly its cells, the baseline of the sharing
anomaly (a VC's queuing delay on the shared cluster beyond what it sees alone on its share).

`private_cluster` builds one cluster file holding a private cluster per VC: every virtual cell
of the VC becomes physical cells of the same shape, in cell types renamed `<type>@<vc>`, so that
no two VCs share a chain and nothing of one VC can ever reach another's hardware. Replaying the
whole trace on it is the same as replaying each VC alone on its own cluster, in one pass.

- A VC cell above node level (a rack) becomes a physical cell with its nodes, named `<vc>-n<i>`.
- A VC cell below node level (a socket) becomes a machine of its own: a node-level cell type
  `<type>-machine@<vc>` holding one such cell, since a physical cluster is made of machines.
- VC cells of different levels in one chain (a rack and two nodes) become separate chains, so a
  group cannot span them privately as it could on the shared cluster.
- Pinned cells are left out: trace jobs never ask for them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from pai.cluster.model import Chain, ClusterConfig
from pai.sim.clusters import ClusterFile


def private_cell_type(cell_type: str, vc: str) -> str:
    """The name the VC's copy of `cell_type` gets in the private cluster."""
    return f"{cell_type}@{vc}"


def private_cluster(cluster: ClusterConfig, vcs: Iterable[str] | None = None) -> ClusterFile:
    """Private clusters of `vcs` (default: every VC) side by side in one cluster file."""
    wanted = list(cluster.virtual_clusters) if vcs is None else list(dict.fromkeys(vcs))
    unknown = [vc for vc in wanted if vc not in cluster.virtual_clusters]
    if unknown:
        raise ValueError(f"no VC named {', '.join(unknown)} in the cluster")
    cell_types: dict[str, dict[str, Any]] = {}
    physical: list[dict[str, Any]] = []
    virtual: dict[str, Any] = {}
    skus: dict[str, None] = {}
    for vc in wanted:
        names = (f"{vc}-n{i}" for i in itertools.count())
        cells = []
        for spec in cluster.virtual_clusters[vc].virtual_cells:
            chain = cluster.chains[spec.chain]
            skus[chain.sku_type] = None
            level = chain.level_of(spec.cell_type)
            top_type = _define_types(chain, level, vc, cell_types)
            top_level = max(level, chain.node_level)
            node_level = chain.node_level if level >= chain.node_level else top_level
            for _ in range(spec.number):
                cell = _physical_cell(chain, top_level, node_level, names)
                physical.append({"cellType": top_type, **cell})
            cells.append({"cellType": top_type, "cellNumber": spec.number})
        virtual[vc] = {"virtualCells": cells}
    taken = sorted(set(cell_types) & (set(cluster.cell_types) | set(cluster.sku_types)))
    if taken:
        raise ValueError(f"private cell type names clash with the cluster's: {', '.join(taken)}")
    sku_types = {
        name: {
            "gpu": cluster.sku_types[name].gpu,
            "cpu": cluster.sku_types[name].cpu,
            "memory": cluster.sku_types[name].memory_mb,
        }
        for name in skus
    }
    return {
        "physicalCluster": {
            "skuTypes": sku_types,
            "cellTypes": cell_types,
            "physicalCells": physical,
        },
        "virtualClusters": virtual,
    }


def _define_types(chain: Chain, level: int, vc: str, cell_types: dict[str, Any]) -> str:
    """Add the VC's copies of the chain's types up to `level` (plus a machine type when that is
    below node level); return the top type's name."""
    child = chain.sku_type
    for lower in range(2, level + 1):
        name = private_cell_type(chain.type_at(lower), vc)
        cell_types[name] = {
            "childCellType": child,
            "childCellNumber": chain.child_numbers[lower - 1],
            "isNodeLevel": lower == chain.node_level,
        }
        child = name
    if level >= chain.node_level:
        return child
    machine = private_cell_type(f"{chain.type_at(level)}-machine", vc)
    cell_types[machine] = {"childCellType": child, "childCellNumber": 1, "isNodeLevel": True}
    return machine


def _physical_cell(
    chain: Chain, level: int, node_level: int, names: Iterator[str]
) -> dict[str, Any]:
    if level == node_level:
        return {"cellAddress": next(names)}
    children = chain.child_numbers[level - 1]
    return {
        "cellChildren": [
            _physical_cell(chain, level - 1, node_level, names) for _ in range(children)
        ]
    }
