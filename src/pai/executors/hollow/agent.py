"""`HollowAgent`: a node's agent that runs nothing, answering the calls a real agent answers.

It answers `info`, `set_exit_spec`, `launch`, `kill`, `poll(ack, wait)` and `recover` as the
Ray engine's agent does (`pai.executors.ray.agent`), with the same numbered, acknowledged
reports, so the control plane follows it exactly as a real node. A launched task is running at
once and ends as its plan says (`.plan`), or when it is stopped. Nothing here runs by itself: a
task's end and the fence are timers of the fleet (`.fleet`), so an idle hollow node costs
nothing. `poll` answers at once; the fleet holds a poll without news for up to its `wait`, and
answers it when the agent says it has news (`News`).

Fencing, as on a real node: once the control plane has not reached the agent for the node
timeout, its tasks stop as if stopped by the platform (`KillReason.FENCED`). The fleet arms that
check when the node goes silent, the only time the control plane stops reaching it.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pai import __version__
from pai.executors.agents.wire import AgentInfo, Item, LogChunk, Recovery, Report
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
)
from pai.executors.hollow.plan import TaskPlan, plan_of
from pai.executors.node.taskfiles import utc_now
from pai.runtime.classification import Classification
from pai.runtime.exitspec import ExitSpec, builtin_records, merge_records, parse_exit_spec

log = logging.getLogger(__name__)

ISOLATION = "hollow"
REPLY_ITEMS = 1000
"""The most report items one reply carries; the rest follow in the next ones."""

Schedule = Callable[[float, Callable[[], None]], None]
"""Run an action at a moment of `time.monotonic()` (the fleet's timers)."""
News = Callable[[str], None]
"""Tell the fleet that node `node` has something new to report."""


@functools.lru_cache(maxsize=8)
def exit_spec(text: str | None) -> ExitSpec:
    """The built-in exit spec with the administrator's additions `text` (shared by all nodes:
    thousands of hollow nodes parse it once)."""
    if text is None:
        return merge_records((), builtin_records(), "built-in exit spec")
    source = "the administrator's exit spec"
    return merge_records(parse_exit_spec(text, source), builtin_records(), source)


@dataclass(slots=True)
class _Task:
    launch: TaskLaunch
    plan: TaskPlan
    started_at: datetime
    result: TaskResult | None = None

    def status(self) -> TaskStatus:
        task = self.launch
        return TaskStatus(
            task.key,
            task.job,
            task.role,
            task.index,
            task.job_attempt,
            task.task_attempt,
            task.node,
            TaskPhase.RUNNING if self.result is None else TaskPhase.FINISHED,
            self.started_at,
            self.result,
            task.stop_grace_seconds,
        )


class HollowAgent:
    """The agent of one hollow node (see the module docstring)."""

    def __init__(self, node: str, schedule: Schedule, news: News, node_timeout: float) -> None:
        self._node = node
        self._schedule = schedule
        self._news = news
        self._node_timeout = node_timeout
        self._incarnation = uuid.uuid4().hex
        self._spec = exit_spec(None)
        self._tasks: dict[str, _Task] = {}  # running, and ended until the control plane knows
        self._outbox: list[tuple[int, Item]] = []
        self._last_number = 0
        self._last_contact = time.monotonic()

    @property
    def node(self) -> str:
        return self._node

    def info(self) -> AgentInfo:
        self._reached()
        return AgentInfo(self._node, self._incarnation, __version__, "", ISOLATION)

    def set_exit_spec(self, text: str | None) -> None:
        self._reached()
        self._spec = exit_spec(text)

    def launch(self, task: TaskLaunch) -> None:
        self._reached()
        if task.key in self._tasks:
            raise ExecutorError(f"task {task.key} was launched before")
        plan = plan_of(task.script)
        running = _Task(task, plan, utc_now())
        self._tasks[task.key] = running
        self._number(TaskEvent(task.key, TaskEventKind.STARTED, running.started_at))
        note = f"[pai] hollow node {self._node}: the task {plan.describe()}\n"
        self._number(LogChunk(task.key, LogStream.RUNTIME, note.encode()))
        if plan.seconds is not None:
            self._schedule(time.monotonic() + plan.seconds, lambda: self._ran_out(running))

    def kill(self, key: str, reason: KillReason) -> None:
        self._reached()
        task = self._tasks.get(key)
        if task is None:
            raise UnknownTaskError(f"no task attempt {key!r} runs on node {self._node}")
        self._stop(task, reason)

    def poll(self, ack: int, wait: float = 0.0) -> Report:
        """What happened since the last acknowledged reply (`ack`: its last number); a task
        whose end was acknowledged is forgotten. The fleet holds an empty reply for `wait`."""
        self._reached()
        kept = 0
        for number, item in self._outbox:
            if number > ack:
                break
            kept += 1
            if isinstance(item, TaskEvent) and item.kind is TaskEventKind.FINISHED:
                self._tasks.pop(item.key, None)
        del self._outbox[:kept]
        return Report(self._incarnation, tuple(self._outbox[:REPLY_ITEMS]))

    def recover(self, resume: dict[str, dict[str, int | None]]) -> Recovery:
        """Every task attempt of the node; those that ended are forgotten once reported."""
        self._reached()
        self._outbox.clear()
        statuses = tuple(task.status() for task in self._tasks.values())
        self._tasks = {key: task for key, task in self._tasks.items() if task.result is None}
        return Recovery(statuses, ())

    def watch_contact(self) -> None:
        """Fence the tasks once the control plane has been away for the node timeout, unless
        it reaches the agent before (the fleet calls this when the node goes silent)."""
        self._schedule(self._last_contact + self._node_timeout, self._check_contact)

    # -- internals --------------------------------------------------------------------------------

    def _check_contact(self) -> None:
        away = time.monotonic() - self._last_contact
        if away < self._node_timeout:
            return  # reached meanwhile
        running = [task for task in self._tasks.values() if task.result is None]
        if running:
            log.warning(
                "hollow node %s: no word from PAI's control plane for %.1f s (more than the "
                "node timeout, %g s): stopping its %d tasks, which PAI retries elsewhere",
                self._node,
                away,
                self._node_timeout,
                len(running),
            )
        for task in running:
            self._stop(task, KillReason.FENCED)

    def _ran_out(self, task: _Task) -> None:
        if task.result is None and self._tasks.get(task.launch.key) is task:
            code = task.plan.exit_code
            self._end(task, self._spec.classify(code), f"its command exited with {code}")

    def _stop(self, task: _Task, reason: KillReason) -> None:
        if task.result is None:
            message = f"stopped by the platform: {reason.name.lower().replace('_', ' ')}"
            classification = self._spec.for_code(reason.exit_code, diagnostics=(message,))
            self._end(task, classification, message)

    def _end(self, task: _Task, classification: Classification, why: str) -> None:
        """The task's end: why in its runtime log, then its result."""
        task.result = TaskResult(classification, task.started_at, utc_now(), ISOLATION)
        key = task.launch.key
        note = f"[pai] {why}; exit code {classification.code} ({classification.phrase})\n"
        self._number(LogChunk(key, LogStream.RUNTIME, note.encode()))
        self._number(TaskEvent(key, TaskEventKind.FINISHED, task.result.finished_at, task.result))

    def _reached(self) -> None:
        self._last_contact = time.monotonic()

    def _number(self, item: Item) -> None:
        self._last_number += 1
        self._outbox.append((self._last_number, item))
        self._news(self._node)
