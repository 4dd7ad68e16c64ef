"""The cluster as OpenPAI's API shows it: virtual clusters with their capacity and use, SKU
types, and nodes with the job holding each leaf cell.

Everything comes from one scheduler snapshot (taken after the controller's last pass) and the
cluster file, so the numbers of one answer are consistent with each other. Capacities are
percentages of the cluster's GPUs, or of its leaf cells (CPU slots) when it has no GPUs. A
leaf cell counts as used by the VC of the job holding it, opportunistic jobs included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from pai.cluster.model import ClusterConfig, SkuType, VirtualClusterSpec
from pai.errors import NoVirtualClusterError
from pai.executors.base import NodeCondition, NodeState
from pai.orchestrator.controller import VcJobs
from pai.orchestrator.controlplane import ControlPlane
from pai.scheduler.types import GPU_MILLI, ClusterSnapshot, NodeSnapshot
from pai.scheduler.types import LeafUsage as SnapshotLeaf
from pai.server.vcusers import UserLimitBody


class Resources(BaseModel):
    cpu: int
    memory: int = Field(description="MB")
    gpu: int


class CellCount(BaseModel):
    cellType: str
    cellNumber: int


class VirtualClusterInfo(BaseModel):
    capacity: float = Field(description="Guaranteed share of the cluster, in percent.")
    usedCapacity: float = Field(description="Share of the cluster its jobs use, in percent.")
    maxCapacity: float = Field(
        description="Share its jobs may use: 100, as opportunistic jobs use idle cells anywhere."
    )
    dedicated: bool
    resourcesUsed: Resources
    resourcesGuaranteed: Resources
    resourcesTotal: Resources = Field(description="The whole cluster, which its jobs may reach.")
    status: str
    cells: list[CellCount] = Field(description="The cells the VC is guaranteed.")
    guaranteedGpus: int
    usedGpus: int = Field(description="GPUs its guaranteed (non-opportunistic) jobs hold.")
    freeGpus: int
    opportunisticGpus: int
    guaranteedLeaves: int = Field(description="Leaf cells (GPUs, or CPU slots) guaranteed.")
    usedLeaves: int
    freeLeaves: int
    opportunisticLeaves: int
    runningJobs: int
    waitingJobs: int
    userLimit: UserLimitBody = Field(
        description="What each user may hold at once by default (the cluster file's "
        "`userLimit`); groups' limits are at `/virtual-clusters/{vc}/user-limits`."
    )


class NodeVcUsage(BaseModel):
    address: str
    healthy: bool
    gpuTotal: int
    gpuUsed: int
    gpuFree: int
    leafCellType: str
    users: list[str] = Field(description="Users whose jobs run on the node.")


class SkuTypeInfo(BaseModel):
    """What one leaf cell of the SKU holds."""

    gpu: int = Field(description="Devices, of kind `device`.")
    cpu: int
    memory: int = Field(description="MB")
    device: str | None = Field(
        default=None,
        description="The CDI kind of its devices (nvidia.com/gpu, amd.com/gpu ...); "
        "absent for a SKU without devices, whose fields are then OpenPAI's.",
    )


class Counts(BaseModel):
    total: int
    used: int
    free: int


class LeafUsage(BaseModel):
    leafIndex: int
    job: str = Field(description="The framework name `<user>~<job>` of the job holding it.")
    vc: str
    priority: int


class SharedTask(BaseModel):
    job: str = Field(description="The framework name `<user>~<job>` of the task's job.")
    vc: str
    taskRoleName: str
    taskIndex: int
    gpuFraction: float = Field(description="The part of the GPU the task has (0.25: a quarter).")
    gpuMemoryMB: int = Field(description="GPU memory it asked for; 0 when it asked for none.")


class SharedGpu(BaseModel):
    """A GPU that tasks share."""

    gpuIndex: int
    freeFraction: float = Field(description="The part of the GPU no task has yet.")
    opportunistic: bool = Field(description="Shared by opportunistic tasks (of any VC).")
    tasks: list[SharedTask]


class NodeInfo(BaseModel):
    name: str
    address: str
    healthy: bool = Field(description="Whether the scheduler places new tasks on the node.")
    engineState: NodeCondition = Field(
        description="The node as the engine that runs tasks sees it: alive, gone (not in the "
        "cluster: never joined, stopped, crashed or unreachable), bad (there, but unable to "
        "take tasks, e.g. smaller than the cluster file says), or cordoned (taken out of "
        "scheduling by an administrator or an alert)."
    )
    engineMessage: str = Field(description="Why the node is not alive; empty when it is.")
    skuType: str
    device: str | None = Field(
        default=None,
        description="The CDI kind of the node's devices, which `gpus` counts; null without.",
    )
    leaves: Counts
    gpus: Counts
    usage: list[LeafUsage] = Field(description="The leaf cells a job holds whole.")
    sharedGpus: list[SharedGpu] = Field(
        default_factory=list, description="The GPUs tasks share: which tasks, and how much is free."
    )


@dataclass
class _Usage:
    """What the jobs of one VC hold."""

    resources: dict[str, int] = field(default_factory=lambda: {"cpu": 0, "memory": 0, "gpu": 0})
    guaranteed_gpus: int = 0
    opportunistic_gpus: int = 0
    units: int = 0

    def add(self, sku: SkuType, units: int, *, opportunistic: bool) -> None:
        self.resources["cpu"] += sku.cpu
        self.resources["memory"] += sku.memory_mb
        self.resources["gpu"] += sku.gpu
        self.units += units
        if opportunistic:
            self.opportunistic_gpus += sku.gpu
        else:
            self.guaranteed_gpus += sku.gpu


class ClusterView:
    """One snapshot of the cluster, rendered."""

    def __init__(
        self,
        cluster: ClusterConfig,
        snapshot: ClusterSnapshot,
        vc_jobs: Mapping[str, VcJobs],
        node_states: Mapping[str, NodeState] | None = None,
    ) -> None:
        self._cluster = cluster
        self._snapshot = snapshot
        self._vc_jobs = vc_jobs
        self._node_states = node_states or {}
        self._has_gpus = any(sku.gpu > 0 for sku in cluster.sku_types.values())

    @classmethod
    def of(cls, controller: ControlPlane) -> ClusterView:
        """The controller's view after its last pass."""
        return cls(
            controller.cluster,
            controller.snapshot(),
            controller.vc_jobs(),
            controller.node_states(),
        )

    def virtual_clusters(self) -> dict[str, VirtualClusterInfo]:
        usage = self._usage_by_vc()
        total = self._resources(self._all_leaves())
        return {
            name: self._virtual_cluster(spec, usage.get(name, _Usage()), total)
            for name, spec in sorted(self._cluster.virtual_clusters.items())
        }

    def virtual_cluster(self, name: str) -> VirtualClusterInfo:
        spec = self._vc_spec(name)
        usage = self._usage_by_vc().get(name, _Usage())
        return self._virtual_cluster(spec, usage, self._resources(self._all_leaves()))

    def node_usage(self) -> dict[str, NodeVcUsage]:
        result = {}
        for node in self._snapshot.nodes:
            gpus = self._cluster.sku_types[node.sku_type].gpu
            result[node.name] = NodeVcUsage(
                address=node.address,
                healthy=node.healthy,
                gpuTotal=node.total_leaves * gpus,
                gpuUsed=node.used_leaves * gpus,
                gpuFree=node.free_leaves * gpus,
                leafCellType=node.sku_type,
                users=sorted({_job_of(group).partition("~")[0] for _, group in _held(node)}),
            )
        return result

    def nodes(self) -> list[NodeInfo]:
        groups = self._snapshot.groups
        result = []
        for node in self._snapshot.nodes:
            gpus = self._cluster.sku_types[node.sku_type].gpu
            engine = self._node_states.get(node.name, NodeState(node.name, NodeCondition.ALIVE))
            result.append(
                NodeInfo(
                    name=node.name,
                    address=node.address,
                    healthy=node.healthy,
                    engineState=engine.condition,
                    engineMessage=engine.message,
                    skuType=node.sku_type,
                    device=_kind(self._cluster.sku_types[node.sku_type]),
                    leaves=Counts(
                        total=node.total_leaves, used=node.used_leaves, free=node.free_leaves
                    ),
                    gpus=Counts(
                        total=node.total_leaves * gpus,
                        used=node.used_leaves * gpus,
                        free=node.free_leaves * gpus,
                    ),
                    usage=[
                        LeafUsage(
                            leafIndex=leaf.index,
                            job=_job_of(leaf.group),
                            vc=groups[leaf.group].vc,
                            priority=groups[leaf.group].priority,
                        )
                        for leaf in node.leaves
                        if leaf.group is not None and leaf.group in groups
                    ],
                    sharedGpus=[self._shared_gpu(leaf) for leaf in node.leaves if leaf.shared],
                )
            )
        return result

    def _shared_gpu(self, leaf: SnapshotLeaf) -> SharedGpu:
        groups = self._snapshot.groups
        tasks = [
            SharedTask(
                job=_job_of(share.group),
                vc=groups[share.group].vc,
                taskRoleName=share.role,
                taskIndex=share.index,
                gpuFraction=share.milli / GPU_MILLI,
                gpuMemoryMB=share.memory_mb,
            )
            for share in leaf.shares
            if share.group in groups
        ]
        return SharedGpu(
            gpuIndex=leaf.index,
            freeFraction=(leaf.free_milli or 0) / GPU_MILLI,
            opportunistic=(leaf.priority or 0) < 0,
            tasks=tasks,
        )

    def sku_types(self, vc: str | None = None) -> dict[str, SkuTypeInfo]:
        """Every SKU of the cluster, or those `vc` has cells of."""
        names = (
            set(self._cluster.sku_types)
            if vc is None
            else {sku.name for sku, _ in self._guaranteed(self._vc_spec(vc))}
        )
        return {
            name: SkuTypeInfo(gpu=sku.gpu, cpu=sku.cpu, memory=sku.memory_mb, device=_kind(sku))
            for name, sku in sorted(self._cluster.sku_types.items())
            if name in names
        }

    # -- internals --------------------------------------------------------------------------------

    def _virtual_cluster(
        self, spec: VirtualClusterSpec, usage: _Usage, total: Resources
    ) -> VirtualClusterInfo:
        leaves = self._snapshot.vcs[spec.name]
        guaranteed = list(self._guaranteed(spec))
        guaranteed_gpus = sum(sku.gpu * count for sku, count in guaranteed)
        jobs = self._vc_jobs.get(spec.name, VcJobs())
        cluster_units = self._units_of(self._all_leaves())
        return VirtualClusterInfo(
            capacity=_percent(self._units_of(guaranteed), cluster_units),
            usedCapacity=_percent(usage.units, cluster_units),
            maxCapacity=100.0,
            dedicated=False,
            resourcesUsed=Resources(**usage.resources),
            resourcesGuaranteed=self._resources(guaranteed),
            resourcesTotal=total,
            status="running",
            cells=[
                CellCount(cellType=cell_type, cellNumber=number)
                for cell_type, number in leaves.guaranteed_cells.items()
            ],
            guaranteedGpus=guaranteed_gpus,
            usedGpus=usage.guaranteed_gpus,
            freeGpus=max(0, guaranteed_gpus - usage.guaranteed_gpus),
            opportunisticGpus=usage.opportunistic_gpus,
            guaranteedLeaves=leaves.guaranteed_leaves,
            usedLeaves=leaves.used_leaves,
            freeLeaves=leaves.free_leaves,
            opportunisticLeaves=leaves.opportunistic_leaves,
            runningJobs=jobs.running,
            waitingJobs=jobs.waiting,
            userLimit=UserLimitBody.of(spec.user_limit),
        )

    def _vc_spec(self, name: str) -> VirtualClusterSpec:
        spec = self._cluster.virtual_clusters.get(name)
        if spec is None:
            known = ", ".join(sorted(self._cluster.virtual_clusters))
            raise NoVirtualClusterError(f"virtual cluster '{name}' does not exist (VCs: {known})")
        return spec

    def _guaranteed(self, spec: VirtualClusterSpec) -> Iterator[tuple[SkuType, int]]:
        """(SKU, leaf cells) for each of the VC's cells."""
        cluster = self._cluster
        for cell in spec.virtual_cells:
            chain = cluster.chains[cell.chain]
            per_cell = chain.leaves_per_cell(chain.level_of(cell.cell_type))
            yield cluster.chain_sku(cell.chain), per_cell * cell.number
        for pinned_id in spec.pinned_cells:
            leaves = sum(1 for _ in cluster.pinned_cells[pinned_id].leaves())
            yield cluster.chain_sku(cluster.pinned_cell_chain(pinned_id)), leaves

    def _all_leaves(self) -> list[tuple[SkuType, int]]:
        return [
            (self._cluster.sku_types[node.sku_type], node.total_leaves)
            for node in self._snapshot.nodes
        ]

    def _units_of(self, leaves: list[tuple[SkuType, int]]) -> int:
        return sum(self._units(sku, count) for sku, count in leaves)

    def _units(self, sku: SkuType, leaves: int) -> int:
        """What capacities are percentages of: GPUs, or leaf cells on a cluster without GPUs."""
        return leaves * sku.gpu if self._has_gpus else leaves

    @staticmethod
    def _resources(leaves: list[tuple[SkuType, int]]) -> Resources:
        return Resources(
            cpu=sum(sku.cpu * count for sku, count in leaves),
            memory=sum(sku.memory_mb * count for sku, count in leaves),
            gpu=sum(sku.gpu * count for sku, count in leaves),
        )

    def _usage_by_vc(self) -> dict[str, _Usage]:
        groups = self._snapshot.groups
        usage: dict[str, _Usage] = {}
        for node in self._snapshot.nodes:
            sku = self._cluster.sku_types[node.sku_type]
            for _, name in _held(node):
                group = groups.get(name)
                if group is not None:
                    usage.setdefault(group.vc, _Usage()).add(
                        sku, self._units(sku, 1), opportunistic=group.priority < 0
                    )
        return usage


def _held(node: NodeSnapshot) -> Iterator[tuple[int, str]]:
    """(leaf index, group) for each leaf of the node a group holds; a shared GPU counts for
    the first group sharing it (its tasks are all of one VC unless they are opportunistic)."""
    for leaf in node.leaves:
        if leaf.group is not None:
            yield leaf.index, leaf.group
        elif leaf.shares:
            yield leaf.index, leaf.shares[0].group


def _job_of(group: str) -> str:
    """The framework name in a scheduler group's name (`<user>~<job>/<group>`)."""
    return group.rsplit("/", 1)[0]


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def _kind(sku: SkuType) -> str | None:
    return sku.device if sku.gpu > 0 else None
