"""Sampling what running tasks use, with real processes (GPUs: see the last test)."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from pai.executors.base import TaskEventKind
from pai.executors.node.usage import GpuProbe

if TYPE_CHECKING:
    from conftest import Harness

BUSY = "python3 -c 'while True: pass'"
WRITER = (
    'python3 -c "import os, time\n'
    "blob = bytearray(64 * 1024 * 1024)\n"
    "with open('out', 'wb') as f:\n"
    "    f.write(os.urandom(8 * 1024 * 1024)); f.flush(); os.fsync(f.fileno())\n"
    'time.sleep(60)"'
)


def usage_of(harness: Harness, key: str, *, samples: int = 2, pause: float = 1.0) -> Any:
    """The task's last sample after `samples` samplings `pause` seconds apart."""
    found = None
    for _ in range(samples):
        time.sleep(pause)
        for task in harness.executor.usage().tasks:
            if task.key == key:
                found = task
    assert found is not None, f"no sample of {key}"
    return found


def test_a_busy_task_uses_a_core_and_an_idle_one_none(harness: Harness) -> None:
    harness.launch("busy", BUSY, gpus=(), memory_mb=512)
    harness.launch("idle", "sleep 60")
    harness.wait_for("busy", TaskEventKind.STARTED)
    harness.wait_for("idle", TaskEventKind.STARTED)
    harness.poll()

    usage = harness.usage_while_busy("busy")

    assert usage["busy"].cpu_percent <= 110  # one core at most
    assert usage["idle"].cpu_percent < 5
    assert usage["busy"].memory_limit_bytes == 512 * 1024 * 1024
    assert (usage["busy"].job, usage["busy"].role, usage["busy"].node) == (
        "alice~job",
        "worker",
        "node1",
    )


def test_memory_and_block_writes_of_the_task_tree_are_counted(harness: Harness) -> None:
    harness.launch("writer", WRITER)
    harness.wait_for("writer", TaskEventKind.STARTED)
    harness.wait_until(lambda: (harness.root / "work" / "writer" / "out").exists())
    time.sleep(0.5)

    usage = usage_of(harness, "writer")

    assert usage.memory_bytes > 64 * 1024 * 1024
    assert usage.write_bytes >= 8 * 1024 * 1024


def test_the_machine_is_sampled_too(harness: Harness) -> None:
    machine = harness.executor.usage().nodes[0]

    assert 0 < machine.memory_used_bytes < machine.memory_total_bytes
    assert 0 < machine.disk_free_bytes <= machine.disk_total_bytes
    assert machine.gpus == ()  # no GPU on this machine


class FakeNvml:
    """NVML as `pynvml` exposes it: a test double, since no GPU or driver exists here."""

    def nvmlInit(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=[30, 90][handle])

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=[1, 3][handle] * 2**30, total=4 * 2**30)


def test_gpus_are_read_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())

    gpus = GpuProbe().read()

    assert [(gpu.index, gpu.utilization_percent, gpu.memory_percent) for gpu in gpus.values()] == [
        (0, 30.0, 25.0),
        (1, 90.0, 75.0),
    ]


def test_a_task_uses_the_mean_of_its_gpus(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    harness.launch("trainer", "sleep 60", gpus=(0, 1))
    harness.wait_for("trainer", TaskEventKind.STARTED)

    usage = usage_of(harness, "trainer", pause=0.2)

    assert (usage.gpus, usage.gpu_percent, usage.gpu_memory_percent) == ((0, 1), 60.0, 50.0)


def test_without_nvml_there_are_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` fails

    assert GpuProbe().read() == {}
