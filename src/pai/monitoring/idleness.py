"""How long a job has used neither CPU nor GPU, from its tasks' usage samples: the same
threshold as the shipped `PaiJobIdle` alert (under 1 %), so what `pai jobs --interactive`
calls idle is what that alert would fire on once it has held long enough."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pai.monitoring.history import Point, Series

BUSY_PERCENT = 1.0


def busy(point: Point) -> bool:
    return any(
        (point.values.get(measure) or 0.0) >= BUSY_PERCENT
        for measure in ("cpu_percent", "gpu_percent")
    )


def idle_since(series: Sequence[Series], started: datetime) -> datetime | None:
    """Since when every task of the job has been idle; None while the latest sample of some
    task shows work, or before any sample was taken."""
    latest = [each.points[-1] for each in series if each.points]
    if not latest or any(busy(point) for point in latest):
        return None
    moments = [point.at for each in series for point in each.points if busy(point)]
    return max([started, *moments])
