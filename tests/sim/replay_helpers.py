"""Small clusters and traces whose replays can be worked out by hand."""

from __future__ import annotations

from pai.cluster import ClusterConfig, load_cluster
from pai.sim.clusters import make_cluster
from pai.sim.engine import replay
from pai.sim.policies import make_policy
from pai.sim.results import JobRecord, ReplayResult
from pai.sim.traces import Trace, TraceJob


def two_vcs_two_nodes() -> ClusterConfig:
    """Nodes node-0 and node-1 of 8 GPUs (no racks); VCs a and b own one node each."""
    return load_cluster(make_cluster(2, 8, None, {"a": 1, "b": 1}))


def trace(*jobs: tuple[str, str, float, int, float]) -> Trace:
    """Jobs given as (id, vc, submit time, GPUs, duration), in any order."""
    ordered = sorted(jobs, key=lambda job: job[2])
    return Trace("hand-made", tuple(TraceJob(i, vc, None, t, g, d) for i, vc, t, g, d in ordered))


def run(
    policy: str, cluster: ClusterConfig, jobs: Trace
) -> tuple[ReplayResult, dict[str, JobRecord]]:
    result = replay(jobs, make_policy(policy, cluster))
    return result, {record.job_id: record for record in result.jobs}


def times(record: JobRecord) -> tuple[float, float, float]:
    """(queuing delay, start, end) of a finished job."""
    return record.queuing_delay_s, record.start_s, record.end_s
