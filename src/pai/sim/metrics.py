"""From replay results to the numbers that compare policies, per VC and for the whole cluster.

- queuing delay: from submission until the job first ran; JCT: from submission to completion;
- sharing anomaly of a VC: its mean queuing delay beyond the same jobs' on the VC's private
  cluster (the `private` policy's result on the same cluster), zero when not beyond;
- GPU allocation rate: GPU-time held by jobs / (GPUs x the replay's window); per VC, over its
  quota instead (above 1 when it ran opportunistically beyond its quota);
- idle GPUs while jobs wait, and fragmented GPUs (free, but on nodes too small for the smallest
  waiting pod): time averages, in GPUs;
- preempted GPU-hours: work lost by attempts that were preempted (since their last checkpoint
  if the policy resumes jobs, else all of it); per VC, the work its jobs lost;
- p99 and max queuing delay of large jobs (`LARGE_JOB_GPUS` GPUs or more): the jobs a stream of
  small ones can starve;
- with users (`user_stats`): the p95 queuing delay of the *light* users' jobs (the half of
  each VC's users with the least demand, GPU-hours of their jobs), and Jain's fairness index
  over users of the GPU time each got against what it demanded while its jobs were in the
  system: x = sum(GPUs x run time) / sum(GPUs x (end - submission)) over the user's jobs, 1 for
  a user whose jobs never waited; J = (sum x)^2 / (n sum x^2), 1 when all users fare alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pai.sim.results import JobRecord, ReplayResult

PRIVATE = "private"
LARGE_JOB_GPUS = 8


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks of an ascending sequence (numpy's default)."""
    if not ordered:
        return math.nan
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _number(value: float, digits: int = 1) -> float | None:
    """JSON has no NaN: an undefined statistic (no jobs) is null."""
    return None if math.isnan(value) else round(value, digits)


def delay_stats(records: Sequence[JobRecord]) -> dict[str, float | None]:
    delays = sorted(record.queuing_delay_s for record in records)
    return {
        "queuing_delay_mean_s": _number(_mean(delays)),
        "queuing_delay_p50_s": _number(percentile(delays, 0.5)),
        "queuing_delay_p95_s": _number(percentile(delays, 0.95)),
        "jct_mean_s": _number(_mean([record.completion_time_s for record in records])),
    }


def large_job_stats(records: Sequence[JobRecord]) -> dict[str, float | None]:
    delays = sorted(r.queuing_delay_s for r in records if r.gpus >= LARGE_JOB_GPUS)
    return {
        "large_jobs": len(delays),
        "large_queuing_delay_p99_s": _number(percentile(delays, 0.99)),
        "large_queuing_delay_max_s": _number(delays[-1] if delays else math.nan),
    }


def by_user(records: Sequence[JobRecord]) -> dict[tuple[str, str], list[JobRecord]]:
    """The jobs of each (VC, user); jobs of unknown users are left out."""
    users: defaultdict[tuple[str, str], list[JobRecord]] = defaultdict(list)
    for record in records:
        if record.user is not None:
            users[(record.vc, record.user)].append(record)
    return users


def light_users(users: Mapping[tuple[str, str], Sequence[JobRecord]]) -> set[tuple[str, str]]:
    """The half of each VC's users whose jobs demand the fewest GPU-hours (ties by name)."""
    per_vc: defaultdict[str, list[tuple[float, tuple[str, str]]]] = defaultdict(list)
    for key, jobs in users.items():
        per_vc[key[0]].append((math.fsum(r.gpus * r.run_s for r in jobs), key))
    return {key for demands in per_vc.values() for _, key in sorted(demands)[: len(demands) // 2]}


def user_stats(records: Sequence[JobRecord]) -> dict[str, float | int | None]:
    """Light users' p95 queuing delay and Jain's index (see the module docstring); null
    without users."""
    users = by_user(records)
    if not users:
        return {
            "users": 0,
            "light_users_queuing_delay_mean_s": None,
            "light_users_queuing_delay_p95_s": None,
            "jain_fairness_index": None,
        }
    delays = sorted(r.queuing_delay_s for key in light_users(users) for r in users[key])
    shares = []
    for jobs in users.values():
        in_system = math.fsum(r.gpus * r.completion_time_s for r in jobs)
        if in_system > 0:
            shares.append(math.fsum(r.gpus * r.run_s for r in jobs) / in_system)
    squares = math.fsum(x * x for x in shares)
    jain = math.fsum(shares) ** 2 / (len(shares) * squares) if squares else math.nan
    return {
        "users": len(users),
        "light_users_queuing_delay_mean_s": _number(_mean(delays)),
        "light_users_queuing_delay_p95_s": _number(percentile(delays, 0.95)),
        "jain_fairness_index": _number(jain, 4),
    }


def by_vc(records: Sequence[JobRecord]) -> dict[str, list[JobRecord]]:
    groups: defaultdict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        groups[record.vc].append(record)
    return groups


def summarize(result: ReplayResult, private: ReplayResult | None = None) -> dict[str, Any]:
    """The JSON object of one replay; sharing anomalies need the `private` replay of the same
    trace and cluster (they are null without it, and zero for the private replay itself)."""
    window = result.makespan_s
    records = by_vc(result.jobs)
    private_means = (
        {vc: _mean([r.queuing_delay_s for r in jobs]) for vc, jobs in by_vc(private.jobs).items()}
        if private is not None
        else {}
    )
    vcs: dict[str, Any] = {}
    for vc in sorted({*result.quota_gpus, *records, *result.refused}):
        jobs = records.get(vc, [])
        stats = delay_stats(jobs)
        quota = result.quota_gpus.get(vc, 0)
        held = result.vc_allocated_gpu_seconds.get(vc, 0.0)
        extra: float | None = None
        if result.policy == PRIVATE:
            extra = 0.0
        elif vc in private_means and stats["queuing_delay_mean_s"] is not None:
            extra = _mean([r.queuing_delay_s for r in jobs]) - private_means[vc]
        vcs[vc] = {
            "jobs": len(jobs),
            "quota_gpus": quota,
            **stats,
            **large_job_stats(jobs),
            "sharing_anomaly_s": None if extra is None else round(max(extra, 0.0), 1),
            "extra_delay_vs_private_s": None if extra is None else round(extra, 1),
            "gpu_allocation_rate": round(held / (quota * window), 4) if quota and window else None,
            "preemptions": sum(r.preemptions for r in jobs),
            "preempted_gpu_hours": round(result.vc_preempted_gpu_seconds.get(vc, 0.0) / 3600, 1),
            "idle_gpus_while_waiting": round(
                result.vc_idle_while_waiting_gpu_seconds.get(vc, 0.0) / window, 1
            )
            if window
            else None,
            "refused_jobs": result.refused.get(vc, 0),
            **user_stats(jobs),
        }
    anomalies = [v["sharing_anomaly_s"] for v in vcs.values() if v["sharing_anomaly_s"] is not None]
    capacity = result.gpus * window
    return {
        "policy": result.policy,
        "cluster": result.cluster,
        "jobs": len(result.jobs),
        "refused_jobs": sum(result.refused.values()),
        "unfinished_jobs": sum(result.unfinished.values()),
        "gpus": result.gpus,
        "makespan_s": round(window, 1),
        "gpu_allocation_rate": round(result.allocated_gpu_seconds / capacity, 4)
        if capacity
        else None,
        **delay_stats(result.jobs),
        **large_job_stats(result.jobs),
        **user_stats(result.jobs),
        "max_sharing_anomaly_s": max(anomalies) if anomalies else None,
        "preemptions": sum(r.preemptions for r in result.jobs),
        "preempted_gpu_hours": round(result.preempted_gpu_seconds / 3600, 1),
        "opportunistic_jobs": sum(1 for r in result.jobs if r.opportunistic),
        "idle_gpus_while_waiting": round(result.idle_while_waiting_gpu_seconds / window, 1)
        if window
        else None,
        "fragmented_gpus": round(result.fragmented_gpu_seconds / window, 1) if window else None,
        "decisions": result.decisions,
        "wall_seconds": round(result.wall_seconds, 2),
        "vcs": vcs,
    }


def summarize_all(results: Sequence[ReplayResult]) -> list[dict[str, Any]]:
    """One object per replay, each compared with the private replay on its own cluster."""
    privates = {r.cluster: r for r in results if r.policy == PRIVATE}
    return [summarize(result, privates.get(result.cluster)) for result in results]


def binned_average(
    times: Sequence[float], values: Sequence[float], start: float, end: float, bins: int
) -> tuple[list[float], list[float]]:
    """Time averages of a step function (value `values[i]` from `times[i]` on) over `bins`
    equal intervals of [start, end]; returns the bins' midpoints and averages."""
    if end <= start or bins < 1:
        return [], []
    width = (end - start) / bins
    sums = [0.0] * bins
    for i, (since, value) in enumerate(zip(times, values, strict=True)):
        until = times[i + 1] if i + 1 < len(times) else end
        low, high = max(since, start), min(until, end)
        index = min(int((low - start) / width), bins - 1) if low < high else bins
        while low < high:
            edge = high if index == bins - 1 else min(high, start + (index + 1) * width)
            if edge > low:  # (rounding may put `low` on its bin's upper edge)
                sums[index] += value * (edge - low)
                low = edge
            index += 1
    midpoints = [start + (i + 0.5) * width for i in range(bins)]
    return midpoints, [total / width for total in sums]
