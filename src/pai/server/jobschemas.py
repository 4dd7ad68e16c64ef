"""Request and response bodies of the job API, with OpenPAI's JSON field names.

Times are milliseconds since the epoch, or null; retry counts split by cause as OpenPAI does
(`user`: charged to the job's retry limit, `platform`: free retries after platform failures,
`resource`: free retries after waiting for resources).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pai.server.schemas import Body


class Submitted(BaseModel):
    status: int = Field(description="202: the job is recorded; the controller takes it from here.")
    message: str
    name: str = Field(description="The job's full name `<user>~<job>`, used in every job path.")


class RetryDetails(BaseModel):
    user: int
    platform: int
    resource: int


class JobListItem(BaseModel):
    debugId: str
    name: str
    username: str
    state: str
    subState: str
    executionType: str
    tags: list[str]
    retries: int
    retryDetails: RetryDetails
    retryDelayTime: int | None = Field(
        description="Milliseconds between the end of the last attempt and the pending retry."
    )
    submissionTime: int
    createdTime: int
    launchedTime: int | None
    completedTime: int | None
    appExitCode: int | None
    virtualCluster: str
    totalGpuNumber: int
    totalTaskNumber: int
    totalTaskRoleNumber: int
    jobPriority: str = Field(description="The job's priority class: prod, test or oppo.")


class JobListWithCount(BaseModel):
    """The answer of `GET /jobs?withTotalCount=true`."""

    totalCount: int = Field(description="Jobs matching the filters, regardless of paging.")
    data: list[JobListItem]


class ExitSpecInfo(BaseModel):
    """What an exit code means and what to do about it (OpenPAI's exit-spec record)."""

    code: int
    phrase: str
    issuer: str
    causer: str
    type: str
    stage: str
    behavior: str
    reaction: str
    reason: str
    repro: list[str]
    solution: list[str]


class WaitReasonInfo(BaseModel):
    """Why a job is WAITING (a PAI extension): a kind for programs and a sentence for people."""

    kind: str = Field(
        description="vc_quota, topology, bad_nodes, opportunistic_capacity, user_limit, "
        "unschedulable or preparing"
    )
    message: str
    details: dict[str, Any]
    queuePosition: int | None = Field(
        default=None,
        description="Its place among the VC's jobs waiting for cells (1: tried next), in the "
        "one-job view; the message then says why jobs go in that order.",
    )
    queueLength: int | None = Field(default=None, description="Jobs waiting for cells there.")


class AppExitMessages(BaseModel):
    container: str | None
    runtime: str | None
    launcher: str | None


class JobStatusInfo(BaseModel):
    username: str
    state: str
    subState: str
    executionType: str
    retries: int
    retryDetails: RetryDetails
    retryDelayTime: int | None
    createdTime: int
    launchedTime: int | None
    completedTime: int | None
    submissionTime: int
    attemptId: int
    attemptState: str
    appId: str
    appProgress: float | None
    appCreatedTime: int | None
    appLaunchedTime: int | None
    appCompletedTime: int | None
    appExitCode: int | None
    appExitSpec: ExitSpecInfo | None
    appExitDiagnostics: str | None
    appExitMessages: AppExitMessages | None
    appExitTriggerMessage: str | None
    appExitTriggerTaskRoleName: str | None
    appExitTriggerTaskIndex: int | None
    appExitType: str | None
    virtualCluster: str
    waitReason: WaitReasonInfo | None = Field(description="Set while the job is WAITING.")


class TaskStatusInfo(BaseModel):
    taskIndex: int
    taskUid: str = Field(
        description="Identifies the task in this job attempt (text, as OpenPAI's instance UID)."
    )
    taskState: str
    containerId: str | None = Field(description="The executor's key of the current attempt.")
    containerIp: str | None
    containerNodeName: str | None
    containerPorts: dict[str, str] = Field(description='label -> "port1,port2"; {} if unplaced')
    containerGpus: str | None = Field(description='GPU indices, "0,1"; null without GPUs')
    containerGpuFraction: float | None = Field(
        default=None,
        description="The part of its one GPU a task sharing it has (0.25); null on whole GPUs.",
    )
    containerLog: str = Field(description='URL of the attempt\'s log locations; "" if unplaced')
    containerExitCode: int | None
    containerExitSpec: ExitSpecInfo | None
    containerExitDiagnostics: str | None
    retries: int
    accountableRetries: int
    createdTime: int | None
    launchedTime: int | None
    completedTime: int | None
    attemptId: int
    attemptState: str
    currentAttemptCreatedTime: int | None
    currentAttemptLaunchedTime: int | None
    currentAttemptCompletedTime: int | None
    dockerImage: str | None = Field(
        default=None, description="PAI: the image the role asked for (dockerImage)."
    )
    isolation: str | None = Field(
        default=None,
        description='PAI: "host" when the task ran directly on its node (the image is only '
        'recorded), "container" when it ran in the image.',
    )
    preparing: str | None = Field(
        default=None,
        description="PAI: what the task's node does before its command starts, such as "
        '"pulling image X: 12.0 of 104.3 MiB"; null once it runs.',
    )
    nodeProblem: str | None = Field(
        default=None,
        description="PAI: while the task is placed and not over, what is wrong with its node "
        '("unreachable since 2024-05-01T10:00:00+00:00: ...", gone, out of disk); null '
        "while the node is fine.",
    )


class TaskRoleName(BaseModel):
    name: str


class TaskRoleInfo(BaseModel):
    taskRoleStatus: TaskRoleName
    taskStatuses: list[TaskStatusInfo]


class JobDetail(BaseModel):
    debugId: str
    name: str
    tags: list[str]
    jobPriority: str
    frameworkName: str
    jobStatus: JobStatusInfo
    taskRoles: dict[str, TaskRoleInfo]


class ExitDiagnostics(BaseModel):
    diagnosticsSummary: str
    runtime: dict[str, Any] | None
    launcher: str


class JobAttemptDetail(JobDetail):
    """One job attempt (a job retry starts a new one), as `GET .../job-attempts` lists them:
    the job detail of that attempt plus OpenPAI's job-history fields."""

    isLatest: bool
    jobName: str
    uid: str = Field(description="The attempt's id, as `jobStatus.appId`.")
    userName: str
    state: str = Field(description="SUCCEEDED, FAILED, STOPPED, or the job's state if current.")
    originState: str = Field(description="The attempt's FrameworkController state.")
    attemptIndex: int
    jobStartedTime: int = Field(description="When the job was submitted.")
    attemptStartedTime: int | None
    attemptCompletedTime: int | None
    exitCode: int | None
    exitPhrase: str | None
    exitType: str | None
    exitDiagnostics: ExitDiagnostics | None
    totalGpuNumber: int
    totalTaskNumber: int
    totalTaskRoleNumber: int


class TaskAttemptInfo(BaseModel):
    attemptId: int
    attemptState: str
    containerId: str | None
    containerIp: str | None
    containerNodeName: str | None
    containerPorts: dict[str, str] = Field(description='label -> "port1,port2"; {} if unplaced')
    containerGpus: str | None
    containerGpuFraction: float | None = None
    containerExitCode: int | None
    containerExitSpec: ExitSpecInfo | None
    containerExitDiagnostics: str | None
    createdTime: int | None
    launchedTime: int | None
    completedTime: int | None
    currentAttemptCreatedTime: int | None = Field(description="OpenPAI's name of createdTime.")
    currentAttemptLaunchedTime: int | None
    currentAttemptCompletedTime: int | None
    containerLog: str = Field(description='URL of the attempt\'s log locations; "" if unplaced')
    logs: str | None = Field(description="URL of the attempt's log locations; null if unplaced")


class TaskAttempts(BaseModel):
    """A task with every attempt of it in one job attempt: its retry history (OpenPAI's task
    status)."""

    taskIndex: int
    taskUid: str = Field(description="The job detail's `taskUid` of this task.")
    taskState: str
    retries: int
    accountableRetries: int
    createdTime: int | None = Field(description="When the task's first attempt was created.")
    launchedTime: int | None
    completedTime: int | None
    username: str
    jobName: str
    jobAttemptId: int
    taskRoleName: str
    taskRole: str = Field(description="PAI's name of taskRoleName.")
    attempts: list[TaskAttemptInfo]


class LogLocation(BaseModel):
    name: Literal["stdout", "stderr", "all", "runtime"]
    uri: str = Field(description="Absolute URL that returns the log as text/plain.")


class LogLocations(BaseModel):
    locations: list[LogLocation]


class JobEventInfo(BaseModel):
    """Something that happened to the job or one of its tasks, in the shape of OpenPAI's
    (Kubernetes) pod events. An event about the whole job names no task: its `podUid`,
    `taskroleName` and `taskName` are "" and its `taskIndex` is -1."""

    uid: str
    frameworkName: str = Field(description="The job, `<user>~<job>`.")
    podUid: str = Field(
        description="The task, the same in every attempt (`metadata.uid` in GET "
        '/kubernetes/pods); "" for the job.'
    )
    taskroleName: str
    taskName: str
    taskIndex: int
    type: str = Field(description="Normal or Warning")
    reason: str
    message: str
    firstTimestamp: datetime = Field(description="ISO 8601, UTC.")
    lastTimestamp: datetime = Field(description="ISO 8601, UTC.")
    count: int
    sourceComponent: str
    sourceHost: str | None


class JobEventList(BaseModel):
    totalCount: int
    data: list[JobEventInfo]


class ExecutionTypeRequest(Body):
    value: Literal["START", "STOP"]


class TagRequest(Body):
    value: str = Field(
        min_length=1, max_length=255, pattern=r"^[^,]+$", description="A tag without commas."
    )
