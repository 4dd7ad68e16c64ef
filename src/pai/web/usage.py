"""What the portal shows of resource use: a job's tasks over its life, the cluster's and a
VC's cells over the last day, and whether a job holds GPUs it does not use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from markupsafe import Markup

from pai.monitoring.history import CLUSTER, TASK, VC, Series, UsageHistory
from pai.web.charts import Line, line_chart

IDLE_WINDOW = timedelta(minutes=10)
IDLE_GPU_PERCENT = 1.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class JobUsage:
    charts: tuple[Markup, ...]
    idle_gpus: bool
    """The job's GPUs were measured over the last IDLE_WINDOW and none was used."""


def job_usage(history: UsageHistory, framework_name: str) -> JobUsage:
    tasks = history.series(TASK, framework_name)

    def lines(measure: str, scale: float = 1.0) -> list[Line]:
        return [
            Line(
                f"{task.role}/{task.index}",
                [
                    (point.at, value / scale)
                    for point in task.points
                    if (value := point.values[measure]) is not None
                ],
            )
            for task in tasks
        ]

    charts = [
        line_chart("CPU", lines("cpu_percent"), unit="% of a core"),
        line_chart("Memory", lines("memory_bytes", MIB), unit="MB"),
    ]
    if any(task.values("gpu_percent") for task in tasks):
        charts.append(line_chart("GPU", lines("gpu_percent"), unit="%", ceiling=100))
    return JobUsage(tuple(charts), _idle_gpus(tasks))


def _idle_gpus(tasks: list[Series]) -> bool:
    since = datetime.now(UTC) - IDLE_WINDOW
    recent = [
        value
        for task in tasks
        for point in task.points
        if point.at >= since and (value := point.values["gpu_percent"]) is not None
    ]
    started = min((task.points[0].at for task in tasks if task.points), default=None)
    measured_long_enough = started is not None and started <= since
    return bool(recent) and measured_long_enough and max(recent) < IDLE_GPU_PERCENT


def capacity_chart(history: UsageHistory, unit: str, vc: str | None = None) -> Markup:
    """The cells in use over the last day, against what there is (the cluster's, or a VC's
    guarantee)."""
    since = datetime.now(UTC) - timedelta(days=1)
    scope, name = (VC, vc) if vc is not None else (CLUSTER, CLUSTER)
    found = history.series(scope, name, since=since)
    points = found[0].points if found else ()
    used = [(point.at, point.values["used"] or 0.0) for point in points]
    total = [(point.at, point.values["total"] or 0.0) for point in points]
    whole = "guaranteed" if vc is not None else "in the cluster"
    return line_chart(
        "Use over the last day",
        [Line("in use", used), Line(whole, total, dashed=True)],
        unit=unit,
    )
