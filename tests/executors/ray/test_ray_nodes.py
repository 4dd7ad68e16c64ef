"""Matching Ray's nodes to the cluster file, and a cluster built from Ray's nodes.

The node records are what `ray.nodes()` returns (its field names and units), written out."""

from __future__ import annotations

from typing import Any

from pai.cluster import load_cluster
from pai.executors.base import NodeCondition
from pai.executors.ray.nodes import RayNode, cluster_from_ray, match_nodes

GIB = 1024**3


def ray_node(
    address: str, *, name: str | None = None, alive: bool = True, **resources: float
) -> RayNode:
    info: dict[str, Any] = {
        "NodeID": f"id-{address}",
        "NodeName": name or address,
        "NodeManagerAddress": address,
        "Alive": alive,
        "Resources": {"memory": 12 * GIB, "object_store_memory": 4 * GIB, **resources},
    }
    return RayNode.from_ray(info)


CLUSTER = load_cluster(
    {
        "physicalCluster": {
            "skuTypes": {"V100": {"gpu": 1, "cpu": 4, "memory": "4Gi"}},
            "cellTypes": {
                "NODE": {"childCellType": "V100", "childCellNumber": 2, "isNodeLevel": True}
            },
            "physicalCells": [
                {"cellType": "NODE", "cellAddress": "gpu1", "nodeAddress": "10.0.0.1"},
                {"cellType": "NODE", "cellAddress": "gpu2", "nodeAddress": "10.0.0.2"},
                {"cellType": "NODE", "cellAddress": "gpu3", "nodeAddress": "10.0.0.3"},
            ],
        },
        "virtualClusters": {"default": {"virtualCells": [{"cellType": "NODE", "cellNumber": 3}]}},
    }
)


def test_a_node_matches_by_address_or_by_name_and_must_be_large_enough() -> None:
    nodes = [
        ray_node("10.0.0.1", CPU=8, GPU=2),
        ray_node("192.168.5.5", name="gpu2", CPU=8, GPU=2),  # another address, same name
        ray_node("10.0.0.3", CPU=2, GPU=1),
    ]

    matches = match_nodes(CLUSTER, nodes)

    assert matches["gpu1"].state.condition is NodeCondition.ALIVE
    assert matches["gpu2"].ray_node == nodes[1]
    bad = matches["gpu3"].state
    assert bad.condition is NodeCondition.BAD
    assert bad.message == (
        "node gpu3 (10.0.0.3) is smaller than the cluster file says: it should have 2 GPUs "
        "and 8 CPUs, Ray reports 1 GPU and 2 CPUs"
    )


def test_memory_counts_what_ray_has_for_tasks_and_objects() -> None:
    small = RayNode.from_ray(
        {
            "NodeID": "x",
            "NodeManagerAddress": "10.0.0.1",
            "Alive": True,
            "Resources": {"CPU": 8, "GPU": 2, "memory": 5 * GIB, "object_store_memory": 2 * GIB},
        }
    )

    state = match_nodes(CLUSTER, [small])["gpu1"].state

    assert state.condition is NodeCondition.BAD
    assert state.message.endswith("it should have 8192 MB of memory, Ray reports 7168 MB of memory")


def test_a_dead_or_absent_node_is_gone() -> None:
    matches = match_nodes(CLUSTER, [ray_node("10.0.0.1", alive=False, CPU=8, GPU=2)])

    gone = matches["gpu1"].state
    assert (gone.condition, matches["gpu1"].ray_node) == (NodeCondition.GONE, None)
    assert gone.message == (
        "node gpu1 (10.0.0.1) is not in the Ray cluster: no live Ray node has that address or name"
    )


def test_without_a_cluster_file_the_live_nodes_that_can_run_tasks_become_the_cluster() -> None:
    nodes = [
        ray_node("10.0.0.9", name="head", CPU=0),  # started with --num-cpus 0: no tasks
        ray_node("10.0.0.1", name="gpu-a", CPU=16, GPU=4, **{"accelerator_type:A100": 1}),
        ray_node("10.0.0.2", name="cpu:b", CPU=4),
        ray_node("10.0.0.3", name="gone", alive=False, CPU=4),
    ]

    cluster = cluster_from_ray(nodes)

    described = {
        node.name: (node.address, node.sku_type, len(node.leaf_indices)) for node in cluster.nodes
    }
    assert described == {"gpu-a": ("10.0.0.1", "A100", 4), "cpu-b": ("10.0.0.2", "CPU", 4)}
    assert cluster.sku_types["A100"].memory_mb == 16 * 1024 // 4
