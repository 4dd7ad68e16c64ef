"""Sharing a VC between its users in replays: users dealt to traces without any, fair share and
limits per user through the real scheduler, and the per-user figures."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
from replay_helpers import two_vcs_two_nodes

from pai.cluster import UserLimit
from pai.scheduler.fairshare import first_starving
from pai.sim.engine import replay
from pai.sim.metrics import user_stats
from pai.sim.policies import make_policy
from pai.sim.results import JobRecord
from pai.sim.traces import Trace, TraceJob
from pai.sim.users import with_users
from pai.sim.usersharing import limit_each_user


def users_trace(*jobs: tuple[str, str, float, int, float]) -> Trace:
    """Jobs as (id, user, submit time, GPUs, duration), all in VC a."""
    ordered = sorted(jobs, key=lambda job: job[2])
    return Trace("users", tuple(TraceJob(i, "a", user, t, g, d) for i, user, t, g, d in ordered))


def sweep_then_colleague() -> Trace:
    """heavy fills VC a (8 GPUs) with 8 one-GPU jobs and queues 8 more; light submits one job
    a minute later. All run 1,000 s."""
    sweep = [(f"h{i}", "heavy", float(i), 1, 1000.0) for i in range(16)]
    return users_trace(*sweep, ("l0", "light", 60.0, 1, 1000.0))


def starts(policy: str, jobs: Trace, **cluster_changes: object) -> dict[str, float]:
    cluster = two_vcs_two_nodes()
    if cluster_changes:
        cluster = dataclasses.replace(cluster, **cluster_changes)  # type: ignore[arg-type]
    result = replay(jobs, make_policy(policy, cluster))
    return {record.job_id: record.start_s for record in result.jobs}


def test_first_come_first_served_puts_the_colleague_behind_the_whole_sweep() -> None:
    started = starts("hived", sweep_then_colleague())
    assert started["l0"] == 2000.0  # after the second round of the sweep


def test_fair_share_lets_the_colleague_in_at_the_first_free_gpu() -> None:
    started = starts("hived+fair", sweep_then_colleague())
    assert started["l0"] == 1000.0
    assert sorted(started[f"h{i}"] for i in range(8, 16)) == [*range(1001, 1008), 2000.0]


def test_a_limit_per_user_keeps_room_for_the_colleague() -> None:
    cluster = two_vcs_two_nodes()
    limited = dataclasses.replace(cluster.virtual_clusters["a"], user_limit=UserLimit(gpus=6))
    vcs = {**cluster.virtual_clusters, "a": limited}
    started = starts("hived+limits", sweep_then_colleague(), virtual_clusters=vcs)
    assert started["l0"] == 60.0  # at once: heavy holds at most 6 of the 8 GPUs
    assert sorted(started[f"h{i}"] for i in range(16)) == [
        *range(6),
        *range(1000, 1006),
        *range(2000, 2004),
    ]


def test_past_the_limit_jobs_overflow_onto_idle_cells_under_pai() -> None:
    cluster = limit_each_user(two_vcs_two_nodes(), 0.5)  # 4 GPUs per user in each VC
    result = replay(sweep_then_colleague(), make_policy("pai+limits", cluster))
    by_id = {record.job_id: record for record in result.jobs}
    assert by_id["l0"].start_s == 60.0
    assert sum(record.opportunistic for record in result.jobs) >= 8  # on VC b's idle node
    assert all(by_id[f"h{i}"].start_s < 1000.0 for i in range(12))


def test_policies_take_fair_and_limits_and_nothing_else() -> None:
    cluster = two_vcs_two_nodes()
    policy = make_policy("pai+fair+limits", cluster)
    assert (policy.name, policy.user_limits) == ("pai+fair+limits", True)
    assert policy.fair_share_half_life_s is not None and policy.overflow
    assert make_policy("hived", cluster).fair_share_half_life_s is None
    for bad in ("pai+fast", "pai+fair+fair", "nope+fair"):
        with pytest.raises(ValueError, match="unknown policy"):
            make_policy(bad, cluster)


def test_users_are_dealt_by_burst_deterministically_and_heavily_to_a_few() -> None:
    jobs = [TraceJob(f"j{i}", "a", None, i * 30.0, 1, 100.0) for i in range(20)]
    jobs += [TraceJob(f"k{i}", "a", None, 100_000 + i * 5000.0, 2, 100.0) for i in range(300)]
    jobs.append(TraceJob("mine", "a", "alice", 2e6, 1, 10.0))
    trace = Trace("t", tuple(jobs), {"assumptions": ["x"]})
    dealt = with_users(trace, users_per_vc=10, seed=3)
    users = [job.user for job in dealt.jobs]
    assert len(set(users[:20])) == 1  # one burst, one user
    assert users[-1] == "alice"  # a recorded user is kept
    assert with_users(trace, users_per_vc=10, seed=3) == dealt
    top, count = Counter(users[20:320]).most_common(1)[0]
    assert top == "a-u01" and count > 60  # Zipf: the first user gets about a third
    assert dealt.metadata["assumptions"][0] == "x"
    assert "users assigned" in dealt.metadata["assumptions"][1]


def record(user: str, submit: float, start: float, run: float, gpus: int = 1) -> JobRecord:
    return JobRecord("j", "a", gpus, submit, start, start + run, user=user, run_s=run)


def test_light_users_and_jains_index_are_computed_as_documented() -> None:
    records = [
        record("heavy", 0, 0, 100, gpus=8),
        record("heavy", 0, 100, 100, gpus=8),  # waited as long as it ran: x = 1600 / 2400
        record("light", 0, 50, 100),  # x = 100 / 150
        record("idle", 0, 0, 10),  # never waited: x = 1
    ]
    stats = user_stats(records)
    assert stats["users"] == 3
    assert stats["light_users_queuing_delay_p95_s"] == 0.0  # only "idle" is in the lower half
    x = [1600 / 2400, 100 / 150, 1.0]
    assert stats["jain_fairness_index"] == round(sum(x) ** 2 / (3 * sum(v * v for v in x)), 4)
    assert user_stats([JobRecord("j", "a", 1, 0, 0, 1)])["jain_fairness_index"] is None


def test_fair_share_keeps_the_starvation_bound_for_a_heavy_users_large_job() -> None:
    """VC b is full for good; in VC a, heavy fills the 8 GPUs, then asks for all 8 at once,
    while light users keep submitting one-GPU jobs. Fair share puts each light job first, but
    once heavy's large job has waited past the `pai` policy's bound (an hour) it is the first
    job of the VC again, gets the reservation, and starts at the next end of jobs."""
    jobs = [TraceJob(f"b{i}", "b", "other", 0.0, 1, 1e6) for i in range(8)]
    jobs += [TraceJob(f"h{i}", "a", "heavy", 0.0, 1, 1000.0) for i in range(8)]
    jobs.append(TraceJob("large", "a", "heavy", 10.0, 8, 1000.0))
    jobs += [TraceJob(f"l{i}", "a", f"light{i}", 20.0 + 100 * i, 1, 1000.0) for i in range(150)]
    trace = Trace("stream", tuple(sorted(jobs, key=lambda job: job.submit_time_s)))

    started = starts("pai+fair", trace)
    fifo = starts("pai", trace)

    assert started["l0"] == 1000.0 and fifo["l0"] == 2000.0  # light users go first...
    assert fifo["large"] == 1000.0
    assert started["large"] == 4000.0  # ...until the large job waited an hour (not 20,000 s)


def test_the_first_starving_job_of_each_vc_and_priority_goes_first() -> None:
    waiting = [
        ("young", "a", 10, 900.0, 1),
        ("old", "a", 10, 100.0, 2),
        ("older", "a", 10, 50.0, 3),
        ("urgent", "a", 100, 800.0, 4),
        ("other-vc", "b", 10, 500.0, 5),
    ]
    assert first_starving(waiting, now=1000.0, starving_after_s=150.0) == {
        "older",
        "urgent",
        "other-vc",
    }
    assert first_starving(waiting, now=1000.0, starving_after_s=math.inf) == set()
