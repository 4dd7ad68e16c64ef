"""Wait reasons a user can act on: one plain sentence, plus the numbers behind it."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from pai.cluster.model import SkuType
from pai.scheduler.gpushare import PodAsk
from pai.scheduler.types import GPU_MILLI, PodRequest, WaitKind, WaitReason

MAX_LISTED_GROUPS = 5  # named in the message
MAX_DETAILED_GROUPS = 50  # listed in the details


def amount(sku: SkuType, leaves: int) -> int:
    """Leaves as the unit users think in: GPUs for GPU SKUs, CPUs otherwise."""
    return leaves * (sku.gpu if sku.gpu > 0 else sku.cpu)


def vc_quota(
    owner: str,
    sku: SkuType,
    total: int,
    used_by_group: Mapping[str, int],
    needed: int,
    free: int,
) -> WaitReason:
    """`used_by_group`: leaves of every group using the VC; the largest are named (ties by name)."""
    noun = sku.unit_noun
    used = sum(used_by_group.values())
    largest = heapq.nlargest(MAX_DETAILED_GROUPS, used_by_group.values())
    threshold = largest[-1] if largest else 0
    listed = sorted(
        ((name, count) for name, count in used_by_group.items() if count >= threshold),
        key=lambda item: (-item[1], item[0]),
    )[:MAX_DETAILED_GROUPS]
    names = ", ".join(f"{name} ({amount(sku, n)})" for name, n in listed[:MAX_LISTED_GROUPS])
    if len(used_by_group) > MAX_LISTED_GROUPS:
        names += f" and {len(used_by_group) - MAX_LISTED_GROUPS} more"
    by = f" by {names}" if names else ""
    message = (
        f"{owner} has {amount(sku, used)} of {amount(sku, total)} {noun} in use{by}; "
        f"this job needs {amount(sku, needed)} and only {amount(sku, free)} are free "
        "(none it may preempt)."
    )
    return WaitReason(
        WaitKind.VC_QUOTA,
        message,
        {
            "owner": owner,
            "total": amount(sku, total),
            "used": amount(sku, used),
            "free": amount(sku, free),
            "needed": amount(sku, needed),
            "groups": {name: amount(sku, n) for name, n in listed},
            "group_count": len(used_by_group),
        },
    )


def topology(
    owner: str, sku: SkuType, sizes: Sequence[int], node_size: int, free: int, largest: int
) -> WaitReason:
    noun = sku.unit_noun
    unit = sku.unit
    distinct = sorted(set(sizes))
    if distinct == [node_size]:
        count = len(sizes)
        wanted = (
            f"a whole {amount(sku, node_size)}-{unit} node"
            if count == 1
            else f"{count} whole {amount(sku, node_size)}-{unit} nodes"
        )
    elif len(distinct) == 1:
        wanted = f"{len(sizes)} x {amount(sku, distinct[0])} {noun}, each task on one node"
        if len(sizes) == 1:
            wanted = f"{amount(sku, distinct[0])} {noun} on one node"
    else:
        listed = ", ".join(str(amount(sku, size)) for size in sorted(sizes))
        wanted = f"tasks of {listed} {noun}, each task on one node"
    message = (
        f"needs {wanted}; the {amount(sku, free)} free {noun} of {owner} are split across "
        f"nodes (at most {amount(sku, largest)} free on one node)."
    )
    return WaitReason(
        WaitKind.TOPOLOGY,
        message,
        {
            "owner": owner,
            "task_sizes": [amount(sku, size) for size in sizes],
            "free": amount(sku, free),
            "largest_free_on_one_node": amount(sku, largest),
        },
    )


def bad_nodes(owner: str, nodes: Sequence[str]) -> WaitReason:
    listed = ", ".join(nodes) if nodes else "unknown"
    message = (
        f"the only cells of {owner} that would fit are on unhealthy nodes ({listed}); "
        "the job waits until they recover or other cells free up."
    )
    return WaitReason(WaitKind.BAD_NODES, message, {"owner": owner, "nodes": list(nodes)})


def opportunistic(sku: SkuType, total: int, idle: int, needed: int, largest: int) -> WaitReason:
    noun = sku.unit_noun
    if idle >= needed:
        message = (
            f"no room for this opportunistic job: {amount(sku, idle)} idle {sku.name} {noun} "
            f"are split across nodes (at most {amount(sku, largest)} idle on one node)."
        )
    else:
        message = (
            f"no room for this opportunistic job: {amount(sku, idle)} of {amount(sku, total)} "
            f"{sku.name} {noun} are idle and it needs {amount(sku, needed)}."
        )
    return WaitReason(
        WaitKind.OPPORTUNISTIC_CAPACITY,
        message,
        {
            "sku_type": sku.name,
            "total": amount(sku, total),
            "idle": amount(sku, idle),
            "needed": amount(sku, needed),
            "largest_idle_on_one_node": amount(sku, largest),
        },
    )


def unschedulable(message: str) -> WaitReason:
    return WaitReason(WaitKind.UNSCHEDULABLE, message[0].upper() + message[1:] + ".", {})


def no_share(
    owner: str, pods: Sequence[PodRequest], asks: Sequence[PodAsk], gpus: int, free_milli: int
) -> WaitReason:
    """A group of tasks sharing GPUs found no GPU (with the node's CPU and memory) for them."""
    needed = sum(ask.milli for ask in asks)
    wanted = "; ".join(
        f"{pod.role} {pod.index}: {describe_ask(ask)}" for pod, ask in zip(pods, asks, strict=True)
    )
    if free_milli < needed:
        kind = WaitKind.OPPORTUNISTIC_CAPACITY if owner == "the cluster" else WaitKind.VC_QUOTA
        message = (
            f"{owner} has {free_milli / GPU_MILLI:g} of {_gpus(gpus)} free to share and the job "
            f"needs {needed / GPU_MILLI:g} ({wanted})."
        )
    else:
        kind = WaitKind.TOPOLOGY
        message = (
            f"{owner} has {free_milli / GPU_MILLI:g} of {_gpus(gpus)} free to share, but no GPU "
            f"with enough left on a node with the CPU and memory asked ({wanted})."
        )
    return WaitReason(
        kind,
        message,
        {
            "owner": owner,
            "gpus": gpus,
            "free_gpus": free_milli / GPU_MILLI,
            "needed_gpus": needed / GPU_MILLI,
        },
    )


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def describe_ask(ask: PodAsk) -> str:
    """`0.25 GPU (4096 MB of its memory), 2 CPUs and 8192 MB`."""
    gpu = f"{ask.milli / GPU_MILLI:g} GPU"
    if ask.gpu_memory_mb:
        gpu += f" ({ask.gpu_memory_mb} MB of its memory)"
    return f"{gpu}, {ask.cpu_milli / 1000:g} CPUs and {ask.memory_mb} MB"
