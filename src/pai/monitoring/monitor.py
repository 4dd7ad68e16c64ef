"""The monitor: asks the executor every few seconds what tasks and machines used, keeps the
latest of it for `/metrics`, and records it (with the VCs' use of their cells) as history.

It runs in the control plane, beside the controller. The executor measures on the nodes (the
local machine, or each Ray node's agent); the monitor adds what only the control plane knows
(whose job it is, in which VC) and writes the samples in one transaction each time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from pai.cluster.model import ClusterConfig
from pai.executors.base import Executor
from pai.executors.node.usage import NodeUsage, TaskUsage
from pai.monitoring.history import CLUSTER, NODE, TASK, VC, UsageHistory
from pai.scheduler.types import ClusterSnapshot
from pai.store import Database
from pai.store.models import JobRow

log = logging.getLogger(__name__)

COMPACT_EVERY = 600.0
"""Seconds between two compactions of the history (averaging old samples, the retention)."""


@dataclass(frozen=True)
class TaskReading:
    """The latest sample of a running task, with whose job it is."""

    usage: TaskUsage
    username: str
    job_name: str
    virtual_cluster: str
    seen: float  # monotonic time of the sample


class Monitor:
    """Run with `start()` / `stop()`; `step()` is one round (tests call it directly)."""

    def __init__(
        self,
        executor: Executor,
        database: Database,
        cluster: ClusterConfig,
        snapshot: Callable[[], ClusterSnapshot],
        history: UsageHistory,
        *,
        interval: float = 5.0,
    ) -> None:
        self._executor = executor
        self._database = database
        self._snapshot = snapshot
        self.history = history
        self.interval = interval
        self._gpu_units = any(sku.gpu > 0 for sku in cluster.sku_types.values())
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskReading] = {}
        self._nodes: dict[str, NodeUsage] = {}
        self._job_vcs: dict[str, str] = {}
        self.rounds = 0
        """Rounds done so far: what it measured changes only when this does."""
        self._next_compaction = time.monotonic() + COMPACT_EVERY
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pai-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def tasks(self) -> list[TaskReading]:
        """The running tasks' latest samples (a task not sampled for three rounds is gone)."""
        oldest = time.monotonic() - 3 * self.interval
        with self._lock:
            return [reading for reading in self._tasks.values() if reading.seen >= oldest]

    def nodes(self) -> list[NodeUsage]:
        with self._lock:
            return list(self._nodes.values())

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                self.step()
            except Exception:  # a bad round must not end monitoring
                log.exception("monitoring round failed; trying again next round")

    def step(self) -> None:
        usage = self._executor.usage()
        now, at = time.monotonic(), datetime.now(UTC)
        readings = self._readings(usage.tasks, now)
        rows = [*map(_task_row, readings), *map(_node_row, usage.nodes)]
        rows += self._capacity_rows(at)
        self.history.write(rows)
        with self._lock:
            self._tasks.update((reading.usage.key, reading) for reading in readings)
            oldest = now - 3 * self.interval
            self._tasks = {k: r for k, r in self._tasks.items() if r.seen >= oldest}
            self._nodes.update((node.node, node) for node in usage.nodes)
            self.rounds += 1
        if now >= self._next_compaction:
            self._next_compaction = now + COMPACT_EVERY
            self.history.compact(at)

    def _readings(self, tasks: Iterable[TaskUsage], now: float) -> list[TaskReading]:
        tasks = list(tasks)
        self._learn_vcs({task.job for task in tasks} - set(self._job_vcs))
        readings = []
        for task in tasks:
            username, _, name = task.job.partition("~")
            vc = self._job_vcs.get(task.job)
            if vc is not None:
                readings.append(TaskReading(task, username, name, vc, now))
        return readings

    def _learn_vcs(self, jobs: set[str]) -> None:
        for job in jobs:
            username, _, name = job.partition("~")
            with self._database.reading() as session:
                vc = session.scalar(
                    select(JobRow.virtual_cluster).where(
                        JobRow.username == username, JobRow.name == name
                    )
                )
            if vc is not None:
                self._job_vcs[job] = vc

    def _capacity_rows(self, at: datetime) -> list[dict[str, Any]]:
        """What each VC's jobs hold of its guarantee, and the whole cluster's use, in GPUs (or
        in leaf cells on a cluster without GPUs)."""
        snapshot = self._snapshot()
        rows = []
        for vc in snapshot.vcs.values():
            used, total = (
                (vc.used_gpus, vc.guaranteed_gpus)
                if self._gpu_units
                else (vc.used_leaves, vc.guaranteed_leaves)
            )
            rows.append({"at": at, "scope": VC, "name": vc.name, "used": used, "total": total})
        used = sum(node.used_leaves for node in snapshot.nodes)
        total = sum(node.total_leaves for node in snapshot.nodes)
        if self._gpu_units:
            used = sum(vc.used_gpus + vc.opportunistic_gpus for vc in snapshot.vcs.values())
            total = sum(vc.guaranteed_gpus for vc in snapshot.vcs.values())
        rows.append({"at": at, "scope": CLUSTER, "name": CLUSTER, "used": used, "total": total})
        return rows


def _task_row(reading: TaskReading) -> dict[str, Any]:
    usage = reading.usage
    return {
        "at": usage.at,
        "scope": TASK,
        "name": usage.job,
        "role": usage.role,
        "task_index": usage.index,
        "node": usage.node,
        "cpu_percent": usage.cpu_percent,
        "memory_bytes": usage.memory_bytes,
        "memory_limit_bytes": usage.memory_limit_bytes,
        "read_bytes": usage.read_bytes,
        "write_bytes": usage.write_bytes,
        "gpu_percent": usage.gpu_percent,
        "gpu_memory_percent": usage.gpu_memory_percent,
    }


def _node_row(usage: NodeUsage) -> dict[str, Any]:
    gpus = usage.gpus
    return {
        "at": usage.at,
        "scope": NODE,
        "name": usage.node,
        "node": usage.node,
        "cpu_percent": usage.cpu_percent,
        "memory_bytes": usage.memory_used_bytes,
        "memory_limit_bytes": usage.memory_total_bytes,
        "gpu_percent": (sum(gpu.utilization_percent for gpu in gpus) / len(gpus) if gpus else None),
    }
