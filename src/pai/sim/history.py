"""PAI's own job history as a trace: replay what a cluster really ran under other policies or on
another cluster file (what-if), from the jobs a server lists (`GET /api/v2/jobs`).

A job's run time is from its first launch to its completion (retries included) and its GPUs are
the job's total; jobs that never started, have not finished or use no GPU are skipped and
counted. Times are the API's milliseconds, put on a clock starting at the first submission.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pai.sdk import Client
from pai.sim.traces import Trace, TraceJob
from pai.sim.traces.building import shifted

FORMAT = "pai-history"
PAGE_SIZE = 5000


class HistoryError(ValueError):
    """A job of the listing lacks a field a trace needs, or has one of the wrong type."""


_NUMBER = (int, float)


def _field(item: Mapping[str, Any], position: int, key: str, kind: type | tuple[type, ...]) -> Any:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        wanted = "text" if kind is str else "a number"
        raise HistoryError(
            f"job {position} ({item.get('name', '?')}) of the listing: field {key!r} must be "
            f"{wanted}, got {value!r}"
        )
    return value


def trace_from_jobs(items: Iterable[Mapping[str, Any]], source: str = "PAI job history") -> Trace:
    """A trace of the jobs in a `GET /api/v2/jobs` listing (the JSON objects, camelCase)."""
    rows: list[tuple[float, TraceJob]] = []
    skipped: Counter[str] = Counter()
    for position, item in enumerate(items):
        submitted = _field(item, position, "submissionTime", _NUMBER)
        launched = _field(item, position, "launchedTime", _NUMBER)
        completed = _field(item, position, "completedTime", _NUMBER)
        gpus = _field(item, position, "totalGpuNumber", int) or 0
        vc = _field(item, position, "virtualCluster", str)
        user = _field(item, position, "username", str)
        name = _field(item, position, "name", str)
        if submitted is None or not vc or not name:
            raise HistoryError(
                f"job {position} of the listing lacks submissionTime, virtualCluster or name"
            )
        if launched is None:
            skipped["never started"] += 1
        elif completed is None:
            skipped["not finished"] += 1
        elif gpus < 1:
            skipped["no GPUs"] += 1
        elif completed < launched or launched < submitted:
            skipped["times out of order"] += 1
        else:
            job = TraceJob(
                job_id=f"{user}~{name}" if user else name,
                vc=vc,
                user=user,
                submit_time_s=submitted / 1000.0,
                gpus=gpus,
                duration_s=(completed - launched) / 1000.0,
                status=_field(item, position, "state", str),
                observed_queue_s=(launched - submitted) / 1000.0,
            )
            rows.append((job.submit_time_s, job))
    rows.sort(key=lambda row: row[0])
    origin = rows[0][0] if rows else 0.0
    jobs = tuple(shifted(job, -origin) for _, job in rows)
    started = datetime.fromtimestamp(origin, UTC).replace(tzinfo=None).isoformat(sep=" ")
    return Trace(
        "history",
        jobs,
        {
            "format": FORMAT,
            "source": source,
            "clock": {"alignment": "shared", "origin": started},
            "assumptions": [
                "run time is from the first launch to completion, retries included",
                "a job's GPUs are its total over all task roles, as one gang",
            ],
            "missing": [],
            "skipped": dict(sorted(skipped.items())),
        },
    )


def fetch_history(client: Client, page_size: int = PAGE_SIZE) -> list[dict[str, Any]]:
    """Every job the client may list, oldest submission first, as the server's JSON."""
    items: list[dict[str, Any]] = []
    while True:
        page = client.jobs(offset=len(items), limit=page_size, order="submissionTime,ASC")
        items += [job.raw() for job in page]
        if len(page) < page_size:
            return items
