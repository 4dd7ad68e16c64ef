"""PAI at a cluster's size: the whole control plane against hollow nodes, measured as clients
see it.

For each size, a fresh store and `pai serve controller --engine hollow` with that many hollow
nodes (8 GPUs each) beside `pai serve api --workers N`, in processes of their own. A user submits
a mix of jobs at a sustained rate (of every ten: eight of one 1-GPU task, one of one 8-GPU task,
one gang of four 8-GPU tasks; each sleeps for an hour) until `--tasks-per-node` tasks per node
were submitted, while other clients read jobs (`GET /jobs/{job}`, one at a time each) and list
pages of 50 (filtered as the portal does). Then, for each size:

- accepted: submissions answered 202 (all must be);
- submit -> RUNNING p50/p99: from the job's submission to its RUNNING, both as the API reports
  them (`submissionTime`, `launchedTime`), over the jobs that reached RUNNING; `not_running`
  counts those that had not when the load ended (the cluster full, a gang waiting);
- GET job p99 and list p99: client-side latencies while the load ran;
- running tasks: those of the jobs RUNNING when the load ended;
- controller CPU per task start: the controller's CPU time while the load ran over the running
  tasks;
- controller pass p99: of the controller's passes while the load ran (`pai_controller_pass_seconds`
  of `/metrics`, to its histogram's bucket);
- store rows per task: the rows the controller wrote while the load ran
  (`pai_store_rows_written_total`), over the running tasks;
- memory: the most resident memory seen of the controller's process and of the API workers.

`--plot DIR` draws each figure against the cluster's size into DIR (docs/images/scale holds the
published run's).

- idle CPU (`--idle`, instead of the load): the control plane's CPU with no job at all, in %
  of one core per 1000 nodes, over `--idle-seconds` after it has started: what watching the
  nodes costs by itself, which must not grow faster than the cluster.

    python benchmarks/scale.py --sizes 100           # a quick look
    python benchmarks/scale.py --json                # 500, 2000 and 5000 nodes
    python benchmarks/scale.py --plot docs/images/scale
    python benchmarks/scale.py --idle                # idle cost at 500, 2000 and 5000 nodes
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
from api import (  # this directory's API benchmark starts servers alike
    ADMIN_PASSWORD,
    CpuMeter,
    log_in,
    percentile,
    platform,
    postgres_reachable,
    store,
)
from prometheus_client.parser import text_string_to_metric_families

GPUS_PER_NODE = 8
JOB_TEXT = """protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: 'python:3.11'}}]
taskRoles:
  main:
    instances: {instances}
    dockerImage: image
    resourcePerInstance: {{cpu: {gpus}, memoryMB: 4096, gpu: {gpus}}}
    commands:
      - sleep 1h
"""
MIX = (*[(1, 1)] * 8, (1, 8), (4, 8))
"""(instances, GPUs each) of every ten jobs submitted."""
LIST_QUERIES: tuple[dict[str, str | int], ...] = (
    {"username": "admin", "limit": 50},
    {"state": "RUNNING", "limit": 50, "order": "submissionTime,DESC"},
    {"vc": "default", "state": "WAITING,RUNNING", "withTotalCount": "true", "limit": 50},
)
PAGE = 50_000
SAMPLE_INTERVAL = 0.5
IDLE_WARM_UP = 10.0
"""Seconds left to a started control plane before its idle CPU is measured."""


class Load:
    """The clients of one run: a submitter at a steady rate, readers of jobs, a lister, and a
    sampler of the control plane's memory; each in a thread of its own until `stop`."""

    def __init__(self, api: str, rate: float, tasks: int, readers: int, processes: Any) -> None:
        self._api = api
        self._rate = rate
        self._tasks = tasks
        self._readers = readers
        self._processes = processes
        self.accepted = 0
        self.refused = 0
        self.submitted_tasks = 0
        self.names: list[str] = []
        self.get_ms: list[float] = []
        self.list_ms: list[float] = []
        self.memory_mb = {"controller": 0.0, "api_workers": 0.0}
        self.done = threading.Event()
        self._stop = threading.Event()

    @contextmanager
    def running(self) -> Iterator[Load]:
        threads = [threading.Thread(target=self._submit, daemon=True)]
        threads += [
            threading.Thread(target=self._read, args=(seed,), daemon=True)
            for seed in range(self._readers)
        ]
        threads += [
            threading.Thread(target=self._list, daemon=True),
            threading.Thread(target=self._sample, daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in threads:
                thread.join(timeout=60)

    def _submit(self) -> None:
        with log_in(self._api, "admin", ADMIN_PASSWORD) as client:
            started = time.monotonic()
            for number, (instances, gpus) in enumerate(itertools.cycle(MIX)):
                if self._stop.is_set() or self.submitted_tasks >= self._tasks:
                    break
                time.sleep(max(0.0, started + number / self._rate - time.monotonic()))
                name = f"scale-{number}"
                text = JOB_TEXT.format(name=name, instances=instances, gpus=gpus)
                response = client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})
                if response.status_code == 202:
                    self.accepted += 1
                    self.submitted_tasks += instances
                    self.names.append(name)
                else:
                    self.refused += 1
        self.done.set()

    def _read(self, seed: int) -> None:
        rng = random.Random(seed)
        with log_in(self._api, "admin", ADMIN_PASSWORD) as client:
            while not self._stop.wait(0.05):
                if not self.names:
                    continue
                name = rng.choice(self.names)
                started = time.perf_counter()
                client.get(f"/jobs/admin~{name}").raise_for_status()
                self.get_ms.append((time.perf_counter() - started) * 1000)

    def _list(self) -> None:
        with log_in(self._api, "admin", ADMIN_PASSWORD) as client:
            for query in itertools.cycle(LIST_QUERIES):
                if self._stop.wait(0.2):
                    return
                started = time.perf_counter()
                client.get("/jobs", params=query).raise_for_status()
                self.list_ms.append((time.perf_counter() - started) * 1000)

    def _sample(self) -> None:
        parts = {"controller": self._processes["controller"], "api_workers": self._processes["api"]}
        while not self._stop.wait(SAMPLE_INTERVAL):
            for part, process in parts.items():
                try:
                    root = psutil.Process(process.pid)
                    tree = [root, *root.children(recursive=True)]
                    resident = sum(member.memory_info().rss for member in tree) / 2**20
                except psutil.Error:
                    continue
                self.memory_mb[part] = max(self.memory_mb[part], resident)


class ControllerMetrics:
    """The controller's counters in `/metrics` (relayed by the API from loopback), read before
    and after the load: what changed in between is the load's."""

    def __init__(self, api: str) -> None:
        self._url = api.removesuffix("/api/v2") + "/metrics"
        self._before = self._read()

    def _read(self) -> dict[str, float]:
        text = httpx.get(self._url, timeout=60).raise_for_status().text
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name in ("pai_controller_pass_seconds", "pai_store_rows_written"):
                for sample in family.samples:
                    key = sample.name + sample.labels.get("le", "")
                    values[key] = sample.value
        return values

    def since(self) -> tuple[float, float]:
        """The 99th percentile of the passes since, to its bucket's upper bound (s), and the
        rows written since."""
        after = self._read()
        changed = {key: after[key] - self._before.get(key, 0.0) for key in after}
        rows = changed.get("pai_store_rows_written_total", 0.0)
        passes = changed.get("pai_controller_pass_seconds_count", 0.0)
        bounds = sorted(
            (float(key.removeprefix("pai_controller_pass_seconds_bucket")), count)
            for key, count in changed.items()
            if key.startswith("pai_controller_pass_seconds_bucket")
        )
        p99 = next((bound for bound, count in bounds if count >= 0.99 * passes), float("nan"))
        return p99, rows


def job_outcomes(client: httpx.Client) -> tuple[list[float], int, int]:
    """Submission to RUNNING of every job that ran, in seconds; how many had not; and the tasks
    of the jobs RUNNING now (the mix's jobs run all their tasks at once)."""
    latencies: list[float] = []
    waiting = running = 0
    offset = 0
    jobs: list[dict[str, Any]] = [{}]
    while jobs:
        page = client.get("/jobs", params={"limit": PAGE, "offset": offset}).raise_for_status()
        jobs = page.json()
        offset += PAGE
        for job in jobs:
            if job.get("launchedTime"):
                latencies.append((job["launchedTime"] - job["submissionTime"]) / 1000)
            else:
                waiting += 1
            if job["state"] == "RUNNING":
                running += job["totalTaskNumber"]
    return latencies, waiting, running


@contextmanager
def hollow_control_plane(
    nodes: int, args: argparse.Namespace, database: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh store and the control plane against `nodes` hollow nodes; the API's URL and the
    `pai serve` processes."""
    with tempfile.TemporaryDirectory(prefix="pai-scale-") as directory:
        home = Path(directory)
        with (
            store(database, args.postgres_url, home) as url,
            platform(
                home,
                url,
                args.api_workers,
                controller_options=("--engine", "hollow"),
                env={"PAI_HOLLOW_NODES": str(nodes), "PAI_LOG_LEVEL": "WARNING"},
            ) as (api, processes),
        ):
            yield api, processes


def measure_size(nodes: int, args: argparse.Namespace, database: str) -> dict[str, Any]:
    with hollow_control_plane(nodes, args, database) as (api, processes):
        meter = CpuMeter(processes, postgresql=False)
        metrics = ControllerMetrics(api)
        load = Load(api, args.rate, nodes * args.tasks_per_node, args.readers, processes)
        with load.running():
            load.done.wait()
            time.sleep(args.settle)
        cpu = meter.seconds()
        pass_p99, rows = metrics.since()
        with log_in(api, "admin", ADMIN_PASSWORD) as client:
            latencies, waiting, running = job_outcomes(client)
    return {
        "nodes": nodes,
        "gpus": nodes * GPUS_PER_NODE,
        "database": database,
        "submitted": load.accepted + load.refused,
        "accepted": load.accepted,
        "running_tasks": running,
        "not_running": waiting,
        "submit_to_running_p50_s": round(percentile(latencies, 0.5), 2),
        "submit_to_running_p99_s": round(percentile(latencies, 0.99), 2),
        "get_job_p99_ms": round(percentile(load.get_ms, 0.99), 1),
        "list_p99_ms": round(percentile(load.list_ms, 0.99), 1),
        "controller_cpu_ms_per_task_start": round(cpu["controller"] * 1000 / max(running, 1), 1),
        "controller_pass_p99_s": pass_p99,
        "store_rows_per_task": round(rows / max(running, 1), 1),
        "controller_memory_mb": round(load.memory_mb["controller"]),
        "api_workers_memory_mb": round(load.memory_mb["api_workers"]),
        "control_plane_memory_mb": round(sum(load.memory_mb.values())),
    }


def measure_idle(nodes: int, args: argparse.Namespace, database: str) -> dict[str, Any]:
    """The control plane's CPU while `nodes` hollow nodes run no job."""
    with hollow_control_plane(nodes, args, database) as (_, processes):
        time.sleep(IDLE_WARM_UP)  # the agents' first calls are a start's, not idleness
        meter = CpuMeter(processes, postgresql=False)
        time.sleep(args.idle_seconds)
        cpu = meter.seconds()
    share = {part: cpu[part] / args.idle_seconds * 100 for part in ("controller", "api_workers")}
    return {
        "nodes": nodes,
        "controller_cpu_pct": round(share["controller"], 2),
        "api_workers_cpu_pct": round(share["api_workers"], 2),
        "control_plane_cpu_pct_per_1000_nodes": round(sum(share.values()) * 1000 / nodes, 2),
    }


PANELS: tuple[tuple[str, tuple[str, ...], float | None], ...] = (
    ("submit -> RUNNING (s)", ("submit_to_running_p50_s", "submit_to_running_p99_s"), 5.0),
    ("reads, p99 (ms)", ("get_job_p99_ms", "list_p99_ms"), 1000.0),
    ("controller pass, p99 (s)", ("controller_pass_p99_s",), None),
    ("controller CPU per task start (ms)", ("controller_cpu_ms_per_task_start",), None),
    (
        "memory (MB)",
        ("controller_memory_mb", "api_workers_memory_mb", "control_plane_memory_mb"),
        2048.0,
    ),
    ("store rows written per task", ("store_rows_per_task",), None),
)
"""Each panel of the plot: its title, the figures it draws, and the target line (the issue's
service-level objectives on this benchmark's machine), if any."""


def plot(results: list[dict[str, Any]], directory: Path) -> Path:
    """One panel per figure against the cluster's size; the PNG's path."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 6.5), layout="constrained")
    nodes = [result["nodes"] for result in results]
    for axes, (title, keys, target) in zip(figure.subplots(2, 3).flat, PANELS, strict=True):
        for key in keys:
            axes.plot(nodes, [result[key] for result in results], marker="o", label=key)
        if target is not None:
            axes.axhline(target, color="red", linestyle="--", linewidth=1, label="target")
        axes.set_title(title)
        axes.set_xlabel("nodes (8 GPUs each)")
        axes.set_ylim(bottom=0)
        axes.legend(fontsize="small")
    figure.suptitle(f"PAI on hollow clusters, {results[0]['database']} store")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scale.png"
    figure.savefig(path, dpi=90)
    return path


RAY_STARTS_AT_ONCE = 4
"""Hosts whose `ray start` run together: more miss Ray's fixed 30 s deadline on 2 busy cores."""
RAY_WAIT = 300.0


def measure_ray(hosts: int, args: argparse.Namespace) -> dict[str, Any]:
    """A real Ray cluster of `hosts` small hosts (each in a network namespace of its own, as
    root): the control plane's CPU with no job, as `measure_idle` measures it, the agents' on
    the hosts besides, and how long a gang of one task per GPU of the cluster takes to start."""
    from pai.executors.sandboxes.ray import RaySandbox
    from pai.executors.sandboxes.ray_gang import (
        HOST_GPUS,
        cluster_file,
        pai_settings,
        ring_job,
        small_hosts,
        wait_all_alive,
        wait_all_running,
    )
    from pai.sdk import Client

    tasks = hosts * HOST_GPUS
    # Under /tmp, short: Ray's socket paths live under the sandbox and must stay short.
    with tempfile.TemporaryDirectory(prefix="pai-scale-", dir="/tmp") as directory:
        home = Path(directory, "pai")  # apart: the platform kills what names its home at exit
        home.mkdir()
        started = time.monotonic()
        sandbox = RaySandbox(
            Path(directory, "ray"), small_hosts(hosts), starts_at_once=RAY_STARTS_AT_ONCE
        )
        with sandbox:
            sandbox_seconds = time.monotonic() - started
            (home / "cluster.yaml").write_text(cluster_file(sandbox))
            with (
                store(args.database, args.postgres_url, home) as url,
                platform(
                    home,
                    url,
                    args.api_workers,
                    controller_options=("--cluster", str(home / "cluster.yaml")),
                    # Tasks run as host processes, as in the tests: the sandbox's hosts share
                    # this machine, where a container runtime may not run (nodes shown bad).
                    env={
                        **pai_settings(sandbox),
                        "PAI_LOG_LEVEL": "WARNING",
                        "PAI_ISOLATION": "host",
                        "PAI_TASK_USER": "root",
                    },
                ) as (api, processes),
                Client.login(api.removesuffix("/api/v2"), "admin", ADMIN_PASSWORD) as client,
            ):
                wait_all_alive(client, hosts, RAY_WAIT)
                time.sleep(IDLE_WARM_UP)
                meter = CpuMeter(processes, postgresql=False)
                agents = _agent_cpu_seconds(sandbox)
                time.sleep(args.idle_seconds)
                cpu = meter.seconds()
                agents_cpu = sum(_agent_cpu_seconds(sandbox).values()) - sum(agents.values())
                submitted = time.monotonic()
                client.submit(ring_job("gang", tasks))
                spanned = wait_all_running(client, "gang", tasks, RAY_WAIT)
                gang_seconds = time.monotonic() - submitted
                client.stop("gang")
        closed = time.monotonic()
    control_plane = cpu["controller"] + cpu["api_workers"]
    host_minutes = hosts * args.idle_seconds / 60
    return {
        "hosts": hosts,
        "gpus": tasks,
        "sandbox_start_s": round(sandbox_seconds, 1),
        "sandbox_close_s": round(time.monotonic() - closed, 1),
        "gang_tasks": tasks,
        "gang_hosts": len(set(spanned.values())),
        "gang_submit_to_all_running_s": round(gang_seconds, 1),
        "idle_control_plane_cpu_s_per_host_per_minute": round(control_plane / host_minutes, 3),
        "control_plane_cpu_pct_per_1000_nodes": round(
            control_plane / args.idle_seconds * 100 * 1000 / hosts, 2
        ),
        "idle_agents_cpu_s_per_host_per_minute": round(agents_cpu / host_minutes, 3),
    }


def _agent_cpu_seconds(sandbox: Any) -> dict[int, float]:
    """CPU seconds spent so far by each PAI agent (a Ray actor) on the sandbox's hosts."""
    spent = {}
    for name in sandbox.workers:
        for pid in sandbox.pids(name):
            try:
                process = psutil.Process(pid)
                if " ".join(process.cmdline()).startswith("ray::_AgentActor"):
                    times = process.cpu_times()
                    spent[pid] = times.user + times.system
            except psutil.Error:
                continue
    return spent


def print_ray(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"A real Ray cluster of {result['hosts']} hosts")
    table.add_column("")
    table.add_column("Ray", justify="right")
    for key, value in result.items():
        table.add_row(key.replace("_", " "), str(value))
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--sizes", default="500,2000,5000", help="cluster sizes in nodes, comma-separated"
    )
    parser.add_argument("--rate", type=float, default=20.0, help="submissions per second")
    parser.add_argument(
        "--tasks-per-node", type=float, default=2.0, help="tasks submitted, per node"
    )
    parser.add_argument("--readers", type=int, default=4, help="clients reading jobs")
    parser.add_argument("--api-workers", type=int, default=2, help="API worker processes")
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds the readers go on after submitting"
    )
    parser.add_argument(
        "--idle", action="store_true", help="measure the idle control plane instead of a load"
    )
    parser.add_argument(
        "--plot", type=Path, metavar="DIR", help="draw the figures against the size into DIR"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=20.0, help="how long --idle measures each size"
    )
    parser.add_argument(
        "--database", choices=("sqlite", "postgresql"), default="sqlite", help="the store"
    )
    parser.add_argument(
        "--postgres-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="the PostgreSQL server to create the store in, with --database postgresql",
    )
    parser.add_argument(
        "--ray-hosts",
        type=int,
        default=0,
        help="also measure a real Ray cluster of this many small hosts (needs root and Ray)",
    )
    args = parser.parse_args()
    if args.database == "postgresql" and not postgres_reachable(args.postgres_url):
        parser.error(f"no PostgreSQL server answers at {args.postgres_url}")
    sizes = [int(size) for size in args.sizes.split(",")]
    measure = measure_idle if args.idle else measure_size
    results = [measure(nodes, args, args.database) for nodes in sizes]
    if args.plot and not args.idle:
        plot(results, args.plot)
    ray = measure_ray(args.ray_hosts, args) if args.ray_hosts else None
    if args.json:
        print(json.dumps({"sizes": results, **({"ray": ray} if ray else {})}))
        return
    from rich.console import Console
    from rich.table import Table

    load = "idle" if args.idle else f"{args.rate:g} submissions/s"
    table = Table(title=f"Hollow clusters, {load} ({args.database})")
    table.add_column("")
    for result in results:
        table.add_column(f"{result['nodes']} nodes", justify="right")
    for key in results[0]:
        table.add_row(key.replace("_", " "), *(str(result[key]) for result in results))
    Console().print(table)
    if ray:
        print_ray(ray)


if __name__ == "__main__":
    main()
