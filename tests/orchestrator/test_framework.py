"""The job state machine: retries, completion policies, stop and preemption, without any I/O."""

from __future__ import annotations

import pytest

from pai.orchestrator import framework as fw
from pai.orchestrator.framework import (
    AttemptState,
    Behavior,
    CompletionStatus,
    JobPolicy,
    RolePolicy,
)

SYNTAX_ERROR = CompletionStatus(231, "ContainerSyntaxError", Behavior.PERMANENT, "USER_FAILURE")
UNKNOWN_FAILURE = CompletionStatus(
    255, "PAIRuntimeUnknownFailed", Behavior.UNKNOWN, "UNKNOWN_FAILURE"
)
SIGKILL = CompletionStatus(137, "ContainerSigKillReceived", Behavior.TRANSIENT, "PLATFORM_FAILURE")
GANG_TIMEOUT = CompletionStatus(
    251, "JobGangAllocationTimeout", Behavior.TRANSIENT_CONFLICT, "RESOURCE_ALLOCATION_TIMEOUT"
)
SIGTERM = CompletionStatus(143, "ContainerSigTermReceived", Behavior.TRANSIENT, "PLATFORM_FAILURE")


def policy(roles: dict[str, RolePolicy] | None = None, **kwargs: object) -> JobPolicy:
    return JobPolicy(roles=roles or {"main": RolePolicy(instances=1, min_succeeded=1)}, **kwargs)  # type: ignore[arg-type]


def start(job_policy: JobPolicy) -> fw.Job:
    """Submit, place everything, see every task running."""
    job, actions = fw.new_job(job_policy, now=0)
    assert actions == [fw.RequestPlacement(tuple(job.tasks))]
    run_attempt(job)
    return job


def run_attempt(job: fw.Job, now: float = 1) -> None:
    launches = fw.on_placed(job, fw.tasks_awaiting_placement(job), now)
    assert {a.task for a in launches if isinstance(a, fw.Launch)} == set(job.tasks)
    for key, task in job.tasks.items():
        fw.on_task_running(job, key, task.current.attempt_id, now + 1)


def exit_task(job: fw.Job, key: tuple[str, int], status: CompletionStatus, now: float = 10):
    return fw.on_task_exited(job, key, job.tasks[key].current.attempt_id, status, now)


def test_single_task_success_ends_the_job_succeeded() -> None:
    job = start(policy())
    assert fw.job_shown_state(job) == "RUNNING"
    actions = exit_task(job, ("main", 0), fw.SUCCEEDED)
    assert fw.job_shown_state(job) == "SUCCEEDED"
    assert actions[-1] == fw.AttemptEnded(0, fw.SUCCEEDED, retrying=False)
    assert job.retry.total == 0


def test_permanent_failure_is_never_retried_even_with_retries_left() -> None:
    job = start(policy(job_retry_count=3))
    actions = exit_task(job, ("main", 0), SYNTAX_ERROR)
    assert fw.job_shown_state(job) == "FAILED"
    assert job.attempt.completion == SYNTAX_ERROR
    assert not any(isinstance(a, fw.RequestPlacement) for a in actions)
    assert job.retry.total == 0


def test_unknown_failure_uses_up_the_job_retry_count() -> None:
    job = start(policy(job_retry_count=2))
    attempts = 0
    while not job.finished:
        attempts += 1
        exit_task(job, ("main", 0), UNKNOWN_FAILURE)
        if not job.finished:
            assert fw.job_shown_state(job) == "WAITING"
            run_attempt(job)
    assert attempts == 3
    assert fw.job_shown_state(job) == "FAILED"
    assert (job.retry.total, job.retry.accountable) == (2, 2)
    assert [a.attempt_id for a in fw.all_attempts(job)] == [0, 1, 2]


def test_transient_failure_retries_without_counting() -> None:
    job = start(policy(job_retry_count=0))
    exit_task(job, ("main", 0), SIGKILL)
    assert job.attempt.attempt_id == 1
    assert job.state is AttemptState.CREATION_PENDING
    assert (job.retry.total, job.retry.accountable, job.retry.platform) == (1, 0, 1)
    run_attempt(job)
    exit_task(job, ("main", 0), fw.SUCCEEDED)
    assert fw.job_shown_state(job) == "SUCCEEDED"


def test_a_platform_failure_that_keeps_coming_backs_off() -> None:
    """A registry out of reach fails every attempt at once: after a few immediate retries the
    job waits, longer each time, instead of spinning through attempts."""
    job = start(policy(backoff=fw.Backoff(transient_first_seconds=2, transient_max_seconds=300)))
    now = 100.0
    waits = []
    for _ in range(12):
        exit_task(job, ("main", 0), SIGKILL, now=now)
        waits.append(0.0 if job.retry_at is None else job.retry_at - now)
        if job.retry_at is not None:
            assert fw.on_tick(job, job.retry_at - 0.1) == []
            now = job.retry_at
            assert fw.on_tick(job, now) == [fw.RequestPlacement((("main", 0),))]
        run_attempt(job, now=now)

    assert waits == [0, 0, 0, 2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert (job.retry.accountable, job.retry.platform) == (0, 12)  # still not charged


def test_resource_conflict_backs_off_before_retrying() -> None:
    job = start(policy(backoff=fw.Backoff(min_seconds=60, max_seconds=900)))
    actions = exit_task(job, ("main", 0), GANG_TIMEOUT, now=100)
    assert not any(isinstance(a, fw.RequestPlacement) for a in actions)
    assert job.retry_at == 160 and fw.next_wakeup(job) == 160
    assert fw.on_tick(job, 159) == []
    assert fw.on_tick(job, 160) == [fw.RequestPlacement((("main", 0),))]
    assert job.retry.resource == 1
    run_attempt(job, now=161)
    exit_task(job, ("main", 0), GANG_TIMEOUT, now=200)
    assert job.retry_at == 200 + 120  # doubled


def test_master_success_completes_the_job_and_stops_workers() -> None:
    roles = {
        "master": RolePolicy(instances=1, min_failed=1, min_succeeded=1),
        "worker": RolePolicy(instances=2, min_failed=1, min_succeeded=-1),
    }
    job = start(policy(roles))
    actions = exit_task(job, ("master", 0), fw.SUCCEEDED)
    kills = [a for a in actions if isinstance(a, fw.Kill)]
    assert {k.task for k in kills} == {("worker", 0), ("worker", 1)}
    assert all(k.status.code == fw.ATTEMPT_COMPLETION_CODE for k in kills)
    assert fw.job_shown_state(job) == "RUNNING"  # cleaning up, not yet done
    exit_task(job, ("worker", 0), SIGTERM)
    assert not job.finished
    exit_task(job, ("worker", 1), SIGTERM)
    assert fw.job_shown_state(job) == "SUCCEEDED"
    assert fw.task_shown_state(job.tasks[("worker", 0)]) == "STOPPED"
    assert job.tasks[("worker", 0)].completion.code == fw.ATTEMPT_COMPLETION_CODE  # type: ignore[union-attr]


def test_failure_of_a_role_that_tolerates_failures_does_not_end_the_job() -> None:
    roles = {"worker": RolePolicy(instances=2, min_failed=-1, min_succeeded=-1)}
    job = start(policy(roles))
    exit_task(job, ("worker", 0), UNKNOWN_FAILURE)
    assert fw.job_shown_state(job) == "RUNNING"
    exit_task(job, ("worker", 1), fw.SUCCEEDED)
    assert fw.job_shown_state(job) == "SUCCEEDED"


def test_first_failed_worker_fails_the_attempt_with_its_code() -> None:
    roles = {"worker": RolePolicy(instances=3, min_failed=1, min_succeeded=3)}
    job = start(policy(roles))
    exit_task(job, ("worker", 1), SYNTAX_ERROR)
    assert job.attempt.trigger == ("worker", 1)
    for index in (0, 2):
        exit_task(job, ("worker", index), SIGTERM)
    assert fw.job_shown_state(job) == "FAILED"
    assert job.attempt.completion is not None and job.attempt.completion.code == 231


def test_stop_while_running_kills_everything_and_ends_stopped() -> None:
    roles = {"worker": RolePolicy(instances=2, min_succeeded=2)}
    job = start(policy(roles, job_retry_count=5))
    actions = fw.on_stop_requested(job, now=5)
    assert {a.task for a in actions if isinstance(a, fw.Kill)} == {("worker", 0), ("worker", 1)}
    assert fw.job_shown_state(job) == "STOPPING"
    exit_task(job, ("worker", 0), SIGTERM)
    exit_task(job, ("worker", 1), SIGTERM)
    assert fw.job_shown_state(job) == "STOPPED"
    assert job.retry.total == 0
    assert fw.on_stop_requested(job, now=6) == []


def test_stop_while_waiting_cancels_placement() -> None:
    job, _ = fw.new_job(policy(), now=0)
    actions = fw.on_stop_requested(job, now=1)
    assert actions[0] == fw.CancelPlacement((("main", 0),))
    assert fw.job_shown_state(job) == "STOPPED"
    assert fw.tasks_awaiting_placement(job) == []


def test_stop_during_a_retry_back_off_ends_stopped() -> None:
    job = start(policy())
    exit_task(job, ("main", 0), GANG_TIMEOUT, now=100)
    assert job.state is AttemptState.ATTEMPT_COMPLETED
    fw.on_stop_requested(job, now=101)
    assert fw.job_shown_state(job) == "STOPPED"
    assert fw.next_wakeup(job) is None


def test_preempted_gang_job_is_retried_for_free() -> None:
    roles = {"worker": RolePolicy(instances=2, min_failed=-1, min_succeeded=-1)}
    job = start(policy(roles, job_retry_count=0))
    actions = fw.on_preempted(job, [("worker", 0), ("worker", 1)], by="alice~prod", now=5)
    assert all(a.status.code == fw.PREEMPTED_CODE for a in actions if isinstance(a, fw.Kill))
    exit_task(job, ("worker", 0), SIGTERM)
    actions = exit_task(job, ("worker", 1), SIGTERM)
    assert fw.RequestPlacement((("worker", 0), ("worker", 1))) in actions
    assert job.attempt.attempt_id == 1 and fw.job_shown_state(job) == "WAITING"
    assert (job.retry.accountable, job.retry.platform) == (0, 1)
    assert "alice~prod" in job.history[0].completion.diagnostics  # type: ignore[union-attr]


def test_without_gang_allocation_tasks_retry_on_their_own() -> None:
    roles = {"worker": RolePolicy(instances=2, min_failed=1, min_succeeded=-1, task_retry_count=1)}
    job = start(policy(roles, gang_allocation=False))
    actions = exit_task(job, ("worker", 0), UNKNOWN_FAILURE)
    assert fw.RequestPlacement((("worker", 0),)) in actions
    task = job.tasks[("worker", 0)]
    assert task.current.attempt_id == 1 and task.retry.accountable == 1
    assert job.attempt.attempt_id == 0 and fw.job_shown_state(job) == "RUNNING"
    fw.on_placed(job, [("worker", 0)], now=11)
    fw.on_task_running(job, ("worker", 0), 1, now=12)
    exit_task(job, ("worker", 0), UNKNOWN_FAILURE, now=20)  # retries used up: the attempt fails
    assert job.attempt.completion is not None and job.attempt.completion.code == 255
    exit_task(job, ("worker", 1), SIGTERM, now=21)
    assert fw.job_shown_state(job) == "FAILED"
    assert [a.attempt_id for a in task.attempts] == [0, 1]


def test_without_gang_allocation_a_preempted_task_retries_alone() -> None:
    roles = {"worker": RolePolicy(instances=2, min_succeeded=-1)}
    job = start(policy(roles, gang_allocation=False))
    fw.on_preempted(job, [("worker", 1)], by="bob~urgent", now=5)
    actions = exit_task(job, ("worker", 1), SIGTERM)
    assert fw.RequestPlacement((("worker", 1),)) in actions
    assert job.tasks[("worker", 1)].retry.platform == 1
    assert job.tasks[("worker", 0)].state is AttemptState.RUNNING


def test_events_for_an_old_attempt_are_ignored() -> None:
    job = start(policy(job_retry_count=1))
    exit_task(job, ("main", 0), UNKNOWN_FAILURE)
    assert fw.on_task_exited(job, ("main", 0), 0, fw.SUCCEEDED, now=20) == []
    assert job.attempt.attempt_id == 1 and not job.finished


def test_state_round_trips_through_its_dict_form() -> None:
    roles = {"worker": RolePolicy(instances=2, min_succeeded=-1, task_retry_count=2)}
    job_policy = policy(roles, gang_allocation=False)
    job = start(job_policy)
    exit_task(job, ("worker", 0), UNKNOWN_FAILURE)
    again = fw.Job.from_dict(job_policy, job.to_dict())
    assert again.to_dict() == job.to_dict()


@pytest.mark.parametrize(
    ("state", "code", "shown"),
    [
        (AttemptState.CREATION_PENDING, None, "WAITING"),
        (AttemptState.PREPARING, None, "WAITING"),
        (AttemptState.RUNNING, None, "RUNNING"),
        (AttemptState.DELETION_PENDING, -210, "STOPPING"),
        (AttemptState.ATTEMPT_COMPLETED, -220, "STOPPING"),
        (AttemptState.ATTEMPT_COMPLETED, 255, "RUNNING"),
        (AttemptState.COMPLETED, 0, "SUCCEEDED"),
        (AttemptState.COMPLETED, -210, "STOPPED"),
        (AttemptState.COMPLETED, 231, "FAILED"),
    ],
)
def test_shown_states_follow_openpai(state: AttemptState, code: int | None, shown: str) -> None:
    assert fw.shown_state(state, code) == shown


def test_a_refused_job_fails_at_once_without_retry() -> None:
    refused = CompletionStatus(
        -200, "PodCreationPermanentError", Behavior.PERMANENT, "USER_FAILURE"
    )
    job, _ = fw.new_job(policy(job_retry_count=3), now=0)
    actions = fw.on_refused(job, refused, now=1)
    assert actions[0] == fw.CancelPlacement((("main", 0),))
    assert fw.job_shown_state(job) == "FAILED"
    assert job.attempt.completion == refused
