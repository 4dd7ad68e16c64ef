"""The chaos checker on hand-made histories: a clean one passes, and each broken promise is
found and explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.chaos.checker import check
from pai.chaos.history import (
    Call,
    Fault,
    FinalJob,
    FinalTask,
    History,
    HistoryError,
    Record,
    Remnant,
    Run,
    Submission,
    read_history,
)

HOST_A, HOST_B = "10.201.0.2", "10.201.0.3"
UNKNOWN_FAILURE = 255
"""What PAI reports for a task that exited with a status its exit spec does not name (3)."""


def submission(job: str, state: str = "SUCCEEDED", **changes: object) -> Submission:
    fields: dict[str, object] = {
        "job": job,
        "workload": "succeed",
        "expected_state": state,
        "expected_exit_code": None,
        "via": "sdk",
        "start": 0.0,
        "end": 0.2,
        "accepted": True,
    }
    fields.update(changes)
    return Submission(**fields)  # type: ignore[arg-type]


def run(job: str, start: float, end: float, host: str = HOST_A, **changes: object) -> Run:
    fields: dict[str, object] = {
        "job": job,
        "role": "main",
        "index": 0,
        "host": host,
        "job_attempt": 0,
        "task_attempt": 0,
        "start": start,
        "end": end,
        "exit_code": 0,
    }
    fields.update(changes)
    return Run(**fields)  # type: ignore[arg-type]


def final(job: str, state: str = "SUCCEEDED", host: str = HOST_A, code: int | None = 0) -> FinalJob:
    return FinalJob(job, state, code, 0, (FinalTask("main", 0, state, host, code),))


def read(path: str, start: float, end: float, status: int | None = 200) -> Call:
    return Call("alice@api-1", "GET", path, start, end, status)


def clean_history() -> list[Record]:
    """A job that lost its host and ran again elsewhere after the first run had stopped, a job
    that failed as asked, a refused submission, a slow read while the store was away."""
    return [
        submission("moved"),
        submission("fails", "FAILED", workload="fail", expected_exit_code=UNKNOWN_FAILURE),
        submission("refused", accepted=False, detail="400 invalid"),
        Fault("host-loss", "w1", 2.0, 9.0),
        Fault("store-stop", "postgres", 20.0, 24.0),
        run("moved", 1.0, 2.0, exit_code=None),
        run("moved", 12.0, 15.0, host=HOST_B, job_attempt=1),
        run("fails", 3.0, 4.0, exit_code=3),
        read("/jobs", 21.0, 25.0),
        Call("alice@api-1", "POST", "/jobs", 21.0, 21.1, 503, retry_after="1"),
        read("/jobs/alice~moved", 30.0, 30.2),
        final("moved", host=HOST_B),
        final("fails", "FAILED", code=UNKNOWN_FAILURE),
    ]


def rules(records: list[Record]) -> list[str]:
    return [violation.rule for violation in check(records)]


def test_a_clean_history_passes() -> None:
    assert check(clean_history()) == []


def test_an_accepted_job_the_store_lacks_is_lost() -> None:
    records = [r for r in clean_history() if not (isinstance(r, FinalJob) and r.job == "moved")]
    [violation] = check(records)
    assert (violation.rule, violation.subject) == ("lost", "moved")


def test_a_job_that_ends_otherwise_than_its_kind_must_is_named_with_how_it_ended() -> None:
    records = [*clean_history()[:-1], final("fails", "SUCCEEDED")]
    # The store disagrees with the host too: its run exited with 3.
    violation, disagreement = check(records)
    assert (violation.rule, disagreement.rule) == ("wrong-end", "store-disagrees")
    assert "a fail job must end FAILED, it ended SUCCEEDED" in violation.explanation


def test_a_wrong_exit_code_and_a_job_that_did_not_end_are_found() -> None:
    records = [*clean_history()[:-2], final("moved", "RUNNING", host=HOST_B)]
    records.append(final("fails", "FAILED", code=137))
    assert sorted(rules(records)) == ["not-ended", "store-disagrees", "wrong-exit-code"]


def test_a_refused_submission_the_store_kept_and_a_job_nobody_submitted_are_found() -> None:
    records = [*clean_history(), final("refused", "SUCCEEDED"), final("ghost", "SUCCEEDED")]
    found = rules(records)
    assert "refused-but-kept" in found and "unsubmitted" in found


def test_a_job_recorded_twice_is_found() -> None:
    assert "recorded-twice" in rules(
        [*clean_history(), final("fails", "FAILED", code=UNKNOWN_FAILURE)]
    )


def test_an_unanswered_submission_may_or_may_not_have_arrived() -> None:
    records = [submission("unknown", accepted=None), submission("arrived", accepted=None)]
    records += [run("arrived", 1.0, 2.0), final("arrived")]
    assert check(records) == []


def test_two_runs_of_a_task_that_overlap_break_the_fencing_promise() -> None:
    records = [*clean_history(), run("moved", 14.5, 16.0, host=HOST_A, job_attempt=2)]
    violations = [v for v in check(records) if v.rule == "overlap"]
    assert [v.subject for v in violations] == ["moved main-0"]
    assert "started 0.50 s before attempt 1.0 on 10.201.0.3 had ended" in violations[0].explanation
    # Where to look: the faults from the earlier run's start on (the host loss came before).
    assert violations[0].explanation.endswith("; no fault meanwhile")
    records.append(Fault("link-cut", "w2", 13.0, 20.0))
    [overlap] = [v for v in check(records) if v.rule == "overlap"]
    assert overlap.explanation.endswith(
        "faults from the start of attempt 1.0 on 10.201.0.3 on: "
        "link-cut of w2 from +1.0 s to +8.0 s"
    )


def test_a_task_that_ran_again_after_succeeding_in_the_same_attempt_is_found() -> None:
    records = [*clean_history(), run("fails", 5.0, 6.0, exit_code=3, task_attempt=1)]
    assert rules(records) == []  # a failed task may run again
    records = [*clean_history(), run("moved", 16.0, 17.0, host=HOST_B, job_attempt=1)]
    assert "ran-after-success" in rules(records)


@pytest.mark.parametrize(
    ("status", "retry_after", "rule"),
    [
        (500, None, "server-error"),
        (502, None, "server-error"),
        (503, None, "no-retry-after"),
        (503, "1", "unavailable-with-store"),
    ],
)
def test_server_errors_and_unavailable_answers_without_retry_after_are_found(
    status: int, retry_after: str | None, rule: str
) -> None:
    call = Call("bob@api-2", "POST", "/jobs", 40.0, 40.1, status, retry_after=retry_after)
    [violation] = check([*clean_history(), call])
    assert (violation.rule, violation.subject) == (rule, "bob@api-2 POST /jobs")


def test_a_slow_read_while_the_store_is_there_is_found_but_not_an_unanswered_one() -> None:
    records = [*clean_history(), read("/jobs", 40.0, 41.5), read("/jobs", 50.0, 60.0, None)]
    [violation] = check(records)
    assert violation.rule == "slow-read"
    assert "answered in 1.50 s (limit 1 s)" in violation.explanation


def test_a_slow_read_just_after_the_store_came_back_is_forgiven() -> None:
    assert check([*clean_history(), read("/jobs", 25.0, 26.5)]) == []


def test_anything_left_on_a_host_after_its_job_ended_is_found() -> None:
    left = [
        Remnant(HOST_A, "process", "moved", "pid 4242: python3 task.py"),
        Remnant(HOST_B, "directory", None, "jobs/old~job"),
    ]
    violations = check([*clean_history(), *left])
    assert [v.rule for v in violations] == ["left-behind", "left-behind"]
    assert "job unknown to the store" in violations[1].explanation


def test_the_store_disagreeing_with_what_the_hosts_ran_is_found() -> None:
    records = [
        *clean_history()[:-2],
        final("moved", host=HOST_A),
        final("fails", "FAILED", code=UNKNOWN_FAILURE),
    ]
    records.append(final("never", "SUCCEEDED"))
    records.append(submission("never"))
    found = check(records)
    assert [v.rule for v in found] == ["store-disagrees", "ran-nowhere"]
    assert f"the store says host {HOST_A}, the last run was on {HOST_B}" in found[0].explanation


def test_a_store_success_whose_last_run_failed_disagrees() -> None:
    records = [*clean_history(), run("moved", 16.0, 17.0, host=HOST_B, job_attempt=2, exit_code=1)]
    [violation] = check(records)
    assert violation.rule == "store-disagrees" and "exited with 1" in violation.explanation


def test_a_history_round_trips_through_its_file_and_a_bad_line_is_named(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    for record in clean_history():
        history.add(record)
    assert history.records() == clean_history()
    with open(history.path, "a") as out:
        out.write('{"kind": "nonsense"}\n')
    with pytest.raises(HistoryError, match=r"history.jsonl:14: not a history record"):
        read_history(history.path)


def test_a_task_that_failed_to_start_needs_no_run() -> None:
    """Its start failed (-120, PodCreationTransientError: the host's disk was full) until its
    user stopped the job: no host ran it, and none had to."""
    never_started = FinalJob(
        "stopped", "STOPPED", -210, 4, (FinalTask("main", 0, "FAILED", HOST_A, -120),)
    )
    records = [*clean_history(), submission("stopped", "STOPPED"), never_started]
    assert check(records) == []
