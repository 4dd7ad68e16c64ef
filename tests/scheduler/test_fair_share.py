"""The usage ledger: what users hold now, and their decayed GPU time."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pai.scheduler.fairshare import UsageLedger, decayed_forward
from pai.scheduler.userlimits import Use

HOUR = 3600.0


def test_recent_use_halves_every_half_life() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.hold("g", job="j", vc="vc", user="u", use=Use(4), guaranteed=True, now=0)
    ledger.release("g", now=1.0)
    assert ledger.recent_gpu_seconds("vc", "u", 1.0) == pytest.approx(4.0, rel=1e-3)
    assert ledger.recent_gpu_seconds("vc", "u", 1.0 + HOUR) == pytest.approx(2.0, rel=1e-3)
    assert ledger.recent_gpu_seconds("vc", "u", 1.0 + 3 * HOUR) == pytest.approx(0.5, rel=1e-3)
    assert ledger.recent_gpu_seconds("vc", "other", 5.0) == 0.0


def test_only_guaranteed_groups_count_against_limits_but_all_gpu_time_is_recent_use() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.hold("a/1", job="a", vc="vc", user="u", use=Use(2, 16), guaranteed=True, now=0)
    ledger.hold("a/2", job="a", vc="vc", user="u", use=Use(1, 8), guaranteed=True, now=0)
    ledger.hold("b/1", job="b", vc="vc", user="u", use=Use(8, 64), guaranteed=False, now=0)
    assert ledger.held("vc", "u") == Use(3, 24, 1)  # one job, two groups
    assert ledger.gpus_held("vc", "u") == 11
    ledger.set_guaranteed("a/2", False)  # lazily preempted
    assert ledger.held("vc", "u") == Use(2, 16, 1)
    ledger.release("a/1", now=10)
    assert ledger.held("vc", "u") == Use()
    assert ledger.recent_gpu_seconds("vc", "u", 10) == pytest.approx(110, rel=1e-2)


def test_a_group_held_again_replaces_what_it_held() -> None:
    ledger = UsageLedger(half_life_s=HOUR)
    ledger.hold("g", job="j", vc="vc", user="u", use=Use(4), guaranteed=True, now=0)
    ledger.hold("g", job="j", vc="vc", user="u", use=Use(2), guaranteed=True, now=0)
    assert ledger.held("vc", "u") == Use(2, 0, 1)
    ledger.release("missing", now=1)
    ledger.release("g", now=1)
    assert ledger.held("vc", "u") == Use()


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(
        st.tuples(st.floats(0, 50_000), st.floats(1, 20_000), st.integers(1, 16)),
        min_size=1,
        max_size=6,
    ),
    later=st.floats(0, 100_000),
)
def test_past_use_given_after_a_restart_counts_as_if_it_was_recorded(
    spans: list[tuple[float, float, int]], later: float
) -> None:
    recorded, restored = UsageLedger(half_life_s=10_000), UsageLedger(half_life_s=10_000)
    end_of_all = max(start + length for start, length, _ in spans)
    now = end_of_all + later
    events = sorted(
        [(start, index, gpus) for index, (start, _, gpus) in enumerate(spans)]
        + [(start + length, index, 0) for index, (start, length, _) in enumerate(spans)]
    )
    for at, index, gpus in events:  # in time order, as a controller sees them
        name = f"g{index}"
        if gpus:
            recorded.hold(name, job=name, vc="vc", user="u", use=Use(gpus), guaranteed=True, now=at)
        else:
            recorded.release(name, now=at)
    for start, length, gpus in spans:
        restored.add_past_use("vc", "u", gpus, start, start + length, now)
    assert restored.recent_gpu_seconds("vc", "u", now) == pytest.approx(
        recorded.recent_gpu_seconds("vc", "u", now), rel=1e-6, abs=1e-6
    )


def test_decayed_forward_is_the_ledgers_closed_form() -> None:
    assert decayed_forward(8.0, 0.0, HOUR, HOUR) == pytest.approx(4.0)
    assert decayed_forward(0.0, 2.0, 1e9, HOUR) == pytest.approx(2 * HOUR / math.log(2))


def test_the_half_life_must_be_positive_and_finite() -> None:
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="half-life"):
            UsageLedger(half_life_s=bad)
