"""The chaos run's short form: three minutes of faults at random on a Ray cluster of three
hosts with PostgreSQL, a standby controller and two API workers (`pai.chaos`), and not one of
PAI's promises broken. `python benchmarks/chaos.py --minutes 30 --seed N` is the long form."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.timeout(900)]
"""The run takes about 5 minutes on a 2-core machine: building the cluster, 3 minutes of storm,
letting every job end; the suite's default timeout is 5 minutes."""
MINUTES = 3.0
SEED = 1


def test_three_minutes_of_faults_lose_nothing_run_nothing_twice_and_leave_nothing(
    requirement: Callable[[bool, str], None],
) -> None:
    requirement(sys.platform == "linux" and os.geteuid() == 0, "network namespaces need root")
    requirement(shutil.which("ip") is not None, "iproute2 (`ip`) is not installed")
    from pai.chaos.postgres import server_installed

    requirement(server_installed(), "PostgreSQL's server is not installed")
    requirement(find_spec("ray") is not None, "Ray is not installed (pip install 'pai[ray]')")
    from pai.chaos.run import run_chaos

    root = Path(tempfile.mkdtemp(prefix="pai-chaos-", dir="/tmp"))  # short: Ray's socket paths
    try:
        report = run_chaos(MINUTES, SEED, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    summary = report.as_dict()
    print(f"\nchaos run: {summary}")
    assert report.violations == [], "\n".join(str(v) for v in report.violations)
    assert report.problems == []
    assert summary["fault_count"] >= 10 and summary["job_count"] >= 30
    assert {cost.fault for cost in report.faults} >= {"controller-kill", "store-stop"}
