"""PAI's nodes and running tasks as Kubernetes node and pod lists (core/v1 `NodeList`,
`PodList`), the shape OpenPAI's server passes on from Kubernetes at `GET /api/v2/kubernetes/...`
and OpenPAI's tools read.

Only the fields those tools use are filled: a node's addresses, capacity, readiness and
schedulability; a pod's node, addresses, phase, resources, ports and OpenPAI's labels (the
user, the VC, the job, and FrameworkController's framework, role and index). A pod is a task
of a job that is not over and holds a placement; its `metadata.uid` is the `podUid` of the
job's events about that task.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pai.cluster.model import ClusterConfig
from pai.executors.base import NodeCondition as EngineCondition
from pai.executors.base import NodeState
from pai.orchestrator import framework as fw
from pai.scheduler.types import ClusterSnapshot, NodeSnapshot
from pai.server.jobviews import debug_id, job_attempt, pod_uid
from pai.store.models import JobRow

NAMESPACE = "default"
"""OpenPAI runs job pods in the `default` namespace."""
GPU_RESOURCE = "nvidia.com/gpu"
GPU_ISOLATION_ANNOTATION = "hivedscheduler.microsoft.com/pod-leaf-cell-isolation"


class ListMeta(BaseModel):
    resourceVersion: str = ""


class ObjectMeta(BaseModel):
    name: str
    namespace: str | None = None
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    creationTimestamp: datetime | None = None


class NodeAddress(BaseModel):
    type: Literal["InternalIP", "Hostname"]
    address: str


class NodeCondition(BaseModel):
    type: Literal["Ready"]
    status: Literal["True", "False"]
    reason: str
    message: str


class NodeSpec(BaseModel):
    unschedulable: bool = Field(description="True for a node the scheduler marked bad.")


class NodeStatus(BaseModel):
    addresses: list[NodeAddress]
    capacity: dict[str, str] = Field(description="cpu, memory (Mi) and nvidia.com/gpu.")
    allocatable: dict[str, str]
    conditions: list[NodeCondition]


class Node(BaseModel):
    kind: Literal["Node"] = "Node"
    apiVersion: Literal["v1"] = "v1"
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


class NodeList(BaseModel):
    kind: Literal["NodeList"] = "NodeList"
    apiVersion: Literal["v1"] = "v1"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[Node]


class ContainerPort(BaseModel):
    name: str
    containerPort: int
    hostPort: int
    protocol: Literal["TCP"] = "TCP"


class ResourceRequirements(BaseModel):
    limits: dict[str, str]
    requests: dict[str, str]


class Container(BaseModel):
    name: str
    image: str
    resources: ResourceRequirements
    ports: list[ContainerPort]


class PodSpec(BaseModel):
    nodeName: str
    containers: list[Container]


class PodStatus(BaseModel):
    phase: Literal["Pending", "Running"] = Field(
        description="Running once the task's process runs; Pending while it is being started."
    )
    hostIP: str
    podIP: str
    startTime: datetime | None


class Pod(BaseModel):
    kind: Literal["Pod"] = "Pod"
    apiVersion: Literal["v1"] = "v1"
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class PodList(BaseModel):
    kind: Literal["PodList"] = "PodList"
    apiVersion: Literal["v1"] = "v1"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[Pod]


def node_list(
    cluster: ClusterConfig, snapshot: ClusterSnapshot, engine: Mapping[str, NodeState]
) -> NodeList:
    """Every node of the cluster file, with what its leaf cells hold in all and, when it is
    not ready, why (the engine's word on it: gone, unreachable since ..., out of disk)."""
    return NodeList(items=[_node(cluster, node, engine.get(node.name)) for node in snapshot.nodes])


def _not_ready(engine: NodeState | None) -> tuple[str, str]:
    """Why a node is not ready, as a Kubernetes reason (`NodeUnreachable`, `NodeGone`, ...:
    the engine's condition) and message (the engine's own words, where it has some)."""
    message = engine.message if engine and engine.message else "the scheduler marked it bad"
    if engine is None or engine.condition is EngineCondition.ALIVE:
        return "NodeUnhealthy", message
    return f"Node{engine.condition.value.capitalize()}", message


def pod_list(jobs: Iterable[JobRow], namespace: str | None = None) -> PodList:
    """The placed tasks of `jobs` (jobs that are not over), in `namespace` if one is given."""
    if namespace not in (None, NAMESPACE):
        return PodList(items=[])
    return PodList(items=[pod for job in jobs for pod in _pods(job)])


def _node(cluster: ClusterConfig, node: NodeSnapshot, engine: NodeState | None) -> Node:
    sku = cluster.sku_types[node.sku_type]
    capacity = _quantities(
        cpu=sku.cpu * node.total_leaves,
        memory_mb=sku.memory_mb * node.total_leaves,
        gpu=sku.gpu * node.total_leaves,
    )
    reason, message = (
        ("KubeletReady", "the node is healthy") if node.healthy else _not_ready(engine)
    )
    ready = NodeCondition(
        type="Ready", status="True" if node.healthy else "False", reason=reason, message=message
    )
    return Node(
        metadata=ObjectMeta(
            name=node.name,
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"pai-node:{node.name}")),
            labels={
                "kubernetes.io/hostname": node.name,
                "pai-worker": "true",
                "pai-sku-type": node.sku_type,
            },
        ),
        spec=NodeSpec(unschedulable=not node.healthy),
        status=NodeStatus(
            addresses=[
                NodeAddress(type="InternalIP", address=node.address),
                NodeAddress(type="Hostname", address=node.name),
            ],
            capacity=capacity,
            allocatable=dict(capacity),
            conditions=[ready],
        ),
    )


def _pods(job: JobRow) -> Iterator[Pod]:
    attempt = job_attempt(job)
    framework = debug_id(job.framework_name)
    for task in attempt.tasks.values():
        current = task.current
        where = current.placement
        if where is None or current.completion is not None:
            continue
        resources = job.spec["taskRoles"][task.role]["resourcePerInstance"]
        limits = _quantities(
            cpu=resources["cpu"], memory_mb=resources["memoryMB"], gpu=resources["gpu"]
        )
        gpus = ",".join(str(gpu) for gpu in where["gpus"])
        yield Pod(
            metadata=ObjectMeta(
                name=f"{framework}-{task.role}-{task.index}",
                namespace=NAMESPACE,
                uid=pod_uid(job.framework_name, task.role, task.index),
                labels={
                    "type": "kube-launcher-task",
                    "userName": job.username,
                    "virtualCluster": job.virtual_cluster,
                    "jobName": job.name,
                    "FC_FRAMEWORK_NAME": framework,
                    "FC_TASKROLE_NAME": task.role,
                    "FC_TASK_INDEX": str(task.index),
                },
                annotations={GPU_ISOLATION_ANNOTATION: gpus} if gpus else {},
                creationTimestamp=_moment(current.created_at),
            ),
            spec=PodSpec(
                nodeName=where["node"],
                containers=[
                    Container(
                        name="app",
                        image=where.get("dockerImage") or "",
                        resources=ResourceRequirements(limits=limits, requests=dict(limits)),
                        ports=list(_ports(where["ports"])),
                    )
                ],
            ),
            status=PodStatus(
                phase="Running" if task.state is fw.AttemptState.RUNNING else "Pending",
                hostIP=where["address"],
                podIP=where["address"],
                startTime=_moment(current.running_at),
            ),
        )


def _quantities(*, cpu: int, memory_mb: int, gpu: int) -> dict[str, str]:
    """Kubernetes resource quantities: `{"cpu": "4", "memory": "4096Mi", ...}`."""
    return {"cpu": str(cpu), "memory": f"{memory_mb}Mi", GPU_RESOURCE: str(gpu)}


def _ports(held: Mapping[str, Any]) -> Iterator[ContainerPort]:
    """Each held port; Kubernetes wants unique names, so a label with several ports numbers
    them (`http`, or `http-0`, `http-1`)."""
    for label, numbers in held.items():
        for index, number in enumerate(numbers):
            name = label if len(numbers) == 1 else f"{label}-{index}"
            yield ContainerPort(name=name, containerPort=number, hostPort=number)


def _moment(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None
