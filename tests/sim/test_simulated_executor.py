"""The simulated executor: tasks run in virtual time, finish with exit 0 or end when killed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pai.executors.base import (
    ExecutorError,
    KillReason,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
    UnknownTaskError,
)
from pai.executors.simulated import SimulatedExecutor, VirtualClock


def launch(key: str, job: str = "job") -> TaskLaunch:
    return TaskLaunch(
        key=key,
        job=job,
        role="worker",
        index=0,
        job_attempt=0,
        task_attempt=0,
        node="node-0",
        address="127.0.0.1",
        script="",
        env={},
        working_dir=Path(),
        log_dir=Path(),
        gpus=(0, 1),
    )


def executor(run_times: dict[str, float]) -> tuple[VirtualClock, SimulatedExecutor]:
    clock = VirtualClock(100.0)
    return clock, SimulatedExecutor(clock, lambda task: run_times[task.job])


def test_a_task_starts_at_once_and_succeeds_after_its_run_time() -> None:
    clock, tasks = executor({"job": 30.0})
    tasks.launch(launch("t1"))

    [started] = tasks.events()
    assert (started.key, started.kind) == ("t1", TaskEventKind.STARTED)
    assert started.at == datetime.fromtimestamp(100.0, UTC)
    assert tasks.next_event_time() == 130.0
    clock.advance_to(129.0)
    assert tasks.events() == []

    clock.advance_to(130.0)
    [finished] = tasks.events()
    assert finished.kind is TaskEventKind.FINISHED
    assert finished.result is not None
    assert finished.result.exit_code == 0
    assert finished.result.started_at == datetime.fromtimestamp(100.0, UTC)
    assert finished.result.finished_at == datetime.fromtimestamp(130.0, UTC)
    assert tasks.next_event_time() is None


def test_a_killed_task_ends_now_with_the_reasons_code_and_never_finishes_later() -> None:
    clock, tasks = executor({"job": 30.0})
    tasks.launch(launch("t1"))
    tasks.events()
    clock.advance_to(110.0)

    tasks.kill("t1", KillReason.PREEMPTED)
    [killed] = tasks.events()
    assert killed.result is not None
    assert killed.result.exit_code == KillReason.PREEMPTED.exit_code
    assert killed.result.classification.phrase == "PodExternalDeleted"
    assert tasks.next_event_time() is None  # its planned finish is dropped

    tasks.kill("t1", KillReason.STOP_REQUESTED)  # already over: nothing happens
    assert tasks.events() == []


def test_recover_reports_every_task_and_unknown_keys_are_errors() -> None:
    clock, tasks = executor({"short": 5.0, "long": 50.0})
    tasks.launch(launch("s", job="short"))
    tasks.launch(launch("l", job="long"))
    clock.advance_to(105.0)
    tasks.events()

    phases = {status.key: status.phase for status in tasks.recover()}
    assert phases == {"s": TaskPhase.FINISHED, "l": TaskPhase.RUNNING}
    assert tasks.logs("s") == b""
    with pytest.raises(UnknownTaskError):
        tasks.kill("missing", KillReason.STOP_REQUESTED)
    with pytest.raises(ExecutorError, match="already launched"):
        tasks.launch(launch("s", job="short"))
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance_to(1.0)
