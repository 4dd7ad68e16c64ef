"""From a job to the groups the scheduler places, as OpenPAI's server translates them for HiveD.

- leaf cells per task = max over gpu, cpu and memory of ceil(request / the SKU's unit), at least
  one; asking for a resource the SKU lacks is refused. A role's `skuNum` sets the number
  instead, and is refused if resourcePerInstance needs more cells than that;
- `jobPriorityClass` gives the priority: crit 120, prod 100, test 10 (default), oppo -1;
- with gang allocation (the default) roles with the same `affinityGroupName` form one group and
  roles without one share the group `default`; without gang allocation every task is its own
  group. A group is named `<job key>/<group>` (OpenPAI: `<user>~<job>/default`);
- without `skuType` or `pinnedCellId`, a group gets the first SKU of its VC (file order) that has
  every resource its tasks ask for and whose cells can hold them, preferring CPU-only SKUs for
  groups that ask for no GPU;
- a task asking for a share of a GPU (`gpu: 0.25`) shares one leaf cell of a SKU of one GPU per
  leaf cell with other such tasks of its VC (`pai.scheduler.gpushare`); its CPU and memory come
  from the node, not from more cells. Roles sharing GPUs and roles on whole cells of one affinity
  group are placed as two groups, `<group>` and `<group>-gpu-share`, which the job still starts
  together (all or nothing);
- requests that can never fit (unknown VC or SKU, more cells than the VC owns, a task larger than
  any of its cells, an opportunistic job on a pinned cell, ...) are refused before they queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pai.cluster.devices import DEFAULT_DEVICE_KIND, device_noun
from pai.cluster.model import ClusterConfig, SkuType
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.types import GpuShare, GroupRequest, PodRequest

if TYPE_CHECKING:
    from pai.protocol import JobSpec

PRIORITY_OF_CLASS = {"crit": 120, "prod": 100, "test": 10, "oppo": -1}
DEFAULT_PRIORITY_CLASS = "test"
DEFAULT_GROUP = "default"
SHARING_GROUP_SUFFIX = "-gpu-share"


class RequestRefused(ValueError):
    """The job can never run as written on this cluster; `problems` says why, one per item."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class _Role:
    name: str
    instances: int
    gpu: float
    cpu: int
    memory_mb: int
    gpu_milli: int | None  # thousandths of one GPU for a role that shares GPUs
    gpu_memory_mb: int
    sku_type: str | None
    sku_num: int | None
    pinned_cell_id: str | None
    group: str


def job_requests(spec: JobSpec, cluster: ClusterConfig, job_key: str) -> list[GroupRequest]:
    """The groups of `spec` in role order; raise `RequestRefused` listing every problem."""
    hived = spec.extras.hived_scheduler
    priority_class = hived.job_priority_class if hived is not None else DEFAULT_PRIORITY_CLASS
    priority = PRIORITY_OF_CLASS[priority_class]
    lazy = bool(hived.lazy_preemption_enable) if hived is not None else False
    settings = hived.task_roles if hived is not None else {}
    problems = [
        f"extras.hivedScheduler.taskRoles.{name}: no task role '{name}' in taskRoles"
        for name in settings
        if name not in spec.task_roles
    ]
    roles: list[_Role] = []
    for name, role in spec.task_roles.items():
        setting = settings.get(name)
        resources = role.resource_per_instance
        if setting is not None and setting.sku_type and setting.pinned_cell_id:
            problems.append(f"task role '{name}': give skuType or pinnedCellId, not both")
        group = (setting.affinity_group_name if setting is not None else None) or DEFAULT_GROUP
        roles.append(
            _Role(
                name=name,
                instances=role.instances,
                gpu=resources.gpu,
                cpu=resources.cpu,
                memory_mb=resources.memory_mb,
                gpu_milli=resources.gpu_milli,
                gpu_memory_mb=resources.gpu_memory_mb or 0,
                sku_type=setting.sku_type if setting is not None else None,
                sku_num=setting.sku_num if setting is not None else None,
                pinned_cell_id=setting.pinned_cell_id if setting is not None else None,
                group=group,
            )
        )
    vc = spec.virtual_cluster
    if vc not in cluster.virtual_clusters:
        known = ", ".join(cluster.virtual_clusters) or "none"
        problems.append(f"unknown virtual cluster '{vc}' (VCs: {known})")
    if problems:
        raise RequestRefused(problems)
    groups: dict[str, list[_Role]] = {}
    for member in roles:
        groups.setdefault(member.group, []).append(member)
    groups = _split_sharing(groups)
    capacity = CapacityIndex.of(cluster)
    requests: list[GroupRequest] = []
    for group_name, members in groups.items():
        try:
            target = _placement_target(members, cluster, vc, priority, group_name)
        except RequestRefused as refused:
            problems += refused.problems
            continue
        refusals: dict[str, str] = {}
        for sku in target.skus:
            try:
                pods = [
                    _pod(member, index, sku)
                    for member in members
                    for index in range(member.instances)
                ]
            except RequestRefused as refused:
                refusals[sku.name] = "; ".join(refused.problems)
                continue
            if spec.extras.gang_allocation:
                units = [(f"{job_key}/{group_name}", pods)]
            else:
                units = [(f"{job_key}/{pod.role}-{pod.index}", [pod]) for pod in pods]
            unit_requests = [
                GroupRequest(
                    name=name,
                    vc=vc,
                    priority=priority,
                    pods=tuple(unit),
                    sku_type=sku.name,
                    pinned_cell_id=target.pinned,
                    lazy_preemption=lazy,
                )
                for name, unit in units
            ]
            refusal = next(filter(None, map(capacity.refusal, unit_requests)), None)
            if refusal is None:
                requests += unit_requests
                break
            refusals[sku.name] = refusal
        else:
            gang = spec.extras.gang_allocation
            problems.append(target.refusal(members, refusals, capacity, gang=gang))
    if problems:
        raise RequestRefused(list(dict.fromkeys(problems)))
    return requests


def _split_sharing(groups: dict[str, list[_Role]]) -> dict[str, list[_Role]]:
    """Roles sharing GPUs leave an affinity group of whole-cell roles for a group of their own."""
    split: dict[str, list[_Role]] = {}
    for name, members in groups.items():
        sharing = [role for role in members if role.gpu_milli is not None]
        whole = [role for role in members if role.gpu_milli is None]
        if sharing and whole:
            split[name] = whole
            split[f"{name}{SHARING_GROUP_SUFFIX}"] = sharing
        else:
            split[name] = members
    return split


def _pod(role: _Role, index: int, sku: SkuType) -> PodRequest:
    if role.gpu_milli is None:
        return PodRequest(role.name, index, _leaf_cells(role, sku))
    if not sku.shareable:
        raise RequestRefused(
            [
                f"task role '{role.name}' asks for a share of a GPU but a leaf cell of SKU "
                f"'{sku.name}' is not one GPU ({sku.gpu} GPUs); shares need a SKU of one GPU"
            ]
        )
    share = GpuShare(role.gpu_milli, role.gpu_memory_mb)
    return PodRequest(role.name, index, 1, share, role.cpu * 1000, role.memory_mb)


@dataclass(frozen=True)
class _Target:
    """The SKUs an affinity group may take, in the order they are tried, and its pinned cell.

    A group that names its SKU or pinned cell has one; otherwise every SKU of its VC with the
    resources its tasks ask for, those without GPUs first for a group that asks for none."""

    skus: list[SkuType]
    pinned: str | None
    chosen_from: list[SkuType] | None
    """Every SKU of the VC, when PAI chooses among them (None: the job named its own)."""
    owner: str
    vc: str | None

    def refusal(
        self,
        members: list[_Role],
        refusals: dict[str, str],
        capacity: CapacityIndex,
        *,
        gang: bool,
    ) -> str:
        """Why no SKU of the target can hold the group: the one SKU's own reason, or, when PAI
        chose among several, each SKU of the VC and why it cannot."""
        if self.chosen_from is None or len(self.chosen_from) == 1:
            return refusals[self.skus[0].name]
        reasons = []
        for sku in self.chosen_from:
            missing = next(filter(None, (_lacking(role, sku) for role in members)), None)
            if missing is not None:
                reason = LACKING_REASONS[missing]
            else:
                reason = self._why_not(sku, refusals[sku.name], capacity, members, gang=gang)
            reasons.append(f"SKU '{sku.name}': {reason}")
        return f"no SKU of {self.owner} can run the tasks: {_asks(members)}; " + "; ".join(reasons)

    def _why_not(
        self,
        sku: SkuType,
        refusal: str,
        capacity: CapacityIndex,
        members: list[_Role],
        *,
        gang: bool,
    ) -> str:
        """A SKU's reason in what its nodes and the VC hold, which a user compares with what
        the tasks ask for; leaf cells mean little to someone who asked for CPUs."""
        if any(role.gpu_milli is not None for role in members):
            return refusal
        try:
            sizes = [_leaf_cells(role, sku) for role in members]
        except RequestRefused:
            return refusal
        held = capacity.sku_capacity(sku.name, self.vc)
        if max(sizes) > held.largest_node:
            return f"a node has at most {_held(sku, held.largest_node)}"
        needed = sum(role.instances * size for role, size in zip(members, sizes, strict=True))
        if gang and needed > held.leaves:
            return f"{self.owner} has {_held(sku, held.leaves)} in all, less than the tasks need"
        return refusal


LACKING_REASONS = {
    "gpu": "it has no GPUs",
    "cpu": "it has no CPUs",
    "memory": "it has no memory",
    "a share of one GPU": "its leaf cells are not one GPU each, as a share of a GPU needs",
    "GPU memory": "its GPUs have less GPU memory than a task asks for",
}
"""What `_lacking` finds, as a reason a SKU cannot run a group."""


def _placement_target(
    members: list[_Role], cluster: ClusterConfig, vc: str, priority: int, group: str
) -> _Target:
    """The SKUs (and pinned cell) of an affinity group, whose roles must agree on both."""
    wanted = {(role.sku_type, role.pinned_cell_id) for role in members}
    if len(wanted) > 1:
        roles = ", ".join(f"'{role.name}'" for role in members)
        raise RequestRefused(
            [
                f"roles {roles} form affinity group '{group}' but ask for different "
                "skuType/pinnedCellId; give them the same, or separate affinityGroupNames"
            ]
        )
    sku_type, pinned = wanted.pop()
    owner = f"VC '{vc}'" if priority >= 0 else "the cluster"
    if pinned is not None:
        if pinned not in cluster.pinned_cells:
            raise RequestRefused([f"unknown pinned cell '{pinned}'"])
        sku = cluster.chain_sku(cluster.pinned_cell_chain(pinned))
        return _Target([sku], pinned, None, owner, vc)
    if sku_type is not None:
        if sku_type not in cluster.sku_types:
            known = ", ".join(cluster.sku_types)
            raise RequestRefused([f"unknown skuType '{sku_type}' (SKU types: {known})"])
        return _Target([cluster.sku_types[sku_type]], None, None, owner, vc)
    skus = cluster.vc_sku_types[vc]
    if not skus and priority < 0:
        skus = cluster.chain_sku_types
    needs_gpu = any(role.gpu > 0 for role in members)
    usable = [sku for sku in skus if all(_lacking(role, sku) is None for role in members)]
    if not usable:
        offers = ", ".join(
            f"'{sku.name}' ({_amounts(sku.gpu, sku.cpu, sku.memory_mb, sku.device)})"
            for sku in skus
        )
        raise RequestRefused(
            [
                f"no SKU of {owner} provides what the tasks ask for: {_asks(members)}; the SKUs "
                f"of {owner} offer per leaf cell: {offers or 'nothing (it has no cells)'}"
            ]
        )
    usable.sort(key=lambda sku: (sku.gpu > 0) != needs_gpu)
    chosen_from = sorted(skus, key=lambda sku: (sku.gpu > 0) != needs_gpu)
    return _Target(usable, None, chosen_from, owner, vc if priority >= 0 else None)


def _asks(members: list[_Role]) -> str:
    return "; ".join(
        f"task role '{role.name}' asks for {_amounts(role.gpu, role.cpu, role.memory_mb)} per task"
        for role in members
    )


def _held(sku: SkuType, leaves: int) -> str:
    """What `leaves` leaf cells of `sku` hold together."""
    return _amounts(leaves * sku.gpu, leaves * sku.cpu, leaves * sku.memory_mb, sku.device)


def _lacking(role: _Role, sku: SkuType) -> str | None:
    if role.gpu_milli is not None:
        if not sku.shareable:
            return "a share of one GPU"
        if role.gpu_memory_mb > sku.gpu_memory_mb:
            return "GPU memory"
        return None
    for resource, asked, unit in (
        ("gpu", role.gpu, sku.gpu),
        ("cpu", role.cpu, sku.cpu),
        ("memory", role.memory_mb, sku.memory_mb),
    ):
        if asked > 0 and unit == 0:
            return resource
    return None


def _leaf_cells(role: _Role, sku: SkuType) -> int:
    lacking = _lacking(role, sku)
    if lacking is not None:
        raise RequestRefused(
            [f"task role '{role.name}' asks for {lacking} but SKU '{sku.name}' has none"]
        )
    counts = [
        math.ceil(asked / unit)
        for asked, unit in (
            (role.gpu, sku.gpu),
            (role.cpu, sku.cpu),
            (role.memory_mb, sku.memory_mb),
        )
        if unit > 0
    ]
    needed = max([1, *counts])
    if role.sku_num is None:
        return needed
    if needed > role.sku_num:
        raise RequestRefused(
            [
                f"extras.hivedScheduler.taskRoles.{role.name}.skuNum: {role.sku_num} leaf "
                f"cell(s) of SKU '{sku.name}' "
                f"({_amounts(sku.gpu, sku.cpu, sku.memory_mb, sku.device)} "
                f"each) hold less than the resourcePerInstance of task role '{role.name}' "
                f"({_amounts(role.gpu, role.cpu, role.memory_mb)}), which needs {needed}; "
                "raise skuNum or lower resourcePerInstance"
            ]
        )
    return role.sku_num


def _amounts(gpu: float, cpu: int, memory_mb: int, kind: str = DEFAULT_DEVICE_KIND) -> str:
    """`1 GPU, 8 CPUs and 61440 MB of memory` (`0.25 GPU ...` for a share; devices of another
    kind by their kind: `1 acc.example/npu, ...`)."""
    cpus = "CPU" if cpu == 1 else "CPUs"
    return f"{gpu} {device_noun(kind, gpu)}, {cpu} {cpus} and {memory_mb} MB of memory"
