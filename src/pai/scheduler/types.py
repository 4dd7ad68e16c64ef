"""What callers exchange with the scheduler: requests, decisions, allocations and snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

OPPORTUNISTIC_PRIORITY = -1
MIN_GUARANTEED_PRIORITY = 0
MAX_PRIORITY = 1000


GPU_MILLI = 1000
"""A whole GPU in thousandths, the unit GPU shares are counted in."""


@dataclass(frozen=True)
class GpuShare:
    """Part of one GPU: `milli` thousandths of its compute (0..1000) and `memory_mb` of its
    memory (0: no amount asked, the task shares the GPU's memory with the others)."""

    milli: int
    memory_mb: int = 0

    @property
    def fraction(self) -> float:
        return self.milli / GPU_MILLI


@dataclass(frozen=True)
class PodRequest:
    """One task of a job: `leaf_cells` leaf cells (GPUs, or CPU slots) on a single node, or,
    with `share`, part of one GPU that other sharing tasks of its VC use too (`leaf_cells` 1).

    `cpu_milli` and `memory_mb` are the node's CPU (thousandths of a core) and memory the task
    needs. A whole-cell task must find them in its cells' shares (SKU cpu and memory per leaf
    cell); tasks sharing GPUs of a node pool the shares of those GPUs (`pai.scheduler.sharing`).
    """

    role: str
    index: int
    leaf_cells: int
    share: GpuShare | None = None
    cpu_milli: int = 0
    memory_mb: int = 0


@dataclass(frozen=True)
class GroupRequest:
    """An affinity group: the pods that are placed together, all or nothing (a gang).

    `priority` -1 is opportunistic (uses idle cells anywhere, preemptible, never preempts);
    0..1000 is guaranteed within the VC's cells. `sku_type` restricts the chains tried;
    `pinned_cell_id` restricts the group to one of the VC's pinned cells.
    """

    name: str
    vc: str
    priority: int
    pods: tuple[PodRequest, ...]
    sku_type: str | None = None
    pinned_cell_id: str | None = None
    lazy_preemption: bool = False

    @property
    def opportunistic(self) -> bool:
        return self.priority < MIN_GUARANTEED_PRIORITY

    @property
    def leaf_cells(self) -> int:
        return sum(pod.leaf_cells for pod in self.pods)

    @property
    def shares(self) -> bool:
        """Whether the group's pods share GPUs (a group shares all its GPUs or none)."""
        return any(pod.share is not None for pod in self.pods)


@dataclass(frozen=True)
class PodPlacement:
    """Where one pod runs. `leaf_indices` are GPU indices (CPU slot indices for CPU SKUs).

    `cell_type` is the type of the VC cell the pod counts against (HiveD's preassigned cell type);
    None for opportunistic pods. It lets `Scheduler.rebuild` reproduce the same VC accounting.
    """

    role: str
    index: int
    node: str
    address: str
    leaf_indices: tuple[int, ...]
    cell_type: str | None
    share: GpuShare | None = None  # the part of its one GPU a sharing pod gets


@dataclass(frozen=True)
class Placement:
    chain: str
    pods: tuple[PodPlacement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        """Distinct nodes, in pod order."""
        return tuple(dict.fromkeys(pod.node for pod in self.pods))


@dataclass(frozen=True)
class Bind:
    """Run the group now: call `Scheduler.allocate(name, placement)` before anything else.

    `downgraded`: groups this decision lazily preempted (they keep running, as opportunistic).
    """

    placement: Placement
    downgraded: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preempt:
    """The group's cells are reserved; stop the `victims` (whole groups), then schedule again."""

    victims: tuple[str, ...]
    placement: Placement
    downgraded: tuple[str, ...] = ()


class WaitKind(StrEnum):
    VC_QUOTA = "vc_quota"  # the VC's cells are in use by its own groups of equal/higher priority
    TOPOLOGY = "topology"  # enough free cells, but not in the shape asked (e.g. a whole node)
    BAD_NODES = "bad_nodes"  # the only cells that would fit are on unhealthy nodes
    OPPORTUNISTIC_CAPACITY = "opportunistic_capacity"  # not enough idle cells in the cluster
    USER_LIMIT = "user_limit"  # its user holds what a user may in the VC (`userlimits`)
    UNSCHEDULABLE = "unschedulable"  # can never fit as asked (fix the request or the cluster)
    PREPARING = "preparing"  # placed; its node prepares a task (pulls its image)


@dataclass(frozen=True)
class WaitReason:
    """Why a group waits: `message` is one sentence for the user, `details` the data behind it."""

    kind: WaitKind
    message: str
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Wait:
    reason: WaitReason


Decision = Bind | Preempt | Wait


@dataclass(frozen=True)
class Allocation:
    """A running group as persisted by the caller, replayed by `Scheduler.rebuild`.

    `opportunistic` is true when the group was lazily preempted (a `downgraded` name).
    """

    request: GroupRequest
    placement: Placement
    opportunistic: bool = False


@dataclass(frozen=True)
class RebuildResult:
    """Groups that could not be restored as they were: `downgraded` now run as opportunistic
    (their VC no longer has room for them, e.g. after a quota change); `rejected` could not be
    placed at all (unknown node or cell, or a cell already taken) and should be stopped."""

    downgraded: tuple[str, ...] = ()
    rejected: Mapping[str, str] = field(default_factory=dict)


class GroupState(StrEnum):
    ALLOCATED = "allocated"
    PREEMPTING = "preempting"  # cells reserved, waiting for its victims to stop
    BEING_PREEMPTED = "being_preempted"  # allocated, and a preemptor reserved some of its cells


@dataclass(frozen=True)
class ShareUsage:
    """One task's part of a shared GPU: the task `role`/`index` of `group`."""

    group: str
    role: str
    index: int
    milli: int
    memory_mb: int = 0


@dataclass(frozen=True)
class LeafUsage:
    """A leaf cell: the group holding it whole, or, when it is shared, the groups sharing it
    (`shares`, `group` None) and the thousandths of the GPU still free (`free_milli`)."""

    index: int
    group: str | None
    priority: int | None
    reserved_by: str | None = None
    shares: tuple[ShareUsage, ...] = ()
    free_milli: int | None = None

    @property
    def shared(self) -> bool:
        return self.free_milli is not None


@dataclass(frozen=True)
class NodeSnapshot:
    name: str
    address: str
    chain: str
    sku_type: str
    healthy: bool
    total_leaves: int
    used_leaves: int
    free_leaves: int
    leaves: tuple[LeafUsage, ...]


@dataclass(frozen=True)
class VcSnapshot:
    """A VC's guarantee and its use. `used` counts the VC's guaranteed groups (reservations of its
    preemptors included); `opportunistic_*` its opportunistic groups, wherever they run."""

    name: str
    guaranteed_leaves: int
    used_leaves: int
    free_leaves: int
    guaranteed_gpus: int
    used_gpus: int
    free_gpus: int
    guaranteed_cells: Mapping[str, int]
    free_cells: Mapping[str, int]  # cell type -> cells of the VC with nothing running in them
    opportunistic_leaves: int
    opportunistic_gpus: int
    groups: Mapping[str, int]  # guaranteed group -> leaf cells it holds in the VC


@dataclass(frozen=True)
class GroupSnapshot:
    name: str
    vc: str
    priority: int  # effective: -1 once lazily preempted
    state: GroupState
    leaves: int
    preemptors: tuple[str, ...] = ()
    victims: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterSnapshot:
    vcs: Mapping[str, VcSnapshot]
    nodes: tuple[NodeSnapshot, ...]
    groups: Mapping[str, GroupSnapshot]
