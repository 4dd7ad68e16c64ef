"""Describe machines as a cluster, so `pai up` works without writing a cluster file: this
machine alone, or the nodes an engine (Ray) reports.

GPUs of this machine come from NVML when the optional `pynvml` package and a driver are present;
CPUs and memory from psutil. The single VC `default` owns every node. Without GPUs a node's leaf
cells are CPU slots (one CPU and its share of memory each), so CPU jobs still run.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from pai.cluster.model import ClusterConfig
from pai.cluster.parse import load_cluster

DEFAULT_VC = "default"
CPU_SKU = "CPU"


@dataclass(frozen=True)
class MachineResources:
    cpus: int
    memory_mb: int
    gpu_model: str | None  # None: no GPU
    gpu_count: int


def detect_local_cluster(node_name: str | None = None) -> ClusterConfig:
    """This machine as a cluster of one node at 127.0.0.1 owned by the VC `default`."""
    return cluster_for_machine(detect_resources(), node_name or _node_name())


def detect_resources() -> MachineResources:
    cpus = psutil.cpu_count(logical=True) or 1
    memory_mb = psutil.virtual_memory().total // 2**20
    model, count = _nvml_gpus()
    return MachineResources(cpus, memory_mb, model, count)


def cluster_for_machine(machine: MachineResources, node_name: str) -> ClusterConfig:
    """The cluster description of one machine (pure, so both branches are testable)."""
    return cluster_for_machines(
        [Machine(node_name, "127.0.0.1", machine)], source="detected local machine"
    )


@dataclass(frozen=True)
class Machine:
    """A machine to describe as a node: its name, the address tasks reach it at, what it has."""

    name: str
    address: str
    resources: MachineResources


def cluster_for_machines(machines: Sequence[Machine], *, source: str) -> ClusterConfig:
    """The machines as a cluster whose one VC `default` owns every node (see
    `cluster_document`)."""
    return load_cluster(cluster_document(machines), source=source)


def cluster_document(machines: Sequence[Machine]) -> dict[str, Any]:
    """The cluster file, as data, of the machines with one VC `default` owning every node.

    Each distinct node shape (its leaf cell and how many it has) becomes one node-level cell
    type. A leaf cell is a GPU with its share of the node's CPUs and memory, or, on a machine
    without GPUs, one CPU with its share of memory, so CPU jobs still run.
    """
    shapes = {machine.name: _shape(machine.resources) for machine in machines}
    sku_names = _sku_names(sorted({sku for sku, _ in shapes.values()}))
    node_types = _node_type_names(sorted(set(shapes.values())), sku_names)
    counts = Counter(node_types[shape] for shape in shapes.values())
    return {
        "physicalCluster": {
            "skuTypes": {name: dict(sku.spec) for sku, name in sku_names.items()},
            "cellTypes": {
                name: {
                    "childCellType": sku_names[sku],
                    "childCellNumber": leaves,
                    "isNodeLevel": True,
                }
                for (sku, leaves), name in node_types.items()
            },
            "physicalCells": [
                {
                    "cellType": node_types[shapes[machine.name]],
                    "cellAddress": machine.name,
                    "nodeAddress": machine.address,
                }
                for machine in machines
            ],
        },
        "virtualClusters": {
            DEFAULT_VC: {
                "virtualCells": [
                    {"cellType": name, "cellNumber": number}
                    for name, number in sorted(counts.items())
                ]
            }
        },
    }


@dataclass(frozen=True, order=True)
class _Sku:
    model: str
    spec: tuple[tuple[str, int], ...]  # gpu, cpu and memory (MB) of one leaf cell


def _shape(machine: MachineResources) -> tuple[_Sku, int]:
    """(leaf cell, how many the machine has)."""
    if machine.gpu_model is not None and machine.gpu_count > 0:
        leaves = machine.gpu_count
        spec = {
            "gpu": 1,
            "cpu": max(1, machine.cpus // leaves),
            "memory": machine.memory_mb // leaves,
        }
        return _Sku(machine.gpu_model, tuple(spec.items())), leaves
    leaves = max(1, machine.cpus)
    spec = {"gpu": 0, "cpu": 1, "memory": machine.memory_mb // leaves}
    return _Sku(CPU_SKU, tuple(spec.items())), leaves


def _sku_names(skus: Sequence[_Sku]) -> dict[_Sku, str]:
    """A model's name, numbered when machines with that model differ in their share per leaf."""
    per_model = Counter(sku.model for sku in skus)
    seen: Counter[str] = Counter()
    names = {}
    for sku in skus:
        seen[sku.model] += 1
        names[sku] = sku.model if per_model[sku.model] == 1 else f"{sku.model}-{seen[sku.model]}"
    return names


def _node_type_names(
    shapes: Sequence[tuple[_Sku, int]], sku_names: dict[_Sku, str]
) -> dict[tuple[_Sku, int], str]:
    per_sku = Counter(sku for sku, _ in shapes)
    return {
        (sku, leaves): (
            f"{sku_names[sku]}-NODE" if per_sku[sku] == 1 else f"{sku_names[sku]}-{leaves}-NODE"
        )
        for sku, leaves in shapes
    }


def _node_name() -> str:
    name = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()).strip("-.")
    return name or "local"


def _nvml_gpus() -> tuple[str | None, int]:
    """(model, count) of the NVIDIA GPUs, or (None, 0) without pynvml, a driver or any GPU."""
    try:
        import pynvml
    except ImportError:
        return None, 0
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError when there is no driver: same as no GPU
        return None, 0
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        if count == 0:
            return None, 0
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        if isinstance(name, bytes):
            name = name.decode()
        model = re.sub(r"[^A-Za-z0-9]+", "-", str(name).removeprefix("NVIDIA ")).strip("-")
        return model or "GPU", count
    finally:
        pynvml.nvmlShutdown()
