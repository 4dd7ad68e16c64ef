"""Devices of any kind in containers, through a real podman and a CDI spec written here: the task
gets exactly the devices the scheduler chose, with what the spec says each brings."""

from __future__ import annotations

import resource
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cdi_spec_files import device_spec
from pai.executors.base import LogStream
from pai.executors.isolation.runtime import may_raise_limits

if TYPE_CHECKING:
    from conftest import Harness

KIND = f"acc.example/npu{uuid.uuid4().hex[:8]}"
"""A kind PAI has no code for, unique to this run so no other spec can declare it."""


@pytest.fixture
def npu_spec(tmp_path: Path) -> Iterator[str]:
    """Two devices of `KIND` (`cdi_spec_files.device_spec`)."""
    with device_spec(KIND, (0, 1), tmp_path):
        yield KIND


def test_a_task_gets_exactly_its_devices_by_cdi_name(containers: Harness, npu_spec: str) -> None:
    script = (
        "env | grep -E '^(NPU_|ROCR|CUDA)' | sort\ncat /npu/* 2>/dev/null\nls /dev | grep npu\n"
    )

    result = containers.run("npu", script, gpus=(1,), device_kind=npu_spec)

    stdout = containers.executor.logs("npu", LogStream.STDOUT).decode()
    assert result.exit_code == 0, stdout
    # Device 1's variable, device node and file, and the spec's common variable; nothing of
    # device 0 (another task's), and no vendor variable for a kind PAI has no code for.
    assert stdout.splitlines() == ["NPU_1_GIVEN=yes", "NPU_DRIVER=1.0", "npu 1", "npu1"]


def test_a_task_given_rdma_has_unlimited_locked_memory_where_pai_may_raise_it(
    containers: Harness,
) -> None:
    result = containers.run("rdma", "ulimit -l", rdma=True)

    assert result.exit_code == 0, result.classification
    said = containers.executor.logs("rdma", LogStream.STDOUT).decode()
    if may_raise_limits():
        assert said == "unlimited\n"
    else:  # the node's own limit: asking for more would fail the container's start
        assert said == f"{resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] // 1024}\n"
