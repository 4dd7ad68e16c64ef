"""A `Pace`: cheap work runs every time; costly work waits in proportion to its cost."""

from __future__ import annotations

import pytest

from fake_clock import FakeClock
from pai.orchestrator import pacing
from pai.orchestrator.pacing import Pace


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(pacing.time, "monotonic", fake)
    return fake


def test_work_cheaper_than_its_threshold_is_never_held_back(clock: FakeClock) -> None:
    pace = Pace(0.1, free_below=0.005)
    for _ in range(3):
        with pace.run():
            clock.now += 0.004
        assert pace.wait() == 0.0


def test_costly_work_takes_at_most_its_share_of_the_time(clock: FakeClock) -> None:
    pace = Pace(0.1, free_below=0.005)
    assert pace.wait() == 0.0  # the first run is due at once
    with pace.run():
        clock.now += 0.05  # a 5,000-node view
    assert pace.wait() == pytest.approx(0.45)  # 0.5 s after it started: 10% of the time
    clock.now += 0.45
    assert pace.wait() == 0.0


def test_a_failed_run_counts_as_well(clock: FakeClock) -> None:
    pace = Pace(0.5, free_below=0.0)
    with pytest.raises(RuntimeError), pace.run():
        clock.now += 1.0
        raise RuntimeError("the store is away")
    assert pace.wait() == pytest.approx(1.0)
