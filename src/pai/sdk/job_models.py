"""Jobs as the API describes them: list items, details with roles and tasks, events, attempts.

Attribute names are the JSON names in snake_case (`totalGpuNumber` → `total_gpu_number`);
times are milliseconds since the epoch, or None.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pai.sdk.model import ApiModel, StringList

FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
"""Job states that never change again."""


class RetryDetails(ApiModel):
    """Retries by cause: the user's program, the platform, or waiting for resources."""

    user: int = 0
    platform: int = 0
    resource: int = 0


class ExitSpec(ApiModel):
    """What an exit code means: its `phrase`, the `reason` and what to do (`solution`)."""

    code: int | None = None
    phrase: str = ""
    issuer: str | None = None
    causer: str | None = None
    type: str | None = None
    stage: str | None = None
    behavior: str | None = None
    reaction: str | None = None
    reason: str | None = None
    repro: StringList = Field(default_factory=list)
    solution: StringList = Field(default_factory=list)


class WaitReason(ApiModel):
    """Why a job is WAITING (a PAI extension): `kind`, a readable `message`, and `details`."""

    kind: str = ""
    message: str = ""
    details: Any = None


class JobInfo(ApiModel):
    """One job in a listing (`GET /jobs`)."""

    name: str
    username: str = ""
    state: str = "UNKNOWN"
    sub_state: str | None = None
    execution_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    retries: int = 0
    retry_details: RetryDetails = Field(default_factory=RetryDetails)
    retry_delay_time: int | None = None
    submission_time: int | None = None
    created_time: int | None = None
    launched_time: int | None = None
    completed_time: int | None = None
    app_exit_code: int | None = None
    virtual_cluster: str | None = None
    total_gpu_number: int = 0
    total_task_number: int = 0
    total_task_role_number: int = 0
    job_priority: str | None = None
    debug_id: str | None = None

    @property
    def full_name(self) -> str:
        """`user~job`, the name other calls take."""
        return f"{self.username}~{self.name}"


class JobStatus(ApiModel):
    """The state of a job: its attempt, retries, times and how it ended."""

    username: str = ""
    state: str = "UNKNOWN"
    sub_state: str | None = None
    execution_type: str | None = None
    retries: int = 0
    retry_details: RetryDetails = Field(default_factory=RetryDetails)
    retry_delay_time: int | None = None
    created_time: int | None = None
    launched_time: int | None = None
    completed_time: int | None = None
    submission_time: int | None = None
    attempt_id: int | None = None
    attempt_state: str | None = None
    app_id: str | None = None
    app_progress: Any = None
    app_created_time: int | None = None
    app_launched_time: int | None = None
    app_completed_time: int | None = None
    app_exit_code: int | None = None
    app_exit_spec: ExitSpec | None = None
    app_exit_diagnostics: str | None = None
    app_exit_messages: dict[str, Any] | None = None
    app_exit_trigger_message: str | None = None
    app_exit_trigger_task_role_name: str | None = None
    app_exit_trigger_task_index: int | None = None
    app_exit_type: str | None = None
    virtual_cluster: str | None = None
    wait_reason: WaitReason | None = None


class TaskStatus(ApiModel):
    """One task of a role: where it runs, what it holds and how it ended."""

    task_index: int
    task_uid: str | None = None
    task_state: str = "UNKNOWN"
    container_id: str | None = None
    container_ip: str | None = None
    container_node_name: str | None = None
    container_ports: dict[str, str] | None = None
    container_gpus: str | None = None
    container_log: str | None = None
    container_exit_code: int | None = None
    container_exit_spec: ExitSpec | None = None
    container_exit_diagnostics: str | None = None
    node_problem: str | None = None
    """While the task runs: what is wrong with its node ("unreachable since ..."), if anything."""
    retries: int = 0
    accountable_retries: int = 0
    created_time: int | None = None
    launched_time: int | None = None
    completed_time: int | None = None
    attempt_id: int | None = None
    attempt_state: str | None = None
    docker_image: str | None = None
    isolation: str | None = None
    """"host" when the task ran directly on its node (the image only recorded), "container"
    when it ran in its image."""
    preparing: str | None = None
    """What the task's node does before its command starts (an image being pulled)."""

    @property
    def gpus(self) -> list[int]:
        """The GPU indices the task holds (`containerGpus` "0,1" → [0, 1])."""
        return _numbers(self.container_gpus)

    @property
    def ports(self) -> dict[str, list[int]]:
        """The ports the task reserved, by label (`{"http": "8080,8081"}` → `[8080, 8081]`)."""
        return {label: _numbers(value) for label, value in (self.container_ports or {}).items()}


class TaskRoleStatus(ApiModel):
    name: str = ""


class TaskRoleDetail(ApiModel):
    """A role of a job and its tasks, in index order."""

    task_role_status: TaskRoleStatus = Field(default_factory=TaskRoleStatus)
    task_statuses: list[TaskStatus] = Field(default_factory=list)


class JobDetail(ApiModel):
    """A job with its status and every task (`GET /jobs/{user~job}`, and each job attempt)."""

    name: str
    debug_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    job_priority: str | None = None
    framework_name: str | None = None
    job_status: JobStatus = Field(default_factory=JobStatus)
    task_roles: dict[str, TaskRoleDetail] = Field(default_factory=dict)
    is_latest: bool | None = None

    @property
    def state(self) -> str:
        return self.job_status.state

    @property
    def full_name(self) -> str:
        """`user~job`, the name other calls take."""
        return self.framework_name or f"{self.job_status.username}~{self.name}"

    @property
    def finished(self) -> bool:
        """Whether the job reached a state it never leaves (SUCCEEDED, FAILED, STOPPED)."""
        return self.state in FINAL_STATES

    def tasks(self) -> list[tuple[str, TaskStatus]]:
        """Every task with its role name, roles in the order the server lists them."""
        return [
            (role, task)
            for role, detail in self.task_roles.items()
            for task in detail.task_statuses
        ]


class JobSubmission(ApiModel):
    """The server's answer to a submission: the job's full name (`user~job`)."""

    name: str
    message: str = ""
    status: int = 202


class JobEvent(ApiModel):
    """Something that happened to a task (`GET /jobs/{user~job}/events`)."""

    uid: str | None = None
    taskrole_name: str | None = None
    task_name: str | None = None
    task_index: int | None = None
    type: str = ""
    reason: str = ""
    message: str = ""
    first_timestamp: Any = None
    last_timestamp: Any = None
    count: int = 1
    source_component: str | None = None
    source_host: str | None = None


class TaskAttempt(ApiModel):
    """One run of a task (a retry starts a new attempt)."""

    attempt_id: int
    attempt_state: str | None = None
    task_state: str | None = None
    container_id: str | None = None
    container_ip: str | None = None
    container_node_name: str | None = None
    container_ports: dict[str, str] | None = None
    container_gpus: str | None = None
    container_exit_code: int | None = None
    container_exit_spec: ExitSpec | None = None
    container_exit_diagnostics: str | None = None
    launched_time: int | None = None
    completed_time: int | None = None
    logs: str | None = None


class TaskAttempts(ApiModel):
    """A task with all its attempts, the retry history."""

    task_index: int
    task_role: str
    job_attempt_id: int
    attempts: list[TaskAttempt] = Field(default_factory=list)


class LogLocation(ApiModel):
    """Where one stream of a task attempt's log can be read (`stdout`, `stderr`, `all`,
    `runtime`)."""

    name: str
    uri: str


def _numbers(text: str | None) -> list[int]:
    return [int(part) for part in (text or "").split(",") if part.strip()]
