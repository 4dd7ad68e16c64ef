"""`pai sim --from-history` against a real PAI platform: the admin's job listing becomes a trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cli.pai_runner import make_pai
from pai.sdk import Client
from pai.sim.traces import read_trace_csv
from sdk.jobs_api import command_job, require_jobs_api, unique
from server.harness import RunningServer


@pytest.mark.slow
def test_history_of_a_real_server_is_exported_as_a_trace(
    pai_platform: RunningServer, requirement: Callable[[bool, str], None], tmp_path: Path
) -> None:
    require_jobs_api(pai_platform, requirement)
    admin = pai_platform.admin
    with Client.login(pai_platform.base_url, admin.username, admin.password) as client:
        submitted = client.submit(command_job(unique("history"), "true"))
        assert client.wait(submitted.name, timeout=120).state == "SUCCEEDED"
    pai = make_pai(tmp_path)
    pai.login(pai_platform, admin.username, admin.password)

    done = pai.run("sim", "--from-history", "--export-history", str(tmp_path / "history.csv"))

    assert done.returncode == 0, done.stderr
    # The example cluster has CPUs only: the job is listed, and left out as a GPU-less job.
    assert "wrote 0 jobs to" in done.stderr
    assert "no GPUs: " in done.stderr
    assert len(read_trace_csv(tmp_path / "history.csv")) == 0
