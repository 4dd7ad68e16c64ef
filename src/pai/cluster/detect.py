"""Describe this machine as a one-node cluster, so `pai up` works without writing a cluster file.

GPUs come from NVML when the optional `pynvml` package and a driver are present; CPUs and memory
from psutil. The single VC `default` owns the whole node. Without GPUs the node's leaf cells are
CPU slots (one CPU and its share of memory each), so CPU jobs still run.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

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
    if machine.gpu_model is not None and machine.gpu_count > 0:
        sku = machine.gpu_model
        leaves = machine.gpu_count
        sku_spec = {
            "gpu": 1,
            "cpu": max(1, machine.cpus // leaves),
            "memory": machine.memory_mb // leaves,
        }
    else:
        sku = CPU_SKU
        leaves = machine.cpus
        sku_spec = {"gpu": 0, "cpu": 1, "memory": machine.memory_mb // leaves}
    node_type = f"{sku}-NODE"
    return load_cluster(
        {
            "physicalCluster": {
                "skuTypes": {sku: sku_spec},
                "cellTypes": {
                    node_type: {
                        "childCellType": sku,
                        "childCellNumber": leaves,
                        "isNodeLevel": True,
                    }
                },
                "physicalCells": [
                    {"cellType": node_type, "cellAddress": node_name, "nodeAddress": "127.0.0.1"}
                ],
            },
            "virtualClusters": {
                DEFAULT_VC: {"virtualCells": [{"cellType": node_type, "cellNumber": 1}]}
            },
        },
        source="detected local machine",
    )


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
