"""`pai vc` and `pai cluster`: capacity, who uses it (each user against the limit), and what
is free."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pai.cli.formatting import NONE, table, usage_bar
from pai.cli.session import JsonOption, ServerOption, connect, out, print_json
from pai.sdk import Node, UserLimit, VcUserLimits, VcUsers, VirtualCluster


def vc(
    name: Annotated[
        str | None,
        typer.Argument(help="One VC: also its users, against their limits, and its limits."),
    ] = None,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the virtual clusters: what each is guaranteed, how much is used, its jobs; with a
    VC's name, also each user's use against the limit and the VC's limits per user."""
    with connect(server) as client:
        if name is None:
            clusters = client.virtual_clusters()
        else:
            clusters = {name: client.virtual_cluster(name)}
            users, limits = client.vc_users(name), client.user_limits(name)
    if name is None:
        if as_json:
            print_json(clusters)
        else:
            out().print(vc_table(clusters))
        return
    if as_json:
        print_json({"virtualCluster": clusters[name], "users": users, "userLimits": limits})
        return
    out().print(Group(vc_table(clusters), Text(""), users_table(users), limits_text(limits, users)))


def users_table(users: VcUsers) -> RenderableType:
    if not users.users:
        return Text("Nobody uses this VC now.", style="dim")
    result = table("USER", "GPUS", "CPUS", "RUNNING JOBS", "WAITING", "RECENT GPU-H", "LIMIT OF")
    for user in users.users:
        result.add_row(
            user.username,
            _against(user.gpus, user.limit.gpus),
            _against(user.cpus, user.limit.cpus),
            _against(user.jobs, user.limit.jobs),
            str(user.waiting_jobs),
            f"{user.recent_gpu_hours:.1f}",
            ", ".join(user.limit_groups) or "the VC",
        )
    return result


def limits_text(limits: VcUserLimits, users: VcUsers) -> Text:
    lines = [f"Limit per user: {limit_phrase(limits.default)} (the VC's default)."]
    lines += [
        f"Members of {group.group}: {limit_phrase(group)} (set by {group.set_by})."
        for group in limits.groups
    ]
    if users.fair_share and users.half_life_seconds is not None:
        hours = users.half_life_seconds / 3600
        lines.append(
            "Waiting jobs of one priority go by their users' recent GPU time "
            f"(fair share, half-life {hours:g} h)."
        )
    else:
        lines.append("Waiting jobs of one priority go first come, first served.")
    return Text("\n".join(lines))


def limit_phrase(limit: UserLimit) -> str:
    """'6 GPUs, 2 running jobs', or 'none'."""
    amounts = [
        f"{amount:g} {unit}"
        for amount, unit in ((limit.gpus, "GPUs"), (limit.cpus, "CPUs"), (limit.jobs, "jobs"))
        if amount is not None
    ]
    return ", ".join(amounts) or "none"


def _against(used: float, limit: float | None) -> RenderableType:
    if limit is None:
        return Text(f"{used:g}")
    return usage_bar(used, limit, width=10) if limit > 0 else Text(f"{used:g}/0")


def cluster(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """Show the nodes (address, state, GPUs and cells used and free, usage per VC) and the
    VCs; a node that is gone or bad is explained below the table."""
    with connect(server) as client:
        nodes = client.nodes()
        clusters = client.virtual_clusters()
    if as_json:
        print_json({"nodes": nodes, "virtualClusters": clusters})
        return
    problems = [
        Text(f"{node.name}: {node.engine_message}") for node in nodes if node.engine_message
    ]
    shared: list[RenderableType] = (
        [shared_table(nodes), Text("")] if any(node.shared_gpus for node in nodes) else []
    )
    out().print(Group(nodes_table(nodes), *problems, Text(""), *shared, vc_table(clusters)))


def vc_table(clusters: Mapping[str, VirtualCluster]) -> Table:
    result = table(
        "VC", "GUARANTEED", "GPUS USED", "LEAF CELLS USED", "FREE GPUS", "RUNNING", "WAITING"
    )
    for name, info in sorted(clusters.items()):
        cells = ", ".join(f"{cell.cell_number} {cell.cell_type}" for cell in info.cells)
        result.add_row(
            name,
            cells or NONE,
            usage_bar(info.used_gpus, info.guaranteed_gpus),
            usage_bar(info.used_leaves, info.guaranteed_leaves),
            str(info.free_gpus),
            str(info.running_jobs),
            str(info.waiting_jobs),
        )
    return result


def nodes_table(nodes: Sequence[Node]) -> Table:
    result = table("NODE", "ADDRESS", "STATE", "SKU", "DEVICES USED", "CELLS USED", "BY VC", "JOBS")
    for node in nodes:
        by_vc = Counter(leaf.vc or NONE for leaf in node.usage)
        by_vc.update(gpu.tasks[0].vc or NONE for gpu in node.shared_gpus if gpu.tasks)
        jobs = sorted(
            {leaf.job for leaf in node.usage if leaf.job}
            | {task.job for gpu in node.shared_gpus for task in gpu.tasks}
        )
        result.add_row(
            node.name,
            node.address,
            node_state(node),
            node.sku_type or NONE,
            devices_used(node),
            usage_bar(node.leaves.used, node.leaves.total, width=10),
            ", ".join(f"{name} {count}" for name, count in sorted(by_vc.items())) or NONE,
            ", ".join(jobs) or NONE,
        )
    return result


def devices_used(node: Node) -> RenderableType:
    """The node's devices in use, with their kind: `1/2 x amd.com/gpu`."""
    bar = usage_bar(node.gpus.used, node.gpus.total, width=10)
    return bar if node.device is None else Group(bar, Text(f"x {node.device}"))


def shared_table(nodes: Sequence[Node]) -> Table:
    """Each shared GPU: how much of it the tasks sharing it have, what is free, and who."""
    result = table("NODE", "GPU", "SHARED", "FREE", "TASKS")
    for node in nodes:
        for gpu in node.shared_gpus:
            tasks = ", ".join(
                f"{task.job} {task.task_role_name}/{task.task_index} ({task.gpu_fraction:g})"
                for task in gpu.tasks
            )
            result.add_row(
                node.name,
                f"{gpu.gpu_index}{' (opportunistic)' if gpu.opportunistic else ''}",
                usage_bar(round(1 - gpu.free_fraction, 3), 1, width=10),
                f"{gpu.free_fraction:g}",
                tasks or NONE,
            )
    return result


STATE_STYLES = {
    "alive": "green",
    "gone": "bold red",
    "unreachable": "bold red",
    "bad": "bold yellow",
    "cordoned": "yellow",
}


def node_state(node: Node) -> Text:
    """The engine's state of the node, and whether the scheduler still avoids it."""
    if node.engine_state == "alive" and not node.healthy:
        return Text("alive, unhealthy", "bold yellow")
    return Text(node.engine_state, STATE_STYLES.get(node.engine_state, ""))
