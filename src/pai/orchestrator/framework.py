"""The job and task state machines, retry and completion policies, as pure functions.

This follows FrameworkController's semantics (a job is a framework; each job attempt re-creates
all tasks; each task has its own attempts), so that OpenPAI users see the states, retry counts
and exit codes they know. Nothing here reads a clock or does I/O: the caller passes `now` and
carries out the returned actions, which is what lets the simulator replay traces through the very
same code the controller runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pai.runtime.classification import Behavior, Classification, ExitCode


class AttemptState(StrEnum):
    """FrameworkController's states, shared by jobs and tasks (an attempt is a try at running)."""

    CREATION_PENDING = "AttemptCreationPending"
    CREATION_REQUESTED = "AttemptCreationRequested"
    PREPARING = "AttemptPreparing"
    RUNNING = "AttemptRunning"
    DELETION_PENDING = "AttemptDeletionPending"
    DELETION_REQUESTED = "AttemptDeletionRequested"
    DELETING = "AttemptDeleting"
    ATTEMPT_COMPLETED = "AttemptCompleted"
    COMPLETED = "Completed"


class ExecutionType(StrEnum):
    START = "START"
    STOP = "STOP"


# Completion codes the platform itself issues (OpenPAI / FrameworkController numbering).
SUCCEEDED_CODE = int(ExitCode.SUCCEEDED)
STOP_REQUESTED_CODE = int(ExitCode.STOP_FRAMEWORK_REQUESTED)
ATTEMPT_COMPLETION_CODE = int(ExitCode.FRAMEWORK_ATTEMPT_COMPLETION)
PREEMPTED_CODE = int(ExitCode.POD_EXTERNAL_DELETED)
_STOPPED_CODES = frozenset({STOP_REQUESTED_CODE, ATTEMPT_COMPLETION_CODE})

# Task states in which a process may exist and must be killed or awaited.
_ALIVE_STATES = frozenset(
    {
        AttemptState.CREATION_REQUESTED,
        AttemptState.PREPARING,
        AttemptState.RUNNING,
        AttemptState.DELETION_PENDING,
        AttemptState.DELETION_REQUESTED,
        AttemptState.DELETING,
    }
)


@dataclass(frozen=True)
class CompletionStatus:
    """Why an attempt ended: the exit-spec code and what the retry policy needs to know."""

    code: int
    phrase: str
    behavior: Behavior = Behavior.UNKNOWN
    failure_type: str = "UNKNOWN_FAILURE"
    diagnostics: str = ""

    @classmethod
    def of(cls, classification: Classification) -> CompletionStatus:
        """The status of a task attempt the runtime classified."""
        return cls(
            code=classification.code,
            phrase=classification.phrase,
            behavior=classification.behavior,
            failure_type=classification.type.value,
            diagnostics="\n".join(classification.diagnostics),
        )

    @property
    def succeeded(self) -> bool:
        return self.code == SUCCEEDED_CODE

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "phrase": self.phrase,
            "behavior": self.behavior.value,
            "failureType": self.failure_type,
            "diagnostics": self.diagnostics,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompletionStatus:
        return cls(
            code=data["code"],
            phrase=data["phrase"],
            behavior=Behavior(data["behavior"]),
            failure_type=data["failureType"],
            diagnostics=data.get("diagnostics", ""),
        )


SUCCEEDED = CompletionStatus(SUCCEEDED_CODE, "Succeeded", Behavior.UNKNOWN, "USER_SUCCESS")
STOP_REQUESTED = CompletionStatus(
    STOP_REQUESTED_CODE, "StopFrameworkRequested", Behavior.PERMANENT, "USER_STOP"
)
ATTEMPT_COMPLETION = CompletionStatus(
    ATTEMPT_COMPLETION_CODE, "FrameworkAttemptCompletion", Behavior.PERMANENT, "USER_STOP"
)


def preempted(by: str) -> CompletionStatus:
    """The status of a task killed so that a higher-priority job can use its cells."""
    return CompletionStatus(
        PREEMPTED_CODE,
        "PodExternalDeleted",
        Behavior.TRANSIENT,
        "PLATFORM_FAILURE",
        f"preempted by {by}",
    )


# ---------------------------------------------------------------------------------------------
# Policies (derived once from the job spec)


@dataclass(frozen=True)
class RolePolicy:
    """Per-role completion and retry settings, already defaulted as OpenPAI does."""

    instances: int
    min_failed: int = 1
    min_succeeded: int = -1
    task_retry_count: int = 0


@dataclass(frozen=True)
class Backoff:
    """Delays before retries: of a failure caused by resource contention (TRANSIENT_CONFLICT),
    and of platform failures (TRANSIENT) once they keep coming."""

    min_seconds: float = 60.0
    max_seconds: float = 900.0
    transient_free_retries: int = 3
    transient_first_seconds: float = 2.0
    transient_max_seconds: float = 300.0

    def delay(self, conflicts_so_far: int) -> float:
        """Doubles with every conflict retry; deterministic so that replays are repeatable."""
        return min(self.max_seconds, self.min_seconds * (2**conflicts_so_far))

    def transient_delay(self, platform_retries_so_far: int) -> float:
        """A platform failure (a node lost, a port taken) is retried at once a few times; one
        that keeps coming (a registry out of reach) waits twice as long each time, so that the
        job does not spin through attempts, events and log folders."""
        beyond = platform_retries_so_far - self.transient_free_retries
        if beyond < 0:
            return 0.0
        return min(self.transient_max_seconds, self.transient_first_seconds * (2**beyond))


@dataclass(frozen=True)
class JobPolicy:
    roles: dict[str, RolePolicy]
    job_retry_count: int = 0
    gang_allocation: bool = True
    backoff: Backoff = field(default_factory=Backoff)


# ---------------------------------------------------------------------------------------------
# State


TaskKey = tuple[str, int]


@dataclass
class RetryStatus:
    """Retries so far: `total` counts all, `accountable` only those charged to the user's limit."""

    total: int = 0
    accountable: int = 0
    platform: int = 0
    resource: int = 0
    conflicts: int = 0

    def record(self, behavior: Behavior, accountable: bool) -> None:
        self.total += 1
        if accountable:
            self.accountable += 1
        elif behavior is Behavior.TRANSIENT_CONFLICT:
            self.resource += 1
        else:
            self.platform += 1
        if behavior is Behavior.TRANSIENT_CONFLICT:
            self.conflicts += 1

    def to_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "accountable": self.accountable,
            "platform": self.platform,
            "resource": self.resource,
            "conflicts": self.conflicts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> RetryStatus:
        return cls(**data)


@dataclass
class TaskAttempt:
    """One try at running one task; kept for the retry history."""

    attempt_id: int
    created_at: float
    launched_at: float | None = None
    running_at: float | None = None
    completed_at: float | None = None
    completion: CompletionStatus | None = None
    placement: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attemptId": self.attempt_id,
            "createdAt": self.created_at,
            "launchedAt": self.launched_at,
            "runningAt": self.running_at,
            "completedAt": self.completed_at,
            "completion": self.completion.to_dict() if self.completion else None,
            "placement": self.placement,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskAttempt:
        completion = data.get("completion")
        return cls(
            attempt_id=data["attemptId"],
            created_at=data["createdAt"],
            launched_at=data.get("launchedAt"),
            running_at=data.get("runningAt"),
            completed_at=data.get("completedAt"),
            completion=CompletionStatus.from_dict(completion) if completion else None,
            placement=data.get("placement"),
        )


@dataclass
class Task:
    role: str
    index: int
    state: AttemptState
    attempts: list[TaskAttempt]
    retry: RetryStatus = field(default_factory=RetryStatus)
    kill_status: CompletionStatus | None = None
    retry_at: float | None = None

    @property
    def key(self) -> TaskKey:
        return (self.role, self.index)

    @property
    def current(self) -> TaskAttempt:
        return self.attempts[-1]

    @property
    def alive(self) -> bool:
        return self.state in _ALIVE_STATES

    @property
    def completion(self) -> CompletionStatus | None:
        return self.current.completion if self.state is AttemptState.COMPLETED else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "index": self.index,
            "state": self.state.value,
            "attempts": [a.to_dict() for a in self.attempts],
            "retry": self.retry.to_dict(),
            "killStatus": self.kill_status.to_dict() if self.kill_status else None,
            "retryAt": self.retry_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        kill = data.get("killStatus")
        return cls(
            role=data["role"],
            index=data["index"],
            state=AttemptState(data["state"]),
            attempts=[TaskAttempt.from_dict(a) for a in data["attempts"]],
            retry=RetryStatus.from_dict(data["retry"]),
            kill_status=CompletionStatus.from_dict(kill) if kill else None,
            retry_at=data.get("retryAt"),
        )


@dataclass
class JobAttempt:
    """One try at running the whole job: every task is created anew for it."""

    attempt_id: int
    created_at: float
    tasks: dict[TaskKey, Task]
    running_at: float | None = None
    completed_at: float | None = None
    completion: CompletionStatus | None = None
    trigger: TaskKey | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attemptId": self.attempt_id,
            "createdAt": self.created_at,
            "runningAt": self.running_at,
            "completedAt": self.completed_at,
            "completion": self.completion.to_dict() if self.completion else None,
            "trigger": list(self.trigger) if self.trigger else None,
            "tasks": [t.to_dict() for t in self.tasks.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobAttempt:
        tasks = [Task.from_dict(t) for t in data["tasks"]]
        completion = data.get("completion")
        trigger = data.get("trigger")
        return cls(
            attempt_id=data["attemptId"],
            created_at=data["createdAt"],
            tasks={t.key: t for t in tasks},
            running_at=data.get("runningAt"),
            completed_at=data.get("completedAt"),
            completion=CompletionStatus.from_dict(completion) if completion else None,
            trigger=(trigger[0], trigger[1]) if trigger else None,
        )


@dataclass
class Job:
    """The whole state of one job, as the controller persists it."""

    policy: JobPolicy
    state: AttemptState
    execution: ExecutionType
    attempt: JobAttempt
    history: list[JobAttempt] = field(default_factory=list)
    retry: RetryStatus = field(default_factory=RetryStatus)
    retry_at: float | None = None

    @property
    def tasks(self) -> dict[TaskKey, Task]:
        return self.attempt.tasks

    @property
    def finished(self) -> bool:
        return self.state is AttemptState.COMPLETED

    @property
    def completing(self) -> bool:
        """The current attempt's outcome is decided; only the clean-up remains."""
        return self.attempt.completion is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "execution": self.execution.value,
            "attempt": self.attempt.to_dict(),
            "history": [a.to_dict() for a in self.history],
            "retry": self.retry.to_dict(),
            "retryAt": self.retry_at,
        }

    @classmethod
    def from_dict(cls, policy: JobPolicy, data: dict[str, Any]) -> Job:
        return cls(
            policy=policy,
            state=AttemptState(data["state"]),
            execution=ExecutionType(data["execution"]),
            attempt=JobAttempt.from_dict(data["attempt"]),
            history=[JobAttempt.from_dict(a) for a in data["history"]],
            retry=RetryStatus.from_dict(data["retry"]),
            retry_at=data.get("retryAt"),
        )


# ---------------------------------------------------------------------------------------------
# Actions the caller carries out


@dataclass(frozen=True)
class RequestPlacement:
    """These tasks need cells; the controller queues them for the scheduler."""

    tasks: tuple[TaskKey, ...]


@dataclass(frozen=True)
class CancelPlacement:
    """These tasks no longer need cells (they were waiting when their attempt ended)."""

    tasks: tuple[TaskKey, ...]


@dataclass(frozen=True)
class Launch:
    task: TaskKey
    attempt_id: int


@dataclass(frozen=True)
class Kill:
    task: TaskKey
    attempt_id: int
    status: CompletionStatus


@dataclass(frozen=True)
class TaskEnded:
    """A task attempt is over (its process is gone): its cells and ports may be released."""

    task: TaskKey
    attempt_id: int


@dataclass(frozen=True)
class AttemptEnded:
    """A job attempt is over; `retrying` says whether a new one follows."""

    attempt_id: int
    completion: CompletionStatus
    retrying: bool


Action = RequestPlacement | CancelPlacement | Launch | Kill | TaskEnded | AttemptEnded


# ---------------------------------------------------------------------------------------------
# Transitions


def new_job(policy: JobPolicy, now: float) -> tuple[Job, list[Action]]:
    """A freshly submitted job: its first attempt waits for placement."""
    attempt = _new_attempt(policy, 0, now)
    job = Job(policy, AttemptState.CREATION_PENDING, ExecutionType.START, attempt)
    return job, [RequestPlacement(tuple(attempt.tasks))]


def on_placed(job: Job, tasks: Iterable[TaskKey], now: float) -> list[Action]:
    """The scheduler bound these tasks to cells: launch them."""
    actions: list[Action] = []
    for key in tasks:
        task = job.tasks[key]
        if task.state is not AttemptState.CREATION_PENDING or job.completing:
            continue
        task.state = AttemptState.CREATION_REQUESTED
        task.current.launched_at = now
        task.retry_at = None
        actions.append(Launch(key, task.current.attempt_id))
    if actions and job.state is AttemptState.CREATION_PENDING:
        job.state = AttemptState.CREATION_REQUESTED
    return actions


def on_task_running(job: Job, key: TaskKey, attempt_id: int, now: float) -> list[Action]:
    """The task's process started."""
    task = job.tasks.get(key)
    if task is None or task.current.attempt_id != attempt_id:
        return []
    if task.state in (AttemptState.CREATION_REQUESTED, AttemptState.PREPARING):
        task.state = AttemptState.RUNNING
        task.current.running_at = now
    if job.state in (AttemptState.CREATION_REQUESTED, AttemptState.PREPARING):
        job.state = AttemptState.RUNNING
        job.attempt.running_at = now
    return []


def on_task_exited(
    job: Job, key: TaskKey, attempt_id: int, status: CompletionStatus, now: float
) -> list[Action]:
    """A task's process ended with `status` (already classified by the exit spec).

    When the platform asked for the kill, the reason it gave (stop, attempt completion,
    preemption) is the task's status, whatever the process's exit code was.
    """
    task = job.tasks.get(key)
    if task is None or task.current.attempt_id != attempt_id or not task.alive:
        return []
    if task.kill_status is not None:
        status = _with_diagnostics(task.kill_status, status.diagnostics)
    task.current.completion = status
    task.current.completed_at = now
    task.kill_status = None
    actions: list[Action] = [TaskEnded(key, attempt_id)]

    retry_delay = None if job.completing else _task_retry_delay(job, task, status)
    if retry_delay is not None:
        task.retry.record(status.behavior, _accountable(status))
        task.state = AttemptState.CREATION_PENDING
        task.attempts.append(TaskAttempt(task.current.attempt_id + 1, created_at=now))
        task.retry_at = now + retry_delay if retry_delay > 0 else None
        actions.append(RequestPlacement((key,)))
        return actions

    task.state = AttemptState.COMPLETED
    if not job.completing:
        outcome = _attempt_outcome(job, key)
        if outcome is not None:
            actions += _complete_attempt(job, outcome, key, now)
    actions += _finish_attempt_if_idle(job, now)
    return actions


def on_stop_requested(job: Job, now: float) -> list[Action]:
    """The user (or an alert) stopped the job: it ends STOPPED and is never retried."""
    if job.finished or job.execution is ExecutionType.STOP:
        return []
    job.execution = ExecutionType.STOP
    if job.state is AttemptState.ATTEMPT_COMPLETED:  # waiting out a retry back-off
        job.retry_at = None
        job.state = AttemptState.COMPLETED
        earlier = job.attempt.completion
        job.attempt.completion = _with_diagnostics(
            STOP_REQUESTED,
            f"stopped while waiting to retry after: {earlier.phrase}" if earlier else "",
        )
        return [AttemptEnded(job.attempt.attempt_id, job.attempt.completion, retrying=False)]
    if job.completing:  # already cleaning up; only prevent the retry
        return _finish_attempt_if_idle(job, now)
    actions = _complete_attempt(job, STOP_REQUESTED, None, now, kill_status=STOP_REQUESTED)
    return actions + _finish_attempt_if_idle(job, now)


def on_refused(job: Job, status: CompletionStatus, now: float) -> list[Action]:
    """The job can no longer run as written (e.g. the cluster changed under it): it fails now
    with a permanent `status`, killing whatever still runs."""
    if job.finished or job.completing:
        return []
    ending = _complete_attempt(job, status, None, now, kill_status=status)
    return ending + _finish_attempt_if_idle(job, now)


def on_preempted(job: Job, tasks: Iterable[TaskKey], by: str, now: float) -> list[Action]:
    """A higher-priority group needs these tasks' cells: kill them with a transient code.

    Under gang allocation the attempt fails and is retried without counting against the
    user's retries; otherwise each task retries on its own, also for free.
    """
    status = preempted(by)
    if job.policy.gang_allocation:
        if job.completing:
            return []
        ending = _complete_attempt(job, status, None, now, kill_status=status)
        return ending + _finish_attempt_if_idle(job, now)
    actions: list[Action] = []
    for key in tasks:
        task = job.tasks[key]
        if task.alive and task.kill_status is None:
            task.kill_status = status
            task.state = AttemptState.DELETION_REQUESTED
            actions.append(Kill(key, task.current.attempt_id, status))
    return actions


def on_tick(job: Job, now: float) -> list[Action]:
    """Time passed: start a retry whose back-off delay has elapsed."""
    actions: list[Action] = []
    if job.state is AttemptState.ATTEMPT_COMPLETED and job.retry_at is not None:
        if now >= job.retry_at:
            actions += _start_next_attempt(job, now)
        return actions
    due = [
        t.key
        for t in job.tasks.values()
        if t.state is AttemptState.CREATION_PENDING and t.retry_at is not None and now >= t.retry_at
    ]
    for key in due:
        job.tasks[key].retry_at = None
    if due:
        actions.append(RequestPlacement(tuple(due)))
    return actions


def next_wakeup(job: Job) -> float | None:
    """The earliest time at which `on_tick` has something to do."""
    times = [t.retry_at for t in job.tasks.values() if t.retry_at is not None]
    if job.retry_at is not None:
        times.append(job.retry_at)
    return min(times, default=None)


def tasks_awaiting_placement(job: Job) -> list[TaskKey]:
    """Tasks that wait for cells now (not those still in a retry back-off)."""
    if job.finished or job.completing or job.state is AttemptState.ATTEMPT_COMPLETED:
        return []
    return [
        t.key
        for t in job.tasks.values()
        if t.state is AttemptState.CREATION_PENDING and t.retry_at is None
    ]


# ---------------------------------------------------------------------------------------------
# Shown states (what OpenPAI's REST API reports)


def shown_state(state: AttemptState, code: int | None) -> str:
    """Map an internal state and exit code to WAITING/RUNNING/STOPPING/... as OpenPAI does."""
    if state in (
        AttemptState.CREATION_PENDING,
        AttemptState.CREATION_REQUESTED,
        AttemptState.PREPARING,
    ):
        return "WAITING"
    if state is AttemptState.RUNNING:
        return "RUNNING"
    if state in (
        AttemptState.DELETION_PENDING,
        AttemptState.DELETION_REQUESTED,
        AttemptState.DELETING,
        AttemptState.ATTEMPT_COMPLETED,
    ):
        return "STOPPING" if code in _STOPPED_CODES else "RUNNING"
    if state is AttemptState.COMPLETED:
        if code == SUCCEEDED_CODE:
            return "SUCCEEDED"
        return "STOPPED" if code in _STOPPED_CODES else "FAILED"
    return "UNKNOWN"


def job_shown_state(job: Job) -> str:
    completion = job.attempt.completion
    code = completion.code if completion else None
    if job.execution is ExecutionType.STOP and not job.finished:
        return "STOPPING"
    return shown_state(job.state, code)


def task_shown_state(task: Task) -> str:
    completion = task.current.completion
    if task.kill_status is not None and task.alive:
        return shown_state(AttemptState.DELETION_REQUESTED, task.kill_status.code)
    return shown_state(task.state, completion.code if completion else None)


# ---------------------------------------------------------------------------------------------
# Internals


def _new_attempt(policy: JobPolicy, attempt_id: int, now: float) -> JobAttempt:
    tasks = {
        (role, index): Task(role, index, AttemptState.CREATION_PENDING, [TaskAttempt(0, now)])
        for role, rp in policy.roles.items()
        for index in range(rp.instances)
    }
    return JobAttempt(attempt_id, now, tasks)


def _accountable(status: CompletionStatus) -> bool:
    return status.behavior not in (Behavior.TRANSIENT, Behavior.TRANSIENT_CONFLICT)


def _retry_delay(
    status: CompletionStatus, retry: RetryStatus, max_retries: int, backoff: Backoff
) -> float | None:
    """FrameworkController's fancy retry: seconds to wait before retrying, or None for no retry.

    Transient failures retry without counting (at once, then backing off when they repeat),
    permanent ones never, the rest count against `max_retries`. Success is never retried.
    """
    if status.succeeded or status.behavior is Behavior.PERMANENT:
        return None
    if status.behavior is Behavior.TRANSIENT:
        return backoff.transient_delay(retry.platform)
    if status.behavior is Behavior.TRANSIENT_CONFLICT:
        return backoff.delay(retry.conflicts)
    return 0.0 if retry.accountable < max_retries else None


def _task_retry_delay(job: Job, task: Task, status: CompletionStatus) -> float | None:
    """Tasks retry on their own only without gang allocation (OpenPAI disables it otherwise)."""
    if job.policy.gang_allocation or job.execution is ExecutionType.STOP:
        return None
    max_retries = job.policy.roles[task.role].task_retry_count
    return _retry_delay(status, task.retry, max_retries, job.policy.backoff)


def _attempt_outcome(job: Job, trigger: TaskKey) -> CompletionStatus | None:
    """The completion policy: has the attempt failed or succeeded now that `trigger` ended?"""
    trigger_task = job.tasks[trigger]
    role = job.policy.roles[trigger[0]]
    role_tasks = [t for t in job.tasks.values() if t.role == trigger[0]]
    status = trigger_task.completion
    assert status is not None
    if not status.succeeded and role.min_failed >= 1:
        failed = sum(1 for t in role_tasks if t.completion and not t.completion.succeeded)
        if failed >= role.min_failed:
            return status
    if status.succeeded and role.min_succeeded >= 1:
        succeeded = sum(1 for t in role_tasks if t.completion and t.completion.succeeded)
        if succeeded >= role.min_succeeded:
            return SUCCEEDED
    if all(t.state is AttemptState.COMPLETED for t in job.tasks.values()):
        return SUCCEEDED
    return None


def _complete_attempt(
    job: Job,
    outcome: CompletionStatus,
    trigger: TaskKey | None,
    now: float,
    kill_status: CompletionStatus = ATTEMPT_COMPLETION,
) -> list[Action]:
    """Decide the attempt's outcome; kill what still runs and drop what still waits."""
    job.attempt.completion = outcome
    job.attempt.trigger = trigger
    job.state = AttemptState.DELETION_PENDING
    actions: list[Action] = []
    waiting: list[TaskKey] = []
    for task in job.tasks.values():
        if task.state is AttemptState.CREATION_PENDING:
            task.state = AttemptState.COMPLETED
            task.current.completion = kill_status
            task.current.completed_at = now
            task.retry_at = None
            waiting.append(task.key)
        elif task.alive and task.kill_status is None:
            task.kill_status = kill_status
            task.state = AttemptState.DELETION_REQUESTED
            actions.append(Kill(task.key, task.current.attempt_id, kill_status))
    if waiting:
        actions.insert(0, CancelPlacement(tuple(waiting)))
    return actions


def _finish_attempt_if_idle(job: Job, now: float) -> list[Action]:
    """Once a decided attempt has no live task, retry the job or complete it."""
    if not job.completing or job.state in (
        AttemptState.ATTEMPT_COMPLETED,
        AttemptState.COMPLETED,
    ):
        return []
    if any(t.alive for t in job.tasks.values()):
        return []
    completion = job.attempt.completion
    assert completion is not None
    job.attempt.completed_at = now
    job.state = AttemptState.ATTEMPT_COMPLETED
    delay = None
    if job.execution is ExecutionType.START:
        delay = _retry_delay(completion, job.retry, job.policy.job_retry_count, job.policy.backoff)
    if delay is None:
        job.state = AttemptState.COMPLETED
        return [AttemptEnded(job.attempt.attempt_id, completion, retrying=False)]
    job.retry.record(completion.behavior, _accountable(completion))
    actions: list[Action] = [AttemptEnded(job.attempt.attempt_id, completion, retrying=True)]
    if delay > 0:
        job.retry_at = now + delay
        return actions
    return actions + _start_next_attempt(job, now)


def _start_next_attempt(job: Job, now: float) -> list[Action]:
    job.history.append(job.attempt)
    job.attempt = _new_attempt(job.policy, job.attempt.attempt_id + 1, now)
    job.state = AttemptState.CREATION_PENDING
    job.retry_at = None
    return [RequestPlacement(tuple(job.tasks))]


def _with_diagnostics(status: CompletionStatus, extra: str) -> CompletionStatus:
    if not extra:
        return status
    joined = f"{status.diagnostics}\n{extra}" if status.diagnostics else extra
    return CompletionStatus(
        status.code, status.phrase, status.behavior, status.failure_type, joined
    )


def all_attempts(job: Job) -> Iterator[JobAttempt]:
    """Every attempt of the job, oldest first, the current one last."""
    yield from job.history
    yield job.attempt
