"""Describe machines as a cluster, so `pai up` works without writing a cluster file: this
machine alone, or the nodes an engine (Ray) reports.

NVIDIA GPUs of this machine come from NVML when the optional `pynvml` package and a driver are
present; other devices from the node's CDI specs (`pai.cluster.cdispecs`: every kind a spec names
devices 0, 1, ... of, so an AMD GPU, an NPU or a kind PAI has no code for is counted alike); CPUs
and memory from psutil. A node is of one kind (HiveD gives a node one leaf type): NVIDIA's GPUs
when NVML finds some, else the kind the specs declare most devices of. The single VC `default`
owns every node. Without devices a node's leaf cells are CPU slots (one CPU and its share of
memory each), so CPU jobs still run.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pai.cluster.cdispecs import numbered_devices
from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.cluster.model import ClusterConfig
from pai.cluster.parse import load_cluster

DEFAULT_VC = "default"
CPU_SKU = "CPU"


@dataclass(frozen=True)
class MachineResources:
    cpus: int
    memory_mb: int
    gpu_model: str | None  # None: no device
    gpu_count: int
    device_kind: str = DEFAULT_DEVICE_KIND
    """The CDI kind of the `gpu_count` devices."""


def detect_local_cluster(node_name: str | None = None) -> ClusterConfig:
    """This machine as a cluster of one node at 127.0.0.1 owned by the VC `default`."""
    return cluster_for_machine(detect_resources(), node_name or _node_name())


def detect_resources(cdi_dirs: Sequence[Path] | None = None) -> MachineResources:
    cpus = psutil.cpu_count(logical=True) or 1
    memory_mb = psutil.virtual_memory().total // 2**20
    model, count = _nvml_gpus()
    if count:
        return MachineResources(cpus, memory_mb, model, count)
    kind, count = _cdi_devices(cdi_dirs)
    if kind is None:
        return MachineResources(cpus, memory_mb, None, 0)
    return MachineResources(cpus, memory_mb, sku_model_of(kind), count, kind)


def sku_model_of(kind: str) -> str:
    """The SKU name of devices of `kind` whose model nothing tells: `GPU` for NVIDIA's, else
    the vendor's first label and the class (`amd-gpu`, `acc-npu`)."""
    if kind == DEFAULT_DEVICE_KIND:
        return "GPU"
    vendor, _, device_class = kind.partition("/")
    return re.sub(r"[^A-Za-z0-9]+", "-", f"{vendor.split('.')[0]}-{device_class}").strip("-")


def _cdi_devices(cdi_dirs: Sequence[Path] | None) -> tuple[str | None, int]:
    """The kind the node's CDI specs declare most devices of (ties: by name), and how many."""
    per_kind = {kind: len(devices) for kind, devices in numbered_devices(cdi_dirs).items()}
    if not per_kind:
        return None, 0
    kind = min(per_kind, key=lambda name: (-per_kind[name], name))
    return kind, per_kind[kind]


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
    spec: tuple[tuple[str, int | str], ...]  # gpu, cpu, memory (MB) and device of one leaf


def _shape(machine: MachineResources) -> tuple[_Sku, int]:
    """(leaf cell, how many the machine has)."""
    if machine.gpu_model is not None and machine.gpu_count > 0:
        leaves = machine.gpu_count
        spec: dict[str, int | str] = {
            "gpu": 1,
            "cpu": max(1, machine.cpus // leaves),
            "memory": machine.memory_mb // leaves,
        }
        if machine.device_kind != DEFAULT_DEVICE_KIND:
            spec["device"] = machine.device_kind
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
