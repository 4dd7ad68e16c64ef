"""`extras`: free-form settings, of which PAI understands and checks the keys listed here.

Every other key of `extras` is kept as written (other tools put theirs there too). Inside the
recognised objects unknown keys are kept as well, except in `hivedScheduler.taskRoles.<role>`,
which OpenPAI's server checks strictly.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pai.protocol.base import Identifier, OpenProtocolModel, ProtocolModel
from pai.protocol.prerequisites import FailurePolicy

MAX_GRACE_SECONDS = 3600
"""A task stopped or preempted is killed at most this long after SIGTERM: a preemptor waits for
its victims, and cells held for longer than an hour are no longer worth the wait."""

PriorityClass = Literal["prod", "test", "oppo"]
DEFAULT_PRIORITY_CLASS: PriorityClass = "test"
RUNTIME_PLUGINS_KEY = "com.microsoft.pai.runtimeplugin"


class HivedTaskRole(ProtocolModel):
    """Where the scheduler may place one role."""

    sku_type: str | None = Field(
        default=None, description="SKU (cell type) the role needs, e.g. V100."
    )
    sku_num: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Leaf cells of the role's SKU each task holds, as OpenPAI's portal writes it next "
            "to skuType; resourcePerInstance must fit in them."
        ),
    )
    pinned_cell_id: str | None = Field(
        default=None,
        description="Run on this pinned cell of the virtual cluster (not with skuType).",
    )
    affinity_group_name: str | None = Field(
        default=None,
        description="Roles sharing a group name are placed together as one gang.",
    )


class HivedSchedulerExtras(OpenProtocolModel):
    """Scheduler settings of a job."""

    job_priority_class: PriorityClass = Field(
        default=DEFAULT_PRIORITY_CLASS,
        description=(
            "prod (100) and test (10) run within the virtual cluster's quota; oppo (-1) runs "
            "opportunistically on idle capacity and may be preempted."
        ),
    )
    task_roles: dict[Identifier, HivedTaskRole] = Field(
        default_factory=dict, description="Per-role placement settings."
    )
    lazy_preemption_enable: bool | None = Field(
        default=None,
        description="Let the job keep running when its cells are lost, until actually needed.",
    )
    gang_release_enable: bool | None = Field(
        default=None, description="Release the job's cells as a gang when it finishes."
    )
    ignore_k8s_suggested_nodes: bool | None = Field(
        default=None, description="Place tasks without Kubernetes' node suggestions."
    )


class StorageRef(OpenProtocolModel):
    """A storage the job mounts."""

    name: str = Field(description="Name of a storage one of the user's groups may use.")
    mount_path: str | None = Field(default=None, description="Mount point; /mnt/<name> if absent.")


class RuntimePlugin(OpenProtocolModel):
    """A runtime plugin run in each task's container before (and after) the commands."""

    plugin: str = Field(description="Plugin name: ssh, tensorboard, cmd, git, ...")
    parameters: dict[str, Any] = Field(default_factory=dict, description="Plugin parameters.")
    failure_policy: FailurePolicy = Field(
        default="fail", description="fail: a plugin error fails the task; ignore: it does not."
    )
    taskroles: list[str] | None = Field(
        default=None, description="Only these roles run the plugin (all roles when absent)."
    )


class JobStatusChangeNotification(OpenProtocolModel):
    """Which job state changes send the user an e-mail."""

    running: bool = Field(default=False, description="When the job starts running.")
    succeeded: bool = Field(default=False, description="When the job succeeds.")
    stopped: bool = Field(default=False, description="When the job is stopped.")
    failed: bool = Field(default=False, description="When the job fails.")
    retried: bool = Field(default=False, description="When the job is retried.")


class Extras(OpenProtocolModel):
    """Settings beyond the core protocol."""

    gang_allocation: bool = Field(
        default=True,
        description=(
            "true: all tasks start together and a failed task is not retried on its own; "
            "false: tasks start as they are placed and taskRetryCount applies."
        ),
    )
    hived_scheduler: HivedSchedulerExtras | None = Field(
        default=None, description="Priority and placement settings for the scheduler."
    )
    storages: list[StorageRef] | None = Field(
        default=None,
        description="Storages to mount; an empty list mounts all of the user's default storages.",
    )
    runtime_plugins: list[RuntimePlugin] = Field(
        default_factory=list, alias=RUNTIME_PLUGINS_KEY, description="Runtime plugins."
    )
    job_status_change_notification: JobStatusChangeNotification | None = Field(
        default=None, description="E-mail notifications on job state changes."
    )
    submit_from: str | None = Field(
        default=None, description="Where the job was submitted from (informational)."
    )
    pod_graceful_deletion_timeout_sec: int | None = Field(
        default=None,
        ge=0,
        le=MAX_GRACE_SECONDS,
        description=(
            "Seconds a task has between SIGTERM and SIGKILL when it is stopped or preempted, "
            "to save its state; the cluster file's podGracefulDeletionTimeoutSec when absent."
        ),
    )
