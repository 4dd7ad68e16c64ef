"""PAI's own trace format: one CSV row per job, the format `pai sim` reads and PAI's job history
is exported in.

Required columns, in this order when written: ``job_id, vc, user, submit_time, gpus, duration``
(times in seconds; ``user`` may be empty). Optional columns, written only when some job has a
value: ``status, cluster, observed_queue, cpus, nodes``. Other columns are ignored on reading. A
name ending in ``.gz`` is written gzipped; reading detects gzip by content.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from pai.sim.traces.building import TraceBuilder
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.reading import Row, iter_csv_rows

FORMAT = "pai-csv"
COLUMNS = ("job_id", "vc", "user", "submit_time", "gpus", "duration")

_OPTIONAL: dict[str, Callable[[TraceJob], object]] = {
    "status": lambda job: job.status,
    "cluster": lambda job: job.cluster,
    "observed_queue": lambda job: job.observed_queue_s,
    "cpus": lambda job: job.cpus,
    "nodes": lambda job: job.nodes,
}


def _columns_with_values(jobs: Iterable[TraceJob]) -> list[str]:
    """The optional columns that at least one job has a value for."""
    jobs = list(jobs)
    return [name for name, get in _OPTIONAL.items() if any(get(job) is not None for job in jobs)]


def _cell(value: object) -> str:
    """Text of one value; floats keep full precision so a written trace reads back identically."""
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _open_for_writing(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        # mtime=0 makes the same trace produce the same bytes.
        compressed = gzip.GzipFile(filename=path.name, mode="wb", fileobj=path.open("wb"), mtime=0)
        return io.TextIOWrapper(compressed, encoding="utf-8", newline="")
    return path.open("w", encoding="utf-8", newline="")


def write_trace_csv(trace: Trace, path: str | Path) -> Path:
    """Write `trace` in PAI's CSV format; the file appears complete or not at all."""
    target = Path(path)
    optional = _columns_with_values(trace)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with _open_for_writing(partial) as stream:
            writer = csv.writer(stream, lineterminator="\n")
            writer.writerow([*COLUMNS, *optional])
            for job in trace:
                required = (job.job_id, job.vc, job.user, job.submit_time_s, job.gpus)
                extra = (_OPTIONAL[name](job) for name in optional)
                writer.writerow([_cell(v) for v in (*required, job.duration_s, *extra)])
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _job(row: Row) -> TraceJob:
    return TraceJob(
        job_id=row.text("job_id"),
        vc=row.text("vc"),
        user=row.optional_text("user"),
        submit_time_s=row.number("submit_time"),
        gpus=row.integer("gpus", minimum=0),
        duration_s=row.number("duration", minimum=0),
        status=row.optional_text("status"),
        cluster=row.optional_text("cluster"),
        observed_queue_s=row.optional_number("observed_queue"),
        cpus=row.optional_integer("cpus", minimum=0),
        nodes=row.optional_integer("nodes", minimum=0),
    )


def read_trace_csv(path: str | Path, *, name: str | None = None) -> Trace:
    """Read a trace in PAI's CSV format; its name defaults to the file name without suffixes."""
    source = Path(path)
    builder = TraceBuilder(source, FORMAT)
    for row in iter_csv_rows(source, COLUMNS, tuple(_OPTIONAL)):
        builder.add(_job(row), row.line)
    present = _columns_with_values(builder.jobs)
    return builder.build(
        name or source.name.split(".")[0],
        clock={"alignment": "as recorded", "origin": "t=0 of the file"},
        assumptions=[],
        missing=[column for column in _OPTIONAL if column not in present],
    )
