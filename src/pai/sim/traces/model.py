"""What every trace loader produces: jobs on one clock, plus a record of how they were read."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, reduced to what a replay needs.

    Times are seconds on the trace's clock (see `Trace.metadata["clock"]`). The optional fields are
    filled only when the source records them, so a replay can compare against what really happened.
    """

    job_id: str
    vc: str
    user: str | None
    submit_time_s: float
    gpus: int
    duration_s: float
    status: str | None = None
    cluster: str | None = None
    observed_queue_s: float | None = None
    cpus: int | None = None
    nodes: int | None = None

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.duration_s


@dataclass(frozen=True, slots=True)
class Trace:
    """A named, submit-time-ordered job list and the facts about how it was produced.

    `metadata` always holds `format`, `source` (where the jobs came from), `clock` (the time origin
    and any alignment applied), `assumptions` (choices the loader made), `missing` (what the source
    does not record) and `skipped` (rows left out, counted by reason), so a report can state them.
    """

    name: str
    jobs: tuple[TraceJob, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        times = (job.submit_time_s for job in self.jobs)
        if any(later < earlier for earlier, later in itertools.pairwise(times)):
            raise ValueError(f"trace {self.name!r}: jobs must be sorted by submit time")

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    @property
    def vcs(self) -> tuple[str, ...]:
        """The VC names that occur in the trace, sorted."""
        return tuple(sorted({job.vc for job in self.jobs}))

    @property
    def span_s(self) -> float:
        """Time from the first to the last submission."""
        return self.jobs[-1].submit_time_s - self.jobs[0].submit_time_s if self.jobs else 0.0

    def gpu_hours_by_vc(self) -> dict[str, float]:
        """GPU-hours (GPUs times run time) each VC consumed in the source cluster."""
        totals: defaultdict[str, float] = defaultdict(float)
        for job in self.jobs:
            totals[job.vc] += job.gpu_seconds / 3600.0
        return dict(sorted(totals.items()))

    def select_vcs(self, vcs: Collection[str]) -> Trace:
        """The same trace restricted to some VCs, e.g. to replay one VC on a private cluster."""
        unknown = sorted(set(vcs) - set(self.vcs))
        if unknown:
            raise ValueError(f"trace {self.name!r} has no VC named {', '.join(unknown)}")
        wanted = set(vcs)
        metadata = {**self.metadata, "selected_vcs": sorted(wanted)}
        return Trace(self.name, tuple(j for j in self.jobs if j.vc in wanted), metadata)
