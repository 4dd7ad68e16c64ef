"""A task's own record of its run, as `task_program.py` writes it, read back as a `Run`: a run
that ended by itself says how, a killed one is seen until its last beat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pai.chaos.collect import read_runs
from pai.chaos.workload import PROGRAM


def task_env(job: str, job_attempt: int) -> dict[str, str]:
    return {
        **os.environ,
        "PAI_JOB_NAME": job,
        "PAI_CURRENT_TASK_ROLE_NAME": "main",
        "PAI_TASK_INDEX": "0",
        "PAI_CONTAINER_HOST_IP": "10.201.0.2",
        "FC_FRAMEWORK_ATTEMPT_ID": str(job_attempt),
        "FC_TASK_ATTEMPT_ID": "0",
    }


def test_runs_that_end_by_themselves_and_one_that_is_killed(tmp_path: Path) -> None:
    def task(job: str, attempt: int, *behaviour: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(PROGRAM), str(tmp_path), *behaviour], env=task_env(job, attempt)
        )

    assert task("alice~fails", 0, "fail", "0.3", "3").wait(10) == 3
    assert task("alice~flaky", 0, "flaky", "0").wait(10) == 1
    assert task("alice~flaky", 1, "flaky", "0").wait(10) == 0
    forever = task("alice~stopped", 0, "forever")
    time.sleep(1.0)
    forever.send_signal(signal.SIGKILL)
    forever.wait(10)

    runs = {(run.job, run.job_attempt): run for run in read_runs(tmp_path)}

    assert {key: run.exit_code for key, run in runs.items()} == {
        ("alice~fails", 0): 3,
        ("alice~flaky", 0): 1,
        ("alice~flaky", 1): 0,
        ("alice~stopped", 0): None,
    }
    assert runs[("alice~fails", 0)].end - runs[("alice~fails", 0)].start >= 0.3
    killed = runs[("alice~stopped", 0)]
    assert killed.host == "10.201.0.2" and (killed.role, killed.index) == ("main", 0)
    assert 0.5 < killed.end - killed.start < 1.5  # seen alive until its last beat
