"""Small builders shared by the scheduler tests."""

from __future__ import annotations

from pai.cluster import ClusterConfig, load_cluster
from pai.scheduler import (
    Bind,
    Decision,
    GroupRequest,
    Placement,
    PodRequest,
    Preempt,
    Scheduler,
    Wait,
)


def gpu_cluster(
    racks: int,
    nodes_per_rack: int,
    vcs: dict[str, object],
    pinned: dict[str, str] | None = None,
) -> ClusterConfig:
    """Racks of 8-GPU nodes (node = 2 sockets x 2 PCIe switches x 2 GPUs); nodes are r<i>-n<j>.

    `vcs` maps VC name to {"nodes": n} (floating nodes), {"racks": n}, {"sockets": n}, or a raw
    HiveD VC spec; `pinned` maps a node name to a pinned cell id.
    """
    pinned = pinned or {}
    physical = []
    for rack in range(racks):
        children = []
        for node in range(nodes_per_rack):
            name = f"r{rack}-n{node}"
            child: dict[str, object] = {"cellAddress": name}
            if name in pinned:
                child["pinnedCellId"] = pinned[name]
            children.append(child)
        physical.append({"cellType": "RACK", "cellChildren": children})
    shorthand = {
        "nodes": "RACK.NODE",
        "racks": "RACK",
        "sockets": "RACK.NODE.SOCKET",
    }
    virtual: dict[str, object] = {}
    for name, spec in vcs.items():
        assert isinstance(spec, dict)
        if set(spec) <= set(shorthand):
            virtual[name] = {
                "virtualCells": [
                    {"cellType": shorthand[kind], "cellNumber": number}
                    for kind, number in spec.items()
                ]
            }
        else:
            virtual[name] = spec
    return load_cluster(
        {
            "skuTypes": {"V100": {"gpu": 1, "cpu": 4, "memory": "32Gi"}},
            "cellTypes": {
                "PCIE": {"childCellType": "V100", "childCellNumber": 2},
                "SOCKET": {"childCellType": "PCIE", "childCellNumber": 2},
                "NODE": {"childCellType": "SOCKET", "childCellNumber": 2, "isNodeLevel": True},
                "RACK": {"childCellType": "NODE", "childCellNumber": nodes_per_rack},
            },
            "physicalCells": physical,
            "virtualClusters": virtual,
        }
    )


def group(name: str, vc: str, priority: int, *sizes: int, **options: object) -> GroupRequest:
    pods = tuple(PodRequest("worker", index, size) for index, size in enumerate(sizes))
    return GroupRequest(name, vc, priority, pods, **options)  # type: ignore[arg-type]


def bind(scheduler: Scheduler, request: GroupRequest) -> Placement:
    """Schedule a group that must bind now, and allocate it."""
    decision = scheduler.schedule(request)
    assert isinstance(decision, Bind), decision
    scheduler.allocate(request.name, decision.placement)
    scheduler.check_invariants()
    return decision.placement


def preempt(scheduler: Scheduler, request: GroupRequest) -> Preempt:
    decision = scheduler.schedule(request)
    assert isinstance(decision, Preempt), decision
    scheduler.check_invariants()
    return decision


def wait(scheduler: Scheduler, request: GroupRequest) -> Wait:
    decision = scheduler.schedule(request)
    assert isinstance(decision, Wait), decision
    scheduler.check_invariants()
    return decision


def rack_of(node: str) -> str:
    return node.split("-")[0]


def decide(scheduler: Scheduler, request: GroupRequest) -> Decision:
    decision = scheduler.schedule(request)
    scheduler.check_invariants()
    return decision
