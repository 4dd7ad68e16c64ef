"""How many API worker processes `pai up` starts when not told: one per core, a few at most."""

from __future__ import annotations

import pytest

from pai.cli.up import MOST_DEFAULT_API_WORKERS, default_api_workers


@pytest.mark.parametrize(
    ("cores", "workers"),
    [(1, 0), (2, 2), (3, 3), (4, 4), (8, MOST_DEFAULT_API_WORKERS), (96, MOST_DEFAULT_API_WORKERS)],
)
def test_the_default_follows_the_cores_and_stays_a_few(cores: int, workers: int) -> None:
    assert default_api_workers(cores) == workers
