"""Collects parsed jobs into a `Trace`: duplicate checks, skip counts, ordering, metadata."""

from __future__ import annotations

import dataclasses
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pai.sim.traces.errors import TraceFormatError
from pai.sim.traces.model import Trace, TraceJob

_JOB_VALUES = operator.attrgetter(*(f.name for f in dataclasses.fields(TraceJob)))
_SUBMIT_INDEX = [f.name for f in dataclasses.fields(TraceJob)].index("submit_time_s")


def shifted(job: TraceJob, delta_s: float) -> TraceJob:
    """The job with its submission moved by `delta_s` seconds (used to rebase a clock).

    Builds the copy directly rather than with `dataclasses.replace`, which is several times
    slower and this runs once per job.
    """
    values = list(_JOB_VALUES(job))
    values[_SUBMIT_INDEX] += delta_s
    return TraceJob(*values)


class TraceBuilder:
    """Accumulates the jobs of one source file; `build` turns them into a sorted `Trace`."""

    def __init__(self, path: Path, format_name: str) -> None:
        self.path = path
        self.format_name = format_name
        self.jobs: list[TraceJob] = []
        self.skipped: Counter[str] = Counter()
        self._seen_ids: set[str] = set()

    def add(self, job: TraceJob, line: int | None) -> None:
        if job.job_id in self._seen_ids:
            raise TraceFormatError(self.path, line, f"duplicate job id {job.job_id!r}")
        self._seen_ids.add(job.job_id)
        self.jobs.append(job)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def rebase_to_first_submission(self) -> str | None:
        """Move an epoch-seconds clock's origin to the earliest submission.

        Returns that origin as a date-time text (no zone, like the sources) for the metadata.
        """
        if not self.jobs:
            return None
        origin = min(job.submit_time_s for job in self.jobs)
        self.jobs = [shifted(job, -origin) for job in self.jobs]
        return datetime.fromtimestamp(origin, UTC).replace(tzinfo=None).isoformat(sep=" ")

    def build(
        self,
        name: str,
        *,
        clock: Mapping[str, Any],
        assumptions: Sequence[str],
        missing: Sequence[str],
    ) -> Trace:
        self.jobs.sort(key=lambda job: job.submit_time_s)
        metadata: dict[str, Any] = {
            "format": self.format_name,
            "source": str(self.path),
            "clock": dict(clock),
            "assumptions": list(assumptions),
            "missing": list(missing),
            "skipped": dict(sorted(self.skipped.items())),
        }
        return Trace(name, tuple(self.jobs), metadata)
