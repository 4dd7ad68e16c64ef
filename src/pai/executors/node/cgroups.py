"""A container's control group, read from the node: its processes, memory and CPU time.

The runtime puts every process of a container in one cgroup, whose limits are the task's. PAI
reads it to signal all the container's processes (those that left its process group
included), to sample what the task uses as the kernel counts it against the limit (memory
without the page cache the kernel can drop, and CPU time), and to learn whether the kernel
killed one of them for memory (`OomWatch`: the runtime's own flag is not set everywhere, and the
cgroup may be gone by the time the container's end is noticed). Both cgroup v1 (one hierarchy
per controller, as on hybrid systems) and v2 (one unified hierarchy) are read.
"""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
OOM_KILL_WAIT = 2.0
"""How long after an OOM event the kill count is watched for the kill."""


@dataclass(frozen=True)
class Cgroup:
    """The directories of one cgroup: per controller on v1, one directory on v2."""

    processes_dir: Path
    memory_dir: Path | None
    cpu_dir: Path | None
    unified: bool

    @classmethod
    def of_pid(cls, pid: int) -> Cgroup | None:
        """The cgroup of process `pid` (None once it is gone, or without cgroups)."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            return None
        mounts = _cgroup_mounts()
        v1: dict[str, str] = {}
        unified_path = None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                unified_path = path
            for controller in controllers.split(","):
                v1[controller] = path
        if "memory" in v1 and "memory" in mounts:
            return cls(
                processes_dir=mounts["memory"] / v1["memory"].lstrip("/"),
                memory_dir=mounts["memory"] / v1["memory"].lstrip("/"),
                cpu_dir=mounts["cpuacct"] / v1["cpuacct"].lstrip("/")
                if "cpuacct" in v1 and "cpuacct" in mounts
                else None,
                unified=False,
            )
        if unified_path is not None and "" in mounts:
            directory = mounts[""] / unified_path.lstrip("/")
            return cls(directory, directory, directory, unified=True)
        return None

    def pids(self) -> list[int]:
        """Every process in the cgroup now (none once it is removed)."""
        try:
            text = (self.processes_dir / "cgroup.procs").read_text()
        except (FileNotFoundError, OSError):
            return []
        return [int(pid) for pid in text.split()]

    def memory_bytes(self) -> int | None:
        """Memory the kernel charges the cgroup for, less the inactive page cache (what the
        kernel would reclaim before it kills), as `docker stats` and the kubelet count it."""
        if self.memory_dir is None:
            return None
        usage_file = "memory.current" if self.unified else "memory.usage_in_bytes"
        inactive_key = "inactive_file" if self.unified else "total_inactive_file"
        try:
            usage = int((self.memory_dir / usage_file).read_text())
            stat = _keyed(self.memory_dir / "memory.stat")
        except (FileNotFoundError, OSError, ValueError):
            return None
        return max(0, usage - stat.get(inactive_key, 0))

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that ever ran in the cgroup."""
        if self.cpu_dir is None:
            return None
        try:
            if self.unified:
                return _keyed(self.cpu_dir / "cpu.stat")["usage_usec"] / 1e6
            return int((self.cpu_dir / "cpuacct.usage").read_text()) / 1e9
        except (FileNotFoundError, OSError, ValueError, KeyError):
            return None

    def oom_watch(self) -> OomWatch:
        """Start noticing the kernel's OOM kills in this cgroup (from now on)."""
        return OomWatch(self)


class OomWatch:
    """Whether the kernel's OOM killer acted in a cgroup since the watch began.

    On v1 the kernel signals an eventfd on each OOM event, and also when the cgroup is removed;
    a thread wakes at each signal and reads the cgroup's `oom_kill` count while the cgroup
    still exists (an OOM kill leaves the container's processes alive long enough). On v2 the
    `oom_kill` count of memory.events is read whenever asked."""

    def __init__(self, cgroup: Cgroup) -> None:
        self._cgroup = cgroup
        self._killed = False
        self._baseline = 0
        if cgroup.memory_dir is None:
            return
        if cgroup.unified:
            self._baseline = self._count() or 0
            return
        try:
            eventfd = _register_oom_eventfd(cgroup.memory_dir)
        except OSError:
            return
        threading.Thread(target=self._wait_for_events, args=(eventfd,), daemon=True).start()

    def killed(self) -> bool:
        """Whether a process of the cgroup was killed for memory (so far)."""
        if not self._killed and self._cgroup.unified:
            count = self._count()
            self._killed = count is not None and count > self._baseline
        return self._killed

    def _wait_for_events(self, eventfd: int) -> None:
        try:
            while True:
                select.select([eventfd], [], [])
                os.eventfd_read(eventfd)
                if not self._count_rises():
                    return  # the cgroup was removed
        finally:
            os.close(eventfd)

    def _count_rises(self) -> bool:
        """After an OOM event: watch the kill count, which the kernel raises once the killer
        has chosen (just after it signals the event). False once the cgroup is gone."""
        deadline = time.monotonic() + OOM_KILL_WAIT
        while (count := self._count()) is not None:
            if count > 0:
                self._killed = True
                return True
            if time.monotonic() > deadline:
                return True  # an OOM event without a kill (yet): wait for the next one
            time.sleep(0.005)
        return False

    def _count(self) -> int | None:
        assert self._cgroup.memory_dir is not None
        directory = self._cgroup.memory_dir
        name = "memory.events" if self._cgroup.unified else "memory.oom_control"
        try:
            return _keyed(directory / name).get("oom_kill", 0)
        except (FileNotFoundError, OSError):
            return None


def _register_oom_eventfd(memory_dir: Path) -> int:
    """An eventfd the kernel signals on every OOM event of the v1 memory cgroup."""
    eventfd = os.eventfd(0, os.EFD_CLOEXEC)
    control = os.open(memory_dir / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
    try:
        (memory_dir / "cgroup.event_control").write_text(f"{eventfd} {control}")
    except OSError:
        os.close(eventfd)
        raise
    finally:
        os.close(control)
    return eventfd


def _keyed(path: Path) -> dict[str, int]:
    values = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[key] = int(value)
    return values


def _cgroup_mounts() -> dict[str, Path]:
    """Where each v1 controller's hierarchy is mounted, and the v2 one under ""."""
    mounts: dict[str, Path] = {}
    for line in MOUNTINFO.read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, extra = before.split(), after.split()
        if len(extra) < 3 or len(fields) < 5:
            continue
        kind, options = extra[0], extra[2]
        if kind == "cgroup2":
            mounts.setdefault("", Path(fields[4]))
        elif kind == "cgroup":
            for option in options.split(","):
                if option in ("memory", "cpuacct", "cpu", "pids"):
                    mounts.setdefault(option, Path(fields[4]))
    return mounts
