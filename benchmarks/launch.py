"""Submit-to-running latency of jobs of 1, 8 and 32 tasks, with real processes.

A job counts as running when every one of its tasks' commands has started. The platform is
the real one minus HTTP: a SQLite store, the controller, the HiveD scheduler and the local
executor, on a cluster of eight CPU "nodes" (127.0.0.1..8) with eight slots each.

    python benchmarks/launch.py [--json] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pai.auth.sealing import SecretBox
from pai.cluster import load_cluster
from pai.executors.local import LocalExecutor, kill_processes_under
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.orchestrator.intents import find_job, request_stop, submit_job
from pai.scheduler import Scheduler
from pai.store import Database

NODES = 8
SLOTS_PER_NODE = 8
SIZES = (1, 8, 32)


def cluster() -> object:
    return load_cluster(
        {
            "physicalCluster": {
                "skuTypes": {"CPU": {"gpu": 0, "cpu": 1, "memory": "256Mi"}},
                "cellTypes": {
                    "NODE": {
                        "childCellType": "CPU",
                        "childCellNumber": SLOTS_PER_NODE,
                        "isNodeLevel": True,
                    }
                },
                "physicalCells": [
                    {"cellType": "NODE", "cellAddress": f"node{i}", "nodeAddress": f"127.0.0.{i}"}
                    for i in range(1, NODES + 1)
                ],
            },
            "virtualClusters": {
                "default": {"virtualCells": [{"cellType": "NODE", "cellNumber": NODES}]}
            },
        }
    )


def job_text(name: str, tasks: int) -> str:
    return f"""
protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
taskRoles:
  worker:
    instances: {tasks}
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ["sleep 120"]
"""


class Bench:
    def __init__(self, home: Path) -> None:
        self.database = Database(f"sqlite:///{home / 'pai.db'}")
        with self.database.exclusive() as connection:
            self.database.upgrade(connection)
        self.cluster = cluster()
        self.box = SecretBox(b"launch-benchmark-key-0123456789abcdef")
        self.controller = Controller(
            self.database,
            Scheduler(self.cluster),  # type: ignore[arg-type]
            LocalExecutor(home / "executor"),
            self.box,
            ControllerSettings(),
        )
        self.home = home

    def submit(self, name: str, tasks: int) -> str:
        with self.database.session() as session:
            row = submit_job(
                session,
                self.cluster,  # type: ignore[arg-type]
                self.box,
                username="bench",
                text=job_text(name, tasks),
                may_use_vc=lambda _vc: True,
            )
            framework_name = row.framework_name
        self.controller.wake()
        return framework_name

    def all_running(self, name: str) -> bool:
        with self.database.session() as session:
            status = find_job(session, name).status
        if status is None:
            return False
        return all(task["state"] == "AttemptRunning" for task in status["attempt"]["tasks"])

    def state(self, name: str) -> str:
        with self.database.session() as session:
            return find_job(session, name).state

    def stop_and_wait(self, name: str) -> None:
        with self.database.session() as session:
            request_stop(session, find_job(session, name))
        self.controller.wake()
        while self.state(name) != "STOPPED":
            time.sleep(0.02)

    def measure(self, tasks: int, runs: int) -> dict[str, float]:
        latencies = []
        for run in range(runs):
            name = self.submit(f"job-{tasks}-{run}", tasks)
            started = time.perf_counter()
            while not self.all_running(name):
                time.sleep(0.005)
            latencies.append(time.perf_counter() - started)
            self.stop_and_wait(name)
        ordered = sorted(latencies)
        p99_index = min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))
        return {
            "tasks": tasks,
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[p99_index] * 1000, 1),
            "tasks_per_second": round(tasks * runs / sum(latencies), 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--runs", type=int, default=20, help="jobs submitted per size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pai-launch-bench-") as directory:
        bench = Bench(Path(directory))
        bench.controller.start()
        try:
            results = [bench.measure(tasks, args.runs) for tasks in SIZES]
        finally:
            bench.controller.stop()
            kill_processes_under(Path(directory))
            bench.database.dispose()
    if args.json:
        print(json.dumps(results))
        return
    table = Table(title="Submit to running (all tasks started), local executor")
    for column in ("tasks", "p50 ms", "p99 ms", "tasks/s"):
        table.add_column(column, justify="right")
    for row in results:
        table.add_row(*(str(row[key]) for key in ("tasks", "p50_ms", "p99_ms", "tasks_per_second")))
    Console().print(table)


if __name__ == "__main__":
    main()
