"""Microsoft's ITP GPU-cluster trace of 2021 (the ElasticFlow release, shipped as itp_jobs).

Columns: ``cluster, job_id, submission_time, duration, num_gpu``. The ten clusters share one clock
(seconds from the start of the two-month collection window), so no alignment is needed. The trace
has no VCs: each source cluster becomes a VC by default, or every job goes into one named VC.
"""

from __future__ import annotations

from pathlib import Path

from pai.sim.traces.building import TraceBuilder
from pai.sim.traces.locations import ITP_JOBS, shipped_file
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.reading import iter_csv_rows

FORMAT = "itp"
COLUMNS = ("cluster", "job_id", "submission_time", "duration", "num_gpu")


def load_itp(path: str | Path | None = None, *, single_vc: str | None = None) -> Trace:
    """Load the ITP jobs (the shipped file by default).

    With `single_vc`, every job is put in that VC (one tenant on the merged cluster); otherwise
    a job's VC is its source cluster. The source cluster is kept in `TraceJob.cluster` either way.
    """
    source = Path(path) if path is not None else shipped_file(ITP_JOBS)
    builder = TraceBuilder(source, FORMAT)
    for row in iter_csv_rows(source, COLUMNS):
        cluster = row.text("cluster")
        job = TraceJob(
            job_id=row.text("job_id"),
            vc=single_vc or cluster,
            user=None,
            submit_time_s=row.number("submission_time", minimum=0),
            gpus=row.integer("num_gpu", minimum=0),
            duration_s=row.number("duration", minimum=0),
            cluster=cluster,
        )
        builder.add(job, row.line)
    vc_rule = f"every job in VC {single_vc!r}" if single_vc else "each source cluster is a VC"
    return builder.build(
        FORMAT,
        clock={"alignment": "shared", "origin": "start of the collection window (2021-03-04)"},
        assumptions=[vc_rule],
        missing=["user", "virtual cluster", "final status", "observed queueing delay", "GPU type"],
    )
