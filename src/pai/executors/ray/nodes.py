"""Ray's nodes as PAI sees them: what each has, and which node of the cluster file it is.

A cluster-file node is the live Ray node with its `nodeAddress` (or, failing that, with its name
as Ray's node name). It is usable when Ray reports at least the GPUs and CPUs that its leaf
cells add up to, and about the memory: Ray measures a node's memory as what is free when the
node starts, so the same machine reports a little more or less from one start to the next. Up to
MEMORY_TOLERANCE less is accepted, with a warning that says so; more missing, or fewer GPUs or
CPUs, keeps the node out of scheduling, and the reason is one sentence that says what the
cluster file expects and what Ray reports.

Without a cluster file, PAI describes the live Ray nodes (`cluster_from_ray`): machines with the
same GPU model, GPU count and CPU count are one node type, whose memory is the smallest any of
them reports, rounded down to a whole GiB. Identical machines started moments apart are thus
one SKU, and a job may span them. A node that joins after PAI started is not in that
description: the control plane names it in its log, and the next `pai up` adds it (to the type
of its shape, if one exists).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pai.cluster.detect import Machine, MachineResources, cluster_document, sku_model_of
from pai.cluster.devices import DEFAULT_DEVICE_KIND, KIND_PATTERN
from pai.cluster.model import ClusterConfig, NodeSpec
from pai.cluster.parse import load_cluster
from pai.executors.base import NodeCondition, NodeState

MIB = 1024 * 1024
GIB_MB = 1024
MEMORY_TOLERANCE = 0.05
"""How much less memory than the cluster file declares a node may report and still be used."""
ACCELERATOR_PREFIX = "accelerator_type:"
RAY_ACCELERATOR_KINDS = {
    "NPU": "huawei.com/npu",  # Ascend
    "HPU": "habana.ai/gaudi",  # Intel Gaudi
    "neuron_cores": "aws.amazon.com/neuroncore",  # AWS Trainium and Inferentia
    "TPU": "google.com/tpu",
}
"""Ray's own accelerator resources other than `GPU`, and the device kind each one counts."""
RAY_GPU_VENDORS = {"AMD-": "amd.com/gpu", "Intel-GPU": "intel.com/gpu"}
"""Ray counts AMD's and Intel's GPUs as `GPU` too; their accelerator type tells them apart."""


@dataclass(frozen=True)
class RayNode:
    """One node of the Ray cluster, from `ray.nodes()`."""

    node_id: str
    name: str
    address: str
    alive: bool
    cpus: int
    gpus: int
    memory_mb: int  # Ray's task memory and object store together: what the machine offers
    gpu_model: str | None
    device_kind: str = DEFAULT_DEVICE_KIND
    """The kind of the node's `gpus` devices (`RAY_ACCELERATOR_KINDS`, `RAY_GPU_VENDORS`)."""

    @classmethod
    def from_ray(cls, info: Mapping[str, Any]) -> RayNode:
        resources: Mapping[str, float] = info.get("Resources") or {}
        models = sorted(
            key.removeprefix(ACCELERATOR_PREFIX)
            for key in resources
            if key.startswith(ACCELERATOR_PREFIX)
        )
        memory = resources.get("memory", 0) + resources.get("object_store_memory", 0)
        model = models[0] if models else None
        kind, count = _accelerators(resources, model)
        return cls(
            node_id=str(info["NodeID"]),
            name=str(info.get("NodeName") or info["NodeManagerAddress"]),
            address=str(info["NodeManagerAddress"]),
            alive=bool(info["Alive"]),
            cpus=int(resources.get("CPU", 0)),
            gpus=count,
            memory_mb=int(memory // MIB),
            gpu_model=model,
            device_kind=kind,
        )

    def describe(self) -> str:
        devices = (
            _count(self.gpus, "GPU")
            if self.device_kind == DEFAULT_DEVICE_KIND
            else f"{self.gpus} x {self.device_kind}"
        )
        return f"{devices}, {_count(self.cpus, 'CPU')} and {self.memory_mb} MB"


def _accelerators(resources: Mapping[str, float], model: str | None) -> tuple[str, int]:
    """The kind of the node's devices and how many: its GPUs (NVIDIA's unless the accelerator
    type names AMD or Intel), else the first of Ray's other accelerator resources it has, else a
    resource named after a CDI kind (`ray start --resources '{"acc.example/npu": 2}'`): how a
    node declares devices of a kind Ray has no name for."""
    if resources.get("GPU", 0) < 1:
        named = [name for name in RAY_ACCELERATOR_KINDS if resources.get(name, 0) >= 1]
        if named:
            return RAY_ACCELERATOR_KINDS[named[0]], int(resources[named[0]])
        kinds = sorted(
            name for name, count in resources.items() if count >= 1 and KIND_PATTERN.match(name)
        )
        if kinds:
            return kinds[0], int(resources[kinds[0]])
    vendors = [kind for prefix, kind in RAY_GPU_VENDORS.items() if (model or "").startswith(prefix)]
    return (vendors[0] if vendors else DEFAULT_DEVICE_KIND), int(resources.get("GPU", 0))


@dataclass(frozen=True)
class NodeMatch:
    """A cluster-file node and the live Ray node that is it (None when Ray has none)."""

    state: NodeState
    ray_node: RayNode | None


def match_nodes(cluster: ClusterConfig, ray_nodes: Sequence[RayNode]) -> dict[str, NodeMatch]:
    """Every cluster-file node, by name, with its Ray node and whether PAI may use it."""
    live = [node for node in ray_nodes if node.alive]
    by_address = {node.address: node for node in live}
    by_name = {node.name: node for node in live}
    matches = {}
    for spec in cluster.nodes:
        found = by_address.get(spec.address) or by_name.get(spec.name)
        matches[spec.name] = NodeMatch(_state(cluster, spec, found), found)
    return matches


def cluster_from_ray(ray_nodes: Sequence[RayNode]) -> ClusterConfig:
    """The live Ray nodes as a cluster owned by the VC `default` (see the module docstring)."""
    return load_cluster(cluster_file_from_ray(ray_nodes), source="Ray cluster")


def cluster_file_from_ray(ray_nodes: Sequence[RayNode]) -> dict[str, Any]:
    """The cluster file, as data, that describes the live Ray nodes: one node type per GPU
    model, GPU count and CPU count, with the smallest memory of its machines in whole GiB.
    Nodes that offer neither CPUs nor GPUs (a head started with `--num-cpus 0`, to keep tasks
    off it) are left out."""
    usable = sorted(filter(_takes_tasks, ray_nodes), key=lambda node: node.name)
    if not usable:
        raise ValueError("the Ray cluster has no live node with CPUs or GPUs to run tasks on")
    memory: dict[tuple[str | None, str, int, int], int] = {}
    for node in usable:
        shape = _shape(node)
        memory[shape] = min(memory.get(shape, node.memory_mb), node.memory_mb)
    machines = [
        Machine(
            _cell_address(node.name),
            node.address,
            MachineResources(
                cpus=node.cpus,
                memory_mb=_whole_gib(memory[_shape(node)]),
                gpu_model=(node.gpu_model or sku_model_of(node.device_kind)) if node.gpus else None,
                gpu_count=node.gpus,
                device_kind=node.device_kind,
            ),
        )
        for node in usable
    ]
    return cluster_document(machines)


def cluster_yaml_from_ray(ray_nodes: Sequence[RayNode]) -> str:
    """`cluster_file_from_ray` as a cluster file to start from: edit it (VCs, memory), then
    `pai up --cluster FILE`."""
    header = (
        "# PAI's cluster, described from the live Ray nodes: machines with the same GPU model,\n"
        "# GPU count and CPU count are one node type, with the smallest memory among them\n"
        "# (whole GiB, in MB). Edit it, then: pai up --engine ray --cluster THIS_FILE\n"
    )
    return header + yaml.safe_dump(cluster_file_from_ray(ray_nodes), sort_keys=False)


def unlisted_nodes(cluster: ClusterConfig, ray_nodes: Sequence[RayNode]) -> list[RayNode]:
    """Live Ray nodes with CPUs or GPUs that are no node of the cluster: joined after PAI
    started without a cluster file, or left out of the cluster file."""
    listed = {spec.address for spec in cluster.nodes} | {spec.name for spec in cluster.nodes}
    return [
        node
        for node in ray_nodes
        if _takes_tasks(node) and node.address not in listed and node.name not in listed
    ]


def _takes_tasks(node: RayNode) -> bool:
    """A live node with CPUs or GPUs (not a head started with `--num-cpus 0`)."""
    return node.alive and (node.cpus > 0 or node.gpus > 0)


def _shape(node: RayNode) -> tuple[str | None, str, int, int]:
    """What makes machines the same node type: device model and kind, their count, and the
    CPU count."""
    return (node.gpu_model if node.gpus else None, node.device_kind, node.gpus, node.cpus)


def _whole_gib(memory_mb: int) -> int:
    """Memory rounded down to a whole GiB, so that small differences in Ray's measurement do
    not make the next start describe the machine differently (kept as is under 1 GiB)."""
    return memory_mb - memory_mb % GIB_MB if memory_mb >= GIB_MB else memory_mb


def _state(cluster: ClusterConfig, spec: NodeSpec, found: RayNode | None) -> NodeState:
    where = f"node {spec.name} ({spec.address})"
    if found is None:
        return NodeState(
            spec.name,
            NodeCondition.GONE,
            f"{where} is not in the Ray cluster: no live Ray node has that address or name",
        )
    sku = cluster.sku_types[spec.sku_type]
    leaves = len(spec.leaf_indices)
    wanted = {"GPU": leaves * sku.gpu, "CPU": leaves * sku.cpu, "MB": leaves * sku.memory_mb}
    reported = {"GPU": found.gpus, "CPU": found.cpus, "MB": found.memory_mb}
    short = [unit for unit in ("GPU", "CPU") if reported[unit] < wanted[unit]]
    memory_short = reported["MB"] < wanted["MB"]
    if reported["MB"] < wanted["MB"] * (1 - MEMORY_TOLERANCE):
        short.append("MB")
    if not short:
        if not memory_short:
            return NodeState(spec.name, NodeCondition.ALIVE)
        return NodeState(
            spec.name,
            NodeCondition.ALIVE,
            f"{where} reports {reported['MB']} MB of memory, a little less than the "
            f"{wanted['MB']} MB the cluster file says (within {MEMORY_TOLERANCE:.0%}, as Ray's "
            "measurement at the node's start varies): used as declared",
        )
    expected = " and ".join(_amount(wanted[unit], unit) for unit in short)
    actual = " and ".join(_amount(reported[unit], unit) for unit in short)
    return NodeState(
        spec.name,
        NodeCondition.BAD,
        f"{where} is smaller than the cluster file says: it should have {expected}, "
        f"Ray reports {actual}",
    )


def _amount(number: int, unit: str) -> str:
    return f"{number} MB of memory" if unit == "MB" else _count(number, unit)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _cell_address(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", name).strip("-.") or "node"
