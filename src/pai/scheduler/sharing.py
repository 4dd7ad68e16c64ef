"""Placing groups whose tasks share GPUs, inside HiveD (the model: `pai.scheduler.gpushare`).

A sharing group is placed in the same two views as any other group:

- guaranteed: on the nodes of its VC's view, the VC's bound node cells and the nodes it could
  still bind, as on a private cluster of its cells; first taking only GPUs free in that view,
  then, if that fails, also those of the VC's lower-priority groups. A GPU free in the VC's view
  may be used opportunistically by another VC: taking it preempts that use (HiveD's rule);
- opportunistic: on idle GPUs and on the opportunistic shared GPUs of any node.

The `SharePolicy` chooses, node by node, the GPU it would take and how good that is; the node
with the best answer wins (ties: the most used node, then a fixed order). Nodes that look alike
to the class are offered once: the VC cells not bound yet are one node of their level. The
chosen VC leaves are then mapped to physical leaves as HiveD maps any group's.

A task needing more CPU or memory than its space has free *claims* free GPUs of the node into
the space (`gpushare`); like the GPU it shares, a claimed GPU free in the VC's view may have to
be preempted first. A group that must wait for preemptions keeps all it counts on meanwhile:
the leaves, as HiveD reserves cells, and the shares of shared GPUs and spaces (`Hold`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pai.scheduler import reasons
from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.gpushare import (
    GpuSlot,
    Hold,
    MemberKey,
    NodeOffer,
    PodAsk,
    ShareClass,
    SharedGpu,
    SharePolicy,
    ShareSpace,
)
from pai.scheduler.groups import GroupRecord
from pai.scheduler.mapping import CellMapping
from pai.scheduler.picker import PickerNode
from pai.scheduler.shareindex import Answer, Draft, Site, SiteIndex, Target
from pai.scheduler.types import (
    GPU_MILLI,
    OPPORTUNISTIC_PRIORITY,
    Allocation,
    Bind,
    Decision,
    GroupRequest,
    GroupState,
    Placement,
    PodPlacement,
    PodRequest,
    Preempt,
    Wait,
    WaitReason,
)

if TYPE_CHECKING:
    from pai.scheduler.admission import CapacityIndex
    from pai.scheduler.views import PhysicalView, VcView

POOL_ROLE = "gpu"
POOL_PREFIX = "shared-gpu:"
"""Pool records are named `shared-gpu:<node>/<leaf index>`; job groups always contain '~'."""
MAX_TRIES = 8
"""Plans a decision may rule out (a plan that cannot be mapped or reserved) before it waits."""


@dataclass
class _Take:
    """Where one sharing pod goes in a plan."""

    pod: int
    ask: PodAsk
    cls: ShareClass
    site: Site
    target: Target
    claims: list[Target] = field(default_factory=list)
    leaf: PhysicalCell | None = None  # the physical leaf of the GPU it uses, once mapped
    claim_leaves: list[PhysicalCell] = field(default_factory=list)


@dataclass
class _Plan:
    request: GroupRequest
    takes: list[_Take]
    placement: Placement


class SharingState(CellMapping):
    """The GPU-sharing half of the scheduler: shared GPUs, spaces, and sharing decisions."""

    share_policy: SharePolicy
    _capacity: CapacityIndex

    def _reset(self) -> None:
        self._reset_shares()
        super()._reset()

    def _reset_shares(self) -> None:
        self._shared: dict[PhysicalCell, SharedGpu] = {}
        self._spaces: dict[tuple[ShareClass, Site], ShareSpace] = {}
        self._share_offer: _Plan | None = None
        self._indexes: dict[tuple[ShareClass, int], SiteIndex] = {}
        self._watching: dict[int, list[SiteIndex]] = {}
        self._class_free: Counter[ShareClass] = Counter()  # free thousandths of shared GPUs

    def _flush(self) -> None:
        for vcell, view in self._dirty_v.items():
            for index in self._watching.get(id(view), ()):
                index.touched(vcell)
        for pcell, physical_view in self._dirty_p.items():
            for index in self._watching.get(id(physical_view), ()):
                index.touched(pcell)
        super()._flush()

    def _site_index(self, cls: ShareClass, view: VcView | PhysicalView) -> SiteIndex:
        """The index of `cls` over `view`'s nodes, made on first use and kept current."""
        key = (cls, id(view))
        index = self._indexes.get(key)
        if index is None:
            sites: list[tuple[Site, PickerNode]] = list(view.nodes.items())
            index = SiteIndex(cls, sites, partial(self._build_draft, cls, preempt=None))
            self._indexes[key] = index
            self._watching.setdefault(id(view), []).append(index)
        return index

    # == deciding ================================================================================

    def _schedule_shares(self, request: GroupRequest) -> Decision:
        asks = [PodAsk.of(pod) for pod in request.pods]
        self.share_policy.observe(request.name, asks)
        if request.opportunistic:
            cls = ShareClass(None, OPPORTUNISTIC_PRIORITY)
            indexes = [
                self._site_index(cls, self._chains[chain].physical_view)
                for chain in self._capacity.opportunistic_chains(request)
            ]
            plan = self._plan(request, asks, indexes, None, set())
            if plan is not None and self._map(plan) is not None:
                return self._offer_plan(plan)
            return Wait(self._share_wait(request, asks, None))
        views = self._share_views(request)
        passes: list[int | None] = [None]
        if request.priority >= 0 and any(
            any(p < request.priority for p in view.by_priority) for view in views
        ):
            passes.append(request.priority)
        indexes = [self._site_index(ShareClass(view, request.priority), view) for view in views]
        for preempt in passes:
            excluded: set[Site] = set()
            for _ in range(MAX_TRIES):
                plan = self._plan(request, asks, indexes, preempt, excluded)
                if plan is None:
                    break
                victims = self._map(plan)
                if victims is None:
                    excluded.update(take.site for take in plan.takes)
                    continue
                if not victims:
                    return self._offer_plan(plan)
                return self._reserve(plan, victims)
        return Wait(self._share_wait(request, asks, views))

    def _share_views(self, request: GroupRequest) -> list[VcView]:
        if request.pinned_cell_id is not None:
            return [self._pinned_views[request.pinned_cell_id]]
        return [
            self._views[(request.vc, chain)] for chain in self._capacity.guaranteed_chains(request)
        ]

    def _plan(
        self,
        request: GroupRequest,
        asks: Sequence[PodAsk],
        indexes: list[SiteIndex],
        preempt: int | None,
        excluded: set[Site],
    ) -> _Plan | None:
        """Choose a GPU for each pod, largest first, all in one chain; None when some pod fits
        nowhere. A lone pod outside preemption is answered from the indexes' heaps."""
        policy = self.share_policy
        fast = policy.pure and preempt is None and not excluded and len(asks) == 1
        overlay: dict[Site, Draft] = {}
        takes: list[_Take] = []
        order = sorted(range(len(asks)), key=lambda i: (-asks[i].milli, i))
        for pod_index in order:
            ask = asks[pod_index]
            best: tuple[Answer, SiteIndex] | None = None
            for index in indexes:
                found = (
                    index.best(ask, policy)
                    if fast
                    else self._scan(index, ask, preempt, excluded, overlay)
                )
                if found is not None and (best is None or found[0] < best[0][0]):
                    best = (found, index)
            if best is None:
                return None
            (_, site, draft, slot), index = best
            overlay[site], target, claims = draft.take(slot, ask)
            takes.append(_Take(pod_index, ask, index.cls, site, target, claims))
            indexes = [other for other in indexes if other.sites[0][0].chain is site.chain]
        takes.sort(key=lambda take: take.pod)
        return _Plan(request, takes, Placement("", ()))

    def _scan(
        self,
        index: SiteIndex,
        ask: PodAsk,
        preempt: int | None,
        excluded: set[Site],
        overlay: dict[Site, Draft],
    ) -> Answer | None:
        """The best answer over every site of the index."""
        best: Answer | None = None
        for site, node in index.sites:
            if site in excluded:
                continue
            draft = overlay.get(site)
            if draft is None:
                if preempt is None:
                    draft = index.draft(site)
                elif node.healthy:
                    draft = self._build_draft(index.cls, site, preempt)
            if draft is None:
                continue
            found = index.answer(site, draft, ask, self.share_policy)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        return best

    def _build_draft(self, cls: ShareClass, site: Site, preempt: int | None) -> Draft | None:
        chain = site.chain
        sku = self.cluster.chain_sku(chain.name)
        cpu_share, memory_share = sku.cpu * 1000, sku.memory_mb
        gpu_memory = sku.gpu_memory_mb
        entries: list[tuple[GpuSlot, Target]] = []
        free = 0
        for leaf in site.leaves:
            holder = leaf.holder
            if isinstance(leaf, PhysicalCell) and leaf.reserver is not None:
                continue
            if holder is None:
                entries.append((GpuSlot(GPU_MILLI, gpu_memory, False), leaf))
                free += 1
                continue
            gpu = holder.gpu
            if gpu is not None and gpu.space.cls == cls:
                if gpu.usable:
                    sizes = tuple(sorted(ask.milli for ask in gpu.members.values()))
                    slot = GpuSlot(
                        GPU_MILLI - gpu.milli, gpu_memory - gpu.gpu_memory_mb, True, sizes
                    )
                    entries.append((slot, gpu))
                continue
            if preempt is not None and holder.priority < preempt:
                entries.append((GpuSlot(GPU_MILLI, gpu_memory, False), leaf))
                free += 1
        if not entries:
            return None
        space = self._spaces.get((cls, site))
        space_cpu = space.cpu_free if space is not None else 0
        space_memory = space.memory_free if space is not None else 0
        count = len(site.leaves)
        base = NodeOffer(
            (),
            count,
            space_cpu + free * cpu_share,
            space_memory + free * memory_share,
            count * cpu_share,
            count * memory_share,
            gpu_memory,
        )
        return Draft(entries, base, space_cpu, space_memory, cpu_share, memory_share)

    def _map(self, plan: _Plan) -> set[str] | None:
        """Physical leaves for the plan's VC leaves (HiveD's mapping) and its placement; the
        groups to preempt (empty: none), or None when a claim would need preemption."""
        by_chain: dict[str, list[tuple[_Take, list[VirtualCell]]]] = {}
        for take in plan.takes:
            if isinstance(take.target, SharedGpu):
                take.leaf = take.target.leaf
            elif isinstance(take.target, PhysicalCell):
                take.leaf = take.target
            take.claim_leaves = [c for c in take.claims if isinstance(c, PhysicalCell)]
            wanted = [c for c in (take.target, *take.claims) if isinstance(c, VirtualCell)]
            if wanted:
                by_chain.setdefault(take.site.chain.name, []).append((take, wanted))
        for chain, pods in by_chain.items():
            mapped = self._map_to_physical(self._chains[chain], [w for _, w in pods], None)
            if mapped is None:
                return None
            for (take, wanted), leaves in zip(pods, mapped, strict=True):
                by_vleaf = dict(zip(wanted, leaves, strict=True))
                if isinstance(take.target, VirtualCell):
                    take.leaf = by_vleaf[take.target]
                take.claim_leaves = [by_vleaf[c] for c in take.claims if isinstance(c, VirtualCell)]
        victims: set[str] = set()
        for take in plan.takes:
            assert take.leaf is not None
            fresh = [] if isinstance(take.target, SharedGpu) else [take.leaf]
            for leaf in [*fresh, *take.claim_leaves]:
                if leaf.reserver is not None:
                    return None
                if leaf.holder is not None:
                    victims.update(leaf.holder.stops)
        plan.placement = self._share_placement(plan)
        return victims

    def _share_placement(self, plan: _Plan) -> Placement:
        pods: list[PodPlacement] = []
        for take in plan.takes:
            leaf = take.leaf
            assert leaf is not None and leaf.node is not None
            pod = plan.request.pods[take.pod]
            view = take.cls.view
            cell_type = None
            if view is not None:
                vleaf = self._vleaf_of(take)
                cell_type = view.chain.type_at(vleaf.root.level)
            pods.append(
                PodPlacement(
                    pod.role,
                    pod.index,
                    leaf.node.name,
                    leaf.node.address,
                    (leaf.leaf_index,),
                    cell_type,
                    pod.share,
                )
            )
        return Placement(plan.takes[0].site.chain.name, tuple(pods))

    def _vleaf_of(self, take: _Take) -> VirtualCell:
        target = take.target
        if isinstance(target, VirtualCell):
            return target
        if isinstance(target, SharedGpu):
            vleaf = target.pool.vleaves[0]
            assert vleaf is not None
            return vleaf
        raise AssertionError("a guaranteed take targets a VC leaf or a shared GPU")

    def _offer_plan(self, plan: _Plan) -> Bind:
        self._share_offer = plan
        return Bind(plan.placement)

    def _reserve(self, plan: _Plan, victims: set[str]) -> Preempt:
        """Keep what the plan needs until the victims stop: the GPUs it starts sharing (each
        once, though several of its pods may share one) and those it claims, as HiveD reserves
        cells, and what it counts on of shared GPUs and of spaces' CPU and memory (`Hold`)."""
        request = plan.request
        fresh: dict[PhysicalCell, PodPlacement] = {}
        for take in plan.takes:
            assert take.leaf is not None
            if not isinstance(take.target, SharedGpu):
                fresh.setdefault(take.leaf, plan.placement.pods[take.pod])
        claimed: dict[PhysicalCell, _Take] = {}
        for take in plan.takes:  # a gang's later pod may start sharing an earlier one's claim
            for leaf in take.claim_leaves:
                if leaf not in fresh:
                    claimed.setdefault(leaf, take)
        self._cancel_preemptors_on([*fresh, *claimed], request.priority)
        group = self._new_group(request, plan.placement)
        group.state = GroupState.PREEMPTING
        group.placement = Placement(plan.placement.chain, tuple(fresh.values()))
        reserved = self._occupy(group, list(fresh), reserve=True)
        group.placement = plan.placement
        assert reserved, "a mapped placement can always be reserved"
        for leaf, take in claimed.items():
            cell_type = plan.placement.pods[take.pod].cell_type
            claim = self._pool_record(take.cls, leaf, cell_type)
            claim.state, claim.owner = GroupState.PREEMPTING, group
            reserved = self._occupy(claim, [leaf], reserve=True)
            assert reserved, "a mapped claim can always be reserved"
            group.claims.append(claim)
        for hold in self._holds_of(plan):
            self._adjust(hold, 1)
            group.holds.append(hold)
            hold.space.holders[group.name] = group
        self._groups[request.name] = group
        self._rebalance_doomed(self._chains[plan.placement.chain])
        self._flush()
        return Preempt(tuple(sorted(victims)), plan.placement)

    def _holds_of(self, plan: _Plan) -> list[Hold]:
        """What the plan counts on beyond the leaves it reserves: the shares of shared GPUs
        its pods join, and, per space, the CPU and memory its new and claimed GPUs do not
        bring."""
        holds: list[Hold] = []
        asked: dict[Site, list[int]] = {}
        brought: dict[Site, set[PhysicalCell]] = {}
        for take in plan.takes:
            assert take.leaf is not None
            target = take.target
            if isinstance(target, SharedGpu):
                holds.append(Hold(target, target.space, take.ask.milli, take.ask.gpu_memory_mb))
            else:
                brought.setdefault(take.site, set()).add(take.leaf)
            brought.setdefault(take.site, set()).update(take.claim_leaves)
            needs = asked.setdefault(take.site, [0, 0])
            needs[0] += take.ask.cpu_milli
            needs[1] += take.ask.memory_mb
        for site, (cpu, memory) in asked.items():
            space = self._spaces.get((plan.takes[0].cls, site))
            if space is None:
                continue  # nothing shared there yet: the plan brings all it needs
            count = len(brought.get(site, ()))
            cpu_held = max(0, cpu - count * space.cpu_share)
            memory_held = max(0, memory - count * space.memory_share)
            if cpu_held or memory_held:
                holds.append(Hold(None, space, cpu_milli=cpu_held, memory_mb=memory_held))
        return holds

    def _adjust(self, hold: Hold, sign: int) -> None:
        """Take (`sign` 1) or give back (-1) what `hold` keeps."""
        if hold.gpu is not None:
            hold.gpu.held += sign
            hold.gpu.milli += sign * hold.milli
            hold.gpu.gpu_memory_mb += sign * hold.gpu_memory_mb
            self._class_free[hold.space.cls] -= sign * hold.milli
        hold.space.cpu_used += sign * hold.cpu_milli
        hold.space.memory_used += sign * hold.memory_mb
        self._touch_space(hold.space)

    def _release_holds(self, group: GroupRecord) -> None:
        holds, group.holds = group.holds, []
        for hold in holds:
            self._adjust(hold, -1)
            hold.space.holders.pop(group.name, None)
        self._give_back_spares({id(hold.space): hold.space for hold in holds}.values())

    def _cancel_preemptors_on(self, leaves: Sequence[PhysicalCell], priority: int) -> None:
        """As `CellState._cancel_preemptors_on`; also the lower-priority preemptors holding
        shares of the spaces of shared GPUs among `leaves` (what they count on goes away)."""
        super()._cancel_preemptors_on(leaves, priority)
        holders: dict[str, GroupRecord] = {}
        for leaf in leaves:
            gpu = self._shared.get(leaf)
            if gpu is not None:
                holders.update(gpu.space.holders)
        self._cancel(holders, priority)

    def _vacate(self, group: GroupRecord) -> None:
        """As `CellState._vacate`; a preempting sharing group also gives back its holds."""
        super()._vacate(group)
        if group.holds:
            self._release_holds(group)

    def _share_wait(
        self, request: GroupRequest, asks: Sequence[PodAsk], views: list[VcView] | None
    ) -> WaitReason:
        if views is None:
            owner = "the cluster"
            gpus, free_milli = self._idle_gpus(request)
        else:
            owner = f"VC '{request.vc}'" if views[0].pinned_id is None else views[0].name
            gpus = sum(view.total_leaves for view in views)
            free_milli = sum(self._view_free_milli(view, request.priority) for view in views)
        return reasons.no_share(owner, request.pods, asks, gpus, free_milli)

    def _view_free_milli(self, view: VcView, priority: int) -> int:
        free_gpus = view.total_leaves - view.used
        return free_gpus * GPU_MILLI + self._class_free[ShareClass(view, priority)]

    def _idle_gpus(self, request: GroupRequest) -> tuple[int, int]:
        gpus = free = 0
        cls = ShareClass(None, OPPORTUNISTIC_PRIORITY)
        for chain in self._capacity.opportunistic_chains(request):
            state = self._chains[chain]
            gpus += state.leaves
            free += state.physical_view.picker.free_leaves * GPU_MILLI
        return gpus, free + self._class_free[cls]

    # == committing ==============================================================================

    def _allocate_shares(self, plan: _Plan) -> None:
        """Carry out the plan of the Bind just offered: open and join shared GPUs."""
        request = plan.request
        group = self._new_group(request, plan.placement)
        for take in plan.takes:
            assert take.leaf is not None
            cell_type = plan.placement.pods[take.pod].cell_type
            gpu = self._shared.get(take.leaf) or self._open_gpu(take.cls, take.leaf, cell_type)
            for leaf in take.claim_leaves:
                if leaf not in self._shared:
                    self._open_gpu(take.cls, leaf, cell_type)
            self._join(gpu, group, request.pods[take.pod], take.ask)
            group.shared.append(gpu)
        self._groups[request.name] = group
        self._give_back_spares({id(gpu.space): gpu.space for gpu in group.shared}.values())
        self._settle(group)

    def _pool_reserved(self, group: GroupRecord) -> None:
        """A sharing group whose victims stopped: each leaf it reserved becomes a shared GPU,
        its pods join theirs, and its claims join its spaces."""
        cls = ShareClass(group.view, group.priority)
        holds, group.holds = group.holds, []  # what they kept is taken for real below
        for hold in holds:
            self._adjust(hold, -1)
            hold.space.holders.pop(group.name, None)
        leaves = self._resolve(group.placement)
        assert not isinstance(leaves, str)
        placed = zip(leaves, group.placement.pods, strict=True)
        cell_types = {leaf: pod.cell_type for leaf, pod in placed}
        for leaf, vleaf in zip(group.leaves, group.vleaves, strict=True):
            pool = self._pool_record(cls, leaf, cell_types[leaf])
            pool.leaves, pool.vleaves = [leaf], [vleaf]
            if vleaf is not None:
                self._set_holder(vleaf, pool)
            self._set_leaf(leaf, pool, None)
            self._new_gpu(cls, pool, leaf, vleaf)
        group.leaves, group.vleaves = [], []
        for claim in group.claims:
            leaf = claim.leaves[0]
            self._set_leaf(leaf, claim, None)
            claim.state, claim.owner = GroupState.ALLOCATED, None
            self._new_gpu(cls, claim, leaf, claim.vleaves[0])
        group.claims = []
        for pod, leaf in zip(group.request.pods, leaves, strict=True):
            gpu = self._shared[leaf]
            self._join(gpu, group, pod, PodAsk.of(pod))
            group.shared.append(gpu)
        group.state = GroupState.ALLOCATED
        self._give_back_spares({id(gpu.space): gpu.space for gpu in group.shared}.values())
        self._settle(group)

    def _open_gpu(self, cls: ShareClass, leaf: PhysicalCell, cell_type: str | None) -> SharedGpu:
        gpu = self._try_open(cls, leaf, cell_type)
        assert gpu is not None, f"{leaf} was offered for sharing but cannot be held"
        return gpu

    def _try_open(
        self, cls: ShareClass, leaf: PhysicalCell, cell_type: str | None
    ) -> SharedGpu | None:
        """Start sharing a free leaf, or None (nothing changed) when the class may not hold it."""
        if leaf.holder is not None or leaf.reserver is not None:
            return None
        pool = self._pool_record(cls, leaf, cell_type)
        if not self._occupy(pool, [leaf], reserve=False):
            return None
        return self._new_gpu(cls, pool, leaf, pool.vleaves[0])

    # == restoring ===============================================================================

    def _restore_shares(self, allocation: Allocation) -> tuple[bool, str | None]:
        """Rebuild a sharing group's place: (whether it now runs as opportunistic, a problem
        when it cannot be restored at all). A guaranteed group whose VC has no room any more
        runs on as opportunistic, as whole-cell groups do."""
        request, placement = allocation.request, allocation.placement
        leaves = self._resolve(placement)
        if isinstance(leaves, str):
            return False, leaves
        group = self._new_group(request, placement)
        guaranteed = not (request.opportunistic or allocation.opportunistic)
        problem: str | None = None
        for as_guaranteed in (True, False) if guaranteed else (False,):
            group.downgraded = not as_guaranteed and not request.opportunistic
            cls = ShareClass(group.view if as_guaranteed else None, group.priority)
            problem = self._restore_pods(group, cls, leaves)
            if problem is None:
                self._groups[request.name] = group
                self._flush()
                return guaranteed and not as_guaranteed, None
            self._leave_shares(group)
            self._flush()
        return False, problem

    def _restore_pods(
        self, group: GroupRecord, cls: ShareClass, leaves: list[PhysicalCell]
    ) -> str | None:
        pods = zip(group.request.pods, group.placement.pods, leaves, strict=True)
        for pod, placed, leaf in pods:
            ask = PodAsk.of(pod)
            gpu = self._shared.get(leaf)
            if gpu is None:
                gpu = self._try_open(cls, leaf, placed.cell_type if cls.view else None)
                if gpu is None:
                    holder = leaf.holder.name if leaf.holder is not None else None
                    return (
                        f"its GPU is used by '{holder}'"
                        if holder
                        else "its VC has no room for its GPU"
                    )
            elif gpu.space.cls != cls:
                return "its GPU is shared by tasks of another VC or priority"
            if gpu.milli + ask.milli > GPU_MILLI:
                return "its GPU has too little left"
            self._join(gpu, group, pod, ask)
            group.shared.append(gpu)
        return None

    def _claim_spares(self) -> None:
        """Give every space over its CPU or memory free GPUs of its node (after a rebuild,
        where the GPUs a space had claimed are not recorded)."""
        for space in list(self._spaces.values()):
            if space.cpu_free >= 0 and space.memory_free >= 0:
                continue
            site = space.site
            node = site.physical if isinstance(site, VirtualCell) else site
            if node is None:
                continue
            cell_type = space.gpus[0].pool.placement.pods[0].cell_type
            for leaf in node.leaves:
                if space.cpu_free >= 0 and space.memory_free >= 0:
                    break
                self._try_open(space.cls, leaf, cell_type)
        self._flush()

    def _pool_record(
        self, cls: ShareClass, leaf: PhysicalCell, cell_type: str | None
    ) -> GroupRecord:
        node = leaf.node
        assert node is not None
        view = cls.view
        request = GroupRequest(
            f"{POOL_PREFIX}{node.name}/{leaf.leaf_index}",
            view.vc if view is not None else "",
            cls.priority,
            (PodRequest(POOL_ROLE, 0, 1),),
            pinned_cell_id=view.pinned_id if view is not None else None,
        )
        placement = Placement(
            leaf.chain.name,
            (PodPlacement(POOL_ROLE, 0, node.name, node.address, (leaf.leaf_index,), cell_type),),
        )
        pool = GroupRecord(request, placement, GroupState.ALLOCATED)
        pool.view = view
        return pool

    def _new_gpu(
        self, cls: ShareClass, pool: GroupRecord, leaf: PhysicalCell, vleaf: VirtualCell | None
    ) -> SharedGpu:
        if vleaf is not None:
            assert cls.view is not None
            site: Site = cls.view.view_node_of(vleaf)
        else:
            assert leaf.node is not None
            site = leaf.node.cell
        space = self._spaces.get((cls, site))
        if space is None:
            sku = self.cluster.chain_sku(leaf.chain.name)
            space = self._spaces[(cls, site)] = ShareSpace(cls, site, sku.cpu * 1000, sku.memory_mb)
        gpu = SharedGpu(leaf, pool, space)
        self._class_free[cls] += GPU_MILLI
        pool.gpu = gpu
        space.gpus.append(gpu)
        self._shared[leaf] = gpu
        self._touch_space(space)
        return gpu

    def _join(self, gpu: SharedGpu, group: GroupRecord, pod: PodRequest, ask: PodAsk) -> None:
        key: MemberKey = (group.name, pod.role, pod.index)
        gpu.members[key] = ask
        gpu.milli += ask.milli
        self._class_free[gpu.space.cls] -= ask.milli
        gpu.gpu_memory_mb += ask.gpu_memory_mb
        gpu.space.cpu_used += ask.cpu_milli
        gpu.space.memory_used += ask.memory_mb
        self._touch_space(gpu.space)

    def _leave_shares(self, group: GroupRecord) -> None:
        """An allocated sharing group ended (or is being restored and failed): leave its GPUs,
        and give back the empty GPUs its spaces no longer need."""
        spaces: dict[int, ShareSpace] = {}
        for gpu, pod in zip(group.shared, group.request.pods, strict=False):
            ask = gpu.members.pop((group.name, pod.role, pod.index))
            gpu.milli -= ask.milli
            self._class_free[gpu.space.cls] += ask.milli
            gpu.gpu_memory_mb -= ask.gpu_memory_mb
            gpu.space.cpu_used -= ask.cpu_milli
            gpu.space.memory_used -= ask.memory_mb
            spaces[id(gpu.space)] = gpu.space
        group.shared = []
        self._give_back_spares(spaces.values())

    def _give_back_spares(self, spaces: Iterable[ShareSpace]) -> None:
        """Close the empty shared GPUs the spaces no longer need for CPU or memory."""
        for space in list(spaces):
            self._touch_space(space)
            for gpu in space.spare_gpus():
                self._close_gpu(gpu)

    def _close_gpu(self, gpu: SharedGpu) -> None:
        space = gpu.space
        space.gpus.remove(gpu)
        self._class_free[space.cls] -= GPU_MILLI
        del self._shared[gpu.leaf]
        if not space.gpus:
            del self._spaces[(space.cls, space.site)]
        self._vacate(gpu.pool)
        self._settle(gpu.pool)

    def _touch_space(self, space: ShareSpace) -> None:
        """Mark the space's node changed, so offers made from it are made again."""
        site = space.site
        if isinstance(site, VirtualCell):
            self._dirty_v[site] = site.view
        else:
            self._dirty_p[site] = self._chains[site.chain.name].physical_view
