"""SenseTime's Helios traces (``cluster_log.csv``, one file per cluster).

Columns: ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
duration, queue``; times are date-times or epoch seconds, ``duration`` and ``queue`` are seconds.
Helios runs CPU-only jobs on the same clusters; they are left out unless asked for, because the
GPU scheduler under study does not place them.
"""

from __future__ import annotations

from pathlib import Path

from pai.sim.traces.building import TraceBuilder
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.reading import Row, iter_csv_rows

FORMAT = "helios"
COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time")
OPTIONAL_COLUMNS = ("start_time", "end_time", "duration", "queue")


def _duration(row: Row) -> float | None:
    """The ``duration`` column, or end - start when it is empty; None if the job never ran."""
    duration = row.optional_number("duration", minimum=0)
    if duration is not None:
        return duration
    start, end = row.optional_timestamp("start_time"), row.optional_timestamp("end_time")
    if start is None or end is None:
        return None
    if end < start:
        raise row.error("column 'end_time' is earlier than 'start_time'")
    return end - start


def load_helios(path: str | Path, *, include_cpu_jobs: bool = False) -> Trace:
    """Load one Helios cluster's ``cluster_log.csv`` (plain or gzipped)."""
    source = Path(path)
    builder = TraceBuilder(source, FORMAT)
    for row in iter_csv_rows(source, COLUMNS, OPTIONAL_COLUMNS):
        gpus = row.integer("gpu_num", minimum=0)
        if gpus == 0 and not include_cpu_jobs:
            builder.skip("CPU-only job")
            continue
        submitted = row.optional_timestamp("submit_time")
        if submitted is None:
            raise row.error("column 'submit_time' is empty")
        duration = _duration(row)
        if duration is None:
            builder.skip("never started")
            continue
        job = TraceJob(
            job_id=row.text("job_id"),
            vc=row.text("vc"),
            user=row.optional_text("user"),
            submit_time_s=submitted,
            gpus=gpus,
            duration_s=duration,
            status=row.optional_text("state"),
            observed_queue_s=row.optional_number("queue", minimum=0),
            cpus=row.optional_integer("cpu_num", minimum=0),
            nodes=row.optional_integer("node_num", minimum=0),
        )
        builder.add(job, row.line)
    origin = builder.rebase_to_first_submission()
    return builder.build(
        FORMAT,
        clock={"alignment": "shared", "origin": origin},
        assumptions=[
            "CPU-only jobs kept" if include_cpu_jobs else "CPU-only jobs left out",
            "times without a zone are read as one wall clock (no DST)",
        ],
        missing=[],
    )
