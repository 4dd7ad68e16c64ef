"""Replays small enough to work out by hand: two VCs of one 8-GPU node each on a 2-node cluster.

Every expected number below follows from the policies' rules; the comments show the reasoning.
"""

from __future__ import annotations

import pytest
from replay_helpers import run, times, trace, two_vcs_two_nodes

from pai.cluster import load_cluster
from pai.scheduler import Scheduler
from pai.sim.clusters import make_cluster
from pai.sim.engine import replay
from pai.sim.metrics import summarize_all
from pai.sim.policies import make_policy
from pai.sim.quota import QuotaScheduler
from pai.sim.workload import ClusterMismatchError

# a1 fills VC a's node; b1 runs on VC b's node; a2 arrives when a's node is full.
TWO_VCS = trace(
    ("a1", "a", 0, 8, 100),
    ("b1", "b", 5, 8, 30),
    ("a2", "a", 10, 4, 50),
)

# Quota places b1 next to a1 (fullest node first), which pushes a2 to the other node; once b1
# ends, each node has 4 free GPUs and b2 (one pod of 8) cannot run although b uses none of its
# quota. HiveD keeps a's jobs in a's cell (one node), so b's node is whole when b2 comes.
FRAGMENTING = trace(
    ("a1", "a", 0, 4, 1000),
    ("b1", "b", 1, 4, 10),
    ("a2", "a", 2, 4, 2000),
    ("b2", "b", 12, 8, 100),
)


@pytest.mark.parametrize("policy", ["hived", "quota", "private"])
def test_a_job_waits_for_its_own_vc_when_the_vc_is_full(policy: str) -> None:
    _, jobs = run(policy, two_vcs_two_nodes(), TWO_VCS)

    assert times(jobs["a1"]) == (0, 0, 100)
    assert times(jobs["b1"]) == (0, 5, 35)
    assert times(jobs["a2"]) == (90, 100, 150)  # b's node is never lent out
    assert jobs["a2"].completion_time_s == 140


def test_overflow_runs_a_waiting_job_on_another_vcs_idle_node() -> None:
    result, jobs = run("hived-oppo", two_vcs_two_nodes(), TWO_VCS)

    # a2 finds a full and b's node busy with b1 until 35, then runs there opportunistically.
    assert times(jobs["a2"]) == (25, 35, 85)
    assert jobs["a2"].opportunistic
    assert not jobs["a1"].opportunistic
    assert result.unfinished == {}


def test_a_preempted_opportunistic_job_is_retried_and_reruns() -> None:
    jobs_in = trace(
        ("a1", "a", 0, 8, 100),
        ("a2", "a", 1, 8, 50),  # a is full: runs on b's idle node
        ("b1", "b", 10, 4, 20),  # b takes its node back: a2 is killed at 10
    )
    result, jobs = run("hived-oppo", two_vcs_two_nodes(), jobs_in)

    assert times(jobs["b1"]) == (0, 10, 30)
    # a2 first ran at 1; after the preemption it waits (4 free GPUs are too few) until b1
    # ends at 30, then runs its full 50 s again.
    assert times(jobs["a2"]) == (0, 1, 80)
    assert jobs["a2"].preemptions == 1
    assert result.preempted_gpu_seconds == 8 * (10 - 1)  # the first run's work is lost
    assert jobs["a2"].opportunistic
    summary = summarize_all([result])[0]
    assert summary["preemptions"] == 1
    assert summary["vcs"]["a"]["preemptions"] == 1


def test_quota_scheduling_fragments_where_hived_does_not() -> None:
    cluster = two_vcs_two_nodes()
    quota, quota_jobs = run("quota", cluster, FRAGMENTING)
    hived, hived_jobs = run("hived", cluster, FRAGMENTING)
    private, private_jobs = run("private", cluster, FRAGMENTING)

    assert times(quota_jobs["b2"]) == (988, 1000, 1100)  # until a1 frees node-0
    assert times(hived_jobs["b2"]) == (0, 12, 112)
    assert times(private_jobs["b2"]) == (0, 12, 112)
    for jobs in (quota_jobs, hived_jobs, private_jobs):
        assert times(jobs["a2"]) == (0, 2, 2002)

    # While b2 waited, node-0 and node-1 each had 4 free GPUs: 8 GPUs no waiting pod fits.
    assert quota.fragmented_gpu_seconds == 8 * 988
    assert quota.idle_while_waiting_gpu_seconds == 8 * 988
    assert hived.fragmented_gpu_seconds == 0

    summaries = {s["policy"]: s for s in summarize_all([hived, quota, private])}
    assert summaries["quota"]["vcs"]["b"]["sharing_anomaly_s"] == 494.0  # (0 + 988) / 2
    assert summaries["quota"]["vcs"]["a"]["sharing_anomaly_s"] == 0.0
    assert summaries["hived"]["vcs"]["b"]["sharing_anomaly_s"] == 0.0
    assert summaries["hived"]["max_sharing_anomaly_s"] == 0.0
    assert summaries["quota"]["max_sharing_anomaly_s"] == 494.0
    # GPU-seconds held: 4x1000 + 4x10 + 4x2000 + 8x100 over 16 GPUs x 2002 s.
    assert summaries["quota"]["gpu_allocation_rate"] == round(12840 / (16 * 2002), 4)


@pytest.mark.parametrize("policy", ["hived", "quota"])
def test_jobs_of_a_vc_run_first_come_first_served(policy: str) -> None:
    jobs_in = trace(("x", "a", 0, 8, 100), ("y", "a", 1, 8, 10), ("z", "a", 2, 8, 10))
    _, jobs = run(policy, two_vcs_two_nodes(), jobs_in)

    assert times(jobs["y"]) == (99, 100, 110)
    assert times(jobs["z"]) == (108, 110, 120)


@pytest.mark.parametrize("policy", ["hived", "quota"])
def test_a_waiting_job_does_not_block_smaller_ones_behind_it(policy: str) -> None:
    jobs_in = trace(("x", "a", 0, 6, 100), ("y", "a", 1, 8, 10), ("z", "a", 2, 2, 10))
    _, jobs = run(policy, two_vcs_two_nodes(), jobs_in)

    assert times(jobs["z"]) == (0, 2, 12)  # fits beside x while y waits for the whole node
    assert times(jobs["y"]) == (99, 100, 110)


def test_a_job_larger_than_its_vc_is_refused_not_queued() -> None:
    result, jobs = run("hived", two_vcs_two_nodes(), trace(("big", "a", 0, 16, 10)))

    assert jobs == {}
    assert result.refused == {"a": 1}
    assert summarize_all([result])[0]["vcs"]["a"]["refused_jobs"] == 1


def test_a_multi_node_job_runs_as_one_gang_and_holds_nothing_while_it_waits() -> None:
    cluster = load_cluster(make_cluster(3, 8, None, {"a": 1, "b": 2}))
    jobs_in = trace(
        ("small", "b", 0, 4, 50),
        ("wide", "b", 1, 16, 10),  # 2 pods of 8: needs both of b's nodes at once
        ("late", "b", 2, 4, 10),
    )
    result, jobs = run("hived", cluster, jobs_in)

    assert times(jobs["late"]) == (0, 2, 12)  # the waiting gang reserved nothing
    assert times(jobs["wide"]) == (49, 50, 60)
    assert result.allocated_gpu_seconds == 4 * 50 + 16 * 10 + 4 * 10


def test_hived_policies_replay_through_pais_real_scheduler() -> None:
    cluster = two_vcs_two_nodes()
    hived = make_policy("hived", cluster)
    assert isinstance(hived.scheduler, Scheduler)
    assert isinstance(make_policy("private", cluster).scheduler, Scheduler)
    assert isinstance(make_policy("quota", cluster).scheduler, QuotaScheduler)

    replay(FRAGMENTING, hived)
    # Only the real scheduler keeps HiveD's cell bookkeeping: after the replay every VC cell
    # is unbound again and its invariants hold.
    hived.scheduler.check_invariants()
    snapshot = hived.scheduler.snapshot()
    assert snapshot.groups == {}
    assert {vc.used_gpus for vc in snapshot.vcs.values()} == {0}


def test_a_trace_vc_the_cluster_lacks_is_an_error() -> None:
    with pytest.raises(ClusterMismatchError, match="no VC named c"):
        run("hived", two_vcs_two_nodes(), trace(("c1", "c", 0, 1, 10)))
