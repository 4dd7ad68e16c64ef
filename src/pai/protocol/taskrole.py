"""Task roles: groups of identical tasks, each with its image, resources and commands."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from pai.protocol.base import (
    Identifier,
    OpenProtocolModel,
    ProtocolModel,
    ProtocolVersion,
    describe_value,
)

DEFAULT_SHM_MB = 512
DEFAULT_PORTS = {"ssh": 1, "http": 1}
"""Ports every task gets even if it does not ask: the runtime's sshd and the http port."""


def _completion_threshold(value: int) -> int:
    if value == -1 or value >= 1:
        return value
    raise ValueError(f"must be -1, a positive integer, or 0/null for the default, got {value}")


CompletionThreshold = Annotated[
    int,
    AfterValidator(_completion_threshold),
    WithJsonSchema({"type": ["integer", "null"], "minimum": -1}),
]


class Completion(ProtocolModel):
    """When a role decides the job attempt (effective values: defaults already applied)."""

    min_failed_instances: CompletionThreshold = Field(
        default=1,
        description=(
            "Failed tasks of this role that fail the job attempt; -1: task failures never do. "
            "Default 1 (also for 0 or null)."
        ),
    )
    min_succeeded_instances: CompletionThreshold = Field(
        default=1,
        description=(
            "Succeeded tasks of this role that succeed the job attempt; -1: only when every task "
            "has completed. Default: the number of instances (also for 0 or null)."
        ),
    )


class ExtraContainerOptions(OpenProtocolModel):
    """Container options beyond resources."""

    shm_mb: int = Field(
        default=DEFAULT_SHM_MB, ge=0, alias="shmMB", description="Size of /dev/shm in MB."
    )
    infiniband: bool = Field(default=False, description="Give the task an InfiniBand device.")


GPU_MILLI = 1000
"""A share of a GPU is given to a thousandth."""


def _gpu_amount(value: Any) -> Any:
    """Whole GPUs (OpenPAI's integer), or a share of one GPU between 0.001 and 0.999."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(
            f"must be a whole number of GPUs (0, 1, 2 ...) or a share of one GPU "
            f"(0.25), got {describe_value(value)}"
        )
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be 0 or more GPUs, got {value}")
        return value
    if not 0 < value < 1:
        whole = " (whole GPUs are written as an integer)" if value.is_integer() else ""
        raise ValueError(
            f"a share of a GPU must be between 0.001 and 0.999{whole}; tasks on several "
            f"GPUs take whole ones, got {describe_value(value)}"
        )
    milli = round(value * GPU_MILLI)
    if milli < 1 or abs(milli - value * GPU_MILLI) > 1e-6:
        raise ValueError(
            f"a share of a GPU is given to a thousandth (0.001), got {describe_value(value)}"
        )
    return value


GpuAmount = Annotated[
    int | float,
    BeforeValidator(_gpu_amount),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "number", "minimum": 0.001, "maximum": 0.999, "multipleOf": 0.001},
            ],
            "description": (
                "GPUs per task: a whole number (0 for a CPU-only task), or a share of one "
                "GPU between 0.001 and 0.999 that tasks of the same VC may share."
            ),
        }
    ),
]


class ResourcePerInstance(ProtocolModel):
    """What each task of the role gets."""

    cpu: int = Field(ge=1, description="CPU cores per task.")
    memory_mb: int = Field(ge=1, alias="memoryMB", description="Memory per task in MB.")
    gpu: GpuAmount = Field(
        description="GPUs per task: whole GPUs, or a share of one GPU (0.001 to 0.999)."
    )
    gpu_memory_mb: int | None = Field(
        default=None,
        ge=1,
        alias="gpuMemoryMB",
        description=(
            "With a share of a GPU: the GPU memory in MB the task may use (the GPU's SKU must "
            "declare gpuMemory); without it the task shares the GPU's memory with the others."
        ),
    )
    ports: dict[Identifier, Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_PORTS),
        min_length=1,
        description=(
            "Port labels and how many ports of each a task reserves; ssh: 1 and http: 1 are "
            "added when missing. Tasks find them in PAI_PORT_LIST_<role>_<index>_<label>."
        ),
    )

    @field_validator("ports")
    @classmethod
    def _add_default_ports(cls, ports: dict[str, int]) -> dict[str, int]:
        return {
            **ports,
            **{label: count for label, count in DEFAULT_PORTS.items() if label not in ports},
        }

    @model_validator(mode="after")
    def _memory_of_a_share(self) -> ResourcePerInstance:
        if self.gpu_memory_mb is not None and self.gpu_milli is None:
            raise ValueError(
                "gpuMemoryMB is for a task on a share of a GPU (gpu between 0.001 and 0.999); "
                "a task on whole GPUs has all their memory"
            )
        return self

    @property
    def gpu_milli(self) -> int | None:
        """Thousandths of one GPU for a task that shares it; None for whole GPUs."""
        return round(self.gpu * GPU_MILLI) if isinstance(self.gpu, float) else None


def _is_unset(value: Any) -> bool:
    return value is None or (type(value) is int and value == 0)


class TaskRole(ProtocolModel):
    """One role of a job: `instances` identical tasks."""

    protocol_version: ProtocolVersion | None = Field(default=None, description="Always 2.")
    instances: int = Field(default=1, ge=1, description="Number of tasks of this role.")
    completion: Completion = Field(
        default_factory=Completion, description="When this role decides the job attempt."
    )
    task_retry_count: int = Field(
        default=0,
        ge=0,
        description="Retries of a failed task; only used with extras.gangAllocation: false.",
    )
    prerequisites: list[str] = Field(
        default_factory=list,
        description="Names of prerequisites (runtime plugins) applied to this role, in order.",
    )
    docker_image: str = Field(description="Name of the dockerimage prerequisite to run in.")
    data: str | None = Field(default=None, description="Name of a data prerequisite ($data).")
    output: str | None = Field(
        default=None, description="Name of an output prerequisite ($output)."
    )
    script: str | None = Field(default=None, description="Name of a script prerequisite ($script).")
    extra_container_options: ExtraContainerOptions = Field(
        default_factory=ExtraContainerOptions, description="Container options."
    )
    resource_per_instance: ResourcePerInstance = Field(description="Resources of each task.")
    commands: list[str] = Field(
        min_length=1, description="Shell command lines run in order as one bash script."
    )

    @model_validator(mode="before")
    @classmethod
    def _effective_completion(cls, data: Any) -> Any:
        """Fill completion defaults as OpenPAI does: 0 or null means absent."""
        if not isinstance(data, dict) or not isinstance(data.get("completion", {}), dict):
            return data
        instances = data.get("instances", 1)
        if type(instances) is not int or instances < 1:
            instances = 1
        completion = dict(data.get("completion", {}))
        for alias, name, default in (
            ("minFailedInstances", "min_failed_instances", 1),
            ("minSucceededInstances", "min_succeeded_instances", instances),
        ):
            key = name if name in completion and alias not in completion else alias
            if _is_unset(completion.get(key)):
                completion[key] = default
        return {**data, "completion": completion}

    @property
    def total_gpus(self) -> float:
        """GPUs of all tasks of this role, shares counted as their fractions."""
        resources = self.resource_per_instance
        if resources.gpu_milli is not None:
            return self.instances * resources.gpu_milli / GPU_MILLI
        return self.instances * resources.gpu
