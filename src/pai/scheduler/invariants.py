"""A from-scratch recount of the scheduler's state, compared with its incremental counters.

Tests call it after every step (`Scheduler.check_invariants`); decisions never do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.scheduler.buddy import feasible
from pai.scheduler.cells import PhysicalCell, VirtualCell
from pai.scheduler.gpushare import Hold, SharedGpu, ShareSpace
from pai.scheduler.groups import GroupRecord
from pai.scheduler.state import ChainState
from pai.scheduler.types import GPU_MILLI, GroupState
from pai.scheduler.views import VcView, view_rank

if TYPE_CHECKING:
    from pai.scheduler.scheduler import Scheduler


def verify(scheduler: Scheduler) -> None:
    """Raise AssertionError listing every place where incremental state differs from a recount."""
    problems: list[str] = []
    _verify_groups(scheduler, problems)
    _verify_shares(scheduler, problems)
    for state in scheduler._chains.values():
        _verify_physical(state.tops, problems)
        _verify_free(scheduler, state, problems)
        for cell in state.node_cells:
            node = state.physical_view.nodes[cell]
            expected = (cell.used, cell.opp, cell.used - cell.opp, cell.bad_nodes == 0)
            actual = (node.used, node.pack, node.penalty, node.healthy)
            if expected != actual or node._indexed is None or node._indexed[0] != node.key():
                problems.append(f"physical picker entry of {cell} is stale: {actual} != {expected}")
    for view in [*scheduler._views.values(), *scheduler._pinned_views.values()]:
        _verify_view(view, problems)
    if problems:
        raise AssertionError("scheduler state is inconsistent:\n" + "\n".join(problems))


def _verify_groups(scheduler: Scheduler, problems: list[str]) -> None:
    holders: dict[PhysicalCell, GroupRecord] = {}
    reservers: dict[PhysicalCell, GroupRecord] = {}
    pools = {gpu.pool.name: gpu.pool for gpu in scheduler._shared.values()}
    claims = {claim.name: claim for group in scheduler._groups.values() for claim in group.claims}
    for name, group in [*scheduler._groups.items(), *pools.items(), *claims.items()]:
        if group.shared or (group.request.shares and group.state is GroupState.ALLOCATED):
            continue  # its pods share GPUs that pools hold (checked by _verify_shares)
        placed = {(pod.node, index) for pod in group.placement.pods for index in pod.leaf_indices}
        joined = {
            (hold.gpu.leaf.node.name, hold.gpu.leaf.leaf_index)
            for hold in group.holds
            if hold.gpu is not None and hold.gpu.leaf.node is not None
        }
        expected = len(placed - joined)  # a preempting group joins shared GPUs by holds
        if len(group.leaves) != expected or len(group.vleaves) != expected:
            problems.append(f"group {name} holds {len(group.leaves)} of {expected} leaves")
        table = reservers if group.state is GroupState.PREEMPTING else holders
        for leaf, vleaf in zip(group.leaves, group.vleaves, strict=False):
            if leaf in table:
                problems.append(f"{leaf} is held by both {table[leaf].name} and {name}")
            table[leaf] = group
            if group.opportunistic and vleaf is not None:
                problems.append(f"opportunistic group {name} holds a VC leaf")
            if not group.opportunistic and vleaf is None:
                problems.append(f"guaranteed group {name} has a leaf outside its VC")
            if vleaf is not None and vleaf.physical is not leaf:
                problems.append(f"{vleaf} of {name} is bound to {vleaf.physical}, not {leaf}")
            if vleaf is not None and vleaf.holder is not group:
                taker = vleaf.holder
                if taker is None or leaf.reserver is not taker:
                    problems.append(f"{vleaf} of {name} is held by {taker}")
    for state in scheduler._chains.values():
        for top in state.tops:
            for leaf in top.walk():
                if leaf.children:
                    continue
                if holders.get(leaf) is not leaf.holder:
                    problems.append(f"{leaf} holder {leaf.holder} != {holders.get(leaf)}")
                if reservers.get(leaf) is not leaf.reserver:
                    problems.append(f"{leaf} reserver {leaf.reserver} != {reservers.get(leaf)}")


def _verify_shares(scheduler: Scheduler, problems: list[str]) -> None:
    """Shared GPUs add up: what their members take, what their spaces pool, who holds them."""
    members: dict[tuple[str, str, int], SharedGpu] = {}
    for name, group in scheduler._groups.items():
        if not group.request.shares or group.state is not GroupState.ALLOCATED:
            continue
        if len(group.shared) != len(group.request.pods):
            problems.append(f"group {name} shares {len(group.shared)} GPUs for its pods")
        for gpu, pod in zip(group.shared, group.request.pods, strict=False):
            members[(name, pod.role, pod.index)] = gpu
            if (name, pod.role, pod.index) not in gpu.members:
                problems.append(f"{gpu} lacks its member {name} {pod.role} {pod.index}")
    held: dict[int, list[Hold]] = {}
    for group in scheduler._groups.values():
        for hold in group.holds:
            held.setdefault(id(hold.gpu), []).append(hold)
            held.setdefault(id(hold.space), []).append(hold)
            if hold.space.holders.get(group.name) is not group:
                problems.append(f"{group.name} holds a share of a space that does not know it")
    spaces: dict[int, ShareSpace] = {}
    for leaf, gpu in scheduler._shared.items():
        if gpu.leaf is not leaf or leaf.holder is not gpu.pool or gpu.pool.gpu is not gpu:
            problems.append(f"{gpu} is not held by its pool")
        holds = held.get(id(gpu), [])
        if gpu.held != len(holds):
            problems.append(f"{gpu} counts {gpu.held} holds of {len(holds)}")
        milli = sum(ask.milli for ask in gpu.members.values()) + sum(h.milli for h in holds)
        if gpu.milli != milli or gpu.milli > GPU_MILLI:
            problems.append(f"{gpu} counts {gpu.milli} thousandths for {gpu.members}")
        memory = sum(a.gpu_memory_mb for a in gpu.members.values())
        if gpu.gpu_memory_mb != memory + sum(h.gpu_memory_mb for h in holds):
            problems.append(f"{gpu} counts {gpu.gpu_memory_mb} MB of GPU memory")
        for key in gpu.members:
            if members.get(key) is not gpu:
                problems.append(f"{gpu} lists {key}, which shares another GPU")
        space = gpu.space
        if scheduler._spaces.get((space.cls, space.site)) is not space or gpu not in space.gpus:
            problems.append(f"{gpu} is not in its space")
        if gpu.pool.priority != space.cls.priority or gpu.pool.view is not space.cls.view:
            problems.append(f"{gpu} is held by a pool of another class")
        spaces[id(space)] = space
    if len(spaces) != len(scheduler._spaces):
        problems.append("a space without shared GPUs is still listed")
    for space in spaces.values():
        asks = [ask for gpu in space.gpus for ask in gpu.members.values()]
        holds = [hold for hold in held.get(id(space), []) if hold.gpu is None]
        used = (
            sum(a.cpu_milli for a in asks) + sum(h.cpu_milli for h in holds),
            sum(a.memory_mb for a in asks) + sum(h.memory_mb for h in holds),
        )
        if used != (space.cpu_used, space.memory_used):
            problems.append(f"space of {space.site} counts {space.cpu_used, space.memory_used}")
        if space.cpu_free < 0 or space.memory_free < 0:
            problems.append(f"space of {space.site} uses more CPU or memory than its GPUs give")
        if space.spare_gpus():
            problems.append(f"space of {space.site} keeps empty GPUs it does not need")


def _verify_physical(tops: list[PhysicalCell], problems: list[str]) -> None:
    def recount(cell: PhysicalCell) -> tuple[int, int, int]:
        if not cell.children:
            used = 1 if cell.holder or cell.reserver else 0
            opp = 1 if cell.holder and not cell.reserver and cell.holder.opportunistic else 0
            bad = 0 if cell.node is None or cell.node.healthy else 1
        else:
            counts = [recount(child) for child in cell.children]
            used = sum(c[0] for c in counts)
            opp = sum(c[1] for c in counts)
            if cell.is_multi_node:
                bad = sum(c[2] for c in counts)
            else:
                bad = 0 if cell.node is None or cell.node.healthy else 1
        if (cell.used, cell.opp, cell.bad_nodes) != (used, opp, bad):
            problems.append(
                f"{cell} counters (used, opp, bad) {(cell.used, cell.opp, cell.bad_nodes)} "
                f"!= recount {(used, opp, bad)}"
            )
        if cell.virtual is not None and cell.virtual.physical is not cell:
            problems.append(f"{cell} is bound to {cell.virtual}, which is bound elsewhere")
        return used, opp, bad

    for top in tops:
        recount(top)


def _verify_free(scheduler: Scheduler, state: ChainState, problems: list[str]) -> None:
    chain = state.chain
    whole: dict[PhysicalCell, bool] = {}

    def mark(cell: PhysicalCell) -> bool:
        children = [mark(child) for child in cell.children]
        whole[cell] = cell.virtual is None and all(children)
        return whole[cell]

    for top in state.tops:
        mark(top)
    expected = {
        cell
        for cell, is_whole in whole.items()
        if is_whole
        and (cell.parent is None or not whole[cell.parent])
        and all(ancestor.virtual is None for ancestor in cell.ancestors())
    }
    actual = {cell for top in state.tops for cell in top.walk() if cell.in_free}
    if actual != expected:
        problems.append(
            f"chain {chain.name}: free cells {sorted(c.address for c in actual)} != "
            f"maximal unbound cells {sorted(c.address for c in expected)}"
        )
    listed = set(state.free.all_cells())
    if listed != actual:
        problems.append(f"chain {chain.name}: free lists disagree with in_free flags")
    counts = [0] * (chain.top_level + 1)
    for cell in actual:
        counts[cell.level] += 1
    if counts != state.free.counts:
        problems.append(f"chain {chain.name}: free counts {state.free.counts} != {counts}")
    need = [0] * (chain.top_level + 1)
    for view in state.views:
        for root in view.roots:
            if root.physical is None:
                need[root.level] += 1
        unbound = [root for roots in view.unbound.values() for root in roots]
        if sorted(r.id for r in unbound) != sorted(r.id for r in view.roots if r.physical is None):
            problems.append(f"{view.name}: unbound roots list is stale")
    if need != state.free.need:
        problems.append(f"chain {chain.name}: unbound VC cells {state.free.need} != {need}")
    if not feasible(chain, counts, need):
        problems.append(f"chain {chain.name}: VC guarantees can no longer all be met")
    for cell in scheduler._multi_node_cells.values():
        if cell.chain is not chain or cell.free_counts is None:
            continue
        recount = [0] * (chain.top_level + 1)
        for inner in cell.walk():
            if inner.in_free:
                recount[inner.level] += 1
        if recount != cell.free_counts:
            problems.append(f"{cell}: free counts {cell.free_counts} != {recount}")


def _verify_view(view: VcView, problems: list[str]) -> None:
    by_priority: dict[int, int] = {}
    group_leaves: dict[GroupRecord, int] = {}

    def recount(cell: VirtualCell) -> int:
        if not cell.children:
            used = 1 if cell.holder is not None else 0
            if cell.holder is not None:
                by_priority[cell.holder.priority] = by_priority.get(cell.holder.priority, 0) + 1
                group_leaves[cell.holder] = group_leaves.get(cell.holder, 0) + 1
        else:
            used = sum(recount(child) for child in cell.children)
        if used != cell.used:
            problems.append(f"{cell} used {cell.used} != recount {used}")
        if cell.physical is not None:
            if cell.physical.virtual is not cell or cell.physical.level != cell.level:
                problems.append(f"{cell} binding to {cell.physical} is not mutual")
            if cell.parent is not None and cell.parent.physical is None:
                problems.append(f"{cell} is bound but its parent is not")
            elif cell.parent is not None and cell.physical.parent is not cell.parent.physical:
                problems.append(f"{cell} is bound outside its parent's physical cell")
        elif cell.used:
            problems.append(f"{cell} is in use but not bound")
        return used

    for root in view.roots:
        recount(root)
    if by_priority != view.by_priority:
        problems.append(f"{view.name}: priorities {view.by_priority} != recount {by_priority}")
    if group_leaves != view.group_leaves:
        problems.append(f"{view.name}: group usage is stale")
    if view.used != sum(by_priority.values()):
        problems.append(f"{view.name}: used {view.used} != {sum(by_priority.values())}")
    for cell, node in view.nodes.items():
        node_priorities: dict[int, int] = {}
        for leaf in cell.leaves:
            if leaf.holder is not None:
                p = leaf.holder.priority
                node_priorities[p] = node_priorities.get(p, 0) + 1
        healthy = cell.physical is None or cell.physical.healthy
        expected = (cell.used, healthy, view_rank(cell), node_priorities)
        actual = (node.used, node.healthy, node.rank, node.by_priority)
        if expected != actual or node._indexed is None or node._indexed[0] != node.key():
            problems.append(f"{view.name}: picker entry of {cell} is stale: {actual} != {expected}")
