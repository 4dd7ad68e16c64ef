"""Job rows rendered as OpenPAI's JSON: list items, job attempts with their tasks, task
attempts and events.

Everything is read from what the controller stored (the state machine in `JobRow.status`),
so these are pure functions of the row and of the exit spec that explains codes. A job the
controller has not taken in yet has no state machine; it is shown as its first attempt with
every task WAITING, which is what it is about to become.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from pai.errors import NoJobError
from pai.executors.base import NodeCondition, NodeState
from pai.orchestrator import framework as fw
from pai.protocol.taskrole import GPU_MILLI
from pai.runtime.exitspec import ExitSpec
from pai.server.jobschemas import (
    AppExitMessages,
    ExitDiagnostics,
    ExitSpecInfo,
    JobAttemptDetail,
    JobDetail,
    JobEventInfo,
    JobListItem,
    JobStatusInfo,
    RetryDetails,
    TaskAttemptInfo,
    TaskAttempts,
    TaskRoleInfo,
    TaskRoleName,
    TaskStatusInfo,
    WaitReasonInfo,
)
from pai.server.queueplace import QueuePlace
from pai.server.views import epoch_ms
from pai.store.models import JobEvent, JobRow

EVENT_SOURCE = "pai-controller"

LogUrl = Callable[[int, str, int, int], str]
"""(job attempt, role, task index, task attempt) -> URL of that task attempt's log locations."""


def task_logs_url(job_url: str) -> LogUrl:
    """Log-location URLs under `job_url` (the absolute URL of `GET /jobs/{user~job}`)."""

    def url(job_attempt: int, role: str, index: int, task_attempt: int) -> str:
        return (
            f"{job_url}/attempts/{job_attempt}/taskRoles/{quote(role, safe='')}"
            f"/taskIndex/{index}/attempts/{task_attempt}/logs"
        )

    return url


def debug_id(framework_name: str) -> str:
    """OpenPAI's `debugId`: the MD5 of the framework name (an identifier, not a secret)."""
    return hashlib.md5(framework_name.encode(), usedforsecurity=False).hexdigest()


def pod_uid(framework_name: str, role: str, index: int) -> str:
    """A task as OpenPAI's clients know a pod: the same in every attempt, so events
    (`podUid`) and `GET /kubernetes/pods` (`metadata.uid`) name it alike."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pai-task:{framework_name}/{role}/{index}"))


def task_uid(framework_name: str, attempt_id: int, role: str, index: int) -> str:
    """OpenPAI's `taskUid` of a task in one job attempt: text, as its server sends a task's
    instance UID, and new in each job attempt (`pod_uid` stays the same across them)."""
    return str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"pai-task:{framework_name}/{attempt_id}/{role}/{index}")
    )


@dataclass(frozen=True)
class JobSummary:
    """The columns the job list reads: everything but the state machine and the job text."""

    id: int
    username: str
    name: str
    state: str
    sub_state: str
    execution_type: str
    retries: int
    retry: Mapping[str, int] | None
    retry_at: float | None
    attempt_completed_at: float | None
    submitted_at: datetime
    launched_at: datetime | None
    completed_at: datetime | None
    exit_code: int | None
    virtual_cluster: str
    total_gpus: int
    total_tasks: int
    total_roles: int
    priority_class: str

    @property
    def framework_name(self) -> str:
        return f"{self.username}~{self.name}"


def list_item(job: JobSummary, tags: list[str]) -> JobListItem:
    submitted = epoch_ms(job.submitted_at)
    return JobListItem(
        debugId=debug_id(job.framework_name),
        name=job.name,
        username=job.username,
        state=job.state,
        subState=job.sub_state,
        executionType=job.execution_type,
        tags=tags,
        retries=job.retries,
        retryDetails=retry_details(job.retry),
        retryDelayTime=retry_delay(job.retry_at, job.attempt_completed_at),
        submissionTime=submitted,
        createdTime=submitted,
        launchedTime=_ms(job.launched_at),
        completedTime=_ms(job.completed_at),
        appExitCode=job.exit_code,
        virtualCluster=job.virtual_cluster,
        totalGpuNumber=job.total_gpus,
        totalTaskNumber=job.total_tasks,
        totalTaskRoleNumber=job.total_roles,
        jobPriority=job.priority_class,
    )


def retry_details(retry: Mapping[str, int] | None) -> RetryDetails:
    counts = retry or {}
    return RetryDetails(
        user=counts.get("accountable", 0),
        platform=counts.get("platform", 0),
        resource=counts.get("resource", 0),
    )


def retry_delay(retry_at: float | None, attempt_completed_at: float | None) -> int | None:
    if retry_at is None or attempt_completed_at is None:
        return None
    return max(0, round((retry_at - attempt_completed_at) * 1000))


def job_attempt(row: JobRow, attempt_id: int | None = None) -> fw.JobAttempt:
    """The job attempt `attempt_id` (default: the latest); NoJobError if there is none."""
    status = row.status
    if status is None:
        if attempt_id in (None, 0):
            return _first_attempt(row)
    elif attempt_id is None or attempt_id == status["attempt"]["attemptId"]:
        return fw.JobAttempt.from_dict(status["attempt"])
    else:
        for data in status["history"]:
            if data["attemptId"] == attempt_id:
                return fw.JobAttempt.from_dict(data)
    raise NoJobError(f"job '{row.framework_name}' has no attempt {attempt_id}")


def job_attempts(row: JobRow) -> list[fw.JobAttempt]:
    """Every attempt of the job, oldest first."""
    status = row.status
    if status is None:
        return [_first_attempt(row)]
    return [fw.JobAttempt.from_dict(data) for data in (*status["history"], status["attempt"])]


def attempt_task(row: JobRow, attempt: fw.JobAttempt, role: str, index: int) -> fw.Task:
    task = attempt.tasks.get((role, index))
    if task is None:
        raise NoJobError(
            f"attempt {attempt.attempt_id} of job '{row.framework_name}' has no task "
            f"{role} #{index}"
        )
    return task


def _first_attempt(row: JobRow) -> fw.JobAttempt:
    """What a job the controller has not taken in yet is about to be: every task waiting."""
    created = row.submitted_at.timestamp()
    tasks = {
        (role, index): fw.Task(
            role, index, fw.AttemptState.CREATION_PENDING, [fw.TaskAttempt(0, created)]
        )
        for role, spec in row.spec["taskRoles"].items()
        for index in range(spec["instances"])
    }
    return fw.JobAttempt(0, created, tasks)


def event_info(framework_name: str, event: JobEvent) -> JobEventInfo:
    return _event(
        framework_name,
        str(event.id),
        event.type,
        event.reason,
        event.message,
        event.at,
        event.role,
        event.task_index,
    )


def submitted_event(row: JobRow) -> JobEventInfo:
    """The first event of every job, read from the job itself: every job has it, at the time
    it was submitted, so it is not stored once per job."""
    return _event(
        row.framework_name,
        f"{row.id}-submitted",
        "Normal",
        "Submitted",
        "job accepted; waiting for resources",
        row.submitted_at,
        None,
        None,
    )


def _event(
    framework_name: str,
    uid: str,
    kind: str,
    reason: str,
    message: str,
    at: datetime,
    role: str | None,
    index: int | None,
) -> JobEventInfo:
    if role is None or index is None:  # about the whole job
        pod, role, task_name, index = "", "", "", -1
    else:
        pod, task_name = pod_uid(framework_name, role, index), f"{role}-{index}"
    return JobEventInfo(
        uid=uid,
        frameworkName=framework_name,
        podUid=pod,
        taskroleName=role,
        taskName=task_name,
        taskIndex=index,
        type=kind,
        reason=reason,
        message=message,
        firstTimestamp=at,
        lastTimestamp=at,
        count=1,
        sourceComponent=EVENT_SOURCE,
        sourceHost=None,
    )


class JobView:
    """One job row, rendered attempt by attempt."""

    def __init__(
        self,
        row: JobRow,
        exit_spec: ExitSpec,
        log_url: LogUrl,
        node_states: Mapping[str, NodeState] | None = None,
        queue: QueuePlace | None = None,
    ) -> None:
        """`node_states`: the engine's word on nodes that are not fine, shown with the tasks
        that run on them; `queue`: where the job, waiting, stands in its VC's queue."""
        self.row = row
        self._queue = queue
        self._exit_spec = exit_spec
        self._log_url = log_url
        self._node_states = node_states or {}
        self._explained: dict[int, ExitSpecInfo] = {}

    def detail(self, attempt: fw.JobAttempt) -> JobDetail:
        return JobDetail(**self._detail_fields(attempt))

    def attempt_detail(self, attempt: fw.JobAttempt) -> JobAttemptDetail:
        row, fields = self.row, self._detail_fields(attempt)
        status: JobStatusInfo = fields["jobStatus"]
        spec = status.appExitSpec
        diagnostics = status.appExitDiagnostics or ""
        return JobAttemptDetail(
            **fields,
            isLatest=self._is_latest(attempt),
            jobName=row.name,
            uid=status.appId,
            userName=row.username,
            state=status.attemptState,
            originState=status.subState,
            attemptIndex=attempt.attempt_id,
            jobStartedTime=status.submissionTime,
            attemptStartedTime=status.appLaunchedTime,
            attemptCompletedTime=status.appCompletedTime,
            exitCode=status.appExitCode,
            exitPhrase=spec.phrase if spec else None,
            exitType=status.appExitType,
            exitDiagnostics=(
                ExitDiagnostics(diagnosticsSummary=diagnostics, runtime=None, launcher=diagnostics)
                if attempt.completion
                else None
            ),
            totalGpuNumber=row.total_gpus,
            totalTaskNumber=row.total_tasks,
            totalTaskRoleNumber=row.total_roles,
        )

    def task_attempts(self, attempt: fw.JobAttempt, task: fw.Task) -> TaskAttempts:
        first, current = task.attempts[0], task.current
        state = fw.task_shown_state(task)
        return TaskAttempts(
            taskIndex=task.index,
            taskUid=self._task_uid(attempt, task),
            taskState=state,
            retries=task.retry.total,
            accountableRetries=task.retry.accountable,
            createdTime=_seconds_ms(first.created_at),
            launchedTime=_seconds_ms(first.running_at),
            completedTime=_seconds_ms(current.completed_at),
            username=self.row.username,
            jobName=self.row.name,
            jobAttemptId=attempt.attempt_id,
            taskRoleName=task.role,
            taskRole=task.role,
            attempts=[
                self._task_attempt_info(attempt, task, task_attempt)
                for task_attempt in task.attempts
            ],
        )

    # -- internals --------------------------------------------------------------------------------

    def _is_latest(self, attempt: fw.JobAttempt) -> bool:
        status = self.row.status
        return status is None or attempt.attempt_id == status["attempt"]["attemptId"]

    def _detail_fields(self, attempt: fw.JobAttempt) -> dict[str, Any]:
        row = self.row
        roles: dict[str, list[TaskStatusInfo]] = {}
        for task in attempt.tasks.values():
            roles.setdefault(task.role, []).append(self._task_status(attempt, task))
        return {
            "debugId": debug_id(row.framework_name),
            "name": row.name,
            "tags": [tag.tag for tag in row.tags],
            "jobPriority": row.priority_class,
            "frameworkName": row.framework_name,
            "jobStatus": self._job_status(attempt),
            "taskRoles": {
                role: TaskRoleInfo(
                    taskRoleStatus=TaskRoleName(name=role),
                    taskStatuses=sorted(tasks, key=lambda task: task.taskIndex),
                )
                for role, tasks in roles.items()
            },
        }

    def _job_status(self, attempt: fw.JobAttempt) -> JobStatusInfo:
        row, status = self.row, self.row.status or {}
        latest = self._is_latest(attempt)
        completion = attempt.completion
        outcome = _outcome(completion)
        if latest:
            state, sub_state = row.state, row.sub_state
            attempt_state = outcome if completion and not _attempt_running(status) else state
        else:
            state = attempt_state = outcome
            sub_state = fw.AttemptState.ATTEMPT_COMPLETED.value
        trigger = attempt.trigger
        trigger_task = attempt.tasks.get(trigger) if trigger else None
        wait_reason = row.wait_reason if latest and row.state == "WAITING" else None
        return JobStatusInfo(
            username=row.username,
            state=state,
            subState=sub_state,
            executionType=row.execution_type,
            retries=row.retries,
            retryDetails=retry_details(status.get("retry")),
            retryDelayTime=(
                retry_delay(status.get("retryAt"), attempt.completed_at) if latest else None
            ),
            createdTime=epoch_ms(row.submitted_at),
            launchedTime=_ms(row.launched_at),
            completedTime=_ms(row.completed_at),
            submissionTime=epoch_ms(row.submitted_at),
            attemptId=attempt.attempt_id,
            attemptState=attempt_state,
            appId=f"j{row.id}-a{attempt.attempt_id}",
            appProgress=None,
            appCreatedTime=_seconds_ms(attempt.created_at),
            appLaunchedTime=_seconds_ms(attempt.running_at),
            appCompletedTime=_seconds_ms(attempt.completed_at),
            appExitCode=completion.code if completion else None,
            appExitSpec=self._explain(completion.code) if completion else None,
            appExitDiagnostics=completion.diagnostics or None if completion else None,
            appExitMessages=(
                AppExitMessages(
                    container=_diagnostics(trigger_task),
                    runtime=None,
                    launcher=completion.diagnostics or None,
                )
                if completion
                else None
            ),
            appExitTriggerMessage=(
                f"the completion policy was met when task {trigger[0]} #{trigger[1]} ended"
                if trigger
                else None
            ),
            appExitTriggerTaskRoleName=trigger[0] if trigger else None,
            appExitTriggerTaskIndex=trigger[1] if trigger else None,
            appExitType=completion.failure_type if completion else None,
            virtualCluster=row.virtual_cluster,
            waitReason=self._wait_reason(wait_reason) if wait_reason else None,
        )

    def _wait_reason(self, stored: dict[str, Any]) -> WaitReasonInfo:
        reason = WaitReasonInfo(**stored)
        if self._queue is None:
            return reason
        return reason.model_copy(
            update={
                "message": f"{reason.message} {self._queue.sentence}",
                "queuePosition": self._queue.position,
                "queueLength": self._queue.waiting,
            }
        )

    def _task_status(self, attempt: fw.JobAttempt, task: fw.Task) -> TaskStatusInfo:
        current = task.current
        where = current.placement
        completion = current.completion
        state = fw.task_shown_state(task)
        created = _seconds_ms(current.created_at)
        launched = _seconds_ms(current.running_at)
        completed = _seconds_ms(current.completed_at)
        return TaskStatusInfo(
            taskIndex=task.index,
            taskUid=self._task_uid(attempt, task),
            taskState=state,
            containerId=where["key"] if where else None,
            containerIp=where["address"] if where else None,
            containerNodeName=where["node"] if where else None,
            containerPorts=_ports(where),
            containerGpus=_gpus(where),
            containerGpuFraction=_gpu_fraction(where),
            containerLog=self._logs(attempt, task, current) or "",
            containerExitCode=completion.code if completion else None,
            containerExitSpec=self._explain(completion.code) if completion else None,
            containerExitDiagnostics=completion.diagnostics or None if completion else None,
            retries=task.retry.total,
            accountableRetries=task.retry.accountable,
            createdTime=created,
            launchedTime=launched,
            completedTime=completed,
            attemptId=current.attempt_id,
            attemptState=state,
            currentAttemptCreatedTime=created,
            currentAttemptLaunchedTime=launched,
            currentAttemptCompletedTime=completed,
            dockerImage=where.get("dockerImage") if where else None,
            isolation=where.get("isolation") if where else None,
            preparing=where.get("preparing") if where else None,
            nodeProblem=self._node_problem(where, completion),
        )

    def _node_problem(
        self, where: Mapping[str, Any] | None, completion: object | None
    ) -> str | None:
        if where is None or completion is not None:
            return None
        state = self._node_states.get(str(where["node"]))
        if state is None or state.condition is NodeCondition.ALIVE:
            return None
        return state.message or state.condition.value

    def _task_attempt_info(
        self, attempt: fw.JobAttempt, task: fw.Task, task_attempt: fw.TaskAttempt
    ) -> TaskAttemptInfo:
        where = task_attempt.placement
        completion = task_attempt.completion
        current = task_attempt is task.current
        state = fw.task_shown_state(task) if current else _outcome(completion)
        created = _seconds_ms(task_attempt.created_at)
        launched = _seconds_ms(task_attempt.running_at)
        completed = _seconds_ms(task_attempt.completed_at)
        logs = self._logs(attempt, task, task_attempt)
        return TaskAttemptInfo(
            attemptId=task_attempt.attempt_id,
            attemptState=state,
            containerId=where["key"] if where else None,
            containerIp=where["address"] if where else None,
            containerNodeName=where["node"] if where else None,
            containerPorts=_ports(where),
            containerGpus=_gpus(where),
            containerGpuFraction=_gpu_fraction(where),
            containerExitCode=completion.code if completion else None,
            containerExitSpec=self._explain(completion.code) if completion else None,
            containerExitDiagnostics=completion.diagnostics or None if completion else None,
            createdTime=created,
            launchedTime=launched,
            completedTime=completed,
            currentAttemptCreatedTime=created,
            currentAttemptLaunchedTime=launched,
            currentAttemptCompletedTime=completed,
            containerLog=logs or "",
            logs=logs,
        )

    def _logs(
        self, attempt: fw.JobAttempt, task: fw.Task, task_attempt: fw.TaskAttempt
    ) -> str | None:
        if task_attempt.placement is None:
            return None
        return self._log_url(attempt.attempt_id, task.role, task.index, task_attempt.attempt_id)

    def _task_uid(self, attempt: fw.JobAttempt, task: fw.Task) -> str:
        return task_uid(self.row.framework_name, attempt.attempt_id, task.role, task.index)

    def _explain(self, code: int) -> ExitSpecInfo:
        explained = self._explained.get(code)
        if explained is None:
            record = self._exit_spec.describe(code)
            explained = ExitSpecInfo(**record.model_dump(mode="json", exclude={"pattern"}))
            self._explained[code] = explained
        return explained


def _attempt_running(status: Mapping[str, Any]) -> bool:
    """Whether the latest attempt is still going (a finished one awaiting a retry is not)."""
    return status.get("state") not in (
        fw.AttemptState.ATTEMPT_COMPLETED.value,
        fw.AttemptState.COMPLETED.value,
    )


def _outcome(completion: fw.CompletionStatus | None) -> str:
    """The state shown for an attempt that is over: SUCCEEDED, FAILED or STOPPED."""
    return fw.shown_state(fw.AttemptState.COMPLETED, completion.code if completion else None)


def _diagnostics(task: fw.Task | None) -> str | None:
    completion = task.current.completion if task is not None else None
    return completion.diagnostics or None if completion else None


def _ports(where: Mapping[str, Any] | None) -> dict[str, str]:
    if where is None:
        return {}
    return {label: ",".join(str(port) for port in ports) for label, ports in where["ports"].items()}


def _gpus(where: Mapping[str, Any] | None) -> str | None:
    gpus = where["gpus"] if where else []
    return ",".join(str(gpu) for gpu in gpus) or None


def _gpu_fraction(where: Mapping[str, Any] | None) -> float | None:
    """The share of its GPU a task sharing one was placed with (`gpuMilli` thousandths)."""
    milli = where.get("gpuMilli") if where else None
    return milli / GPU_MILLI if milli is not None else None


def _ms(moment: datetime | None) -> int | None:
    return epoch_ms(moment) if moment is not None else None


def _seconds_ms(seconds: float | None) -> int | None:
    return round(seconds * 1000) if seconds is not None else None
