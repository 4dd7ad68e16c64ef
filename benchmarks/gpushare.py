"""GPU sharing on Alibaba's openb trace: the ATC'23 inflation replay through PAI's scheduler, for
each placement policy, averaged over seeds (`pai.sim.inflation`, `pai.sim.sharepolicies`).

    python benchmarks/gpushare.py                                              # Rich table
    python benchmarks/gpushare.py --json --trace FILE --seeds 42-51            # JSON
    python benchmarks/gpushare.py --trace FILE --seeds 42-51 --plot out.png    # and a plot
    python benchmarks/gpushare.py --trace FILE --vcs models --seeds 42-51      # VCs' guarantees

The pod list is one of `alibaba/clusterdata`'s cluster-trace-gpu-v2023 (default: the shipped
data/traces/openb_pod_list_default.csv.gz); the node list (openb_node_list_gpu_node.csv[.gz]) is
read from the pod list's folder unless `--nodes` names it.
Prints `{"workload", "gpus", "seeds", "policies": {POLICY: {"alloc_at_100", "alloc_at_130",
"seconds", "cpu_seconds"}}}`: allocation rates in percent of the cluster's GPUs when the arrived
workload first reaches 100 % and 130 %, means over the seeds; seconds (wall and CPU) per seed.
With `--vcs models` the cluster is split into a VC per GPU model and PAI's policy runs with
pods overflowing onto other VCs' idle GPUs; it adds, per VC, the least margin (GPUs) between
what its pods hold on the shared cluster and alone on its cells, at any arrival.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from pai.cluster import load_cluster
from pai.scheduler.fragmentation import FragmentationPolicy
from pai.sim.inflation import (
    DEFAULT_TARGET,
    InflationResult,
    draw_arrivals,
    replay_inflation,
    replay_with_vcs,
)
from pai.sim.openb import node_list_beside, openb_cluster, read_nodes, read_pods, vc_name
from pai.sim.plots import allocation_by_arrival
from pai.sim.sharepolicies import SHARE_POLICIES, ClusterScale, make_share_policy
from pai.sim.traces.locations import OPENB_PODS, shipped_file

DEFAULT_POLICIES = (
    "random",
    "best-fit",
    "dot-product",
    "gpu-packing",
    "gpu-clustering",
    "fgd",
    "pai",
)
DEFAULT_SEEDS = "42"


def seeds_of(text: str) -> list[int]:
    """`42`, `42-51` or `42,45`."""
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def workload_name(trace: Path) -> str:
    name = trace.name
    for suffix in (".gz", ".csv"):
        name = name.removesuffix(suffix)
    return name


def run(
    trace: Path,
    nodes_file: Path,
    policies: Sequence[str],
    seeds: Sequence[int],
    tick: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, list[InflationResult]]]:
    pods = read_pods(trace)
    nodes = read_nodes(nodes_file)
    cluster = load_cluster(openb_cluster(nodes), source=str(nodes_file))
    gpus = sum(node.gpus for node in nodes)
    scale = ClusterScale(max(n.cpu_milli for n in nodes), max(n.gpus for n in nodes) * 1000)
    results: dict[str, list[InflationResult]] = {name: [] for name in policies}
    for seed in seeds:
        arrivals = draw_arrivals(pods, gpus, seed)
        for name in policies:
            policy = make_share_policy(name, pods, scale, seed)
            results[name].append(replay_inflation(cluster, arrivals, name, policy, seed=seed))
            tick(f"{name}, seed {seed}")
    summary = {
        "workload": workload_name(trace),
        "gpus": gpus,
        "seeds": list(seeds),
        "policies": {name: _summary(runs) for name, runs in results.items()},
    }
    return summary, results


def run_vcs(
    trace: Path, nodes_file: Path, seeds: Sequence[int], tick: Callable[[str], None]
) -> dict[str, Any]:
    pods = read_pods(trace)
    nodes = read_nodes(nodes_file)
    cluster = load_cluster(openb_cluster(nodes, "models"), source=str(nodes_file))
    gpus = sum(node.gpus for node in nodes)
    weights: dict[str, int] = {}
    for node in nodes:
        weights[vc_name(node.model)] = weights.get(vc_name(node.model), 0) + node.gpus
    shared: list[InflationResult] = []
    alone: list[InflationResult] = []
    margins: dict[str, float] = {}
    preempted = []
    for seed in seeds:
        arrivals = draw_arrivals(pods, gpus, seed, vc_weights=weights)
        result = replay_with_vcs(cluster, arrivals, FragmentationPolicy, seed=seed)
        tick(f"VCs by GPU model, seed {seed}")
        shared.append(result.shared)
        alone.append(result.alone)
        preempted.append(result.shared.preempted)
        for vc, margin in result.margins.items():
            margins[vc] = min(margin, margins.get(vc, margin))
    return {
        "layout": "a VC per GPU model, pods given a VC in proportion to its GPUs",
        "vc_gpus": weights,
        "shared": _summary(shared),
        "alone": _summary(alone),
        "preempted_per_seed": statistics.fmean(preempted),
        "least_margin_gpus": dict(sorted(margins.items())),
    }


def _summary(runs: list[InflationResult]) -> dict[str, float]:
    return {
        "alloc_at_100": round(statistics.fmean(r.allocation_at(100) for r in runs), 2),
        "alloc_at_130": round(statistics.fmean(r.allocation_at(DEFAULT_TARGET) for r in runs), 2),
        "seconds": round(statistics.fmean(r.seconds for r in runs), 1),
        "cpu_seconds": round(statistics.fmean(r.cpu_seconds for r in runs), 1),
    }


def mean_curve(runs: list[InflationResult]) -> list[tuple[float, float]]:
    """The mean allocation rate at each whole percent of arrived workload."""
    return [
        (float(step), statistics.fmean(r.allocation_at(step) for r in runs))
        for step in range(0, int(DEFAULT_TARGET) + 1)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trace",
        type=Path,
        help=f"an openb pod list (.csv[.gz]); default: the shipped {OPENB_PODS}",
    )
    parser.add_argument("--nodes", type=Path, help="the node list (default: beside the trace)")
    parser.add_argument("--seeds", default=DEFAULT_SEEDS, help="42, 42-51 or 42,45")
    parser.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help=f"comma-separated, of {', '.join(SHARE_POLICIES)}",
    )
    parser.add_argument("--vcs", choices=["models"], help="also split the cluster into VCs")
    parser.add_argument("--plot", type=Path, help="write allocation against arrivals (PNG)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    trace: Path = args.trace or shipped_file(OPENB_PODS)
    seeds = seeds_of(args.seeds)
    policies = [name.strip() for name in args.policies.split(",") if name.strip()]
    unknown = [name for name in policies if name not in SHARE_POLICIES]
    if unknown:
        parser.error(f"unknown policies {', '.join(unknown)}; known: {', '.join(SHARE_POLICIES)}")
    nodes_file = args.nodes or node_list_beside(trace)
    console = Console(stderr=True)
    runs = len(seeds) * (len(policies) + (1 if args.vcs else 0))
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying", total=runs)

        def tick(done: str) -> None:
            progress.update(task, description=f"done: {done}", advance=1)

        summary, results = run(trace, nodes_file, policies, seeds, tick)
        if args.vcs:
            summary["vcs"] = run_vcs(trace, nodes_file, seeds, tick)
    if args.plot:
        curves = {name: mean_curve(runs_of) for name, runs_of in results.items()}
        allocation_by_arrival(curves, summary["workload"], len(seeds), args.plot)
    if args.json:
        print(json.dumps(summary))
        return
    Console().print(_table(summary))


def _table(summary: dict[str, Any]) -> Table:
    seeds = summary["seeds"]
    table = Table(
        title=f"{summary['workload']} on {summary['gpus']} GPUs, seeds {seeds[0]}-{seeds[-1]}"
    )
    for column in ("policy", "alloc at 100 %", "alloc at 130 %", "s per seed", "CPU s"):
        table.add_column(column, justify="right")
    rows = list(summary["policies"].items())
    vcs = summary.get("vcs")
    if vcs:
        rows += [("pai, VCs", vcs["shared"]), ("pai, VCs alone", vcs["alone"])]
    for name, row in rows:
        table.add_row(
            name,
            f"{row['alloc_at_100']:.2f}",
            f"{row['alloc_at_130']:.2f}",
            f"{row['seconds']:.1f}",
            f"{row['cpu_seconds']:.1f}",
        )
    return table


if __name__ == "__main__":
    main()
