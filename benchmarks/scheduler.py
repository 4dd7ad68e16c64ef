"""Scheduler throughput and decision latency on large simulated clusters.

For each cluster size (nodes of 8 GPUs in racks of 20, five VCs owning racks, floating nodes
and sockets) a seeded workload of gangs of 1 to 64 GPUs (guaranteed at two priorities, and
opportunistic) arrives while earlier ones complete, keeping the cluster busy; waiting groups are
retried when cells free up, preemption victims are stopped at once. Everything runs in virtual
time; only the scheduler's own calls are timed.

    python benchmarks/scheduler.py            # Rich table
    python benchmarks/scheduler.py --json     # one JSON object per cluster size

Each size runs in a fresh process so that `peak_mb` (the process's maximum resident memory)
belongs to that size alone.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import random
import resource
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass

from pai.cluster import ClusterConfig, load_cluster
from pai.scheduler import Bind, GroupRequest, PodRequest, Preempt, Scheduler

SIZES = (100, 1_000, 5_000)
RACK_NODES = 20
GANG_GPUS = (1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 16, 32, 64)
RETRIES_PER_EVENT = 20


@dataclass(frozen=True)
class Result:
    nodes: int
    gpus: int
    decisions: int
    pods_placed: int
    pods_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    peak_mb: float
    utilization: float  # mean share of GPUs in use, sampled at arrivals after warm-up


def build_cluster(nodes: int) -> ClusterConfig:
    racks = nodes // RACK_NODES
    rack_vc = max(1, racks * 3 // 10)
    floating = racks - rack_vc
    floating_nodes = floating * RACK_NODES
    split = [floating_nodes * 30 // 100, floating_nodes * 30 // 100, floating_nodes * 25 // 100]
    socket_nodes = floating_nodes - sum(split)
    return load_cluster(
        {
            "skuTypes": {"V100": {"gpu": 1, "cpu": 8, "memory": "60Gi"}},
            "cellTypes": {
                "PCIE": {"childCellType": "V100", "childCellNumber": 2},
                "SOCKET": {"childCellType": "PCIE", "childCellNumber": 2},
                "NODE": {"childCellType": "SOCKET", "childCellNumber": 2, "isNodeLevel": True},
                "RACK": {"childCellType": "NODE", "childCellNumber": RACK_NODES},
            },
            "physicalCells": [
                {
                    "cellType": "RACK",
                    "cellChildren": [
                        {"cellAddress": f"r{rack}-n{node}"} for node in range(RACK_NODES)
                    ],
                }
                for rack in range(racks)
            ],
            "virtualClusters": {
                "vc_racks": {"virtualCells": [{"cellType": "RACK", "cellNumber": rack_vc}]},
                **{
                    f"vc_nodes{i}": {"virtualCells": [{"cellType": "RACK.NODE", "cellNumber": n}]}
                    for i, n in enumerate(split)
                },
                "vc_sockets": {
                    "virtualCells": [
                        {"cellType": "RACK.NODE.SOCKET", "cellNumber": socket_nodes * 2}
                    ]
                },
            },
        }
    )


def make_request(rng: random.Random, serial: int, vcs: list[str]) -> GroupRequest:
    gpus = rng.choice(GANG_GPUS)
    pods = (gpus,) if gpus <= 8 else (8,) * (gpus // 8)
    roll = rng.random()
    priority = -1 if roll < 0.15 else (100 if roll < 0.3 else 10)
    vc = rng.choice(vcs)
    if vc == "vc_sockets" and priority >= 0:
        pods = tuple(min(size, 4) for size in pods)
    return GroupRequest(
        name=f"job{serial}",
        vc=vc,
        priority=priority,
        pods=tuple(PodRequest("worker", i, size) for i, size in enumerate(pods)),
    )


def run(nodes: int, arrivals: int, seed: int = 7) -> Result:
    cluster = build_cluster(nodes)
    scheduler = Scheduler(cluster)
    # A long-running controller does this once after start-up: the cells live for the whole
    # process, and leaving them to the cyclic collector adds pauses of a few hundred ms.
    gc.collect()
    gc.freeze()
    rng = random.Random(seed)
    vcs = list(cluster.virtual_clusters)
    latencies: list[float] = []
    busy = 0.0
    pods_placed = 0
    now = 0.0
    completions: list[tuple[float, str]] = []
    running: dict[str, int] = {}
    in_use = 0
    samples: list[float] = []
    pending: deque[GroupRequest] = deque()
    mean_runtime = 100.0
    # Offered load slightly above capacity keeps the cluster full and a queue waiting.
    total_gpus = nodes * 8
    mean_gpus = sum(GANG_GPUS) / len(GANG_GPUS)
    interarrival = mean_runtime * mean_gpus / (total_gpus * 1.1)

    def timed(call, *args):  # type: ignore[no-untyped-def]
        nonlocal busy
        start = time.perf_counter()
        value = call(*args)
        busy += time.perf_counter() - start
        return value

    def stop(name: str) -> None:
        nonlocal in_use
        timed(scheduler.release, name)
        in_use -= running.pop(name)

    def attempt(request: GroupRequest) -> bool:
        nonlocal pods_placed, in_use
        start = time.perf_counter()
        decision = timed(scheduler.schedule, request)
        if isinstance(decision, Preempt):
            for victim in decision.victims:
                stop(victim)
            decision = timed(scheduler.schedule, request)
        if isinstance(decision, Bind):
            timed(scheduler.allocate, request.name, decision.placement)
        latencies.append(time.perf_counter() - start)
        if not isinstance(decision, Bind):
            return False
        pods_placed += len(request.pods)
        running[request.name] = request.leaf_cells
        in_use += request.leaf_cells
        duration = rng.expovariate(1 / mean_runtime)
        heapq.heappush(completions, (now + duration, request.name))
        return True

    def retry_pending() -> None:
        for _ in range(min(RETRIES_PER_EVENT, len(pending))):
            request = pending.popleft()
            if not attempt(request):
                pending.append(request)

    next_arrival = 0.0
    for serial in range(arrivals):
        next_arrival += rng.expovariate(1 / interarrival)
        while completions and completions[0][0] <= next_arrival:
            now, name = heapq.heappop(completions)
            if name in running:
                stop(name)
                retry_pending()
        now = next_arrival
        if serial >= arrivals // 3:
            samples.append(in_use / total_gpus)
        request = make_request(rng, serial, vcs)
        if not attempt(request):
            pending.append(request)
    latencies.sort()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return Result(
        nodes=nodes,
        gpus=total_gpus,
        decisions=len(latencies),
        pods_placed=pods_placed,
        pods_per_second=round(pods_placed / busy, 1),
        p50_ms=round(latencies[len(latencies) // 2] * 1000, 3),
        p99_ms=round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
        max_ms=round(latencies[-1] * 1000, 3),
        peak_mb=round(peak_kb / 1024, 1),
        utilization=round(sum(samples) / len(samples), 3),
    )


def arrivals_for(nodes: int) -> int:
    return max(4_000, nodes * 6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--nodes", type=int, help="run one size in this process (internal)")
    args = parser.parse_args()
    if args.nodes:
        print(json.dumps(asdict(run(args.nodes, arrivals_for(args.nodes)))))
        return
    results = []
    for nodes in SIZES:
        output = subprocess.run(
            [sys.executable, __file__, "--nodes", str(nodes)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append(json.loads(output))
    if args.json:
        keys = ("nodes", "gpus", "pods_per_second", "p50_ms", "p99_ms", "peak_mb")
        print(json.dumps([{key: result[key] for key in keys} for result in results]))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="HiveD scheduler: busy cluster, gangs of 1-64 GPUs")
    columns = {
        "nodes": "nodes",
        "gpus": "GPUs",
        "utilization": "GPUs busy",
        "decisions": "decisions",
        "pods_placed": "pods placed",
        "pods_per_second": "pods/s",
        "p50_ms": "p50 ms",
        "p99_ms": "p99 ms",
        "max_ms": "max ms",
        "peak_mb": "peak MB",
    }
    for title in columns.values():
        table.add_column(title, justify="right")
    for result in results:
        table.add_row(*(str(result[key]) for key in columns))
    Console().print(table)


if __name__ == "__main__":
    main()
