"""Matching Ray's nodes to the cluster file, and a cluster built from Ray's nodes.

The node records are what `ray.nodes()` returns (its field names and units), written out."""

from __future__ import annotations

from typing import Any

import yaml

from pai.cluster import load_cluster
from pai.executors.base import NodeCondition
from pai.executors.ray.nodes import (
    RayNode,
    cluster_from_ray,
    cluster_yaml_from_ray,
    match_nodes,
    unlisted_nodes,
)

GIB = 1024**3


def ray_node(
    address: str,
    *,
    name: str | None = None,
    alive: bool = True,
    memory: float = 12 * GIB,
    **resources: float,
) -> RayNode:
    info: dict[str, Any] = {
        "NodeID": f"id-{address}",
        "NodeName": name or address,
        "NodeManagerAddress": address,
        "Alive": alive,
        "Resources": {"memory": memory, "object_store_memory": 4 * GIB, **resources},
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


MB = 1024**2


def test_identical_machines_that_ray_measured_a_little_apart_are_one_node_type() -> None:
    # As Ray reported two workers started seconds apart: 10,885 MB and 10,814 MB.
    workers = [
        ray_node("10.0.0.1", name="w1", memory=10_885 * MB - 4 * GIB, CPU=4, GPU=2),
        ray_node("10.0.0.2", name="w2", memory=10_814 * MB - 4 * GIB, CPU=4, GPU=2),
    ]

    cluster = cluster_from_ray(workers)
    again = cluster_from_ray(
        [ray_node("10.0.0.1", name="w1", memory=10_500 * MB - 4 * GIB, CPU=4, GPU=2), workers[1]]
    )

    assert {node.sku_type for node in cluster.nodes} == {"GPU"}
    assert len({node.chain for node in cluster.nodes}) == 1
    sku = cluster.sku_types["GPU"]
    assert (sku.gpu, sku.cpu, sku.memory_mb) == (1, 2, 10 * 1024 // 2)  # 10 GiB, rounded down
    assert again.sku_types == cluster.sku_types  # a little less memory: the same description
    assert all(state.state.usable for state in match_nodes(cluster, workers).values())


def test_machines_of_another_gpu_count_or_cpu_count_are_another_node_type() -> None:
    nodes = [
        ray_node("10.0.0.1", name="a", CPU=4, GPU=2),
        ray_node("10.0.0.2", name="b", CPU=8, GPU=2),
        ray_node("10.0.0.3", name="c", CPU=4, GPU=4),
    ]

    cluster = cluster_from_ray(nodes)

    assert len({node.chain for node in cluster.nodes}) == 3


def test_a_node_with_a_few_percent_less_memory_is_used_with_a_warning() -> None:
    declared = 8 * GIB  # the cluster file's two leaves of 4 GiB
    slightly = ray_node("10.0.0.1", memory=declared * 0.97 - 4 * GIB, CPU=8, GPU=2)
    much = ray_node("10.0.0.2", memory=declared * 0.90 - 4 * GIB, CPU=8, GPU=2)
    fewer_gpus = ray_node("10.0.0.3", CPU=8, GPU=1)

    matches = match_nodes(CLUSTER, [slightly, much, fewer_gpus])

    warned = matches["gpu1"].state
    assert warned.condition is NodeCondition.ALIVE and warned.usable
    assert warned.message.startswith(
        f"node gpu1 (10.0.0.1) reports {slightly.memory_mb} MB of memory, a little less than "
        "the 8192 MB the cluster file says (within 5%"
    )
    assert matches["gpu2"].state.condition is NodeCondition.BAD
    assert "it should have 8192 MB of memory" in matches["gpu2"].state.message
    assert matches["gpu3"].state.condition is NodeCondition.BAD


def test_a_node_that_joins_later_is_named_and_joins_its_type_at_the_next_start() -> None:
    first = [ray_node("10.0.0.1", name="w1", CPU=4, GPU=2)]
    cluster = cluster_from_ray(first)
    joined = ray_node("10.0.0.2", name="w2", memory=11 * GIB, CPU=4, GPU=2)

    assert unlisted_nodes(cluster, [*first, joined]) == [joined]
    restarted = cluster_from_ray([*first, joined])
    assert [node.name for node in restarted.nodes] == ["w1", "w2"]
    assert len({node.chain for node in restarted.nodes}) == 1
    assert unlisted_nodes(restarted, [*first, joined]) == []


def test_the_described_cluster_is_a_cluster_file_to_start_from() -> None:
    nodes = [ray_node("10.0.0.1", name="w1", CPU=4, GPU=2)]

    text = cluster_yaml_from_ray(nodes)

    assert text.startswith("# PAI's cluster, described from the live Ray nodes")
    assert load_cluster(yaml.safe_load(text)) == cluster_from_ray(nodes)


def test_rays_accelerator_resources_become_device_kinds() -> None:
    nodes = [
        ray_node("10.0.0.1", name="ascend", CPU=8, NPU=8, **{"accelerator_type:Ascend910B": 1}),
        ray_node("10.0.0.2", name="gaudi", CPU=8, HPU=4),
        ray_node("10.0.0.3", name="trn", CPU=8, neuron_cores=32),
        ray_node(
            "10.0.0.4", name="mi300", CPU=8, GPU=2, **{"accelerator_type:AMD-Instinct-MI300X": 1}
        ),
        ray_node("10.0.0.5", name="h100", CPU=8, GPU=2, **{"accelerator_type:H100": 1}),
        # A kind Ray has no name for, declared as a resource named after it.
        ray_node("10.0.0.6", name="fpga", CPU=8, **{"acc.example/fpga": 2}),
    ]

    cluster = cluster_from_ray(nodes)

    kinds = {
        node.name: (cluster.sku_types[node.sku_type].device, len(node.leaf_indices))
        for node in cluster.nodes
    }
    assert kinds == {
        "ascend": ("huawei.com/npu", 8),
        "gaudi": ("habana.ai/gaudi", 4),
        "trn": ("aws.amazon.com/neuroncore", 32),
        "mi300": ("amd.com/gpu", 2),
        "h100": ("nvidia.com/gpu", 2),
        "fpga": ("acc.example/fpga", 2),
    }
    assert nodes[1].describe() == "4 x habana.ai/gaudi, 8 CPUs and 16384 MB"
