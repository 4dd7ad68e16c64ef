"""Limits per user in a VC: which limit applies, what a group holds, and why a job waits."""

from __future__ import annotations

from pai.cluster.model import SkuType, UserLimit
from pai.scheduler.types import GpuShare, GroupRequest, PodRequest, WaitKind
from pai.scheduler.userlimits import (
    LIMIT_DETAIL,
    EffectiveLimit,
    Use,
    effective_limit,
    group_use,
    over_limit,
)

V100 = SkuType("V100", gpu=1, cpu=8, memory_mb=61440)


def test_a_job_within_the_limit_is_not_held_back() -> None:
    limit = EffectiveLimit(UserLimit(gpus=6, jobs=3))
    assert over_limit("alice", "default", limit, Use(4, 32, 2), Use(2, 16, 1)) is None
    assert over_limit("alice", "default", EffectiveLimit(UserLimit()), Use(99), Use(99)) is None


def test_a_job_past_the_limit_waits_saying_who_uses_what() -> None:
    reason = over_limit(
        "alice", "default", EffectiveLimit(UserLimit(gpus=6)), Use(6, 48, 3), Use(2, 16, 1)
    )
    assert reason is not None and reason.kind is WaitKind.USER_LIMIT
    assert reason.message == (
        "alice uses 6 of the 6 GPUs a user may have in VC 'default'; this job needs 2 GPUs. "
        "It starts when other jobs of alice in the VC end."
    )
    assert reason.details[LIMIT_DETAIL] == [
        {"resource": "gpus", "used": 6.0, "limit": 6.0, "needs": 2.0}
    ]


def test_every_resource_past_its_limit_is_named_with_the_group_it_comes_from() -> None:
    limit = EffectiveLimit(UserLimit(gpus=8, cpus=100, jobs=2), ("interns",))
    reason = over_limit("bob", "vision", limit, Use(7, 56, 2), Use(2, 16, 1))
    assert reason is not None
    assert reason.message.startswith(
        "bob uses 7 of the 8 GPUs and 2 of the 2 running jobs a member of group 'interns' "
        "may have in VC 'vision'; this job needs 2 GPUs and 1 jobs."
    )
    assert reason.details["groups"] == ["interns"]


def test_a_job_larger_than_the_limit_says_it_needs_the_limit_raised() -> None:
    reason = over_limit("alice", "default", EffectiveLimit(UserLimit(gpus=4)), Use(), Use(8))
    assert reason is not None
    assert reason.message == (
        "this job needs 8 GPUs but a user may have at most 4 GPUs in VC 'default': "
        "it starts only once an administrator raises the limit."
    )


def test_group_limits_replace_the_default_and_the_most_generous_wins() -> None:
    default = UserLimit(gpus=4, jobs=2)
    assert effective_limit(default, {}) == EffectiveLimit(default)
    combined = effective_limit(
        default,
        {"b": UserLimit(gpus=16, cpus=64), "a": UserLimit(gpus=8, cpus=None, jobs=5)},
    )
    assert combined == EffectiveLimit(UserLimit(gpus=16, cpus=None, jobs=None), ("a", "b"))
    assert combined.whose == "a member of 'a', 'b'"


def test_a_group_holds_its_cells_resources_or_its_share_of_a_gpu() -> None:
    whole = GroupRequest("g", "vc", 10, (PodRequest("w", 0, 2), PodRequest("w", 1, 2)))
    assert group_use(whole, V100) == Use(4, 32)
    shared = GroupRequest(
        "s", "vc", 10, (PodRequest("w", 0, 1, GpuShare(250), cpu_milli=2000, memory_mb=1024),)
    )
    assert group_use(shared, V100) == Use(0.25, 2)
