"""When a job counts as idle: every task's latest sample under 1 % CPU and GPU, idle since its
last busy sample (or its start)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pai.monitoring.history import Point, Series
from pai.monitoring.idleness import idle_since

START = datetime(2026, 1, 1, tzinfo=UTC)


def task(*cpu: float, gpu: float | None = None) -> Series:
    points = tuple(
        Point(START + timedelta(minutes=minute), {"cpu_percent": value, "gpu_percent": gpu})
        for minute, value in enumerate(cpu, start=1)
    )
    return Series("task", "alice~job", "main", 0, "node1", points)


def test_idle_since_the_last_busy_sample_of_any_task() -> None:
    assert idle_since([task(50, 0.2, 0.1), task(0, 30, 0, 0)], START) == START + timedelta(
        minutes=2
    )


def test_never_busy_means_idle_since_the_start() -> None:
    assert idle_since([task(0, 0.5)], START) == START


def test_a_task_working_now_makes_the_job_busy() -> None:
    assert idle_since([task(0, 0), task(0, 80)], START) is None
    assert idle_since([task(0, 0, gpu=90)], START) is None


def test_no_samples_yet_says_nothing() -> None:
    assert idle_since([], START) is None
    assert idle_since([task()], START) is None
