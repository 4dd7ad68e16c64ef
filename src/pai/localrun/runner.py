"""One job driven to its end on this machine: the platform's state machine and launches, the
node's executor, and no scheduler (every task has its place already, `pai.localrun.plan`).

What differs from the controller: the job lives in memory only, a task that cannot be launched
here fails the run at once (the cluster would retry it elsewhere), and a stop comes from Ctrl-C.
"""

from __future__ import annotations

import getpass
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from pai.executors.base import KillReason, LogStream, TaskEventKind, TaskLaunch
from pai.executors.local import LocalExecutor
from pai.localrun.plan import RunPlan, label
from pai.localrun.relay import Relay
from pai.orchestrator import framework as fw
from pai.orchestrator.active import ActiveJob
from pai.orchestrator.launching import assign_ports, build_launch
from pai.orchestrator.policy import job_policy
from pai.runtime.classification import Classification, ExitCode
from pai.runtime.exitspec import ExitSpecSource
from pai.runtime.ports import DEFAULT_PORT_RANGE, PortAllocator

POLL_SECONDS = 0.1
PORTS_KEPT = 5000
"""The fewest ports of PAI's range a run may use."""
KILL_REASONS = {reason.exit_code: reason for reason in KillReason}

Prepare = Callable[[TaskLaunch], TaskLaunch]
"""What the run does to a launch before it starts (`--shell` replaces the commands)."""


@dataclass(frozen=True)
class Outcome:
    """How the job ended: its completion and, when a task's end decided it, that task and the
    task's classification (whose `origin_exit_code` is its process's status)."""

    completion: fw.CompletionStatus
    task: fw.TaskKey | None
    classification: Classification | None
    stopped: bool

    @property
    def exit_status(self) -> int:
        """What `pai run` exits with: 0 on success, 130 when stopped by Ctrl-C, else the failing
        task's own exit status (the job's PAI code when the task has none in 1..255)."""
        if self.completion.succeeded:
            return 0
        if self.stopped:
            return 130
        origin = self.classification.origin_exit_code if self.classification else None
        for code in (origin, self.completion.code):
            if code is not None and 0 < code < 256:
                return code
        return 1


def ending(classification: Classification) -> str:
    """`exit code 3, PAI code 255 (PAIRuntimeUnknownFailed)`, or `exit code 0 (Succeeded)`."""
    code, origin = classification.code, classification.origin_exit_code
    said = f"({classification.phrase})"
    if origin is None:
        return f"PAI code {code} {said}"
    if origin == code:
        return f"exit code {code} {said}"
    return f"exit code {origin}, PAI code {code} {said}"


def port_range() -> tuple[int, int]:
    """PAI's port range from a random place in it: runs started side by side (and a platform on
    the same machine) then seldom try the same ports first, so that tasks seldom lose a port
    to another run's task between its allocation and their binding it."""
    start, end = DEFAULT_PORT_RANGE
    return random.randrange(start, end - PORTS_KEPT), end


class LocalRun:
    """Runs `plan` with `executor` until the job ends; `stop()` (from a signal handler, say)
    stops it with every task's grace period, as `pai stop` would."""

    def __init__(
        self,
        plan: RunPlan,
        executor: LocalExecutor,
        relay: Relay,
        *,
        prepare: Prepare | None = None,
        exit_specs: ExitSpecSource | None = None,
    ) -> None:
        self._plan = plan
        self._executor = executor
        self._relay = relay
        self._prepare = prepare
        self._exit_specs = exit_specs or ExitSpecSource()
        self._ports = PortAllocator(*port_range())
        self._stop = threading.Event()
        self._keys: dict[str, tuple[fw.TaskKey, int]] = {}
        """Each launched key's task and the task's attempt."""
        self._key_of: dict[fw.TaskKey, str] = {}
        """The executor's key of each task's latest placed attempt (its actions name the task:
        by the time they are carried out, a new job attempt may have replaced the tasks)."""
        self._ends: dict[fw.TaskKey, Classification] = {}
        self.launched: list[TaskLaunch] = []
        machine, actions = fw.new_job(job_policy(plan.spec), time.monotonic())
        self._job = ActiveJob(
            id=1,
            username=getpass.getuser(),
            name=plan.spec.name,
            submitted_at=datetime.now(UTC),
            spec=plan.spec,
            machine=machine,
            groups=[],
        )
        self._first = actions

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> Outcome:
        machine = self._job.machine
        self._handle(self._first)
        stopping = False
        while not machine.finished:
            if self._stop.is_set() and not stopping:
                stopping = True
                self._relay.note(None, "stopping every task (each has its grace period)")
                self._handle(fw.on_stop_requested(machine, time.monotonic()))
            for event in self._executor.events():
                if event.key not in self._keys:
                    continue
                task, attempt = self._keys[event.key]
                if event.kind is TaskEventKind.PREPARING:
                    self._relay.note(label(task), event.message)
                elif event.kind is TaskEventKind.STARTED:
                    self._handle(fw.on_task_running(machine, task, attempt, time.monotonic()))
                elif event.result is not None:
                    self._ended(task, attempt, event.result.classification)
            self._handle(fw.on_tick(machine, time.monotonic()))
            if not machine.finished:
                time.sleep(POLL_SECONDS)
        self._relay.wait()
        completion = machine.attempt.completion or fw.SUCCEEDED
        trigger = machine.attempt.trigger
        return Outcome(completion, trigger, self._ends.get(trigger) if trigger else None, stopping)

    def _ended(self, task: fw.TaskKey, attempt: int, classification: Classification) -> None:
        machine = self._job.machine
        self._ends[task] = classification
        self._relay.note(label(task), f"ended: {ending(classification)}")
        completion = fw.CompletionStatus.of(classification)
        self._handle(fw.on_task_exited(machine, task, attempt, completion, time.monotonic()))

    def _handle(self, actions: Iterable[fw.Action]) -> None:
        machine = self._job.machine
        for action in actions:
            if isinstance(action, fw.RequestPlacement):
                self._place(action.tasks)
            elif isinstance(action, fw.Launch):
                self._launch(action.task)
            elif isinstance(action, fw.Kill):
                reason = KILL_REASONS.get(action.status.code, KillReason.ATTEMPT_COMPLETED)
                self._executor.kill(self._key_of[action.task], reason)
            elif isinstance(action, fw.TaskEnded):
                self._ports.release(self._key_of.pop(action.task))
            elif isinstance(action, fw.AttemptEnded) and action.retrying:
                self._relay.note(
                    None,
                    f"job attempt {action.attempt_id} ended with {action.completion.code} "
                    f"{action.completion.phrase}; retrying ({machine.retry.total} so far)",
                )

    def _place(self, tasks: tuple[fw.TaskKey, ...]) -> None:
        """Every task of the plan has its place; a new job attempt brings back the tasks that
        the plan leaves out (`--role/--index`), which are dropped again."""
        machine = self._job.machine
        for left_out in set(machine.tasks) - set(self._plan.pods):
            del machine.tasks[left_out]
        wanted = [task for task in tasks if task in self._plan.pods]
        pods = tuple(self._plan.pods[task] for task in wanted)
        placed = assign_ports(self._job, pods, self._ports, self._executor.isolation_on)
        for task, where in placed.items():
            machine.tasks[task].current.placement = where
            self._keys[where["key"]] = (task, machine.tasks[task].current.attempt_id)
            self._key_of[task] = where["key"]
        self._handle(fw.on_placed(machine, placed, time.monotonic()))

    def _launch(self, task: fw.TaskKey) -> None:
        executor = self._executor
        try:
            launch = build_launch(self._job, task, self._plan.secrets, executor.attempt_dir)
            if self._prepare is not None:
                launch = self._prepare(launch)
            executor.launch(launch)
        except Exception as error:  # any failure to start ends the task, saying why
            attempt = self._job.machine.tasks[task].current.attempt_id
            self._ended(task, attempt, self._launch_failure(error))
            return
        self.launched.append(launch)
        key = launch.key
        self._relay.follow(label(task), lambda: executor.follow_logs(key, LogStream.ALL, tail=None))

    def _launch_failure(self, error: Exception) -> Classification:
        message = f"cannot start here: {error}"
        return self._exit_specs.current().for_code(
            int(ExitCode.POD_CREATION_PERMANENT_ERROR), diagnostics=(message,)
        )
