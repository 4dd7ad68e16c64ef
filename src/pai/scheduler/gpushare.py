"""What GPU sharing is made of: shared GPUs, the spaces that pool their CPU and memory, and the
offers a placement policy chooses from.

A *shared GPU* is a leaf cell held, in HiveD's books, by a one-leaf *pool* group of one sharing
class: the guaranteed tasks of one VC (or pinned cell) at one priority, or the opportunistic
tasks. Everything HiveD promises about cells therefore holds for shared GPUs unchanged: a pool
binds its VC's cells like any group, preempting it stops every task in it, and its VC counts the
GPU as used. Inside, the shared GPU records what each task takes: thousandths of its compute and
megabytes of its memory, up to the whole GPU.

Every leaf cell comes with the SKU's share of its node's CPU and memory. The sharing tasks of one
class on one node (a *space*) pool the shares of their shared GPUs there. A task needing more CPU
or memory than its space has free takes further free GPUs of the node into the space (they stay
usable by the space's sharing tasks), so a sharing task never uses what a whole-GPU task or
another VC is owed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pai.scheduler.types import GPU_MILLI, GpuShare, PodRequest

if TYPE_CHECKING:
    from pai.scheduler.cells import PhysicalCell, VirtualCell
    from pai.scheduler.groups import GroupRecord
    from pai.scheduler.views import VcView


@dataclass(frozen=True, eq=False)
class ShareClass:
    """Who may share a GPU: guaranteed tasks of one VC view at one priority, or (`view` None)
    opportunistic tasks of any VC. Identity is the view's, so two classes compare by value."""

    view: VcView | None
    priority: int

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ShareClass)
            and self.view is other.view
            and self.priority == other.priority
        )

    def __hash__(self) -> int:
        return hash((id(self.view), self.priority))

    @property
    def opportunistic(self) -> bool:
        return self.view is None


MemberKey = tuple[str, str, int]
"""(group, role, task index): one sharing task."""


class PodAsk(NamedTuple):
    """What one sharing task needs; hashable, so answers can be remembered per kind of task."""

    milli: int
    gpu_memory_mb: int
    cpu_milli: int
    memory_mb: int

    @classmethod
    def of(cls, pod: PodRequest) -> PodAsk:
        share = pod.share or GpuShare(GPU_MILLI)
        return cls(share.milli, share.memory_mb, pod.cpu_milli, pod.memory_mb)


class SharedGpu:
    """A leaf cell shared by tasks of one class; `pool` holds the leaf in HiveD's books.

    `milli` and `gpu_memory_mb` count what the members take and what preemptors hold for the
    tasks they will start here once their victims stop (`Hold`).
    """

    __slots__ = ("gpu_memory_mb", "held", "leaf", "members", "milli", "pool", "space")

    def __init__(self, leaf: PhysicalCell, pool: GroupRecord, space: ShareSpace) -> None:
        self.leaf = leaf
        self.pool = pool
        self.space = space
        self.members: dict[MemberKey, PodAsk] = {}
        self.milli = 0  # thousandths of the GPU taken or held
        self.gpu_memory_mb = 0
        self.held = 0  # holds on it: it stays shared while a preemptor counts on it

    def __repr__(self) -> str:
        node = self.leaf.node.name if self.leaf.node else "?"
        return f"SharedGpu({node}/{self.leaf.leaf_index} {self.milli}/{GPU_MILLI})"

    @property
    def usable(self) -> bool:
        """Whether new tasks may join: not being taken by a preemptor."""
        return self.leaf.reserver is None

    def stops(self) -> list[str]:
        """The groups that must stop for the GPU to be taken from its space: those sharing it,
        and, if the space's other tasks need its CPU or memory share, all of the space's."""
        groups = {group for group, _, _ in self.members}
        space = self.space
        cpu = space.cpu_free - space.cpu_share + sum(a.cpu_milli for a in self.members.values())
        memory = space.memory_free - space.memory_share
        memory += sum(ask.memory_mb for ask in self.members.values())
        if cpu < 0 or memory < 0:
            groups.update(group for gpu in space.gpus for group, _, _ in gpu.members)
        return sorted(groups)


class ShareSpace:
    """The shared GPUs of one class on one node, which pool their CPU and memory shares.

    `site` is the node as the class sees it: a VC's node cell (guaranteed) or the physical node
    cell (opportunistic). `cpu_used` and `memory_used` count what members take and what
    preemptors hold.
    """

    __slots__ = (
        "cls",
        "cpu_share",
        "cpu_used",
        "gpus",
        "holders",
        "memory_share",
        "memory_used",
        "site",
    )

    def __init__(
        self,
        cls: ShareClass,
        site: VirtualCell | PhysicalCell,
        cpu_share: int,
        memory_share: int,
    ) -> None:
        self.cls = cls
        self.site = site
        self.cpu_share = cpu_share  # per GPU, thousandths of a core
        self.memory_share = memory_share  # per GPU, MB
        self.gpus: list[SharedGpu] = []
        self.cpu_used = 0
        self.memory_used = 0
        self.holders: dict[str, GroupRecord] = {}  # preempting groups with holds here

    @property
    def cpu_free(self) -> int:
        return len(self.gpus) * self.cpu_share - self.cpu_used

    @property
    def memory_free(self) -> int:
        return len(self.gpus) * self.memory_share - self.memory_used

    def spare_gpus(self) -> list[SharedGpu]:
        """Empty shared GPUs the space can give back without going over its CPU and memory."""
        spare: list[SharedGpu] = []
        cpu, memory = self.cpu_free, self.memory_free
        for gpu in reversed(self.gpus):
            if gpu.held or gpu.members or cpu < self.cpu_share or memory < self.memory_share:
                continue
            spare.append(gpu)
            cpu -= self.cpu_share
            memory -= self.memory_share
        return spare


@dataclass(frozen=True)
class Hold:
    """What a preempting group keeps for its tasks until its victims stop: part of a shared
    GPU it will join, or CPU and memory of a space its tasks will count on."""

    gpu: SharedGpu | None
    space: ShareSpace
    milli: int = 0
    gpu_memory_mb: int = 0
    cpu_milli: int = 0
    memory_mb: int = 0


# == offers: what a placement policy sees ========================================================


class GpuSlot(NamedTuple):
    """A GPU a sharing task could use: how much of it is free, and whether tasks of its class
    already share it (`shared`) or it is a free GPU the task would start sharing. `sizes` are
    the thousandths the tasks on it take, smallest first."""

    free_milli: int
    free_memory_mb: int
    shared: bool
    sizes: tuple[int, ...] = ()

    def taken_by(self, ask: PodAsk) -> GpuSlot:
        """The slot once `ask` took its part of the GPU."""
        return GpuSlot(
            self.free_milli - ask.milli,
            self.free_memory_mb - ask.gpu_memory_mb,
            True,
            tuple(sorted((*self.sizes, ask.milli))),
        )


@dataclass(frozen=True)
class NodeOffer:
    """A node as a sharing task of one class sees it: its usable GPUs (`slots`, sorted), all its
    GPUs (`gpus`; those not in `slots` are held by others), the CPU (thousandths of a core)
    and memory it could have, and the node's totals. `gpu_memory_mb` is each GPU's memory
    (0: not declared)."""

    slots: tuple[GpuSlot, ...]
    gpus: int
    cpu_free: int
    memory_free: int
    cpu_total: int
    memory_total: int
    gpu_memory_mb: int

    def fits(self, ask: PodAsk, slot: GpuSlot) -> bool:
        if slot.free_milli < ask.milli:
            return False
        if ask.gpu_memory_mb and slot.free_memory_mb < ask.gpu_memory_mb:
            return False
        return ask.cpu_milli <= self.cpu_free and ask.memory_mb <= self.memory_free

    def usable_slots(self, ask: PodAsk) -> list[int]:
        """Indexes of the slots `ask` fits in, each distinct slot once."""
        if ask.cpu_milli > self.cpu_free or ask.memory_mb > self.memory_free:
            return []
        milli, memory = ask.milli, ask.gpu_memory_mb
        found: list[int] = []
        previous: GpuSlot | None = None
        for index, slot in enumerate(self.slots):
            if slot[0] >= milli and (not memory or slot[1] >= memory) and slot != previous:
                found.append(index)
            previous = slot
        return found


Score = tuple[float, ...]
"""Lower is better; compared as tuples."""


class SharePolicy(Protocol):
    """Where a sharing task goes: PAI's own (`pai.scheduler.fragmentation`) or a baseline.

    `choose` returns the best slot of `offer` for `ask` with its score, or None when none fits;
    the scheduler takes the node with the lowest score (ties: the most used node, then a fixed
    order). When `pure` is true the answer depends only on the arguments and `version`, so the
    scheduler reuses it while the node and `version` stay the same.
    """

    pure: bool
    version: int

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None: ...

    def observe(self, group: str, asks: Sequence[PodAsk]) -> None:
        """The tasks of `group` ask to be placed (policies may learn the workload from them)."""
        ...
