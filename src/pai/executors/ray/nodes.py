"""Ray's nodes as PAI sees them: what each has, and which node of the cluster file it is.

A cluster-file node is the live Ray node with its `nodeAddress` (or, failing that, with its name
as Ray's node name). It is usable when Ray reports at least the GPUs, CPUs and memory that its
leaf cells add up to; otherwise it stays out of scheduling, and the reason is one sentence that
says what the cluster file expects and what Ray reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pai.cluster.detect import Machine, MachineResources, cluster_for_machines
from pai.cluster.model import ClusterConfig, NodeSpec
from pai.executors.base import NodeCondition, NodeState

MIB = 1024 * 1024
ACCELERATOR_PREFIX = "accelerator_type:"


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

    @classmethod
    def from_ray(cls, info: Mapping[str, Any]) -> RayNode:
        resources: Mapping[str, float] = info.get("Resources") or {}
        models = sorted(
            key.removeprefix(ACCELERATOR_PREFIX)
            for key in resources
            if key.startswith(ACCELERATOR_PREFIX)
        )
        memory = resources.get("memory", 0) + resources.get("object_store_memory", 0)
        return cls(
            node_id=str(info["NodeID"]),
            name=str(info.get("NodeName") or info["NodeManagerAddress"]),
            address=str(info["NodeManagerAddress"]),
            alive=bool(info["Alive"]),
            cpus=int(resources.get("CPU", 0)),
            gpus=int(resources.get("GPU", 0)),
            memory_mb=int(memory // MIB),
            gpu_model=models[0] if models else None,
        )

    def describe(self) -> str:
        return f"{_count(self.gpus, 'GPU')}, {_count(self.cpus, 'CPU')} and {self.memory_mb} MB"


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
    """The live Ray nodes as a cluster owned by the VC `default`. Nodes that offer neither CPUs
    nor GPUs (a head started with `--num-cpus 0`, to keep tasks off it) are left out."""
    machines = [
        Machine(
            _cell_address(node.name),
            node.address,
            MachineResources(
                cpus=node.cpus,
                memory_mb=node.memory_mb,
                gpu_model=(node.gpu_model or "GPU") if node.gpus else None,
                gpu_count=node.gpus,
            ),
        )
        for node in sorted(ray_nodes, key=lambda node: node.name)
        if node.alive and (node.cpus > 0 or node.gpus > 0)
    ]
    if not machines:
        raise ValueError("the Ray cluster has no live node with CPUs or GPUs to run tasks on")
    return cluster_for_machines(machines, source="Ray cluster")


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
    short = [unit for unit in wanted if reported[unit] < wanted[unit]]
    if not short:
        return NodeState(spec.name, NodeCondition.ALIVE)
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
