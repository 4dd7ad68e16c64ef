"""Usage history in the store: series back in order, old samples averaged, expired ones gone;
and what the portal concludes from it (a job holding GPUs it does not use)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from pai.monitoring.history import CLUSTER, TASK, Retention, UsageHistory
from pai.store import Database
from pai.web.usage import job_usage

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def history(pai_database_url: str) -> Iterator[UsageHistory]:
    database = Database(pai_database_url)
    with database.exclusive() as connection:
        database.upgrade(connection)
    yield UsageHistory(
        database, Retention(timedelta(hours=1), timedelta(minutes=5), timedelta(days=7))
    )
    database.dispose()


def task_sample(
    at: datetime, index: int, cpu: float, gpu: float | None = None
) -> dict[str, object]:
    return {
        "at": at,
        "scope": TASK,
        "name": "alice~train",
        "role": "worker",
        "task_index": index,
        "node": "node1",
        "cpu_percent": cpu,
        "memory_bytes": 1000 * (index + 1),
        "gpu_percent": gpu,
    }


def test_a_jobs_samples_come_back_as_one_series_per_task(history: UsageHistory) -> None:
    history.write(
        [task_sample(NOW + timedelta(seconds=s), i, 10 * s) for s in range(3) for i in (1, 0)]
    )

    series = history.series(TASK, "alice~train")

    assert [(s.role, s.index, s.node) for s in series] == [
        ("worker", 0, "node1"),
        ("worker", 1, "node1"),
    ]
    assert series[0].values("cpu_percent") == [0, 10, 20]
    assert history.series(TASK, "bob~other") == []


def test_old_samples_are_averaged_per_bucket_and_expired_ones_dropped(
    history: UsageHistory,
) -> None:
    old = NOW - timedelta(hours=2)  # older than the raw window: averaged per 5 minutes
    history.write([task_sample(old + timedelta(seconds=10 * s), 0, float(s)) for s in range(6)])
    history.write([task_sample(NOW - timedelta(days=8), 0, 99.0)])  # past the retention
    history.write([task_sample(NOW - timedelta(minutes=1), 0, 7.0)])  # recent: kept as it is
    history.write([{"at": NOW, "scope": CLUSTER, "name": CLUSTER, "used": 3, "total": 8}])

    removed = history.compact(NOW)

    [series] = history.series(TASK, "alice~train")
    assert removed == 6  # six raw samples became one average; one expired
    assert series.values("cpu_percent") == [2.5, 7.0]
    assert [point.values["memory_bytes"] for point in series.points] == [1000, 1000]
    assert history.series(CLUSTER, CLUSTER)[0].values("used") == [3]


def test_a_job_that_holds_gpus_it_does_not_use_is_called_out(history: UsageHistory) -> None:
    now = datetime.now(UTC)
    history.write(
        [task_sample(now - timedelta(minutes=m), 0, 1.0, gpu=0.0) for m in range(15, -1, -1)]
    )
    assert job_usage(history, "alice~train").idle_gpus

    history.write([task_sample(now, 1, 50.0, gpu=85.0)])
    assert not job_usage(history, "alice~train").idle_gpus


def test_a_job_without_gpu_measurements_is_not_called_idle(history: UsageHistory) -> None:
    now = datetime.now(UTC)
    history.write([task_sample(now - timedelta(minutes=m), 0, 0.0) for m in range(15, -1, -1)])

    usage = job_usage(history, "alice~train")

    assert not usage.idle_gpus and len(usage.charts) == 2  # CPU and memory, no GPU chart
