"""`pai vc` and `pai cluster`: capacity, who uses it, and what is free."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pai.cli.formatting import NONE, table, usage_bar
from pai.cli.session import JsonOption, ServerOption, connect, out, print_json
from pai.sdk import Node, VirtualCluster


def vc(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """Show the virtual clusters: what each is guaranteed, how much is used, its jobs."""
    with connect(server) as client:
        clusters = client.virtual_clusters()
    if as_json:
        print_json(clusters)
    else:
        out().print(vc_table(clusters))


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
    result = table("NODE", "ADDRESS", "STATE", "SKU", "GPUS USED", "CELLS USED", "BY VC", "JOBS")
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
            usage_bar(node.gpus.used, node.gpus.total, width=10),
            usage_bar(node.leaves.used, node.leaves.total, width=10),
            ", ".join(f"{name} {count}" for name, count in sorted(by_vc.items())) or NONE,
            ", ".join(jobs) or NONE,
        )
    return result


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
