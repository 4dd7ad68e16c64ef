"""The fault schedule is the seed's: the same seed gives the same faults, another seed others,
and a long run meets every kind of fault often enough to count."""

from __future__ import annotations

from collections import Counter

from pai.chaos.schedule import BY_NAME, FAULT_KINDS, plan


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert plan(7, 600) == plan(7, 600)
    assert plan(7, 600) != plan(8, 600)


def test_half_an_hour_brings_over_a_hundred_faults_of_every_kind_within_their_bounds() -> None:
    planned = plan(1, 30 * 60)

    assert len(planned) > 100
    assert set(Counter(fault.fault for fault in planned)) == {kind.name for kind in FAULT_KINDS}
    for fault in planned:
        kind = BY_NAME[fault.fault]
        assert fault.target in kind.targets
        assert kind.hold[0] <= fault.hold <= kind.hold[1]
        assert 0 < fault.at < 30 * 60
    assert [fault.at for fault in planned] == sorted(fault.at for fault in planned)
