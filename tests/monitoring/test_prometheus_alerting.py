"""PAI's monitoring with the real parts: Debian's `prometheus` and `prometheus-alertmanager`
binaries configured by `pai monitoring config`, a real `pai up`, and a real SMTP server.

A task that burns CPU shows up in a PromQL query with its labels; a job that sits idle trips
PaiJobIdle, Alertmanager calls PAI's webhook, and PAI tags the job, stops it, cordons its node
and e-mails its owner, as the administrator's actions say.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.pai_runner import make_pai
from e2e.pai_process import ADMIN_PASSWORD, PaiUp
from monitoring.conftest import Mailbox, free_port
from pai.executors.local import kill_processes_under
from server.harness import LOCAL_CLUSTER_FILE

pytestmark = pytest.mark.slow

WAIT = 90.0
ACTIONS = """
smtp: {{host: 127.0.0.1, port: {port}, from: pai@example.com}}
rules:
- match: {{alertname: PaiJobIdle}}
  actions: [email-user, {{tag-jobs: {{tags: [idle]}}}}, stop-jobs, cordon-nodes]
"""
JOB = """
protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
taskRoles:
  main:
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands: ["{command}"]
"""


def wait_for(find: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := find()):
        assert time.monotonic() < deadline, f"not within {WAIT:g} s: {what}"
        time.sleep(0.5)
    return found


@pytest.fixture
def binaries(requirement: Callable[[bool, str], None]) -> dict[str, str]:
    found = {name: shutil.which(name) for name in ("prometheus", "prometheus-alertmanager")}
    requirement(
        all(found.values()),
        "Debian's prometheus and prometheus-alertmanager are not installed "
        "(apt-get install prometheus prometheus-alertmanager)",
    )
    return {name: str(path) for name, path in found.items()}


@pytest.fixture
def platform(tmp_path: Path, mailbox: Mailbox) -> Iterator[PaiUp]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "alert-actions.yaml").write_text(ACTIONS.format(port=mailbox.port))
    pai = PaiUp(home, LOCAL_CLUSTER_FILE, {"PAI_MONITOR_INTERVAL": "1"})
    pai.start()
    yield pai
    pai.stop()
    kill_processes_under(home)  # tasks outlive `pai up` by design


def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)


def test_prometheus_sees_tasks_and_an_idle_job_is_acted_on(
    binaries: dict[str, str], platform: PaiUp, mailbox: Mailbox, tmp_path: Path
) -> None:
    config = tmp_path / "monitoring"
    prometheus_port, alertmanager_port = free_port(), free_port()
    admin = make_pai(tmp_path / "admin")
    assert (
        admin.run(
            "login", "--server", platform.url, "--username", "admin", "--password", ADMIN_PASSWORD
        ).returncode
        == 0
    )
    written = admin.run(
        "monitoring", "config", "--out", str(config), "--idle-for", "5s",
        "--scrape-interval", "1s", "--evaluation-interval", "1s", "--group-wait", "1s",
        "--alertmanager", f"127.0.0.1:{alertmanager_port}",
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    servers = [
        start(
            [
                binaries["prometheus-alertmanager"],
                f"--config.file={config / 'alertmanager.yml'}",
                f"--storage.path={config / 'alertmanager-data'}",
                f"--web.listen-address=127.0.0.1:{alertmanager_port}",
                "--cluster.listen-address=",
            ],
            config / "alertmanager.log",
        ),
        start(
            [
                binaries["prometheus"],
                f"--config.file={config / 'prometheus.yml'}",
                f"--storage.tsdb.path={config / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
            ],
            config / "prometheus.log",
        ),
    ]
    try:
        with platform.client() as client:
            client.create_user("alice", "alice-password-1", email="alice@example.com")
        user = make_pai(tmp_path / "alice")
        user.run("login", "--server", platform.url, "--username", "alice",
                 "--password", "alice-password-1")  # fmt: skip
        for name, command in (
            ("burner", "python3 -c 'while True: pass'"),
            ("sleeper", "sleep 600"),
        ):
            job_file = tmp_path / f"{name}.yaml"
            job_file.write_text(JOB.format(name=name, command=command))
            assert user.run("submit", str(job_file)).returncode == 0

        def busy() -> list[dict[str, Any]]:
            # A busy loop keeps a core busy; on a loaded machine it gets a share of one.
            query = 'task_cpu_percent{job_name="alice~burner"} > 10'
            answer = httpx.get(
                f"http://127.0.0.1:{prometheus_port}/api/v1/query", params={"query": query}
            ).json()
            return list(answer["data"]["result"])

        [series] = wait_for(busy, "the burner's CPU in Prometheus")
        labels = series["metric"]
        assert (labels["username"], labels["virtual_cluster"]) == ("alice", "default")
        assert (labels["role_name"], labels["task_index"]) == ("main", "0")
        assert labels["node"].startswith("node")

        with platform.client() as client:
            stopped = wait_for(
                lambda: (
                    client.job("alice~sleeper").state == "STOPPED" and client.job("alice~sleeper")
                ),
                "the idle job stopped",
            )
            [(recipients, message)] = wait_for(lambda: mailbox.messages, "an e-mail to alice")
            sleeper_node = next(t.container_node_name for _, t in stopped.tasks())
            nodes = {node.name: node for node in client.nodes()}
            burner = client.job("alice~burner")
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)

    assert "idle" in stopped.tags and burner.state == "RUNNING" and "idle" not in burner.tags
    assert recipients == ["alice@example.com"]
    text = message.get_payload()
    assert "alice~sleeper" in text and "PaiJobIdle" in text and "stop-jobs" in text
    assert nodes[sleeper_node].engine_state == "cordoned"
    uncordoned = admin.run("admin", "node", "uncordon", sleeper_node)
    assert uncordoned.returncode == 0, uncordoned.stderr
    listed = user.run("alerts", "--state", "all")
    assert "PaiJobIdle" in listed.stdout and "stop-jobs" in listed.stdout, listed.stderr
    usage = user.run("job", "burner", "--usage")
    assert "main/0" in usage.stdout and "(limit 256)" in usage.stdout, usage.stderr
