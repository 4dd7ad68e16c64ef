"""Describing this machine as a cluster when no cluster file is given."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
import yaml

from pai.cluster import detect_local_cluster
from pai.cluster.cdispecs import CDI_DIRS_VARIABLE
from pai.cluster.detect import (
    Machine,
    MachineResources,
    cluster_for_machine,
    cluster_for_machines,
    detect_resources,
)


def test_this_machine_without_gpus_runs_cpu_slots_in_the_default_vc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CDI_DIRS_VARIABLE, str(tmp_path))  # no CDI spec: no device
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


def test_machines_of_several_shapes_get_one_node_type_each_all_in_the_default_vc() -> None:
    v100 = MachineResources(cpus=32, memory_mb=256_000, gpu_model="V100", gpu_count=8)
    small_v100 = MachineResources(cpus=16, memory_mb=128_000, gpu_model="V100", gpu_count=4)
    cpu_box = MachineResources(cpus=4, memory_mb=8_000, gpu_model=None, gpu_count=0)
    machines = [
        Machine("g1", "10.0.0.1", v100),
        Machine("g2", "10.0.0.2", v100),
        Machine("g3", "10.0.0.3", small_v100),
        Machine("c1", "10.0.0.4", cpu_box),
    ]

    cluster = cluster_for_machines(machines, source="test")

    # Both V100 shapes give a GPU the same share of its host, so they share one SKU.
    assert set(cluster.sku_types) == {"V100", "CPU"}
    shapes = {node.name: (node.sku_type, len(node.leaf_indices)) for node in cluster.nodes}
    assert shapes == {"g1": ("V100", 8), "g2": ("V100", 8), "g3": ("V100", 4), "c1": ("CPU", 4)}
    assert {node.name: node.address for node in cluster.nodes}["g3"] == "10.0.0.3"
    (vc,) = cluster.virtual_clusters.values()
    owned = {cell.cell_type: cell.number for cell in vc.virtual_cells}
    assert owned == {"V100-8-NODE": 2, "V100-4-NODE": 1, "CPU-NODE": 1}


def test_machines_whose_gpus_get_different_shares_get_numbered_skus() -> None:
    roomy = MachineResources(cpus=64, memory_mb=512_000, gpu_model="A100", gpu_count=8)
    tight = MachineResources(cpus=16, memory_mb=128_000, gpu_model="A100", gpu_count=8)

    cluster = cluster_for_machines(
        [Machine("a", "10.0.0.1", roomy), Machine("b", "10.0.0.2", tight)], source="test"
    )

    by_node = {node.name: cluster.sku_types[node.sku_type] for node in cluster.nodes}
    assert (by_node["a"].cpu, by_node["b"].cpu) == (8, 2)
    assert by_node["a"].name != by_node["b"].name
    assert {sku.name for sku in by_node.values()} == {"A100-1", "A100-2"}


def write_spec(folder: Path, kind: str, names: list[str], suffix: str = ".yaml") -> None:
    """A CDI spec of devices `names` of `kind`, as a vendor's generator writes one."""
    devices = [
        {"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/acc{name}"}]}}
        for name in names
    ]
    spec = {"cdiVersion": "0.6.0", "kind": kind, "devices": devices}
    text = json.dumps(spec) if suffix == ".json" else yaml.safe_dump(spec)
    (folder / f"{kind.replace('/', '-')}{suffix}").write_text(text)


def test_a_machine_without_nvml_counts_its_devices_from_its_cdi_specs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_spec(tmp_path, "acc.example/npu", ["0", "1", "2", "all"])  # `all`: an alias
    write_spec(tmp_path, "amd.com/gpu", ["0", "1"], ".json")
    (tmp_path / "broken.yaml").write_text("kind: [not, a, kind]\n")
    monkeypatch.setenv(CDI_DIRS_VARIABLE, f"{tmp_path}:{tmp_path / 'absent'}")

    machine = detect_resources()
    cluster = cluster_for_machine(machine, "npu-box")

    assert (machine.device_kind, machine.gpu_count) == ("acc.example/npu", 3)
    (node,) = cluster.nodes
    sku = cluster.sku_types[node.sku_type]
    assert (node.sku_type, sku.device, sku.gpu) == ("acc-npu", "acc.example/npu", 1)
    assert node.leaf_indices == (0, 1, 2)


def test_machines_with_devices_of_several_kinds_get_a_sku_per_kind() -> None:
    amd = MachineResources(16, 64_000, "amd-gpu", 2, "amd.com/gpu")
    npu = MachineResources(16, 64_000, "acc-npu", 4, "acc.example/npu")
    nvidia = MachineResources(16, 64_000, "A100", 2)

    cluster = cluster_for_machines(
        [
            Machine("a", "10.0.0.1", amd),
            Machine("n", "10.0.0.2", npu),
            Machine("g", "10.0.0.3", nvidia),
        ],
        source="test",
    )

    kinds = {name: sku.device for name, sku in cluster.sku_types.items()}
    assert kinds == {
        "amd-gpu": "amd.com/gpu",
        "acc-npu": "acc.example/npu",
        "A100": "nvidia.com/gpu",
    }
