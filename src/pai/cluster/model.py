"""The validated cluster description: what the cluster file says, with every default filled in.

Everything here is immutable and already checked (see `pai.cluster.parse`), so the scheduler and
the rest of PAI can trust it without re-validating.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from pai.cluster.devices import DEFAULT_DEVICE_KIND, device_noun

DEFAULT_STOP_GRACE_SECONDS = 10
"""From SIGTERM to SIGKILL when a task is stopped or preempted, unless the cluster file or the job
says otherwise."""


class ClusterConfigError(ValueError):
    """A cluster file is invalid; `problems` lists every problem found, each naming where it is."""

    def __init__(self, problems: list[str], source: str = "cluster file") -> None:
        self.problems = list(problems)
        self.source = source
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{source} is invalid ({len(self.problems)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class SkuType:
    """The resources of one leaf cell: a device with its share of the node, or a slice of CPUs.

    `gpu` counts the leaf's devices, of kind `device` (a CDI kind; NVIDIA GPUs unless the
    cluster file says otherwise). `gpu_memory_mb` is the memory of each of the leaf's devices
    (0: not declared), which tasks sharing a device may ask a part of.
    """

    name: str
    gpu: int
    cpu: int
    memory_mb: int
    gpu_memory_mb: int = 0
    device: str = DEFAULT_DEVICE_KIND

    @property
    def shareable(self) -> bool:
        """Whether tasks may share its leaf cells: a leaf cell of exactly one GPU."""
        return self.gpu == 1

    @property
    def unit_noun(self) -> str:
        """How messages count this SKU's leaf cells: in its devices (GPUs, or the kind for
        another kind), or in CPUs where it has none."""
        return device_noun(self.device, 2) if self.gpu > 0 else "CPUs"

    @property
    def unit(self) -> str:
        """One of what `unit_noun` counts: `GPU`, the kind, or `CPU`."""
        return device_noun(self.device, 1) if self.gpu > 0 else "CPU"


@dataclass(frozen=True)
class CellType:
    name: str
    child_type: str
    child_number: int
    is_node_level: bool


@dataclass(frozen=True)
class Chain:
    """All physical trees whose top-level cell type is `name`; a group never spans chains.

    `types[0]` is the leaf (SKU) type at level 1, `types[-1]` the top type. Within a chain every
    cell of a level has the same shape, which is what lets the scheduler count cells per level.
    """

    name: str
    types: tuple[str, ...]
    child_numbers: tuple[int, ...]  # child_numbers[i]: children of a cell at level i + 1 (leaf: 0)
    node_level: int
    sku_type: str

    @property
    def top_level(self) -> int:
        return len(self.types)

    def level_of(self, cell_type: str) -> int:
        return self.types.index(cell_type) + 1

    def type_at(self, level: int) -> str:
        return self.types[level - 1]

    @cached_property
    def _leaves_per_level(self) -> tuple[int, ...]:
        counts = [0, 1]
        for level in range(2, self.top_level + 1):
            counts.append(counts[-1] * self.child_numbers[level - 1])
        return tuple(counts)

    def leaves_per_cell(self, level: int) -> int:
        return self._leaves_per_level[level]

    def cells_per_cell(self, upper: int, lower: int) -> int:
        """How many level-`lower` cells one level-`upper` cell contains."""
        return self.leaves_per_cell(upper) // self.leaves_per_cell(lower)


@dataclass(frozen=True)
class PhysicalCellSpec:
    """One physical cell with its inferred address; node-level cells carry the node's identity."""

    cell_type: str
    level: int
    address: str
    pinned_cell_id: str | None
    children: tuple[PhysicalCellSpec, ...]
    node_name: str | None = None
    node_address: str | None = None
    leaf_index: int | None = None

    def walk(self) -> Iterator[PhysicalCellSpec]:
        """This cell and all its descendants, depth first, children in file order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> Iterator[PhysicalCellSpec]:
        return (cell for cell in self.walk() if not cell.children)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    address: str
    chain: str
    sku_type: str
    leaf_indices: tuple[int, ...]
    rdma: bool = False
    """The node has RDMA devices (InfiniBand, RoCE) for the tasks of jobs of several tasks."""


@dataclass(frozen=True)
class VirtualCellSpec:
    """`number` cells of `cell_type` in `chain`, owned by a VC (HiveD's preassigned cells)."""

    chain: str
    cell_type: str
    number: int


@dataclass(frozen=True)
class UserLimit:
    """The most one user's guaranteed jobs may hold in a VC at once: GPUs, CPUs, running jobs.

    None is no limit on that resource. A VC's `userLimit` in the cluster file is the default for
    its users; an administrator may give a group's members another (`pai.scheduler.userlimits`).
    """

    gpus: float | None = None
    cpus: float | None = None
    jobs: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.gpus is None and self.cpus is None and self.jobs is None

    def most_generous(self, other: UserLimit) -> UserLimit:
        """Per resource the larger of the two limits (no limit beats any): what a member of
        several limited groups may use."""
        return UserLimit(
            _larger(self.gpus, other.gpus),
            _larger(self.cpus, other.cpus),
            _larger(self.jobs, other.jobs),
        )


_Amount = TypeVar("_Amount", int, float)


def _larger(first: _Amount | None, second: _Amount | None) -> _Amount | None:
    if first is None or second is None:
        return None
    return max(first, second)


@dataclass(frozen=True)
class VirtualClusterSpec:
    name: str
    virtual_cells: tuple[VirtualCellSpec, ...]
    pinned_cells: tuple[str, ...]
    user_limit: UserLimit = field(default_factory=UserLimit)
    """The default limit of each user of the VC (`userLimit`; unlimited when absent)."""


@dataclass(frozen=True)
class ClusterConfig:
    sku_types: dict[str, SkuType]
    cell_types: dict[str, CellType]
    chains: dict[str, Chain]
    physical_cells: tuple[PhysicalCellSpec, ...]
    virtual_clusters: dict[str, VirtualClusterSpec]
    nodes: tuple[NodeSpec, ...]
    pinned_cells: dict[str, PhysicalCellSpec] = field(default_factory=dict)
    stop_grace_seconds: int = DEFAULT_STOP_GRACE_SECONDS  # a job's default SIGTERM grace period

    @cached_property
    def rdma_nodes(self) -> frozenset[str]:
        """The names of the nodes that have RDMA devices (`rdma: true`)."""
        return frozenset(node.name for node in self.nodes if node.rdma)

    def chain_sku(self, chain: str) -> SkuType:
        return self.sku_types[self.chains[chain].sku_type]

    @cached_property
    def vc_sku_types(self) -> dict[str, tuple[SkuType, ...]]:
        """The SKU types of each VC's cells, each once, in the order its cells are listed."""
        return {
            name: tuple(
                {
                    self.chain_sku(cell.chain).name: self.chain_sku(cell.chain)
                    for cell in vc.virtual_cells
                }.values()
            )
            for name, vc in self.virtual_clusters.items()
        }

    @cached_property
    def chain_sku_types(self) -> tuple[SkuType, ...]:
        """The SKU types of every chain of the cluster, each once."""
        return tuple(
            {self.chain_sku(chain).name: self.chain_sku(chain) for chain in self.chains}.values()
        )

    def pinned_cell_chain(self, pinned_cell_id: str) -> str:
        for top in self.physical_cells:
            if any(cell.pinned_cell_id == pinned_cell_id for cell in top.walk()):
                return top.cell_type
        raise KeyError(pinned_cell_id)
