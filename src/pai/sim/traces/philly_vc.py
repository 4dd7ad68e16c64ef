"""The Philly trace as per-VC job lists (the PCS artifact's derivative, shipped as philly_vc_jobs).

Columns: ``vc, app_id, submit_time, num_gpu, duration`` (plus PCS bookkeeping columns that are not
used). Each VC's ``submit_time`` counts from that VC's own first job, so the loader puts the VCs on
one clock with a selectable alignment (see `pai.sim.traces.alignment`).
"""

from __future__ import annotations

from pathlib import Path

from pai.sim.traces.alignment import Alignment, vc_clock_shifts
from pai.sim.traces.building import TraceBuilder
from pai.sim.traces.locations import PHILLY_VC_JOBS, shipped_file
from pai.sim.traces.model import Trace, TraceJob
from pai.sim.traces.reading import iter_csv_rows

FORMAT = "philly-vc"
COLUMNS = ("vc", "app_id", "submit_time", "num_gpu", "duration")

PHILLY_WINDOW_S = 137 * 86_400.0
"""Length of the raw Philly collection window, 2017-08-07 to 2017-12-22."""


def load_philly_vc(
    path: str | Path | None = None,
    *,
    alignment: Alignment = "zero",
    seed: int = 0,
    window_s: float = PHILLY_WINDOW_S,
) -> Trace:
    """Load the per-VC Philly jobs (the shipped file by default) onto one clock.

    `seed` and `window_s` matter only for ``alignment="spread"``.
    """
    source = Path(path) if path is not None else shipped_file(PHILLY_VC_JOBS)
    # Rows are parsed first and jobs built once the per-VC clock shifts are known.
    rows = [
        (
            row.line,
            row.text("vc"),
            row.text("app_id"),
            row.number("submit_time", minimum=0),
            row.integer("num_gpu", minimum=0),
            row.number("duration", minimum=0),
        )
        for row in iter_csv_rows(source, COLUMNS)
    ]
    shifts, clock = vc_clock_shifts(
        ((vc, submit) for _, vc, _, submit, _, _ in rows),
        alignment,
        window_s=window_s,
        seed=seed,
    )
    builder = TraceBuilder(source, FORMAT)
    for line, vc, app_id, submit, gpus, duration in rows:
        job = TraceJob(f"{vc}-{app_id}", vc, None, submit + shifts[vc], gpus, duration)
        builder.add(job, line)
    return builder.build(
        FORMAT,
        clock=clock,
        assumptions=[
            "each VC's clock starts at its own first job; VCs placed on one clock by "
            f"'{clock['alignment']}' alignment",
            "duration is the job's run time at its full GPU demand, as recovered from the "
            "PCS artifact's service times",
        ],
        missing=["user", "final status", "observed queueing delay", "absolute dates per VC"],
    )
