"""Microsoft Philly's raw job log (``cluster_job_log``): a JSON list of jobs with their attempts.

Each job: ``status, vc, jobid, user, submitted_time, attempts``; each attempt: ``start_time,
end_time, detail``; each detail: ``ip`` (machine) and ``gpus`` (GPU names). The conversion follows
the trace owners' analysis notebook: a job's GPUs are those of its first attempt, its run time
spans from the first attempt's start to the last attempt's end, and its observed queueing delay
is the first start minus the submission. Jobs that cannot be measured that way (no attempts, a
missing time, still running when the log was taken, no GPUs) are skipped and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pai.sim.traces.building import TraceBuilder
from pai.sim.traces.errors import TraceFormatError
from pai.sim.traces.json_stream import JsonListReader
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.reading import open_text, parse_timestamp

FORMAT = "philly-joblog"


class _JobReader:
    """Field access on one job object, raising errors that name the line and the job."""

    def __init__(self, path: Path, line: int, job: Any) -> None:
        self.path = path
        self.line = line
        if not isinstance(job, Mapping):
            raise TraceFormatError(path, line, "expected a job object")
        self.job = job
        self.name = str(job.get("jobid", "?"))

    def error(self, message: str) -> TraceFormatError:
        return TraceFormatError(self.path, self.line, f"job {self.name}: {message}")

    def text(self, container: Mapping[str, Any], key: str) -> str:
        value = container.get(key)
        if not isinstance(value, str) or not value:
            raise self.error(f"field {key!r} must be a non-empty string, got {value!r}")
        return value

    def time(self, container: Mapping[str, Any], key: str) -> float | None:
        """A timestamp, or None when the log has none (null, missing or the text "None")."""
        value = container.get(key)
        if value is None or value in ("", "None"):
            return None
        if not isinstance(value, str | int | float):
            raise self.error(f"field {key!r} must be a date-time, got {value!r}")
        try:
            return parse_timestamp(str(value))
        except ValueError:
            raise self.error(f"field {key!r} must be a date-time, got {value!r}") from None

    def attempts(self) -> list[Mapping[str, Any]]:
        attempts = self.job.get("attempts") or []
        if not isinstance(attempts, list) or not all(isinstance(a, Mapping) for a in attempts):
            raise self.error("field 'attempts' must be a list of objects")
        return attempts

    def attempt_shape(self, attempt: Mapping[str, Any]) -> tuple[int, int]:
        """GPUs and machines of an attempt, summed over its ``detail`` entries."""
        details = attempt.get("detail") or []
        if not isinstance(details, list) or not all(isinstance(d, Mapping) for d in details):
            raise self.error("field 'detail' of the first attempt must be a list of objects")
        gpus = 0
        for detail in details:
            names = detail.get("gpus") or []
            if not isinstance(names, list):
                raise self.error("field 'gpus' of an attempt detail must be a list")
            gpus += len(names)
        return gpus, len(details)


def _job_or_skip_reason(reader: _JobReader) -> TraceJob | str:
    job = reader.job
    job_id = reader.text(job, "jobid")
    vc = reader.text(job, "vc")
    user = job.get("user")
    status = job.get("status")
    submitted = reader.time(job, "submitted_time")
    attempts = reader.attempts()
    if submitted is None:
        return "no submit time"
    if not attempts:
        return "no attempts"
    started = reader.time(attempts[0], "start_time")
    if started is None:
        return "no start time"
    ended = reader.time(attempts[-1], "end_time")
    if ended is None:
        return "no end time (still running when logged)"
    if ended < started:
        return "ends before it starts"
    gpus, machines = reader.attempt_shape(attempts[0])
    if gpus == 0:
        return "no GPUs"
    return TraceJob(
        job_id=job_id,
        vc=vc,
        user=str(user) if user else None,
        submit_time_s=submitted,
        gpus=gpus,
        duration_s=ended - started,
        status=str(status) if status else None,
        observed_queue_s=started - submitted,
        nodes=machines,
    )


def load_philly_joblog(path: str | Path) -> Trace:
    """Load a Philly ``cluster_job_log`` file (plain or gzipped JSON)."""
    source = Path(path)
    builder = TraceBuilder(source, FORMAT)
    with open_text(source) as stream:
        for line, element in JsonListReader(stream, source):
            outcome = _job_or_skip_reason(_JobReader(source, line, element))
            if isinstance(outcome, str):
                builder.skip(outcome)
            else:
                builder.add(outcome, line)
    origin = builder.rebase_to_first_submission()
    return builder.build(
        FORMAT,
        clock={"alignment": "shared", "origin": origin},
        assumptions=[
            "GPUs are those of the first attempt; run time is from the first attempt's start "
            "to the last attempt's end, as in the trace owners' analysis notebook",
            "times without a zone are read as one wall clock (no DST)",
        ],
        missing=[],
    )
