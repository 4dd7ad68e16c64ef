"""`pai cluster` shows the GPUs tasks share: which tasks, how much each has, and what is free."""

from __future__ import annotations

from rich.console import Console

from pai.cli.cluster import nodes_table, shared_table
from pai.sdk import Node


def shown(renderable: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(renderable)
    return console.export_text()


NODE = Node.model_validate(
    {
        "name": "gpu-node",
        "address": "127.0.0.1",
        "skuType": "GPU",
        "leaves": {"total": 2, "used": 2, "free": 0},
        "gpus": {"total": 2, "used": 2, "free": 0},
        "usage": [{"leafIndex": 1, "job": "bob~train", "vc": "default", "priority": 10}],
        "sharedGpus": [
            {
                "gpuIndex": 0,
                "freeFraction": 0.25,
                "opportunistic": False,
                "tasks": [
                    {
                        "job": "alice~notebook",
                        "vc": "default",
                        "taskRoleName": "main",
                        "taskIndex": 0,
                        "gpuFraction": 0.25,
                        "gpuMemoryMB": 4096,
                    },
                    {
                        "job": "carol~infer",
                        "vc": "default",
                        "taskRoleName": "server",
                        "taskIndex": 1,
                        "gpuFraction": 0.5,
                        "gpuMemoryMB": 0,
                    },
                ],
            }
        ],
    }
)


def test_each_shared_gpu_lists_its_tasks_and_the_part_left() -> None:
    text = shown(shared_table([NODE]))

    (row,) = [line for line in text.splitlines() if line.startswith("gpu-node")]
    assert "0.75/1" in row and " 0.25 " in row  # shared: three quarters; free: one
    assert "alice~notebook main/0 (0.25)" in row and "carol~infer server/1 (0.5)" in row
    assert Node.model_validate(NODE.raw()).shared_gpus[0].tasks[0].gpu_memory_mb == 4096


def test_the_nodes_table_counts_jobs_on_shared_gpus_with_the_others() -> None:
    text = shown(nodes_table([NODE]))

    assert "alice~notebook" in text and "carol~infer" in text and "bob~train" in text
    assert "default 2" in text  # one GPU held whole, one shared, both the VC's


def test_the_nodes_table_names_each_nodes_device_kind() -> None:
    npu = Node.model_validate(
        {
            "name": "npu-node",
            "skuType": "NPU",
            "device": "acc.example/npu",
            "leaves": {"total": 4, "used": 1, "free": 3},
            "gpus": {"total": 4, "used": 1, "free": 3},
        }
    )

    text = shown(nodes_table([npu]))

    assert "DEVICES USED" in text
    assert "1/4" in text and "x acc.example/npu" in text
