"""The variables that tell a task which devices it has: `PAI_*` ones for every kind, and those
each known vendor's software reads.

A vendor's variables come in two sorts. Its container runtime hook (NVIDIA's, Ascend's,
Habana's) reads the node's device indices and hands those devices to the container; its
user-space library (CUDA, ROCm, Level Zero, CANN) reads the indices of the devices it may use
among those it sees. On the host a task sees every device, so both carry the node's indices; in
a container it sees only its own, numbered from 0, so the container isolation renumbers the
second sort (`visible_indices_in_container`). A kind PAI has no entry for gets the `PAI_*`
variables only: its CDI spec says what else its devices need. docs/deploy.md ("Accelerators")
cites each vendor's documentation of these variables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pai.cluster.devices import DEFAULT_DEVICE_KIND, device_name


@dataclass(frozen=True)
class VendorVariables:
    """`runtime`: read by the vendor's container runtime (node indices, also in a container);
    `userspace`: read by its user-space library (indices among the devices the task sees)."""

    runtime: tuple[str, ...] = ()
    userspace: tuple[str, ...] = ()


VENDOR_VARIABLES: dict[str, VendorVariables] = {
    # NVIDIA Container Toolkit; CUDA.
    DEFAULT_DEVICE_KIND: VendorVariables(("NVIDIA_VISIBLE_DEVICES",), ("CUDA_VISIBLE_DEVICES",)),
    # ROCm's GPU isolation: the ROCm runtime and HIP.
    "amd.com/gpu": VendorVariables((), ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")),
    # oneAPI Level Zero's affinity mask.
    "intel.com/gpu": VendorVariables((), ("ZE_AFFINITY_MASK",)),
    # Ascend Docker Runtime; the CANN runtime.
    "huawei.com/npu": VendorVariables(("ASCEND_VISIBLE_DEVICES",), ("ASCEND_RT_VISIBLE_DEVICES",)),
    # Habana's container runtime (Intel's CDI generator names Gaudi `intel.com/gaudi`).
    "habana.ai/gaudi": VendorVariables(("HABANA_VISIBLE_DEVICES",)),
    "intel.com/gaudi": VendorVariables(("HABANA_VISIBLE_DEVICES",)),
}
NO_NVIDIA_GPUS = {"NVIDIA_VISIBLE_DEVICES": "none", "CUDA_VISIBLE_DEVICES": ""}
"""What a task without NVIDIA GPUs sees, so that it cannot pick up any (OpenPAI sets `none`)."""


def vendor_variables(kind: str) -> VendorVariables:
    """The known variables of `kind`: its own entry, or its vendor's (`huawei.com/Ascend910`
    is an Ascend NPU as `huawei.com/npu` is), or none."""
    if kind in VENDOR_VARIABLES:
        return VENDOR_VARIABLES[kind]
    vendor = kind.partition("/")[0]
    for known, variables in VENDOR_VARIABLES.items():
        if known.startswith(f"{vendor}/"):
            return variables
    return VendorVariables()


def device_env(kind: str, devices: Sequence[int]) -> dict[str, str]:
    """Every variable naming the task's `devices` (node indices) of `kind`, as on the host."""
    env = dict(NO_NVIDIA_GPUS)
    if not devices:
        return env
    listed = ",".join(str(device) for device in devices)
    variables = vendor_variables(kind)
    env.update({name: listed for name in (*variables.runtime, *variables.userspace)})
    env.update(
        PAI_DEVICE_KIND=kind,
        PAI_DEVICE_COUNT=str(len(devices)),
        PAI_DEVICE_INDICES=listed,
        PAI_DEVICES=",".join(device_name(kind, device) for device in devices),
    )
    return env


def visible_indices_in_container(kind: str, count: int) -> dict[str, str]:
    """The user-space variables as a container with only the task's `count` devices numbers
    them: from 0."""
    numbered = ",".join(str(index) for index in range(count))
    return {name: numbered for name in vendor_variables(kind).userspace}
