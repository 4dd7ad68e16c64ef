"""What monitoring costs: the sampler with 200 running tasks, and `/metrics` at 10,000 jobs.

The sampler is the real one: 200 tasks (`sleep`) run under the local executor, and each round
of the monitor reads every task's process tree, the machine, and writes the samples (and the
VCs' use) to a SQLite store. Its cost is CPU time per round, reported as a share of one core at
the default interval of 5 s. `/metrics` is rendered from the same monitor, with 10,000 jobs in
the store, as Prometheus would scrape it, each time after a new sampling round (what it
measured is rendered once a round).

    python benchmarks/monitoring.py [--json] [--tasks N] [--jobs N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import track
from rich.table import Table
from sqlalchemy import insert

from pai.auth.sealing import SecretBox
from pai.cluster import ClusterConfig, load_cluster
from pai.executors.base import TaskEventKind, TaskLaunch
from pai.executors.local import LocalExecutor, kill_processes_under
from pai.monitoring.history import UsageHistory
from pai.monitoring.metrics import PlatformMetrics
from pai.monitoring.monitor import Monitor
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.scheduler import Scheduler
from pai.store import Database
from pai.store.models import JobRow

DEFAULT_INTERVAL = 5.0
TARGET_CORE_PERCENT = 2.0
TARGET_RENDER_P99_MS = 100.0


def cluster() -> ClusterConfig:
    return load_cluster(
        {
            "physicalCluster": {
                "skuTypes": {"CPU": {"gpu": 0, "cpu": 1, "memory": "64Mi"}},
                "cellTypes": {
                    "NODE": {"childCellType": "CPU", "childCellNumber": 50, "isNodeLevel": True}
                },
                "physicalCells": [
                    {"cellType": "NODE", "cellAddress": f"node{i}", "nodeAddress": f"127.0.0.{i}"}
                    for i in range(1, 5)
                ],
            },
            "virtualClusters": {
                "default": {"virtualCells": [{"cellType": "NODE", "cellNumber": 4}]}
            },
        }
    )


def fill_jobs(database: Database, jobs: int, running: int) -> None:
    """`jobs` rows, the first `running` of them running (their tasks are the benchmark's)."""
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = [
        {
            "id": number + 1,
            "username": f"user{number % 50}",
            "name": f"job-{number}",
            "virtual_cluster": "default",
            "priority_class": "test",
            "submitted_at": now - timedelta(seconds=jobs - number),
            "job_text": "",
            "spec": {},
            "total_tasks": 1,
            "total_gpus": 0,
            "total_roles": 1,
            "state": "RUNNING" if number < running else "SUCCEEDED",
            "sub_state": "AttemptRunning",
            "execution_type": "START",
            "retries": number % 3,
            "status": {},
            "allocations": [],
        }
        for number in range(jobs)
    ]
    with database.engine.begin() as connection:
        for first in range(0, jobs, 1000):
            connection.execute(insert(JobRow), rows[first : first + 1000])


def start_tasks(executor: LocalExecutor, root: Path, count: int) -> None:
    for number in track(range(count), description=f"Starting {count} tasks", transient=True):
        attempt = root / "jobs" / f"job-{number}"
        executor.launch(
            TaskLaunch(
                key=f"task-{number}",
                job=f"user{number % 50}~job-{number}",
                role="main",
                index=0,
                job_attempt=0,
                task_attempt=0,
                node=f"node{number % 4 + 1}",
                address="127.0.0.1",
                script="sleep 3600",
                env={},
                working_dir=attempt / "work",
                log_dir=attempt / "logs",
                memory_mb=64,
            )
        )
    started: set[str] = set()
    while len(started) < count:
        started |= {e.key for e in executor.events() if e.kind is TaskEventKind.STARTED}
        time.sleep(0.1)


def measure(tasks: int, jobs: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pai-monitoring-bench-") as directory:
        root = Path(directory)
        database = Database(f"sqlite:///{root / 'pai.db'}")
        with database.exclusive() as connection:
            database.upgrade(connection)
        fill_jobs(database, jobs, tasks)
        executor = LocalExecutor(root / "executor")
        controller = Controller(
            database,
            Scheduler(cluster()),
            executor,
            SecretBox(b"monitoring-benchmark-key-0123456789abc"),
            ControllerSettings(),
        )
        history = UsageHistory(database)
        monitor = Monitor(executor, database, controller.cluster, controller.snapshot, history)
        metrics = PlatformMetrics(monitor, controller, database, root)
        try:
            start_tasks(executor, root, tasks)
            monitor.step()  # the baseline round: CPU counting starts here
            costs = []
            for _ in track(range(rounds), description="Sampling rounds", transient=True):
                time.sleep(0.5)
                before = time.process_time()
                monitor.step()
                costs.append(time.process_time() - before)
            renders = []
            for _ in track(range(100), description="Rendering /metrics", transient=True):
                monitor.step()  # a new round each time: nothing of the last render is reused
                before = time.perf_counter()
                text = metrics.render()
                renders.append(time.perf_counter() - before)
            sampled = sum(1 for line in text.splitlines() if line.startswith(b"task_cpu_percent{"))
        finally:
            kill_processes_under(root)
            database.dispose()
    per_round = statistics.median(costs)
    ordered = sorted(renders)
    return {
        "tasks": tasks,
        "jobs": jobs,
        "tasks_in_metrics": sampled,
        "sampling_cpu_ms_per_round": round(per_round * 1000, 1),
        "sampler_core_percent_at_5s": round(100 * per_round / DEFAULT_INTERVAL, 2),
        "target_core_percent": TARGET_CORE_PERCENT,
        "metrics_render_p50_ms": round(statistics.median(ordered) * 1000, 1),
        "metrics_render_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
        "target_render_p99_ms": TARGET_RENDER_P99_MS,
        "metrics_bytes": len(text),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    result = measure(args.tasks, args.jobs, args.rounds)
    if args.json:
        print(json.dumps(result))
        return
    table = Table(title="Monitoring overhead")
    table.add_column("what")
    table.add_column("measured", justify="right")
    table.add_column("target", justify="right")
    table.add_row(
        f"sampler, {result['tasks']} tasks, CPU per round",
        f"{result['sampling_cpu_ms_per_round']} ms",
        "",
    )
    table.add_row(
        "sampler at a 5 s interval", f"{result['sampler_core_percent_at_5s']} % of a core", "< 2 %"
    )
    table.add_row(
        f"/metrics at {result['jobs']:,} jobs, p50 / p99",
        f"{result['metrics_render_p50_ms']} / {result['metrics_render_p99_ms']} ms",
        "p99 < 100 ms",
    )
    Console().print(table)


if __name__ == "__main__":
    main()
