"""What each kind of fault cost: its recovery time, and the work of the runs it killed, charged
to the latest fault that could have killed them."""

from __future__ import annotations

from pai.chaos.history import Fault, FinalJob, Record, Run, Submission
from pai.chaos.run import fault_costs, jobs_by_kind

HOSTS = {"w1": "10.201.0.2", "w2": "10.201.0.3", "w3": "10.201.0.4"}


def run(job: str, host: str, start: float, end: float, exit_code: int | None) -> Run:
    return Run(job, "main", 0, HOSTS[host], 0, 0, start, end, exit_code)


def submission(job: str, workload: str) -> Submission:
    expected = "STOPPED" if workload in ("stopped", "interactive") else "SUCCEEDED"
    return Submission(job, workload, expected, None, "sdk", 0.0, 0.1, True)


def test_a_killed_run_is_charged_to_the_latest_fault_that_could_have_killed_it() -> None:
    records: list[Record] = [
        Fault("host-loss", "w1", 10.0, 40.0),
        Fault("controller-kill", "controller", 9.5, 14.0),  # too short to have the runs fenced
        Fault("link-cut", "w2", 13.0, 50.0),
        Fault("api-kill", "api-1", 15.0, 17.0),  # kills no run
        submission("a~lost", "succeed"),
        submission("a~stopped", "stopped"),
        submission("a~interactive", "interactive"),
        run("a~lost", "w1", 5.0, 10.2, None),  # its host was lost: not the later link cut
        run("a~cut", "w2", 1.0, 20.0, None),  # the cut of its own host came last
        run("a~done", "w3", 1.0, 30.0, 0),  # ended by itself: no work lost
        run("a~stopped", "w3", 1.0, 30.0, None),  # stopped by its user: not a fault's doing
        run("a~interactive", "w3", 1.0, 30.0, None),
    ]

    costs = {cost.fault: cost for cost in fault_costs(records, HOSTS)}

    assert (costs["host-loss"].count, costs["host-loss"].mean_recovery) == (1, 30.0)
    assert (costs["host-loss"].runs_killed, costs["host-loss"].work_lost) == (1, 5.2)
    assert (costs["link-cut"].runs_killed, costs["link-cut"].work_lost) == (1, 19.0)
    assert (costs["controller-kill"].runs_killed, costs["controller-kill"].max_recovery) == (0, 4.5)
    assert costs["api-kill"].runs_killed == 0


def test_jobs_are_counted_by_kind_and_how_they_ended() -> None:

    records: list[Record] = [
        submission("a~one", "succeed"),
        submission("a~two", "succeed"),
        submission("a~three", "stopped"),
        FinalJob("a~one", "SUCCEEDED", 0, 0),
        FinalJob("a~three", "STOPPED", -210, 0),
    ]
    assert jobs_by_kind(records) == {
        "succeed": {"SUCCEEDED": 1, "ABSENT": 1},
        "stopped": {"STOPPED": 1},
    }
