"""A process's descendants and what they use, read from /proc.

Walking /proc/<pid>/task/<tid>/children costs in proportion to the tree, not to every process
on the machine (which is what psutil would scan to answer "children"). Used by the supervisor
(memory limits) and by usage sampling (CPU, memory, block I/O per task).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import psutil

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def descendant_pids(root: int) -> Iterator[int]:
    pending = [root]
    while pending:
        children = child_pids(pending.pop())
        yield from children
        pending.extend(children)


def child_pids(pid: int) -> list[int]:
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.NoSuchProcess:
            return []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    children: list[int] = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as listing:
                children.extend(int(child) for child in listing.read().split())
        except FileNotFoundError:
            continue
    return children


def resident_bytes(pid: int) -> int:
    """Resident memory of one process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_SIZE
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def tree_resident_bytes(root: int) -> int:
    """Resident memory of `root`'s descendants."""
    return sum(resident_bytes(pid) for pid in descendant_pids(root))


@dataclass(frozen=True)
class ProcessCounters:
    """What one process has used so far: CPU seconds, and bytes read from and written to
    block devices (None where the kernel does not say, e.g. another user's process)."""

    started: int  # start time in clock ticks since boot: with the pid, the process's identity
    cpu_seconds: float
    memory_bytes: int
    read_bytes: int | None
    write_bytes: int | None


def process_counters(pid: int) -> ProcessCounters | None:
    """The process's counters, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The command name (field 2) may hold spaces: the fields after it follow the last ')'.
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    user_ticks, system_ticks, started = int(fields[11]), int(fields[12]), int(fields[19])
    read_bytes = write_bytes = None
    try:
        with open(f"/proc/{pid}/io", "rb") as io:
            values = dict(line.split(b":") for line in io.read().splitlines())
        read_bytes, write_bytes = int(values[b"read_bytes"]), int(values[b"write_bytes"])
    except (FileNotFoundError, ProcessLookupError, PermissionError, KeyError, ValueError):
        pass
    return ProcessCounters(
        started=started,
        cpu_seconds=(user_ticks + system_ticks) / CLOCK_TICKS,
        memory_bytes=int(fields[21]) * PAGE_SIZE,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
    )
