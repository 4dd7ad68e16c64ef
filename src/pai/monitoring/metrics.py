"""`/metrics`: what Prometheus scrapes from PAI.

Task metrics keep the names and labels of OpenPAI's job exporter (`task_cpu_percent`,
`task_mem_usage_byte`, ... with `username`, `job_name` (the framework name `user~job`),
`virtual_cluster`, `role_name`, `task_index`), plus `node`. The rest is PAI's own, prefixed
`pai_`: nodes (use, GPUs, state), jobs by state and VC, retries of unfinished jobs, VCs'
guaranteed, used and free cells, each GPU's allocation and each task's share of a shared GPU
(labelled by `node` and `minor_number`, as GPU metrics are), the disk under `$PAI_HOME`, and
histograms of API latency, scheduling decisions and waiting. Live values are read when
Prometheus scrapes, so a render costs one small query of the store and no more.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from pai.executors.base import NodeCondition
from pai.executors.node.usage import NodeUsage, TaskUsage
from pai.monitoring.monitor import Monitor
from pai.orchestrator.controller import FINAL_STATES, Controller
from pai.scheduler.types import GPU_MILLI
from pai.store import Database
from pai.store.models import JobRow

TASK_LABELS = ["username", "job_name", "virtual_cluster", "role_name", "task_index", "node"]
SUBMIT_ROUTE, ACCEPTED = "/api/v2/jobs", 202
WAITING_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600)


class PlatformMetrics:
    """The platform's metrics in a registry of their own (several platforms may share a
    process, in tests); also the controller's `SchedulingObserver`."""

    def __init__(
        self, monitor: Monitor, controller: Controller, database: Database, home: Path
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.api_latency = Histogram(
            "pai_api_request_duration_seconds",
            "Time to answer an API request, by method, route and status class.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.submissions = Counter(
            "pai_job_submissions", "Jobs accepted by the API.", registry=self.registry
        )
        self.decisions = Histogram(
            "pai_scheduling_decision_seconds",
            "Time the scheduler takes to consider one waiting job.",
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1),
            registry=self.registry,
        )
        self.waiting = Histogram(
            "pai_job_waiting_seconds",
            "Time from a job's submission to the placement of (a group of) its tasks.",
            ["virtual_cluster"],
            buckets=WAITING_BUCKETS,
            registry=self.registry,
        )
        self.passes = Histogram(
            "pai_controller_pass_seconds",
            "Time the controller takes for one pass (intake, events, timers, scheduling, writes).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.registry.register(_Live(controller, database, home))
        # Tasks' and nodes' samples change once a monitoring round: rendered once a round.
        self._monitor = monitor
        self._lock = threading.Lock()
        self._rendered: tuple[tuple[int, int], bytes] | None = None

    def render(self) -> bytes:
        return self._sampled_text() + generate_latest(self.registry)

    def _sampled_text(self) -> bytes:
        # A round that never comes (a stalled monitor) must not freeze the samples: the key
        # also changes every interval, when `Monitor.tasks()` may drop old ones.
        key = (self._monitor.rounds, int(time.monotonic() / self._monitor.interval))
        with self._lock:
            if self._rendered is None or self._rendered[0] != key:
                self._rendered = (key, _sampled_text(self._monitor))
            return self._rendered[1]

    def request_answered(self, method: str, route: str, status: int, seconds: float) -> None:
        self.api_latency.labels(method, route, f"{status // 100}xx").observe(seconds)
        if method == "POST" and route == SUBMIT_ROUTE and status == ACCEPTED:
            self.submissions.inc()

    def decided(self, seconds: float) -> None:
        self.decisions.observe(seconds)

    def placed(self, virtual_cluster: str, waited_seconds: float) -> None:
        self.waiting.labels(virtual_cluster).observe(max(0.0, waited_seconds))

    def passed(self, seconds: float) -> None:
        self.passes.observe(seconds)


TASK_METRICS: tuple[tuple[str, str, Callable[[TaskUsage], float | None]], ...] = (
    ("task_cpu_percent", "CPU of the task's processes, in % of one core.", lambda u: u.cpu_percent),
    ("task_mem_usage_byte", "Resident memory of the task's processes.", lambda u: u.memory_bytes),
    ("task_mem_limit_byte", "The task's memoryMB, in bytes.", lambda u: u.memory_limit_bytes),
    (
        "task_mem_usage_percent",
        "Resident memory in % of the task's memoryMB.",
        lambda u: 100.0 * u.memory_bytes / u.memory_limit_bytes if u.memory_limit_bytes else None,
    ),
    (
        "task_block_in_byte",
        "Bytes the task's live processes read from disks.",
        lambda u: u.read_bytes,
    ),
    (
        "task_block_out_byte",
        "Bytes the task's live processes wrote to disks.",
        lambda u: u.write_bytes,
    ),
    ("task_gpu_percent", "Mean utilisation of the task's GPUs, in %.", lambda u: u.gpu_percent),
    (
        "task_gpu_mem_percent",
        "Mean memory use of the task's GPUs, in %.",
        lambda u: u.gpu_memory_percent,
    ),
)
NODE_METRICS: tuple[tuple[str, str, Callable[[NodeUsage], float]], ...] = (
    ("pai_node_cpu_percent", "CPU use of the whole machine, in %.", lambda n: n.cpu_percent),
    ("pai_node_memory_used_bytes", "Memory in use on the machine.", lambda n: n.memory_used_bytes),
    ("pai_node_memory_total_bytes", "Memory of the machine.", lambda n: n.memory_total_bytes),
    (
        "pai_node_network_receive_bytes",
        "Bytes received since the machine started.",
        lambda n: n.net_in_bytes,
    ),
    (
        "pai_node_network_transmit_bytes",
        "Bytes sent since the machine started.",
        lambda n: n.net_out_bytes,
    ),
    (
        "pai_node_disk_free_bytes",
        "Free bytes where tasks' directories are.",
        lambda n: n.disk_free_bytes,
    ),
    (
        "pai_node_disk_total_bytes",
        "Size of the disk of tasks' directories.",
        lambda n: n.disk_total_bytes,
    ),
)


def _sampled_text(monitor: Monitor) -> bytes:
    """What the monitor measured on the nodes (tasks, machines, GPUs) in the text format,
    written directly: the thousands of task samples are most of a scrape, and building
    them as client-library objects would cost several times more."""
    lines: list[str] = []
    tasks = [
        (
            reading.usage,
            _labels(
                username=reading.username,
                job_name=reading.usage.job,
                virtual_cluster=reading.virtual_cluster,
                role_name=reading.usage.role,
                task_index=str(reading.usage.index),
                node=reading.usage.node,
            ),
        )
        for reading in monitor.tasks()
    ]
    for name, help_text, value_of in TASK_METRICS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [
            f"{name}{{{labels}}} {float(value)!r}"
            for usage, labels in tasks
            if (value := value_of(usage)) is not None
        ]
    nodes = monitor.nodes()
    for name, help_text, node_value in NODE_METRICS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{_labels(node=n.node)}}} {float(node_value(n))!r}" for n in nodes]
    for name, help_text, percent in (
        ("gpu_utilization", "Utilisation of a GPU, in %.", lambda g: g.utilization_percent),
        ("gpu_mem_utilization", "Memory use of a GPU, in %.", lambda g: g.memory_percent),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [
            f"{name}{{{_labels(node=n.node, minor_number=str(g.index))}}} {float(percent(g))!r}"
            for n in nodes
            for g in n.gpus
        ]
    return ("\n".join(lines) + "\n").encode()


def _labels(**labels: str) -> str:
    return ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Live(Collector):
    """The values read at scrape time."""

    def __init__(self, controller: Controller, database: Database, home: Path) -> None:
        self._controller = controller
        self._database = database
        self._home = home

    def collect(self) -> Iterator[Metric]:
        yield self._node_states()
        yield from self._jobs()
        yield from self._vcs()
        yield from self._gpus()
        yield self._devices()
        yield CounterMetricFamily(
            "pai_store_rows_written",
            "Rows the controller's process inserted, updated or deleted in the store.",
            value=self._database.rows_written,
        )
        disk = shutil.disk_usage(self._home)
        yield GaugeMetricFamily(
            "pai_home_disk_free_bytes", "Free bytes on the disk of $PAI_HOME.", value=disk.free
        )
        yield GaugeMetricFamily(
            "pai_home_disk_total_bytes", "Size of the disk of $PAI_HOME.", value=disk.total
        )

    def _node_states(self) -> Metric:
        states = GaugeMetricFamily(
            "pai_node_state",
            "1 for the state each node of the cluster file is in (alive, gone, bad, cordoned).",
            labels=["node", "state"],
        )
        engine = self._controller.node_states()
        for spec in self._controller.cluster.nodes:
            current = engine[spec.name].condition if spec.name in engine else NodeCondition.ALIVE
            for condition in NodeCondition:
                states.add_metric([spec.name, condition.value], float(condition is current))
        return states

    def _jobs(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "pai_jobs", "Jobs by state and VC.", labels=["state", "virtual_cluster"]
        )
        retries = GaugeMetricFamily(
            "pai_job_retries",
            "Retries so far of each job that has not ended.",
            labels=["username", "job_name", "virtual_cluster"],
        )
        with self._database.reading() as session:
            counts = session.execute(
                select(JobRow.state, JobRow.virtual_cluster, func.count()).group_by(
                    JobRow.state, JobRow.virtual_cluster
                )
            ).all()
            unfinished = session.execute(
                select(JobRow.username, JobRow.name, JobRow.virtual_cluster, JobRow.retries).where(
                    JobRow.state.not_in(FINAL_STATES), JobRow.retries > 0
                )
            ).all()
        for state, vc, count in counts:
            jobs.add_metric([state, vc], count)
        for username, name, vc, count in unfinished:
            retries.add_metric([username, f"{username}~{name}", vc], count)
        yield jobs
        yield retries

    def _gpus(self) -> Iterator[Metric]:
        """Each GPU's allocation, and each task's share of the GPUs that tasks share."""
        allocated = GaugeMetricFamily(
            "pai_gpu_allocated",
            "The part of a GPU allocated to tasks: 1 held whole, the tasks' shares when shared.",
            labels=["node", "minor_number"],
        )
        shares = GaugeMetricFamily(
            "pai_task_gpu_share",
            "The part of a shared GPU a task has.",
            labels=[*TASK_LABELS, "minor_number"],
        )
        cluster = self._controller.cluster
        snapshot = self._controller.snapshot()
        for node in snapshot.nodes:
            if not cluster.sku_types[node.sku_type].shareable:
                continue
            for leaf in node.leaves:
                gpu = str(leaf.index)
                if not leaf.shared:
                    allocated.add_metric([node.name, gpu], float(leaf.group is not None))
                    continue
                allocated.add_metric([node.name, gpu], 1 - (leaf.free_milli or 0) / GPU_MILLI)
                for share in leaf.shares:
                    job = share.group.rsplit("/", 1)[0]
                    group = snapshot.groups.get(share.group)
                    vc = group.vc if group is not None else ""
                    labels = [job.partition("~")[0], job, vc, share.role, str(share.index)]
                    shares.add_metric([*labels, node.name, gpu], share.milli / GPU_MILLI)
        yield allocated
        yield shares

    def _devices(self) -> Metric:
        """Each node's devices of its SKU's kind (NVIDIA GPUs, AMD GPUs, NPUs ...)."""
        devices = GaugeMetricFamily(
            "pai_node_devices",
            "A node's devices, labelled by their CDI kind: total, used (held whole) and free.",
            labels=["node", "device", "kind"],
        )
        cluster = self._controller.cluster
        for node in self._controller.snapshot().nodes:
            sku = cluster.sku_types[node.sku_type]
            if sku.gpu == 0:
                continue
            for kind, leaves in (
                ("total", node.total_leaves),
                ("used", node.used_leaves),
                ("free", node.free_leaves),
            ):
                devices.add_metric([node.name, sku.device, kind], leaves * sku.gpu)
        return devices

    def _vcs(self) -> Iterator[Metric]:
        gpus = GaugeMetricFamily(
            "pai_vc_gpus",
            "A VC's GPUs: guaranteed, used by its guaranteed jobs, free, used opportunistically.",
            labels=["virtual_cluster", "kind"],
        )
        leaves = GaugeMetricFamily(
            "pai_vc_cells",
            "A VC's leaf cells (GPUs, or CPU slots): guaranteed, used, free, opportunistic.",
            labels=["virtual_cluster", "kind"],
        )
        for vc in self._controller.snapshot().vcs.values():
            for kind, gpu_count, leaf_count in (
                ("guaranteed", vc.guaranteed_gpus, vc.guaranteed_leaves),
                ("used", vc.used_gpus, vc.used_leaves),
                ("free", vc.free_gpus, vc.free_leaves),
                ("opportunistic", vc.opportunistic_gpus, vc.opportunistic_leaves),
            ):
                gpus.add_metric([vc.name, kind], gpu_count)
                leaves.add_metric([vc.name, kind], leaf_count)
        yield gpus
        yield leaves
