"""Reading a node's CDI specs: the device nodes on the host that each device brings."""

from __future__ import annotations

import json
from pathlib import Path

from pai.cluster.cdispecs import host_nodes


def test_the_host_nodes_of_some_devices_are_theirs_and_the_specs_common_ones(
    tmp_path: Path,
) -> None:
    spec = {
        "cdiVersion": "0.6.0",
        "kind": "amd.com/gpu",
        "devices": [
            {
                "name": str(index),
                "containerEdits": {
                    "deviceNodes": [
                        {"path": f"/dev/dri/renderD{128 + index}"},
                        {"path": f"/dev/gpu{index}", "hostPath": f"/dev/dri/card{index}"},
                    ]
                },
            }
            for index in range(3)
        ],
        "containerEdits": {"deviceNodes": [{"path": "/dev/kfd"}]},
    }
    (tmp_path / "amd.json").write_text(json.dumps(spec))

    nodes = host_nodes("amd.com/gpu", ["0", "2"], [tmp_path])

    assert nodes == [
        Path("/dev/dri/renderD128"),
        Path("/dev/dri/card0"),  # the host side of a node the container sees elsewhere
        Path("/dev/kfd"),
        Path("/dev/dri/renderD130"),
        Path("/dev/dri/card2"),
    ]
    assert host_nodes("acc.example/npu", ["0"], [tmp_path]) == []
