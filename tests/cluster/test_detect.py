"""Describing this machine as a cluster when no cluster file is given."""

from __future__ import annotations

import psutil

from pai.cluster import detect_local_cluster
from pai.cluster.detect import MachineResources, cluster_for_machine


def test_this_machine_without_gpus_runs_cpu_slots_in_the_default_vc() -> None:
    cluster = detect_local_cluster(node_name="here")
    (node,) = cluster.nodes
    cpus = psutil.cpu_count(logical=True) or 1
    assert (node.name, node.address) == ("here", "127.0.0.1")
    assert len(node.leaf_indices) == cpus
    sku = cluster.sku_types[node.sku_type]
    assert (sku.gpu, sku.cpu) == (0, 1)
    assert sku.memory_mb == psutil.virtual_memory().total // 2**20 // cpus
    (vc,) = cluster.virtual_clusters.values()
    assert vc.name == "default"
    assert [(cell.chain, cell.number) for cell in vc.virtual_cells] == [(node.chain, 1)]


def test_a_gpu_machine_gets_one_leaf_per_gpu_with_its_share_of_the_host() -> None:
    machine = MachineResources(cpus=32, memory_mb=256_000, gpu_model="A100-SXM4-40GB", gpu_count=4)
    cluster = cluster_for_machine(machine, "gpu-box")
    sku = cluster.sku_types["A100-SXM4-40GB"]
    assert (sku.gpu, sku.cpu, sku.memory_mb) == (1, 8, 64_000)
    assert cluster.nodes[0].leaf_indices == (0, 1, 2, 3)
