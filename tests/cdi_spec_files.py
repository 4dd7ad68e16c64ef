"""CDI specs written by tests, for a device kind PAI has no code for: each device sets a
variable, adds a device node and mounts a file, so what a task got is visible in it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pai.cluster.cdispecs import DEFAULT_CDI_DIRS


@contextmanager
def device_spec(kind: str, indices: Sequence[int], files: Path) -> Iterator[Path]:
    """A spec of devices `indices` of `kind` in the folder podman reads (podman 4.3 has no
    setting for another), removed afterwards. Device N sets `NPU_N_GIVEN=yes`, adds `/dev/npuN`
    (the host's /dev/null) and mounts a file under `files` saying `npu N` at `/npu/N`; every
    device of the spec sets `NPU_DRIVER=1.0`. `kind` should be unique to the run, so that no
    other spec declares it."""
    folder = DEFAULT_CDI_DIRS[0]
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    devices = []
    for index in indices:
        info = files / f"npu{index}-info"
        info.write_text(f"npu {index}\n")
        edits = {
            "env": [f"NPU_{index}_GIVEN=yes"],
            "deviceNodes": [{"path": f"/dev/npu{index}", "hostPath": "/dev/null"}],
            "mounts": [
                {"hostPath": str(info), "containerPath": f"/npu/{index}", "options": ["ro", "bind"]}
            ],
        }
        devices.append({"name": str(index), "containerEdits": edits})
    spec = {
        "cdiVersion": "0.5.0",
        "kind": kind,
        "devices": devices,
        "containerEdits": {"env": ["NPU_DRIVER=1.0"]},
    }
    path = folder / f"pai-test-{kind.replace('/', '-')}.json"
    path.write_text(json.dumps(spec))
    try:
        yield path
    finally:
        path.unlink()
        if created and not any(folder.iterdir()):
            folder.rmdir()
