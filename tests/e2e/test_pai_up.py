"""`pai up` as a user runs it: a separate process, driven by the `pai` SDK over HTTP.

The control plane is killed with SIGKILL while a job runs, started again on the same home, and
the job finishes exactly once with its log intact. The PyTorch DDP example trains across two
tasks with the gloo backend when torch is installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from cli.pai_runner import make_pai
from e2e.pai_process import ADMIN_PASSWORD, PaiUp, job_file
from pai.executors.local import kill_processes_under
from server.harness import LOCAL_CLUSTER_FILE

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
pytestmark = pytest.mark.slow


@pytest.fixture
def pai_up(tmp_path: Path) -> Iterator[PaiUp]:
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE)
    platform.start()
    yield platform
    platform.stop()
    kill_processes_under(platform.home)


def test_a_job_survives_a_killed_control_plane_and_finishes_once(
    pai_up: PaiUp, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    with pai_up.client() as client:
        client.submit(
            job_file(
                "survivor",
                [f"echo run >> {runs}", "echo before the crash", "sleep 4", "echo after the crash"],
            )
        )
        deadline = time.monotonic() + 30
        while client.job("survivor").job_status.state != "RUNNING":
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.1)
    pai_up.kill()
    pai_up.start()
    with pai_up.client() as client:
        detail = client.wait("survivor", timeout=60, poll=0.2)
        assert detail.job_status.state == "SUCCEEDED"
        assert detail.job_status.retries == 0
        log = client.logs("survivor", role="main")
    assert runs.read_text() == "run\n"
    assert "before the crash" in log and "after the crash" in log


def test_the_pytorch_ddp_example_trains_on_two_tasks(
    pai_up: PaiUp, torch_module: ModuleType
) -> None:
    with pai_up.client() as client:
        client.submit(EXAMPLES / "pytorch-ddp.yaml")
        detail = client.wait("pytorch-ddp", timeout=180, poll=0.5)
        log = client.logs("pytorch-ddp", role="worker", index=0)
        assert detail.job_status.state == "SUCCEEDED", (detail.job_status, log)
        log = client.logs("pytorch-ddp", role="worker", index=0)
    assert "final loss:" in log


def test_the_quick_start_works_as_written(pai_up: PaiUp, tmp_path: Path) -> None:
    """README and docs/quickstart.md: log in, submit the hello job, wait, read its log."""
    pai = make_pai(tmp_path / "user")
    login = pai.run(
        "login", "--server", pai_up.url, "--username", "admin", input=f"{ADMIN_PASSWORD}\n"
    )
    assert login.returncode == 0, login.stderr
    submitted = pai.run("submit", str(EXAMPLES / "hello-world.yaml"), "--wait")
    assert submitted.returncode == 0, submitted.stderr
    logs = pai.run("logs", "hello-world")
    assert logs.returncode == 0, logs.stderr
    assert "Hello from task main/0" in logs.stdout
    listing = pai.run("jobs", "--json")
    assert [job["state"] for job in json.loads(listing.stdout)] == ["SUCCEEDED"]
