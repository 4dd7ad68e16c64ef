"""Users for traces that record none (the shipped Philly per-VC and ITP traces), so that fair
share and limits per user can be measured on them.

Who submitted what is not in those traces, so it is modelled, and every result that depends
on it says so (the trace's metadata lists the assumption). Two facts of real clusters shape the
model: users submit in bursts (a hyper-parameter sweep is many jobs of one size within
minutes), and a few users submit most of the work (the Philly and Helios analyses find the
heaviest few percent of users behind most GPU time). So, per VC:

- a job of the same GPU count as the VC's previous job of that count, submitted within
  `burst_gap_s` of it, belongs to the same burst, hence to the same user;
- each new burst goes to one of the VC's `users_per_vc` users, drawn with Zipf weights (the
  k-th user 1/k), from a random generator seeded by `seed` and the VC's name: the same trace
  gets the same users in every replay.
"""

from __future__ import annotations

import dataclasses
import random

from pai.sim.traces import Trace

DEFAULT_USERS_PER_VC = 20
BURST_GAP_S = 600.0


def with_users(
    trace: Trace,
    *,
    users_per_vc: int = DEFAULT_USERS_PER_VC,
    burst_gap_s: float = BURST_GAP_S,
    seed: int = 0,
) -> Trace:
    """The trace with a user for every job that has none (see the module docstring)."""
    if users_per_vc < 1:
        raise ValueError(f"need at least one user per VC, got {users_per_vc}")
    if all(job.user for job in trace.jobs):
        return trace
    weights = [1 / rank for rank in range(1, users_per_vc + 1)]
    generators: dict[str, random.Random] = {}
    last: dict[tuple[str, int], tuple[float, str]] = {}  # (VC, GPUs) -> (submitted, user)
    jobs = []
    for job in trace.jobs:
        if job.user:
            jobs.append(job)
            continue
        burst = (job.vc, job.gpus)
        previous = last.get(burst)
        if previous is not None and job.submit_time_s - previous[0] <= burst_gap_s:
            user = previous[1]
        else:
            generator = generators.setdefault(job.vc, random.Random(f"{seed}/{job.vc}"))
            number = generator.choices(range(1, users_per_vc + 1), weights)[0]
            user = f"{job.vc}-u{number:02d}"
        last[burst] = (job.submit_time_s, user)
        jobs.append(dataclasses.replace(job, user=user))
    assumption = (
        f"users assigned (the trace records none): jobs of one VC and GPU count submitted "
        f"within {burst_gap_s:g} s of each other are one user's burst; bursts go to "
        f"{users_per_vc} users per VC with Zipf weights (seed {seed})"
    )
    assumptions = [*trace.metadata.get("assumptions", []), assumption]
    return Trace(trace.name, tuple(jobs), {**trace.metadata, "assumptions": assumptions})
