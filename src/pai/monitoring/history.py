"""Usage samples in the store: written as they come, read back as series for charts, averaged
into coarser samples as they age, and dropped after the retention.

Raw samples (one every few seconds) are kept for `raw_window`; older ones are replaced by one
average per `bucket` (5 minutes) and per task, node or VC, so a week of a thousand tasks stays
a few million small rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select

from pai.store import Database
from pai.store.models import UsageSample

TASK, NODE, VC, CLUSTER = "task", "node", "vc", "cluster"
MEASURES = (
    "cpu_percent",
    "memory_bytes",
    "memory_limit_bytes",
    "read_bytes",
    "write_bytes",
    "gpu_percent",
    "gpu_memory_percent",
    "used",
    "total",
)
_IDENTITY = ("scope", "name", "role", "task_index", "node")


@dataclass(frozen=True)
class Retention:
    raw_window: timedelta = timedelta(hours=1)
    bucket: timedelta = timedelta(minutes=5)
    keep: timedelta = timedelta(days=7)


@dataclass(frozen=True)
class Point:
    at: datetime
    values: dict[str, float | None]


@dataclass(frozen=True)
class Series:
    """The samples of one task (`role`, `index`), node or VC, oldest first."""

    scope: str
    name: str
    role: str | None
    index: int | None
    node: str | None
    points: tuple[Point, ...]

    def values(self, measure: str) -> list[float]:
        return [value for point in self.points if (value := point.values[measure]) is not None]


class UsageHistory:
    def __init__(self, database: Database, retention: Retention | None = None) -> None:
        self._database = database
        self.retention = retention or Retention()

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        """Raw samples: dicts with `at`, the identity columns and any of MEASURES."""
        if not rows:
            return
        complete = [{**_EMPTY, **row} for row in rows]
        with self._database.session() as session:
            session.execute(insert(UsageSample), complete)

    def series(self, scope: str, name: str, *, since: datetime | None = None) -> list[Series]:
        """Every series of a job (one per task), of a node or of a VC."""
        query = select(UsageSample).where(UsageSample.scope == scope, UsageSample.name == name)
        if since is not None:
            query = query.where(UsageSample.at >= since)
        grouped: dict[tuple[Any, ...], list[Point]] = defaultdict(list)
        with self._database.reading() as session:
            for sample in session.scalars(query.order_by(UsageSample.at, UsageSample.id)):
                key = (sample.role, sample.task_index, sample.node)
                values = {measure: getattr(sample, measure) for measure in MEASURES}
                grouped[key].append(Point(sample.at, values))
        return [
            Series(scope, name, role, index, node, tuple(points))
            for (role, index, node), points in sorted(grouped.items(), key=_series_order)
        ]

    def compact(self, now: datetime) -> int:
        """Average the raw samples older than the raw window into buckets and drop what is
        older than the retention; the number of rows removed."""
        retention = self.retention
        bucket = int(retention.bucket.total_seconds())
        cutoff = now - retention.raw_window
        with self._database.session() as session:
            expired = session.execute(
                delete(UsageSample)
                .where(UsageSample.at < now - retention.keep)
                .returning(UsageSample.id)
            )
            dropped = len(expired.all())
            old = session.scalars(
                select(UsageSample).where(UsageSample.at < cutoff, UsageSample.resolution < bucket)
            ).all()
            averaged = _averages(old, bucket)
            if old:
                session.execute(delete(UsageSample).where(UsageSample.id.in_([s.id for s in old])))
            if averaged:
                session.execute(insert(UsageSample), averaged)
        return dropped + len(old) - len(averaged)


_EMPTY: dict[str, Any] = {
    "role": None,
    "task_index": None,
    "node": None,
    "resolution": 0,
    **dict.fromkeys(MEASURES),
}


def _averages(samples: Iterable[UsageSample], bucket: int) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[UsageSample]] = defaultdict(list)
    for sample in samples:
        start = int(sample.at.timestamp()) // bucket * bucket
        groups[(*(getattr(sample, column) for column in _IDENTITY), start)].append(sample)
    rows = []
    for (*identity, start), members in groups.items():
        row: dict[str, Any] = dict(zip(_IDENTITY, identity, strict=True))
        row["at"] = members[0].at.fromtimestamp(start + bucket / 2, members[0].at.tzinfo)
        row["resolution"] = bucket
        for measure in MEASURES:
            values = [v for member in members if (v := getattr(member, measure)) is not None]
            row[measure] = _mean(measure, values)
        rows.append(row)
    return rows


def _mean(measure: str, values: list[float]) -> float | int | None:
    if not values:
        return None
    average = sum(values) / len(values)
    return round(average) if measure.endswith("bytes") else average


def _series_order(item: tuple[tuple[Any, ...], list[Point]]) -> tuple[str, int, str]:
    role, index, node = item[0]
    return (role or "", index or 0, node or "")
