"""The `pai` policy in a replay: preempted jobs resume from checkpoints, starving jobs get a
reservation, and the per-VC numbers administrators compare policies by."""

from __future__ import annotations

from replay_helpers import run, times, trace, two_vcs_two_nodes

from pai.sim.metrics import summarize_all
from pai.sim.policies import DEFAULT_CHECKPOINT_INTERVAL_S


def test_a_preempted_job_resumes_from_its_last_checkpoint() -> None:
    jobs_in = trace(
        ("a1", "a", 0, 8, 10_000),
        ("a2", "a", 1, 8, 5_000),  # a is full: runs on b's idle node from 1
        ("b1", "b", 2_001, 4, 20),  # b takes its node back after a2 ran 2,000 s
    )
    result, jobs = run("pai", two_vcs_two_nodes(), jobs_in)

    assert DEFAULT_CHECKPOINT_INTERVAL_S == 1_800
    # a2 saved 1,800 s of work, lost 200 s, and runs the other 3,200 s once b1 ends at 2,021
    assert times(jobs["a2"]) == (0, 1, 2_021 + 3_200)
    assert result.preempted_gpu_seconds == 8 * 200
    summary = summarize_all([result])[0]
    assert summary["vcs"]["a"]["preempted_gpu_hours"] == round(8 * 200 / 3600, 1)
    assert summary["vcs"]["b"]["preempted_gpu_hours"] == 0
    assert summary["vcs"]["a"]["idle_gpus_while_waiting"] == 0
    # the same trace restarts a2 from scratch under hived-oppo
    oppo, oppo_jobs = run("hived-oppo", two_vcs_two_nodes(), jobs_in)
    assert oppo.preempted_gpu_seconds == 8 * 2_000
    assert oppo_jobs["a2"].end_s == 2_021 + 5_000
    # and under hived a2 waits for a1 while b's node idles: 8 GPUs for 2,000 s, then 4
    hived = summarize_all([run("hived", two_vcs_two_nodes(), jobs_in)[0]])[0]
    window = hived["makespan_s"]
    expected = (8 * 2_000 + 4 * 20 + 8 * (10_000 - 2_021)) / window
    assert hived["vcs"]["a"]["idle_gpus_while_waiting"] == round(expected, 1)
    assert hived["vcs"]["b"]["idle_gpus_while_waiting"] == 0


# b's node is busy all along, so nothing overflows; a's node always runs two of a stream of
# 4-GPU jobs, so an 8-GPU job never finds it empty unless cells are reserved for it.
STREAM = trace(
    ("b0", "b", 0, 8, 100_000),
    ("big", "a", 5, 8, 100),
    *((f"s{k}", "a", 500.0 * k, 4, 1_000) for k in range(30)),
)


def test_a_large_job_is_not_starved_by_a_stream_of_small_ones() -> None:
    _, hived_jobs = run("hived", two_vcs_two_nodes(), STREAM)
    pai, pai_jobs = run("pai", two_vcs_two_nodes(), STREAM)

    assert hived_jobs["big"].start_s >= 500 * 29  # only once the stream has dried up
    # Past the one-hour bound (asked at 4,000 when s6 ends) big gets a reservation; s8 would
    # end after big can start, so it may not take a's free half as a guaranteed job: it runs
    # there opportunistically until big starts when s7 ends at 4,500, and resumes at 4,600.
    assert times(pai_jobs["big"]) == (4_495, 4_500, 4_600)
    assert times(pai_jobs["s8"]) == (0, 4_000, 4_600 + 1_000)
    assert pai_jobs["s8"].preemptions == 1 and pai_jobs["s8"].opportunistic
    summary = summarize_all([pai])[0]
    assert summary["large_queuing_delay_max_s"] == 4_495
    assert summary["vcs"]["a"]["large_jobs"] == 1
