"""The `pai` policy: overflow onto idle cells, and reservations with backfill for starving jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from scheduler_helpers import gpu_cluster, group

from fake_clock import FakeClock
from pai.errors import ConfigurationError
from pai.scheduler import Allocation, Bind, GroupRequest, Preempt, Wait, WaitKind
from pai.scheduler.pai import PaiScheduler, build_scheduler
from pai.scheduler.scheduler import Scheduler
from pai.settings import Settings

MINUTE = 60.0
HOUR = 60 * MINUTE


def _starving_setup() -> tuple[PaiScheduler, FakeClock, dict[str, float]]:
    """VC a owns two 8-GPU nodes: A (4 GPUs, 40 min) and B (8 GPUs, 100 min) run."""
    clock = FakeClock(0.0)
    declared: dict[str, float] = {}
    scheduler = PaiScheduler(
        gpu_cluster(1, 2, {"a": {"nodes": 2}}),
        clock=clock,
        run_time=lambda request: declared.get(request.name),
        starvation_after_s=30 * MINUTE,
        overflow=False,
    )
    for name, gpus, minutes in (("A", 4, 40), ("B", 8, 100)):
        declared[name] = minutes * MINUTE
        _run(scheduler, group(name, "a", 10, gpus))
    return scheduler, clock, declared


def _run(scheduler: Scheduler, request: GroupRequest) -> None:
    decision = scheduler.schedule(request)
    assert isinstance(decision, Bind), decision
    scheduler.allocate(request.name, decision.placement)


def test_a_starving_job_is_told_when_it_starts_and_small_jobs_backfill_only_in_time() -> None:
    scheduler, clock, declared = _starving_setup()
    big = group("C", "a", 10, 8)
    first = scheduler.schedule(big)
    assert isinstance(first, Wait) and "estimated start" not in first.reason.message

    clock.now = 31 * MINUTE  # past the bound: C gets a reservation
    waiting = scheduler.schedule(big)
    assert isinstance(waiting, Wait)
    assert "estimated start: in about 9 min, after job A ends" in waiting.reason.message
    assert waiting.reason.details["estimated_start"] == 40 * MINUTE

    declared["D"] = 20 * MINUTE  # would hold half of node 1 past C's start
    held_back = scheduler.schedule(group("D", "a", 10, 4))
    assert isinstance(held_back, Wait) and held_back.reason.kind is WaitKind.VC_QUOTA
    assert held_back.reason.details["reserved_for"] == "C"
    assert "ends before that job starts (estimated start: in about 9 min" in (
        held_back.reason.message
    )

    declared["E"] = 5 * MINUTE  # ends before C can start: backfills
    _run(scheduler, group("E", "a", 10, 4))

    clock.now = 36 * MINUTE
    scheduler.release("E")
    clock.now = 40 * MINUTE
    scheduler.release("A")
    _run(scheduler, big)
    assert scheduler.book.reservations == {}
    after = scheduler.schedule(group("D", "a", 10, 4))  # no reservation left, but no room
    assert isinstance(after, Wait) and "reserved_for" not in after.reason.details


def test_without_known_run_times_the_estimate_says_so_and_then_learns() -> None:
    clock = FakeClock(0.0)
    scheduler = PaiScheduler(
        gpu_cluster(1, 1, {"a": {"nodes": 1}}), clock=clock, starvation_after_s=0, overflow=False
    )
    _run(scheduler, group("first", "a", 10, 8))
    waiting = scheduler.schedule(group("second", "a", 10, 8))
    assert isinstance(waiting, Wait)
    assert "estimated start: unknown" in waiting.reason.message

    clock.now = 30 * MINUTE
    scheduler.release("first")  # the VC learns: its jobs run 30 minutes
    _run(scheduler, group("second", "a", 10, 8))
    clock.now = 40 * MINUTE
    third = scheduler.schedule(group("third/default", "a", 10, 8))
    assert isinstance(third, Wait)
    assert "estimated start: in about 20 min, after job second ends" in third.reason.message


def test_a_job_that_finds_its_vc_full_runs_on_another_vcs_idle_cells() -> None:
    scheduler = build_scheduler("pai", gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}}))
    _run(scheduler, group("a1", "a", 10, 8))
    overflow = scheduler.schedule(group("a2", "a", 10, 8))
    assert isinstance(overflow, Bind)  # on b's idle node, as an opportunistic job
    scheduler.allocate("a2", overflow.placement)
    assert scheduler.snapshot().groups["a2"].priority == -1

    owner = scheduler.schedule(group("b1", "b", 10, 8))  # b wants its node back
    assert isinstance(owner, Preempt) and owner.victims == ("a2",)


def _two_opportunistic_jobs(**options: object) -> PaiScheduler:
    """VC a's and b's nodes both idle, taken by opportunistic jobs: `old` started at 0 h (on the
    first node), `young` at 9 h; it is 10 h now."""
    clock = FakeClock(0.0)
    cluster = gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}})
    scheduler = PaiScheduler(cluster, clock=clock, **options)  # type: ignore[arg-type]
    _run(scheduler, group("old", "b", -1, 8))
    clock.now = 9 * HOUR
    _run(scheduler, group("young", "b", -1, 8))
    clock.now = 10 * HOUR
    return scheduler


def test_a_vc_taking_back_idle_cells_preempts_the_job_that_loses_the_least_work() -> None:
    youngest_first = _two_opportunistic_jobs()
    owner = youngest_first.schedule(group("owner", "a", 10, 8))
    assert isinstance(owner, Preempt) and owner.victims == ("young",)  # 1 h lost, not 10

    # A caller that knows checkpoints: `old` saved one a minute ago, `young` has none yet.
    since_checkpoint = {"old": 1 * MINUTE, "young": 1 * HOUR}
    checkpointed = _two_opportunistic_jobs(work_at_risk=since_checkpoint.__getitem__)
    owner = checkpointed.schedule(group("owner", "a", 10, 8))
    assert isinstance(owner, Preempt) and owner.victims == ("old",)


def test_the_old_policies_stay_selectable() -> None:
    cluster = gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}})
    hived = build_scheduler("hived", cluster)
    _run(hived, group("a1", "a", 10, 8))
    assert isinstance(hived.schedule(group("a2", "a", 10, 8)), Wait)  # no overflow

    oppo = build_scheduler("hived-oppo", cluster, reserve_after_s=0)
    _run(oppo, group("a1", "a", 10, 8))
    _run(oppo, group("a2", "a", 10, 8))
    waiting = oppo.schedule(group("a3", "a", 10, 8))
    assert isinstance(waiting, Wait) and "estimated start" not in waiting.reason.message


def test_after_a_restart_an_overflowed_job_is_opportunistic_again() -> None:
    """The controller stores the job's own (guaranteed) request with the placement it got."""
    cluster = gpu_cluster(1, 2, {"a": {"nodes": 1}, "b": {"nodes": 1}})
    scheduler = build_scheduler("pai", cluster)
    stored = []
    for name in ("a1", "a2"):  # a2 overflows onto b's node
        request = group(name, "a", 10, 8)
        decision = scheduler.schedule(request)
        assert isinstance(decision, Bind)
        scheduler.allocate(name, decision.placement)
        stored.append(Allocation(request, decision.placement))

    restarted = build_scheduler("pai", cluster)
    result = restarted.rebuild(stored)
    assert result.downgraded == ("a2",) and not result.rejected
    assert restarted.snapshot().groups["a2"].priority == -1
    preempt = restarted.schedule(group("b1", "b", 10, 8))
    assert isinstance(preempt, Preempt) and preempt.victims == ("a2",)


def test_a_wrong_policy_setting_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"PAI_SCHEDULER: must be one of pai, hived-oppo"):
        Settings.from_env({"PAI_HOME": str(tmp_path), "PAI_SCHEDULER": "slurm"})
    with pytest.raises(ConfigurationError, match=r"PAI_SCHEDULER_RESERVE_AFTER: must be"):
        Settings.from_env({"PAI_HOME": str(tmp_path), "PAI_SCHEDULER_RESERVE_AFTER": "-5"})
    chosen = Settings.from_env({"PAI_HOME": str(tmp_path), "PAI_SCHEDULER": "HiveD"})
    assert chosen.scheduler == "hived"
    assert Settings.from_env({"PAI_HOME": str(tmp_path)}).scheduler == "pai"
