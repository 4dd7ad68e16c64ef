"""Translating a job into the groups the scheduler places (OpenPAI's rules for HiveD)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.cluster import cluster_from_file, load_cluster
from pai.executors.ray.nodes import RayNode, cluster_from_ray
from pai.protocol import parse_job
from pai.scheduler import Bind, PodRequest, Scheduler
from pai.scheduler.requests import RequestRefused, job_requests
from pai.scheduler.types import GpuShare

CLUSTER = load_cluster(
    {
        "skuTypes": {
            "V100": {"gpu": 1, "cpu": 4, "memory": "32Gi"},
            "CPU": {"gpu": 0, "cpu": 1, "memory": "2Gi"},
        },
        "cellTypes": {
            "PCIE": {"childCellType": "V100", "childCellNumber": 2},
            "SOCKET": {"childCellType": "PCIE", "childCellNumber": 2},
            "NODE": {"childCellType": "SOCKET", "childCellNumber": 2, "isNodeLevel": True},
            "RACK": {"childCellType": "NODE", "childCellNumber": 4},
            "CPU-NODE": {"childCellType": "CPU", "childCellNumber": 16, "isNodeLevel": True},
        },
        "physicalCells": [
            {
                "cellType": "RACK",
                "cellChildren": [
                    {"cellAddress": "g0"},
                    {"cellAddress": "g1"},
                    {"cellAddress": "g2"},
                    {"cellAddress": "g3", "pinnedCellId": "pin"},
                ],
            },
            {"cellType": "CPU-NODE", "cellAddress": "c0"},
        ],
        "virtualClusters": {
            "vision": {
                "virtualCells": [
                    {"cellType": "RACK.NODE", "cellNumber": 2},
                    {"cellType": "CPU-NODE", "cellNumber": 1},
                ],
                "pinnedCells": [{"pinnedCellId": "pin"}],
            },
            "nlp": {"virtualCells": [{"cellType": "RACK.NODE", "cellNumber": 1}]},
        },
    }
)


LOCAL_CLUSTER_FILE = Path(__file__).parents[2] / "examples" / "clusters" / "local-4node.yaml"


def job(roles: dict[str, dict[str, Any]], vc: str = "vision", **extras: Any) -> Any:
    document = {
        "protocolVersion": 2,
        "name": "train",
        "type": "job",
        "prerequisites": [{"type": "dockerimage", "name": "img", "uri": "python:3.11"}],
        "taskRoles": {
            name: {
                "instances": role.get("instances", 1),
                "dockerImage": "img",
                "resourcePerInstance": {
                    "cpu": role.get("cpu", 1),
                    "memoryMB": role.get("memoryMB", 1024),
                    "gpu": role.get("gpu", 0),
                    **({"gpuMemoryMB": role["gpuMemoryMB"]} if "gpuMemoryMB" in role else {}),
                },
                "commands": ["true"],
            }
            for name, role in roles.items()
        },
        "defaults": {"virtualCluster": vc},
        "extras": extras,
    }
    return parse_job(yaml.safe_dump(document, sort_keys=False))


def test_all_roles_form_one_gang_with_leaf_cells_from_the_largest_resource() -> None:
    spec = job(
        {
            "master": {"gpu": 1, "cpu": 12},  # cpu 12 / 4 per GPU -> 3 leaf cells
            "worker": {"instances": 2, "gpu": 2, "memoryMB": 40_000},  # 40000 / 32768 -> 2
        },
        hivedScheduler={
            "jobPriorityClass": "prod",
            "taskRoles": {"master": {"skuType": "V100"}, "worker": {"skuType": "V100"}},
        },
    )
    (request,) = job_requests(spec, CLUSTER, "alice~train")
    assert request.name == "alice~train/default"
    assert (request.vc, request.priority, request.sku_type) == ("vision", 100, "V100")
    assert request.pods == (
        PodRequest("master", 0, 3),
        PodRequest("worker", 0, 2),
        PodRequest("worker", 1, 2),
    )
    decision = Scheduler(CLUSTER).schedule(request)
    assert isinstance(decision, Bind)
    assert [(pod.role, pod.index) for pod in decision.placement.pods] == [
        ("master", 0),
        ("worker", 0),
        ("worker", 1),
    ]


def test_affinity_groups_priority_classes_and_lazy_preemption() -> None:
    spec = job(
        {"ps": {"gpu": 1}, "worker": {"instances": 2, "gpu": 1}, "eval": {"gpu": 1}},
        hivedScheduler={
            "jobPriorityClass": "oppo",
            "lazyPreemptionEnable": True,
            "taskRoles": {
                "ps": {"affinityGroupName": "train"},
                "worker": {"affinityGroupName": "train"},
            },
        },
    )
    requests = job_requests(spec, CLUSTER, "bob~j")
    assert [(r.name, len(r.pods), r.priority, r.lazy_preemption) for r in requests] == [
        ("bob~j/train", 3, -1, True),
        ("bob~j/default", 1, -1, True),
    ]
    default = job_requests(job({"w": {"gpu": 1}}), CLUSTER, "bob~k")
    assert default[0].priority == 10


def test_without_gang_allocation_every_task_is_its_own_group() -> None:
    spec = job({"worker": {"instances": 3, "gpu": 1}}, gangAllocation=False)
    requests = job_requests(spec, CLUSTER, "u~j")
    assert [r.name for r in requests] == ["u~j/worker-0", "u~j/worker-1", "u~j/worker-2"]
    assert all(len(r.pods) == 1 for r in requests)


def test_cpu_only_tasks_get_the_cpu_sku_and_gpu_tasks_the_gpu_sku() -> None:
    (cpu,) = job_requests(job({"w": {"cpu": 3, "memoryMB": 5000}}), CLUSTER, "u~cpu")
    assert (cpu.sku_type, cpu.pods[0].leaf_cells) == ("CPU", 3)  # 5000 MB / 2048 -> 3 as well
    (gpu,) = job_requests(job({"w": {"cpu": 1, "gpu": 2}}), CLUSTER, "u~gpu")
    assert (gpu.sku_type, gpu.pods[0].leaf_cells) == ("V100", 2)


def test_pinned_cells_choose_their_sku() -> None:
    spec = job({"w": {"gpu": 8}}, hivedScheduler={"taskRoles": {"w": {"pinnedCellId": "pin"}}})
    (request,) = job_requests(spec, CLUSTER, "u~p")
    assert (request.pinned_cell_id, request.sku_type) == ("pin", "V100")
    assert isinstance(Scheduler(CLUSTER).schedule(request), Bind)


@pytest.mark.parametrize(
    ("roles", "vc", "extras", "message"),
    [
        ({"w": {"gpu": 1}}, "ghost", {}, "unknown virtual cluster 'ghost' (VCs: vision, nlp)"),
        (
            {"w": {"gpu": 1}},
            "vision",
            {"hivedScheduler": {"taskRoles": {"w": {"skuType": "A100"}}}},
            "unknown skuType 'A100' (SKU types: V100, CPU)",
        ),
        (
            {"w": {"gpu": 1}},
            "vision",
            {"hivedScheduler": {"taskRoles": {"w": {"skuType": "CPU"}}}},
            "task role 'w' asks for gpu but SKU 'CPU' has none",
        ),
        (
            {"w": {"cpu": 1}},
            "nlp",
            {"hivedScheduler": {"taskRoles": {"w": {"skuType": "CPU"}}}},
            "VC 'nlp' has no cells of SKU type 'CPU'",
        ),
        (
            {"w": {"instances": 3, "gpu": 8}},
            "vision",
            {},
            "no SKU of VC 'vision' can run the tasks: task role 'w' asks for 8 GPUs, 1 CPU and "
            "1024 MB of memory per task; SKU 'V100': VC 'vision' has 16 GPUs, 64 CPUs and "
            "524288 MB of memory in all, less than the tasks need; SKU 'CPU': it has no GPUs",
        ),
        (
            {"w": {"gpu": 12}},
            "vision",
            {},
            "no SKU of VC 'vision' can run the tasks: task role 'w' asks for 12 GPUs, 1 CPU and "
            "1024 MB of memory per task; SKU 'V100': a node has at most 8 GPUs, 32 CPUs and "
            "262144 MB of memory; SKU 'CPU': it has no GPUs",
        ),
        (
            {"w": {"gpu": 1}},
            "vision",
            {
                "hivedScheduler": {
                    "jobPriorityClass": "oppo",
                    "taskRoles": {"w": {"pinnedCellId": "pin"}},
                }
            },
            "an opportunistic job cannot ask for a pinned cell",
        ),
        (
            {"a": {"gpu": 1}, "b": {"gpu": 1}},
            "vision",
            {
                "hivedScheduler": {
                    "taskRoles": {"a": {"skuType": "V100"}, "b": {"pinnedCellId": "pin"}}
                }
            },
            "roles 'a', 'b' form affinity group 'default' but ask for different",
        ),
    ],
)
def test_requests_that_can_never_fit_are_refused(
    roles: dict[str, dict[str, Any]], vc: str, extras: dict[str, Any], message: str
) -> None:
    with pytest.raises(RequestRefused) as refused:
        job_requests(job(roles, vc=vc, **extras), CLUSTER, "u~j")
    assert any(problem.startswith(message) for problem in refused.value.problems), refused.value


def test_sku_num_sets_the_leaf_cells_of_each_task() -> None:
    """OpenPAI's portal writes skuNum next to skuType: that many cells per task, even beyond
    what resourcePerInstance needs (here 1 GPU, but a whole PCIe pair)."""
    settings = {"taskRoles": {"w": {"skuType": "V100", "skuNum": 2}}}
    spec = job({"w": {"instances": 2, "gpu": 1}}, hivedScheduler=settings)
    (request,) = job_requests(spec, CLUSTER, "u~pairs")
    assert request.pods == (PodRequest("w", 0, 2), PodRequest("w", 1, 2))


def test_sku_num_below_what_resource_per_instance_needs_is_refused() -> None:
    settings = {"taskRoles": {"w": {"skuType": "V100", "skuNum": 2}}}
    spec = job({"w": {"gpu": 4, "cpu": 8}}, hivedScheduler=settings)
    with pytest.raises(RequestRefused) as refused:
        job_requests(spec, CLUSTER, "u~j")
    assert refused.value.problems == [
        "extras.hivedScheduler.taskRoles.w.skuNum: 2 leaf cell(s) of SKU 'V100' (1 GPU, 4 CPUs "
        "and 32768 MB of memory each) hold less than the resourcePerInstance of task role 'w' "
        "(4 GPUs, 8 CPUs and 1024 MB of memory), which needs 4; raise skuNum or lower "
        "resourcePerInstance"
    ]


def test_a_job_no_sku_of_its_vc_can_hold_says_what_it_asks_and_what_the_vc_offers() -> None:
    cluster = cluster_from_file(LOCAL_CLUSTER_FILE)  # CPU slots only
    spec = job({"trainer": {"gpu": 1, "cpu": 2, "memoryMB": 4096}}, vc="default")
    with pytest.raises(RequestRefused) as refused:
        job_requests(spec, cluster, "u~j")
    assert refused.value.problems == [
        "no SKU of VC 'default' provides what the tasks ask for: task role 'trainer' asks for "
        "1 GPU, 2 CPUs and 4096 MB of memory per task; the SKUs of VC 'default' offer per leaf "
        "cell: 'CPU' (0 GPUs, 1 CPU and 1024 MB of memory)"
    ]


def test_a_role_on_a_share_of_a_gpu_shares_one_leaf_cell_and_asks_the_node_for_cpu() -> None:
    spec = job({"notebook": {"instances": 2, "gpu": 0.25, "cpu": 6, "memoryMB": 8192}})

    (request,) = job_requests(spec, CLUSTER, "u~nb")

    assert request.sku_type == "V100" and request.shares
    assert request.pods == (
        PodRequest("notebook", 0, 1, GpuShare(250), 6000, 8192),
        PodRequest("notebook", 1, 1, GpuShare(250), 6000, 8192),
    )
    decision = Scheduler(CLUSTER).schedule(request)
    assert isinstance(decision, Bind)
    assert [pod.share for pod in decision.placement.pods] == [GpuShare(250), GpuShare(250)]


def test_sharing_roles_of_a_gang_with_whole_gpu_roles_become_a_group_of_their_own() -> None:
    spec = job({"trainer": {"gpu": 2}, "helper": {"gpu": 0.5}})

    requests = job_requests(spec, CLUSTER, "u~mix")

    assert [(r.name, r.shares) for r in requests] == [
        ("u~mix/default", False),
        ("u~mix/default-gpu-share", True),
    ]


def test_gpu_memory_of_a_share_needs_a_sku_that_declares_it() -> None:
    spec = job({"w": {"gpu": 0.5, "gpuMemoryMB": 4096}})

    with pytest.raises(RequestRefused) as refused:
        job_requests(spec, CLUSTER, "u~mem")

    assert "no SKU of VC 'vision' provides what the tasks ask for" in str(refused.value)


def test_a_share_of_a_gpu_is_refused_on_a_sku_of_several_gpus_per_leaf() -> None:
    pairs = load_cluster(
        {
            "skuTypes": {"PAIR": {"gpu": 2, "cpu": 8, "memory": "32Gi"}},
            "cellTypes": {
                "NODE": {"childCellType": "PAIR", "childCellNumber": 2, "isNodeLevel": True}
            },
            "physicalCells": [{"cellType": "NODE", "cellAddress": "n0"}],
            "virtualClusters": {
                "default": {"virtualCells": [{"cellType": "NODE", "cellNumber": 1}]}
            },
        }
    )
    spec = job({"w": {"gpu": 0.5}}, vc="default")

    with pytest.raises(RequestRefused) as refused:
        job_requests(spec, pairs, "u~pair")

    assert "0.5 GPU" in str(refused.value)


def ray_node(name: str, cpus: int, gpus: int = 0) -> RayNode:
    """A live node as `ray.nodes()` reports it (field names and units as Ray's)."""
    resources = {"CPU": cpus, "memory": 12 * 1024**3, "object_store_memory": 4 * 1024**3}
    if gpus:
        resources["GPU"] = gpus
    node = {"NodeID": name, "NodeName": name, "NodeManagerAddress": name, "Alive": True}
    return RayNode.from_ray({**node, "Resources": resources})


MIXED_RAY_CLUSTER = cluster_from_ray(
    [ray_node("head", cpus=1), ray_node("worker-a", cpus=4, gpus=2), ray_node("worker-b", 4, 2)]
)
"""A Ray cluster without a cluster file: a head of 1 CPU and no GPU, workers of 4 CPUs and 2
GPUs each (SKUs `CPU` and `GPU`, both in the VC `default`)."""


def test_a_cpu_only_task_too_large_for_the_cpu_only_nodes_goes_to_nodes_with_gpus() -> None:
    spec = job({"main": {"gpu": 0, "cpu": 2}}, vc="default")

    (request,) = job_requests(spec, MIXED_RAY_CLUSTER, "u~cpu")

    assert request.sku_type == "GPU"
    decision = Scheduler(MIXED_RAY_CLUSTER).schedule(request)
    assert isinstance(decision, Bind)
    assert decision.placement.pods[0].node in {"worker-a", "worker-b"}


def test_a_cpu_only_task_that_fits_the_cpu_only_nodes_stays_off_the_gpus() -> None:
    spec = job({"main": {"gpu": 0, "cpu": 1}}, vc="default")

    (request,) = job_requests(spec, MIXED_RAY_CLUSTER, "u~small")

    assert request.sku_type == "CPU"


def test_a_task_no_sku_can_hold_is_refused_with_each_sku_and_why_in_cpus() -> None:
    spec = job({"main": {"gpu": 0, "cpu": 8}}, vc="default")

    with pytest.raises(RequestRefused) as refused:
        job_requests(spec, MIXED_RAY_CLUSTER, "u~big")

    assert refused.value.problems == [
        "no SKU of VC 'default' can run the tasks: task role 'main' asks for 0 GPUs, 8 CPUs and "
        "1024 MB of memory per task; SKU 'CPU': a node has at most 0 GPUs, 1 CPU and 16384 MB "
        "of memory; SKU 'GPU': a node has at most 2 GPUs, 4 CPUs and 16384 MB of memory"
    ]
