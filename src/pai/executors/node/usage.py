"""What tasks and nodes use: CPU, memory, block I/O, network and GPUs, sampled on the node.

A host task is every process below its supervisor (the supervisor is a subreaper, so processes
the task orphans stay in its tree); a container task is its container's cgroup, whose memory
and CPU time are read as the kernel counts them against the container's limits. A task's CPU %
is CPU time over wall time between two samples, in percent of one core (200 = two busy cores,
as OpenPAI's job exporter counts), so the first sample of a task only sets the baseline. GPUs
are read through NVML when the `pynvml` package and a driver are there; a task's GPU use is the
average over the GPUs the scheduler gave it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.executors.node.cgroups import Cgroup
from pai.executors.node.proctree import ProcessCounters, descendant_pids, process_counters
from pai.executors.node.taskfiles import utc_now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuUsage:
    index: int
    utilization_percent: float
    memory_used_bytes: int
    memory_total_bytes: int

    @property
    def memory_percent(self) -> float:
        return 100.0 * self.memory_used_bytes / self.memory_total_bytes


@dataclass(frozen=True)
class TaskUsage:
    """One sample of one running task attempt."""

    key: str
    job: str  # the framework name, user~job
    role: str
    index: int
    node: str
    at: datetime
    cpu_percent: float
    memory_bytes: int
    memory_limit_bytes: int | None
    read_bytes: int  # from and to block devices, by the task's live processes so far
    write_bytes: int
    gpus: tuple[int, ...] = ()
    gpu_percent: float | None = None  # None: no GPU, or none measured
    gpu_memory_percent: float | None = None


@dataclass(frozen=True)
class NodeUsage:
    """One sample of one machine."""

    node: str
    at: datetime
    cpu_percent: float  # of the whole machine
    memory_used_bytes: int
    memory_total_bytes: int
    net_in_bytes: int  # received and sent since the machine started
    net_out_bytes: int
    disk_free_bytes: int  # where tasks' working directories are
    disk_total_bytes: int
    gpus: tuple[GpuUsage, ...] = ()


@dataclass(frozen=True)
class Usage:
    """What an executor measured since it was last asked."""

    tasks: tuple[TaskUsage, ...] = ()
    nodes: tuple[NodeUsage, ...] = ()


@dataclass(frozen=True)
class RunningTask:
    """A task to sample: who it is and the process its processes descend from (for a task in
    a container, the container's first process, whose cgroup holds them all)."""

    key: str
    job: str
    role: str
    index: int
    node: str
    root_pid: int
    memory_limit_bytes: int | None
    gpus: tuple[int, ...]
    in_container: bool = False
    device_kind: str = DEFAULT_DEVICE_KIND
    """The kind of `gpus`: only NVIDIA's are read (through NVML); others are not measured."""


class GpuProbe:
    """The machine's GPUs through NVML; nothing at all without `pynvml` or a driver."""

    def __init__(self) -> None:
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:  # ImportError, or NVMLError without a driver: no GPUs to read
            self._nvml = None

    def read(self) -> dict[int, GpuUsage]:
        nvml = self._nvml
        if nvml is None:
            return {}
        found = {}
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                rates = nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                found[index] = GpuUsage(index, float(rates.gpu), memory.used, memory.total)
        except Exception as error:  # a GPU that fell off the bus must not stop the sampling
            log.warning("reading GPUs through NVML failed: %s", error)
        return found


@dataclass
class _Baseline:
    at: float
    processes: dict[int, ProcessCounters] = field(default_factory=dict)
    cgroup_cpu_seconds: float | None = None


class UsageSampler:
    """Samples the tasks of one machine and the machine itself; keep one per machine."""

    def __init__(self, node: str, disk: Path, gpus: GpuProbe | None = None) -> None:
        self._node = node
        self._disk = disk
        self._gpus = gpus or GpuProbe()
        self._baselines: dict[str, _Baseline] = {}
        psutil.cpu_percent(None)  # the machine's CPU % is measured from here on

    def sample(self, tasks: Iterable[RunningTask]) -> Usage:
        now, at = time.monotonic(), utc_now()
        gpus = self._gpus.read()
        sampled = []
        seen = set()
        for task in tasks:
            seen.add(task.key)
            usage = self._task(task, now, at, gpus)
            if usage is not None:
                sampled.append(usage)
        for key in set(self._baselines) - seen:
            del self._baselines[key]  # ended
        return Usage(tuple(sampled), (self._machine(at, gpus),))

    def _task(
        self, task: RunningTask, now: float, at: datetime, gpus: dict[int, GpuUsage]
    ) -> TaskUsage | None:
        cgroup = Cgroup.of_pid(task.root_pid) if task.in_container else None
        pids = cgroup.pids() if cgroup is not None else descendant_pids(task.root_pid)
        processes = {pid: counters for pid in pids if (counters := process_counters(pid))}
        cgroup_cpu = cgroup.cpu_seconds() if cgroup is not None else None
        previous = self._baselines.get(task.key)
        self._baselines[task.key] = _Baseline(now, processes, cgroup_cpu)
        if previous is None or now <= previous.at:
            return None
        if cgroup_cpu is not None and previous.cgroup_cpu_seconds is not None:
            busy = cgroup_cpu - previous.cgroup_cpu_seconds
        else:
            busy = _busy_seconds(processes, previous.processes)
        memory = cgroup.memory_bytes() if cgroup is not None else None
        if memory is None:
            memory = sum(counters.memory_bytes for counters in processes.values())
        nvml = task.device_kind == DEFAULT_DEVICE_KIND  # what GpuProbe's indices number
        held = [gpus[index] for index in task.gpus if index in gpus] if nvml else []
        return TaskUsage(
            key=task.key,
            job=task.job,
            role=task.role,
            index=task.index,
            node=task.node,
            at=at,
            cpu_percent=round(100.0 * busy / (now - previous.at), 2),
            memory_bytes=memory,
            memory_limit_bytes=task.memory_limit_bytes,
            read_bytes=sum(counters.read_bytes or 0 for counters in processes.values()),
            write_bytes=sum(counters.write_bytes or 0 for counters in processes.values()),
            gpus=task.gpus,
            gpu_percent=_mean([gpu.utilization_percent for gpu in held]),
            gpu_memory_percent=_mean([gpu.memory_percent for gpu in held]),
        )

    def _machine(self, at: datetime, gpus: dict[int, GpuUsage]) -> NodeUsage:
        memory = psutil.virtual_memory()
        network = psutil.net_io_counters()
        existing = next(path for path in (self._disk, *self._disk.parents) if path.exists())
        disk = psutil.disk_usage(str(existing))
        return NodeUsage(
            node=self._node,
            at=at,
            cpu_percent=psutil.cpu_percent(None),
            memory_used_bytes=memory.total - memory.available,
            memory_total_bytes=memory.total,
            net_in_bytes=network.bytes_recv,
            net_out_bytes=network.bytes_sent,
            disk_free_bytes=disk.free,
            disk_total_bytes=disk.total,
            gpus=tuple(gpus[index] for index in sorted(gpus)),
        )


def _busy_seconds(
    processes: dict[int, ProcessCounters], before: dict[int, ProcessCounters]
) -> float:
    """CPU time the processes used since `before` was sampled."""
    busy = 0.0
    for pid, counters in processes.items():
        earlier = before.get(pid)
        if earlier is None or earlier.started != counters.started:
            busy += counters.cpu_seconds  # started since the last sample
        else:
            busy += counters.cpu_seconds - earlier.cpu_seconds
    return busy


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None
