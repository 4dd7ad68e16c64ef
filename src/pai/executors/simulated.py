"""An executor whose tasks run in virtual time: what `pai sim` replays traces with.

A launched task "starts" at once and "finishes" with exit code 0 after the run time its owner
gives it (`run_time`, e.g. the trace's duration), unless it is killed first, in which case it
ends at once with the kill reason's code. Nothing runs and nothing waits: the caller moves a
`VirtualClock` from one event to the next (`next_event_time`) and collects what happened with
`events()`, exactly as the controller polls a real executor.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from pai.executors.base import (
    ExecutorError,
    KillReason,
    LogStream,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
    TaskResult,
    TaskStatus,
    UnknownTaskError,
    check_task_key,
)
from pai.runtime.classification import Classification, ExitCode
from pai.runtime.exitspec import builtin_exit_spec

ISOLATION = "simulated"


class VirtualClock:
    """Seconds of simulated time; callable, so it can stand in for `time.time`."""

    __slots__ = ("now",)

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance_to(self, moment: float) -> None:
        if moment < self.now:
            raise ValueError(f"virtual time cannot go back from {self.now} to {moment}")
        self.now = moment


@dataclass(slots=True)
class _SimulatedTask:
    launch: TaskLaunch
    started_at: float
    finish_at: float
    result: TaskResult | None = None


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class SimulatedExecutor:
    """The `Executor` protocol over virtual time (see the module docstring).

    `run_time(task)` gives the seconds a task attempt runs before it exits with code 0.
    """

    def __init__(self, clock: VirtualClock, run_time: Callable[[TaskLaunch], float]) -> None:
        self.clock = clock
        self._run_time = run_time
        self._tasks: dict[str, _SimulatedTask] = {}
        self._finishing: list[tuple[float, int, str]] = []  # (finish time, order, key)
        self._order = itertools.count()
        self._due: list[TaskEvent] = []  # happened at the current time (starts, kills)
        spec = builtin_exit_spec()
        self._verdicts: dict[int, Classification] = {
            int(code): spec.for_code(int(code))
            for code in (ExitCode.SUCCEEDED, *(reason.value for reason in KillReason))
        }

    # -- the Executor protocol --------------------------------------------------------------------

    def isolation_on(self, node: str) -> str:
        return ISOLATION

    def launch(self, task: TaskLaunch) -> None:
        check_task_key(task.key)
        if task.key in self._tasks:
            raise ExecutorError(f"task {task.key} was already launched")
        run_time = self._run_time(task)
        if not run_time >= 0:
            raise ExecutorError(f"task {task.key}: run time must be >= 0 seconds, got {run_time}")
        now = self.clock.now
        finish_at = now + run_time
        self._tasks[task.key] = _SimulatedTask(task, now, finish_at)
        heapq.heappush(self._finishing, (finish_at, next(self._order), task.key))
        self._due.append(TaskEvent(task.key, TaskEventKind.STARTED, _moment(now)))

    def kill(self, key: str, reason: KillReason) -> None:
        task = self._task(key)
        if task.result is None:
            self._finish(task, self._verdicts[reason.exit_code], self.clock.now)

    def events(self) -> list[TaskEvent]:
        """Everything that happened up to the clock's current time, oldest first."""
        now = self.clock.now
        finishing = self._finishing
        while finishing and finishing[0][0] <= now:
            finish_at, _, key = heapq.heappop(finishing)
            task = self._tasks[key]
            if task.result is None and task.finish_at == finish_at:
                self._finish(task, self._verdicts[ExitCode.SUCCEEDED], finish_at)
        happened, self._due = self._due, []
        return happened

    def recover(self) -> list[TaskStatus]:
        """Every task this executor launched; virtual tasks cannot be lost."""
        return [
            TaskStatus(
                key=key,
                job=task.launch.job,
                role=task.launch.role,
                index=task.launch.index,
                job_attempt=task.launch.job_attempt,
                task_attempt=task.launch.task_attempt,
                node=task.launch.node,
                phase=TaskPhase.RUNNING if task.result is None else TaskPhase.FINISHED,
                started_at=_moment(task.started_at),
                result=task.result,
            )
            for key, task in self._tasks.items()
        ]

    def logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = None
    ) -> bytes:
        """Simulated tasks print nothing."""
        self._task(key)
        return b""

    def follow_logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = 0
    ) -> Iterator[bytes]:
        self._task(key)
        return iter(())

    # -- for the simulation loop ------------------------------------------------------------------

    def next_event_time(self) -> float | None:
        """When the next event happens: now if some are due, else the next finish, else None."""
        if self._due:
            return self.clock.now
        finishing = self._finishing
        while finishing:
            finish_at, _, key = finishing[0]
            task = self._tasks[key]
            if task.result is None and task.finish_at == finish_at:
                return finish_at
            heapq.heappop(finishing)  # the task was killed before it could finish
        return None

    def _task(self, key: str) -> _SimulatedTask:
        task = self._tasks.get(key)
        if task is None:
            raise UnknownTaskError(f"no simulated task {key!r} was launched")
        return task

    def _finish(self, task: _SimulatedTask, verdict: Classification, at: float) -> None:
        task.result = TaskResult(verdict, _moment(task.started_at), _moment(at), ISOLATION)
        self._due.append(
            TaskEvent(task.launch.key, TaskEventKind.FINISHED, _moment(at), task.result)
        )
