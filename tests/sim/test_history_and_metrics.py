"""PAI's job history as a trace, and the statistics that summarise a replay."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pai.sim.history import HistoryError, trace_from_jobs
from pai.sim.metrics import binned_average, percentile
from pai.sim.traces import read_trace_csv, write_trace_csv

T0 = 1_700_000_000_000  # milliseconds, as the jobs API gives times


def listed(
    name: str, submitted: int, launched: int | None, completed: int | None, **extra: object
) -> dict[str, object]:
    """A job as `GET /api/v2/jobs` lists it; times in ms after T0."""
    return {
        "name": name,
        "username": "alice",
        "virtualCluster": "vision",
        "state": "SUCCEEDED" if completed else "RUNNING",
        "submissionTime": T0 + submitted,
        "launchedTime": None if launched is None else T0 + launched,
        "completedTime": None if completed is None else T0 + completed,
        "totalGpuNumber": 2,
        **extra,
    }


def test_history_becomes_a_trace_on_a_clock_from_the_first_submission(tmp_path: Path) -> None:
    jobs = [
        listed("late", 90_000, 95_000, 155_000, username="bob", virtualCluster="nlp"),
        listed("first", 30_000, 40_000, 100_000, totalGpuNumber=8),
        listed("waiting", 50_000, None, None),
        listed("running", 60_000, 61_000, None),
        listed("cpu", 70_000, 71_000, 72_000, totalGpuNumber=0),
    ]
    trace = trace_from_jobs(jobs, source="job history of a test server")

    assert [job.job_id for job in trace] == ["alice~first", "bob~late"]
    first, late = trace.jobs
    assert (first.submit_time_s, first.duration_s, first.gpus) == (0.0, 60.0, 8)
    assert first.observed_queue_s == 10.0
    assert (late.vc, late.submit_time_s, late.duration_s) == ("nlp", 60.0, 60.0)
    assert trace.metadata["skipped"] == {"never started": 1, "no GPUs": 1, "not finished": 1}
    assert trace.metadata["source"] == "job history of a test server"

    written = write_trace_csv(trace, tmp_path / "history.csv")
    again = read_trace_csv(written)
    assert [(j.job_id, j.vc, j.submit_time_s, j.gpus, j.duration_s) for j in again] == [
        (j.job_id, j.vc, j.submit_time_s, j.gpus, j.duration_s) for j in trace
    ]


def test_a_malformed_listing_names_the_job_and_field() -> None:
    with pytest.raises(HistoryError, match=r"job 1 \(bad\).*'totalGpuNumber' must be a number"):
        trace_from_jobs([listed("ok", 0, 1, 2), listed("bad", 0, 1, 2, totalGpuNumber="two")])
    with pytest.raises(HistoryError, match="job 0 of the listing lacks"):
        trace_from_jobs([{"name": "x", "submissionTime": T0}])


def test_percentiles_interpolate_between_ranks() -> None:
    values = [0.0, 10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 0.5) == 20.0
    assert percentile(values, 0.95) == 38.0
    assert math.isnan(percentile([], 0.5))


def test_binned_average_of_a_step_function() -> None:
    # 1 GPU from 0 to 5, 3 GPUs from 5 to 10, none after: bins of 5 seconds.
    midpoints, averages = binned_average([0.0, 5.0, 10.0], [1.0, 3.0, 0.0], 0.0, 20.0, 4)

    assert midpoints == [2.5, 7.5, 12.5, 17.5]
    assert averages == [1.0, 3.0, 0.0, 0.0]
    _, halves = binned_average([0.0, 2.5], [2.0, 4.0], 0.0, 5.0, 1)
    assert halves == [3.0]
