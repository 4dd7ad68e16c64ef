"""Submit-to-running latency of jobs of 1, 8 and 32 tasks, with real processes.

A job counts as running when every one of its tasks' commands has started. The platform is
the real one minus HTTP: a SQLite store, the controller, the HiveD scheduler and an executor.
The local executor runs a cluster of eight CPU "nodes" (127.0.0.1..8) with eight slots each.
With `--engine ray` the same jobs also run on a Ray cluster of four hosts on this machine (a
head and four workers in network namespaces of their own, eight slots each; needs root), so
32 tasks spread over 4 hosts, and both engines are measured in the same run. With
`--isolation container` the local executor's jobs also run with every task in a container of
a busybox image already on the machine (podman, a runtime configuration and registry of the
benchmark's own: `pai.executors.sandboxes.containers`; needs root), next to host tasks in the
same run and to the runtime's own floor: as many bare `podman run --detach` started at once.

    python benchmarks/launch.py [--json] [--runs N] [--engine local|ray]
                                [--isolation host|container]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pai.auth.sealing import SecretBox
from pai.cluster import ClusterConfig, load_cluster
from pai.executors.base import Executor
from pai.executors.isolation.policy import IsolationPolicy
from pai.executors.local import LocalExecutor, kill_processes_under
from pai.executors.node.taskfiles import SupervisorConfig
from pai.executors.sandboxes.containers import ContainerSandbox
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.orchestrator.intents import find_job, prepare_job, record_job, request_stop
from pai.runtime.ports import PortAllocator
from pai.scheduler import Scheduler
from pai.store import Database

LOCAL_NODES = 8
RAY_WORKERS = 4
SLOTS_PER_NODE = 8
SIZES = (1, 8, 32)


def cluster(addresses: dict[str, str]) -> ClusterConfig:
    """Nodes of eight CPU slots each, at the given addresses, all in the VC `default`."""
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
                    {"cellType": "NODE", "cellAddress": name, "nodeAddress": address}
                    for name, address in addresses.items()
                ],
            },
            "virtualClusters": {
                "default": {"virtualCells": [{"cellType": "NODE", "cellNumber": len(addresses)}]}
            },
        }
    )


def job_text(name: str, tasks: int, image: str) -> str:
    return f"""
protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: "{image}"}}]
taskRoles:
  worker:
    instances: {tasks}
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ["sleep 120"]
"""


class Bench:
    def __init__(
        self,
        home: Path,
        cluster: ClusterConfig,
        executor: Executor,
        ports: PortAllocator,
        image: str = "python:3.11",
    ) -> None:
        self.database = Database(f"sqlite:///{home / 'pai.db'}")
        with self.database.exclusive() as connection:
            self.database.upgrade(connection)
        self.cluster = cluster
        self.box = SecretBox(b"launch-benchmark-key-0123456789abcdef")
        self.controller = Controller(
            self.database,
            Scheduler(self.cluster),
            executor,
            self.box,
            ControllerSettings(),
            ports=ports,
        )
        self.home = home
        self.image = image

    def submit(self, name: str, tasks: int) -> str:
        job = prepare_job(
            self.cluster,
            self.box,
            username="bench",
            text=job_text(name, tasks, self.image),
            may_use_vc=lambda _vc: True,
        )
        with self.database.session() as session:
            record_job(session, job)
        self.controller.wake()
        return job.framework_name

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


def run(bench: Bench, runs: int) -> list[dict[str, float]]:
    bench.controller.start()
    try:
        return [bench.measure(tasks, runs) for tasks in SIZES]
    finally:
        bench.controller.stop()
        bench.database.dispose()


def measure_local(
    directory: Path, runs: int, config: SupervisorConfig | None = None, image: str = "python:3.11"
) -> list[dict[str, float]]:
    home = directory / ("local" if config is None else "local-containers")
    addresses = {f"node{i}": f"127.0.0.{i}" for i in range(1, LOCAL_NODES + 1)}
    executor = LocalExecutor(home / "executor", config=config)
    try:
        return run(Bench(home, cluster(addresses), executor, PortAllocator(), image), runs)
    finally:
        kill_processes_under(home)


def measure_containers(
    directory: Path, runs: int
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """The local executor's jobs with every task in a container of an image on the node, and
    the runtime's own floor: as many bare `podman run --detach` at once, without PAI."""
    with ContainerSandbox(directory / "containers") as sandbox:
        image = sandbox.busybox("bench/busybox:1")
        sandbox.podman("pull", "--authfile", str(sandbox.auth_file()), image)
        os.environ.update(sandbox.env)  # the executor's supervisors start podman with it
        config = SupervisorConfig(isolation=IsolationPolicy("container"))
        jobs = measure_local(directory, runs, config, image)
        return jobs, [runtime_floor(sandbox, image, tasks, FLOOR_RUNS) for tasks in SIZES]


FLOOR_RUNS = 5


def runtime_floor(sandbox: ContainerSandbox, image: str, tasks: int, runs: int) -> dict[str, float]:
    """Wall time of `tasks` bare `podman run --detach` started together, until all returned."""
    command = ["podman", "run", "--detach", "--network", "host", "--log-driver", "passthrough"]
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        starts = [
            subprocess.Popen(
                [*command, image, "sleep", "60"],
                env={**os.environ, **sandbox.env},
                stdout=subprocess.DEVNULL,
            )
            for _ in range(tasks)
        ]
        if any(start.wait() != 0 for start in starts):
            raise RuntimeError("podman run failed in the runtime floor measurement")
        walls.append(time.perf_counter() - started)
        sandbox.podman("rm", "--force", "--all", "--time", "0")
    return {"tasks": tasks, "p50_ms": round(statistics.median(walls) * 1000, 1)}


def measure_ray(directory: Path, runs: int) -> list[dict[str, float]]:
    from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec

    names = [f"w{i}" for i in range(1, RAY_WORKERS + 1)]
    workers = [WorkerSpec(name, cpus=SLOTS_PER_NODE) for name in names]
    with RaySandbox(directory / "ray", workers) as sandbox:
        os.environ.update(sandbox.env)  # Ray reads its token when it is imported
        from pai.executors.ray.executor import RayExecutor, connect

        connect(sandbox.address, "pai-bench")
        hosts = cluster({name: sandbox.worker_address(name) for name in names})
        home = directory / "ray-home"
        executor = RayExecutor(
            hosts, home / "executor", node_dir=sandbox.root / "nodes", store_id="bench"
        )
        try:
            return run(Bench(home, hosts, executor, PortAllocator(probe=None)), runs)
        finally:
            executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--runs", type=int, default=20, help="jobs submitted per size")
    parser.add_argument("--engine", choices=("local", "ray"), default="local")
    parser.add_argument("--isolation", choices=("host", "container"), default="host")
    args = parser.parse_args()
    # Short: Ray's socket paths live under it and must stay within the kernel's 107 bytes.
    with tempfile.TemporaryDirectory(prefix="pai-launch-", dir="/tmp") as directory:
        local = measure_local(Path(directory), args.runs)
        if args.isolation == "container":
            show_containers(local, *measure_containers(Path(directory), args.runs), args.json)
            return
        if args.engine == "local":
            if args.json:
                print(json.dumps(local))
            else:
                Console().print(table("Submit to running, local executor", local))
            return
        on_ray = measure_ray(Path(directory), args.runs)
    ratios = {
        str(ray_row["tasks"]): round(ray_row["p50_ms"] / local_row["p50_ms"], 2)
        for local_row, ray_row in zip(local, on_ray, strict=True)
    }
    if args.json:
        print(json.dumps({"local": local, "ray": on_ray, "ray_to_local_p50": ratios}))
        return
    console = Console()
    console.print(table(f"Submit to running, local executor ({LOCAL_NODES} nodes)", local))
    console.print(table(f"Submit to running, Ray ({RAY_WORKERS} hosts)", on_ray))
    console.print(f"Ray p50 / local p50 by tasks: {ratios}")


def show_containers(
    host: list[dict[str, float]],
    containers: list[dict[str, float]],
    floor: list[dict[str, float]],
    as_json: bool,
) -> None:
    ratios = {
        str(row["tasks"]): round(row["p50_ms"] / host_row["p50_ms"], 2)
        for host_row, row in zip(host, containers, strict=True)
    }
    if as_json:
        print(
            json.dumps(
                {
                    "host": host,
                    "container": containers,
                    "container_to_host_p50": ratios,
                    "bare_podman_run": floor,
                }
            )
        )
        return
    console = Console()
    console.print(table("Submit to running, tasks on the host", host))
    console.print(table("Submit to running, tasks in containers (image present)", containers))
    console.print(f"container p50 / host p50 by tasks: {ratios}")
    floor_table = Table(title="Bare `podman run --detach`, N at once, without PAI")
    floor_table.add_column("containers", justify="right")
    floor_table.add_column("p50 ms", justify="right")
    for row in floor:
        floor_table.add_row(str(row["tasks"]), str(row["p50_ms"]))
    console.print(floor_table)


def table(title: str, results: list[dict[str, float]]) -> Table:
    shown = Table(title=title)
    for column in ("tasks", "p50 ms", "p99 ms", "tasks/s"):
        shown.add_column(column, justify="right")
    for row in results:
        shown.add_row(*(str(row[key]) for key in ("tasks", "p50_ms", "p99_ms", "tasks_per_second")))
    return shown


if __name__ == "__main__":
    main()
