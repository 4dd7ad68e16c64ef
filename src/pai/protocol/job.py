"""The job: the document a user submits, as OpenPAI's server accepts it."""

from __future__ import annotations

import math
from typing import Any, Literal, overload

from pydantic import Field

from pai.protocol.base import (
    ComponentHeader,
    Identifier,
    Name,
    OpenProtocolModel,
    ProtocolModel,
    ProtocolVersion,
)
from pai.protocol.extras import DEFAULT_PRIORITY_CLASS, Extras, PriorityClass
from pai.protocol.prerequisites import (
    DataPrerequisite,
    DockerImagePrerequisite,
    OutputPrerequisite,
    Prerequisite,
    PrerequisiteType,
    ScriptPrerequisite,
)
from pai.protocol.taskrole import TaskRole

DEFAULT_VIRTUAL_CLUSTER = "default"


class DeploymentRole(ProtocolModel):
    """Commands a deployment adds around one role's commands."""

    pre_commands: list[str] = Field(
        default_factory=list, description="Run before the role's commands."
    )
    post_commands: list[str] = Field(
        default_factory=list, description="Run after the role's commands."
    )


class Deployment(OpenProtocolModel):
    """A named set of commands to wrap around roles' commands; chosen by defaults.deployment."""

    protocol_version: ProtocolVersion | None = Field(default=None, description="Always 2.")
    name: Name = Field(description="Deployment name, unique in the job.")
    task_roles: dict[Identifier, DeploymentRole] = Field(
        min_length=1, description="Commands per role; every role must exist in taskRoles."
    )


class Defaults(OpenProtocolModel):
    """Job-wide defaults."""

    virtual_cluster: str = Field(
        default=DEFAULT_VIRTUAL_CLUSTER, description="Virtual cluster the job runs in."
    )
    deployment: str | None = Field(
        default=None, description="Name of the deployment applied to the roles it covers."
    )


class JobSpec(ComponentHeader):
    """A job in the OpenPAI job protocol v2, validated, with OpenPAI's defaults applied.

    Attributes are snake_case; `model_dump(by_alias=True)` gives OpenPAI's camelCase JSON. It holds
    the secrets' values: show it with `masked_job_dict`, never with a plain dump.
    """

    protocol_version: ProtocolVersion = Field(description='Protocol version: 2 (or "2").')
    type: Literal["job"] = Field(description="Always job.")
    prerequisites: list[Prerequisite] = Field(
        default_factory=list, description="Images, code, data and outputs the roles select."
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="Values commands use as <% $parameters.name %>."
    )
    secrets: dict[str, Any] = Field(
        default_factory=dict,
        repr=False,
        description=(
            "Values commands use as <% $secrets.name %>; substituted only when a task starts, "
            "masked everywhere they are shown."
        ),
    )
    job_retry_count: int = Field(default=0, ge=0, description="Retries of the whole job.")
    task_roles: dict[Identifier, TaskRole] = Field(
        min_length=1, description="The roles of the job by name."
    )
    deployments: list[Deployment] = Field(
        default_factory=list, description="Deployments to choose from."
    )
    defaults: Defaults = Field(default_factory=Defaults, description="Job-wide defaults.")
    extras: Extras = Field(default_factory=Extras, description="Settings beyond the core.")

    @property
    def virtual_cluster(self) -> str:
        """The virtual cluster the job runs in."""
        return self.defaults.virtual_cluster

    @property
    def priority_class(self) -> PriorityClass:
        """The job's priority class: the scheduler setting, else test."""
        hived = self.extras.hived_scheduler
        return hived.job_priority_class if hived is not None else DEFAULT_PRIORITY_CLASS

    @property
    def total_tasks(self) -> int:
        """Tasks in the job, over all roles."""
        return sum(role.instances for role in self.task_roles.values())

    @property
    def total_gpus(self) -> int:
        """GPUs the job asks for, over all tasks; shares of GPUs add up, rounded up to a whole
        GPU (a job of four tasks on a quarter GPU each counts one)."""
        return math.ceil(round(sum(role.total_gpus for role in self.task_roles.values()), 3))

    @overload
    def prerequisite(
        self, type: Literal["dockerimage"], name: str
    ) -> DockerImagePrerequisite | None: ...
    @overload
    def prerequisite(self, type: Literal["script"], name: str) -> ScriptPrerequisite | None: ...
    @overload
    def prerequisite(self, type: Literal["output"], name: str) -> OutputPrerequisite | None: ...
    @overload
    def prerequisite(self, type: Literal["data"], name: str) -> DataPrerequisite | None: ...
    @overload
    def prerequisite(self, type: PrerequisiteType, name: str) -> Prerequisite | None: ...
    def prerequisite(self, type: PrerequisiteType, name: str) -> Prerequisite | None:
        """The prerequisite of this type and name (names are unique per type), or None."""
        for candidate in self.prerequisites:
            if candidate.type == type and candidate.name == name:
                return candidate
        return None
