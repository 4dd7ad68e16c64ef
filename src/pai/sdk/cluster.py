"""Virtual clusters, nodes and SKU types: what the cluster has and who uses it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pai.sdk.base import ApiBase
from pai.sdk.model import ApiModel
from pai.sdk.names import segment


class Resources(ApiModel):
    cpu: float = 0
    memory: float = 0
    gpu: float = 0


class CellCount(ApiModel):
    """`cell_number` cells of type `cell_type` (a VC's reservation)."""

    cell_type: str
    cell_number: int


class UserLimit(ApiModel):
    """The most one user may hold at once in a VC; None: no limit on that resource."""

    gpus: float | None = None
    cpus: float | None = None
    jobs: int | None = None


class GroupUserLimit(UserLimit):
    """A limit an administrator set for each member of `group` in a VC."""

    group: str
    set_by: str = ""
    updated_time: int = 0


class VcUserLimits(ApiModel):
    """A VC's default limit per user, and the groups' limits that replace it for members."""

    default: UserLimit = Field(default_factory=UserLimit)
    groups: list[GroupUserLimit] = Field(default_factory=list)


class VcUser(ApiModel):
    """One user of a VC: what the user's guaranteed jobs hold against the limit that applies
    (from `limit_groups`, or the VC's default), and the recent use fair share orders by."""

    username: str
    gpus: float = 0
    cpus: float = 0
    jobs: int = 0
    limit: UserLimit = Field(default_factory=UserLimit)
    limit_groups: list[str] = Field(default_factory=list)
    gpus_held: float = 0
    recent_gpu_hours: float = 0
    waiting_jobs: int = 0


class VcUsers(ApiModel):
    fair_share: bool = False
    half_life_seconds: float | None = None
    users: list[VcUser] = Field(default_factory=list)


class VirtualCluster(ApiModel):
    """A virtual cluster: OpenPAI's capacity fields, plus PAI's counts of GPUs, of leaf cells
    (GPUs, or CPU slots on a CPU cluster) and of jobs."""

    capacity: float = 0
    used_capacity: float = 0
    max_capacity: float = 0
    dedicated: bool = False
    resources_used: Resources = Field(default_factory=Resources)
    resources_guaranteed: Resources = Field(default_factory=Resources)
    resources_total: Resources = Field(default_factory=Resources)
    status: str = "running"
    cells: list[CellCount] = Field(default_factory=list)
    guaranteed_gpus: int = 0
    used_gpus: int = 0
    free_gpus: int = 0
    opportunistic_gpus: int = 0
    guaranteed_leaves: int = 0
    used_leaves: int = 0
    free_leaves: int = 0
    opportunistic_leaves: int = 0
    running_jobs: int = 0
    waiting_jobs: int = 0
    user_limit: UserLimit = Field(default_factory=UserLimit)


class NodeVcUsage(ApiModel):
    """A node's usage as `GET /virtual-clusters?nodes` reports it."""

    address: str = ""
    healthy: bool = True
    gpu_total: int = 0
    gpu_used: int = 0
    gpu_free: int = 0
    leaf_cell_type: str | None = None
    users: list[Any] = Field(default_factory=list)


class Counts(ApiModel):
    total: int = 0
    used: int = 0
    free: int = 0


class LeafUsage(ApiModel):
    """One leaf cell (a GPU, or a CPU slot) in use: by which job, VC and priority."""

    leaf_index: int
    job: str | None = None
    vc: str | None = None
    priority: Any = None


class SharedTask(ApiModel):
    """A task on part of a shared GPU."""

    job: str
    vc: str | None = None
    task_role_name: str = ""
    task_index: int = 0
    gpu_fraction: float = 0
    gpu_memory_mb: int = Field(default=0, alias="gpuMemoryMB")


class SharedGpu(ApiModel):
    """A GPU tasks share: which tasks, and the part of it still free."""

    gpu_index: int
    free_fraction: float = 0
    opportunistic: bool = False
    tasks: list[SharedTask] = Field(default_factory=list)


class Node(ApiModel):
    """A node: health, SKU, and its leaf cells (GPUs or CPU slots) total, used and free."""

    name: str
    address: str = ""
    healthy: bool = True
    engine_state: str = "alive"
    """alive, gone (not in the engine's cluster) or bad (there, but unable to take tasks)."""
    engine_message: str = ""
    sku_type: str | None = None
    device: str | None = None
    """The CDI kind of the node's devices (`nvidia.com/gpu`, `amd.com/gpu` ...), which `gpus`
    counts; None without devices."""
    leaves: Counts = Field(default_factory=Counts)
    gpus: Counts = Field(default_factory=Counts)
    usage: list[LeafUsage] = Field(default_factory=list)
    shared_gpus: list[SharedGpu] = Field(default_factory=list)


class SkuType(ApiModel):
    """What one leaf cell of a SKU holds."""

    gpu: float = 0
    cpu: float = 0
    memory: float = 0
    device: str | None = None
    """The CDI kind of its devices; None for a SKU without."""


class ClusterApi(ApiBase):
    """Methods describing the cluster."""

    def virtual_clusters(self) -> dict[str, VirtualCluster]:
        """Every virtual cluster by name.

        for name, vc in client.virtual_clusters().items():
            print(name, vc.free_gpus, "of", vc.guaranteed_gpus, "GPUs free")
        """
        body = self._transport.get("/virtual-clusters")
        return {name: VirtualCluster.model_validate(vc) for name, vc in body.items()}

    def virtual_cluster(self, name: str) -> VirtualCluster:
        """One virtual cluster; `NotFoundError` (NoVirtualClusterError) if there is none."""
        return VirtualCluster.model_validate(
            self._transport.get(f"/virtual-clusters/{segment(name)}")
        )

    def vc_users(self, vc: str) -> VcUsers:
        """Who uses the VC: each user's use against the limit, recent use, waiting jobs.

        for user in client.vc_users("default").users:
            print(user.username, user.gpus, "of", user.limit.gpus, "GPUs")
        """
        return VcUsers.model_validate(self._transport.get(f"/virtual-clusters/{segment(vc)}/users"))

    def user_limits(self, vc: str) -> VcUserLimits:
        """The VC's default limit per user and the groups' limits."""
        return VcUserLimits.model_validate(
            self._transport.get(f"/virtual-clusters/{segment(vc)}/user-limits")
        )

    def set_user_limit(
        self,
        vc: str,
        group: str,
        *,
        gpus: float | None = None,
        cpus: float | None = None,
        jobs: int | None = None,
    ) -> GroupUserLimit:
        """Limit each member of `group` in `vc` (admin): it replaces the VC's default for
        them; a resource left None has no limit.

        client.set_user_limit("default", "interns", gpus=4, jobs=2)
        """
        body = self._transport.send(
            "PUT",
            f"/virtual-clusters/{segment(vc)}/user-limits/{segment(group)}",
            {"gpus": gpus, "cpus": cpus, "jobs": jobs},
        )
        return GroupUserLimit.model_validate(body)

    def remove_user_limit(self, vc: str, group: str) -> str:
        """Drop the limit of `group` in `vc` (admin): its members get the VC's default."""
        body = self._transport.send(
            "DELETE", f"/virtual-clusters/{segment(vc)}/user-limits/{segment(group)}"
        )
        return str(body.get("message", ""))

    def node_usage(self) -> dict[str, NodeVcUsage]:
        """Per-node usage by node name, the `?nodes` view of the virtual-cluster API."""
        body = self._transport.get("/virtual-clusters", params={"nodes": "true"})
        return {name: NodeVcUsage.model_validate(node) for name, node in body.items()}

    def nodes(self) -> list[Node]:
        """Every node with its health and which job holds each of its leaf cells."""
        return [Node.model_validate(node) for node in self._transport.get("/cluster/nodes")]

    def sku_types(self, vc: str | None = None) -> dict[str, SkuType]:
        """The SKU types of the cluster (or of one VC) by name."""
        body = self._transport.get("/cluster/sku-types", params={"vc": vc} if vc else None)
        return {name: SkuType.model_validate(sku) for name, sku in body.items()}
