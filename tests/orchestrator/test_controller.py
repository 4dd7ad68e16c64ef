"""The controller with real parts: a SQLite store, the HiveD scheduler and real processes.

The cluster is four CPU "nodes" on this machine (127.0.0.1..4), so multi-node jobs, gangs and
preemption happen for real.
"""

from __future__ import annotations

import itertools
import json
import shlex
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from pai.auth.sealing import SecretBox
from pai.cluster import ClusterConfig, cluster_from_file, cluster_from_yaml
from pai.executors.base import LogStream
from pai.executors.local import kill_processes_under
from pai.orchestrator.active import VcJobs
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.orchestrator.framework import Backoff
from pai.orchestrator.intents import find_job, prepare_job, record_job, request_stop
from pai.platform import open_engine
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.scheduler import Scheduler
from pai.settings import Settings
from pai.store import Database
from pai.store.models import Base, JobEvent, JobRow

CLUSTER = Path(__file__).parents[2] / "examples" / "clusters" / "local-4node.yaml"
KEY = b"controller-test-key-0123456789abcdef"
FINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


class Platform:
    """A controller with its store and executor, as `pai up` assembles them."""

    def __init__(self, home: Path, cluster: ClusterConfig | None = None) -> None:
        self.home = home
        self.database_url = f"sqlite:///{home / 'pai.db'}"
        self.database = Database(self.database_url)
        with self.database.exclusive() as connection:
            self.database.upgrade(connection)
        self.cluster = cluster or cluster_from_file(CLUSTER)
        self.box = SecretBox(KEY)
        self.controller = self._controller()

    def _controller(self) -> Controller:
        settings = Settings(self.home, self.database_url, isolation="host", task_user="")
        engine = open_engine(settings, self.cluster, ExitSpecSource(), self.database)
        return Controller(
            self.database,
            Scheduler(self.cluster),
            engine.executor,
            self.box,
            ControllerSettings(poll_interval=0.05, backoff=Backoff(1, 2)),
        )

    def restart(self) -> None:
        """A new control plane on the same store and state directory (the old one is gone)."""
        self.controller.stop()
        self.controller = self._controller()
        self.controller.start()

    def submit(self, text: str, user: str = "alice", vcs: tuple[str, ...] = ("default",)) -> str:
        with self.database.session() as session:
            job = prepare_job(
                self.cluster,
                self.box,
                username=user,
                text=textwrap.dedent(text),
                may_use_vc=lambda vc: vc in vcs,
            )
            name = record_job(session, job).framework_name
        self.controller.wake()
        return name

    def job(self, name: str) -> JobRow:
        with self.database.session() as session:
            return find_job(session, name)

    def stop(self, name: str) -> None:
        with self.database.session() as session:
            request_stop(session, find_job(session, name))
        self.controller.wake()

    def wait(self, name: str, states: set[str] = FINAL, timeout: float = 60) -> JobRow:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.job(name)
            if row.state in states:
                return row
            time.sleep(0.05)
        raise AssertionError(f"{name} still {self.job(name).state} after {timeout}s")

    def tasks(self, name: str) -> dict[tuple[str, int], dict[str, Any]]:
        status = self.job(name).status
        assert status is not None
        return {(t["role"], t["index"]): t for t in status["attempt"]["tasks"]}

    def log(self, name: str, role: str = "main", index: int = 0) -> str:
        key = self.tasks(name)[(role, index)]["attempts"][-1]["placement"]["key"]
        return self.controller.executor.logs(key, LogStream.ALL).decode()

    def events(self, name: str) -> list[str]:
        with self.database.session() as session:
            job_id = find_job(session, name).id
            return [
                f"{e.reason}: {e.message}"
                for e in session.query(JobEvent).filter_by(job_id=job_id).order_by(JobEvent.id)
            ]


@contextmanager
def running_platform(home: Path, cluster: ClusterConfig | None = None) -> Iterator[Platform]:
    platform = Platform(home, cluster)
    platform.controller.start()
    try:
        yield platform
    finally:
        platform.controller.stop()
        kill_processes_under(home)
        platform.database.dispose()


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    with running_platform(tmp_path) as platform:
        yield platform


def own_sleep(seconds: int) -> str:
    """A duration for `sleep` that only the calling test uses (`300.042917`): tests running in
    the suite's other process sleep too, and a test that looks for its tasks among the
    machine's processes must find its own only."""
    return f"{seconds}.{uuid.uuid4().int % 10**6:06d}"


def job(name: str, commands: list[str], **extra: str) -> str:
    lines = "\n".join(f"      - {json.dumps(command)}" for command in commands)
    more = "\n".join(f"{key}: {value}" for key, value in extra.items())
    return f"""
protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: image, uri: "python:3.11"}}
{more}
taskRoles:
  main:
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands:
{lines}
"""


def test_hello_world_succeeds_and_its_log_has_the_output(platform: Platform) -> None:
    name = platform.submit(job("hello", ["echo hello from $PAI_JOB_NAME"]))
    row = platform.wait(name)
    assert (row.state, row.exit_code, row.retries) == ("SUCCEEDED", 0, 0)
    assert row.launched_at is not None and row.completed_at is not None
    assert "hello from alice~hello" in platform.log(name)
    where = platform.tasks(name)[("main", 0)]["attempts"][-1]["placement"]
    assert (where["isolation"], where["dockerImage"]) == ("host", "python:3.11")
    assert any(event.startswith("Scheduled") for event in platform.events(name))


def test_two_workers_on_two_nodes_talk_over_tcp_using_only_the_environment(
    platform: Platform,
) -> None:
    server = (
        "import os, socket; s = socket.socket(); e = os.environ; "
        "s.bind((e['PAI_HOST_IP_server_0'], int(e['PAI_PORT_LIST_server_0_data']))); "
        "s.listen(); c, _ = s.accept(); print('server got', c.recv(100).decode())"
    )
    client = (
        "import os, socket, time\n"
        "e = os.environ\n"
        "addr = (e['PAI_HOST_IP_server_0'], int(e['PAI_PORT_LIST_server_0_data']))\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        c = socket.create_connection(addr); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "c.sendall(('hi from ' + os.environ['PAI_CONTAINER_HOST_IP']).encode())"
    )
    name = platform.submit(
        f"""
        protocolVersion: 2
        name: tcp
        type: job
        prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
        taskRoles:
          server:
            dockerImage: image
            resourcePerInstance: {{cpu: 4, memoryMB: 512, gpu: 0, ports: {{data: 1}}}}
            commands: [{json.dumps("python3 -c " + shlex.quote(server))}]
          client:
            dockerImage: image
            resourcePerInstance: {{cpu: 4, memoryMB: 512, gpu: 0}}
            commands: [{json.dumps("python3 -c " + shlex.quote(client))}]
        """
    )
    assert platform.wait(name).state == "SUCCEEDED"
    tasks = platform.tasks(name)
    server_node = tasks[("server", 0)]["attempts"][-1]["placement"]["address"]
    client_node = tasks[("client", 0)]["attempts"][-1]["placement"]["address"]
    assert server_node != client_node  # four CPU slots each: a whole node per task
    assert f"server got hi from {client_node}" in platform.log(name, "server")


def test_a_syntax_error_fails_once_whatever_the_retry_count(platform: Platform) -> None:
    name = platform.submit(job("syntax", ["python3 -c 'print(\"unbalanced'"], jobRetryCount="3"))
    row = platform.wait(name)
    assert (row.state, row.exit_code, row.retries) == ("FAILED", 231, 0)
    diagnostics = platform.tasks(name)[("main", 0)]["attempts"][-1]["completion"]["diagnostics"]
    assert "SyntaxError" in diagnostics and 'print("unbalanced' in diagnostics


def test_an_unrecognised_failure_uses_up_the_retries(platform: Platform) -> None:
    name = platform.submit(job("flaky", ["exit 1"], jobRetryCount="2"))
    row = platform.wait(name)
    assert (row.state, row.exit_code, row.retries) == ("FAILED", 255, 2)
    assert row.status is not None and len(row.status["history"]) == 2


def test_a_task_killed_from_outside_is_retried_without_counting(platform: Platform) -> None:
    marker, nap = platform.home / "second-run", own_sleep(60)
    name = platform.submit(
        job(
            "killed",
            [
                f"if [ -e {marker} ]; then echo second run; exit 0; fi",
                f"touch {marker}",
                f"sleep {nap}",
            ],
        )
    )
    platform.wait(name, {"RUNNING"})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sleepers = [
            p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", nap]
        ]
        if sleepers and marker.exists():
            break
        time.sleep(0.05)
    for process in sleepers:
        process.kill()
    row = platform.wait(name)
    assert row.state == "SUCCEEDED" and row.retries == 1
    assert row.status is not None and row.status["retry"]["accountable"] == 0
    assert "second run" in platform.log(name)


def test_master_success_ends_the_job_and_stops_the_workers(platform: Platform) -> None:
    nap = own_sleep(300)
    name = platform.submit(
        f"""
        protocolVersion: 2
        name: master
        type: job
        prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
        taskRoles:
          master:
            dockerImage: image
            completion: {{minSucceededInstances: 1}}
            resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
            commands: ["sleep 1", "echo master done"]
          worker:
            instances: 2
            dockerImage: image
            completion: {{minFailedInstances: -1, minSucceededInstances: -1}}
            resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
            commands: ["sleep {nap}"]
        """
    )
    row = platform.wait(name)
    assert row.state == "SUCCEEDED"
    tasks = platform.tasks(name)
    assert tasks[("worker", 0)]["attempts"][-1]["completion"]["code"] == -220
    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", nap]]


def test_stopping_a_running_job_leaves_no_process_behind(platform: Platform) -> None:
    naps = own_sleep(301), own_sleep(302)
    name = platform.submit(job("long", [f"sleep {naps[0]} & sleep {naps[1]}; wait"]))
    platform.wait(name, {"RUNNING"})
    platform.stop(name)
    row = platform.wait(name)
    assert (row.state, row.exit_code) == ("STOPPED", -210)
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] in (["sleep", naps[0]], ["sleep", naps[1]])
    ]


def test_an_opportunistic_job_is_preempted_by_the_owner_and_runs_again(platform: Platform) -> None:
    oppo = platform.submit(
        """
        protocolVersion: 2
        name: scavenger
        type: job
        prerequisites: [{type: dockerimage, name: image, uri: "python:3.11"}]
        taskRoles:
          main:
            dockerImage: image
            resourcePerInstance: {cpu: 4, memoryMB: 1024, gpu: 0}
            commands: ["echo attempt $FC_FRAMEWORK_ATTEMPT_ID", "sleep 2"]
        defaults: {virtualCluster: research}
        extras: {hivedScheduler: {jobPriorityClass: oppo}}
        """,
        user="bob",
        vcs=("research",),
    )
    # Fill the default VC's three nodes with guaranteed jobs, so only the research node is idle.
    fillers = [
        platform.submit(
            job(f"filler{i}", ["sleep 3"]).replace(
                "cpu: 1, memoryMB: 256", "cpu: 4, memoryMB: 1024"
            )
        )
        for i in range(3)
    ]
    platform.wait(oppo, {"RUNNING"})
    prod = platform.submit(
        """
        protocolVersion: 2
        name: urgent
        type: job
        prerequisites: [{type: dockerimage, name: image, uri: "python:3.11"}]
        taskRoles:
          main:
            dockerImage: image
            resourcePerInstance: {cpu: 4, memoryMB: 1024, gpu: 0}
            commands: ["echo urgent work"]
        defaults: {virtualCluster: research}
        extras: {hivedScheduler: {jobPriorityClass: prod}}
        """,
        user="carol",
        vcs=("research",),
    )
    assert platform.wait(prod).state == "SUCCEEDED"
    row = platform.wait(oppo)
    assert row.state == "SUCCEEDED"
    assert row.retries >= 1 and row.status is not None and row.status["retry"]["accountable"] == 0
    assert any(event.startswith("Preempted") for event in platform.events(oppo))
    for filler in fillers:
        platform.wait(filler)


def test_a_restarted_control_plane_finishes_a_running_job_once(platform: Platform) -> None:
    counter = platform.home / "runs"
    name = platform.submit(
        job("survivor", [f"echo run >> {counter}", "sleep 2", "echo finished work"])
    )
    platform.wait(name, {"RUNNING"})
    platform.restart()
    row = platform.wait(name)
    assert (row.state, row.retries) == ("SUCCEEDED", 0)
    assert counter.read_text() == "run\n"
    assert "finished work" in platform.log(name)


def test_secrets_reach_the_task_but_never_the_store(platform: Platform) -> None:
    text = job("secretive", ["echo token-length ${#TOKEN} ends-with ${TOKEN: -3}"])
    text = text.replace("commands:\n", "commands:\n      - export TOKEN='<% $secrets.token %>'\n")
    text += "secrets:\n  token: s3cr3t-v4lue\n"
    name = platform.submit(text)
    assert platform.wait(name).state == "SUCCEEDED"
    assert "token-length 12 ends-with lue" in platform.log(name)
    with platform.database.engine.connect() as connection:
        dump = [
            str(row)
            for table in Base.metadata.sorted_tables
            for row in connection.execute(table.select())
        ]
    assert dump and not any("s3cr3t-v4lue" in row for row in dump)


def test_a_stopped_task_has_its_jobs_grace_period_to_save_its_state(tmp_path: Path) -> None:
    # The cluster file gives stopped tasks no grace at all: SIGKILL right after SIGTERM.
    cluster = cluster_from_yaml(CLUSTER.read_text() + "podGracefulDeletionTimeoutSec: 0\n")
    with running_platform(tmp_path, cluster) as platform:
        names = {}
        for label, extras in (("patient", "{podGracefulDeletionTimeoutSec: 5}"), ("hasty", "{}")):
            saving = job(
                label,
                [
                    f"trap 'sleep 0.5; echo saved > {tmp_path / label}.saved; exit 0' TERM",
                    f"touch {tmp_path / label}.ready",
                    "sleep 300 & wait",
                ],
                extras=extras,
            )
            names[label] = platform.submit(saving)
        for label in names:
            platform.wait(names[label], {"RUNNING"})
            deadline = time.monotonic() + 30
            while not (tmp_path / f"{label}.ready").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        for name in names.values():
            platform.stop(name)
        assert {platform.wait(name).state for name in names.values()} == {"STOPPED"}
        assert (tmp_path / "patient.saved").read_text() == "saved\n"
        assert not (tmp_path / "hasty.saved").exists()


def test_a_retried_job_resumes_from_its_previous_attempts_work_directory(
    platform: Platform,
) -> None:
    name = platform.submit(
        job(
            "resume",
            [
                'if [ -n "$PAI_PREVIOUS_WORK_DIR" ]; then',
                '  echo "resumed from $(cat "$PAI_PREVIOUS_WORK_DIR/checkpoint")"; exit 0',
                "fi",
                'echo step-42 > "$PAI_WORK_DIR/checkpoint"',
                "exit 1",
            ],
            jobRetryCount="1",
        )
    )
    row = platform.wait(name)
    assert (row.state, row.retries) == ("SUCCEEDED", 1)
    assert "resumed from step-42" in platform.log(name)


def test_a_costly_view_of_the_cluster_trails_the_passes_but_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At thousands of nodes the scheduler's snapshot takes tens of milliseconds: the view
    API workers show is refreshed at most at a pace that bounds its cost, and still shows
    the last pass's outcome without waiting for another event."""
    platform = Platform(tmp_path)
    snapshot = platform.controller.scheduler.snapshot
    refreshed: list[float] = []

    def slow_snapshot() -> object:
        time.sleep(0.05)
        refreshed.append(time.monotonic())
        return snapshot()

    monkeypatch.setattr(platform.controller.scheduler, "snapshot", slow_snapshot)
    platform.controller.start()
    try:
        name = platform.submit(job("viewed", [f"sleep {own_sleep(30)}"]))
        platform.wait(name, {"RUNNING"})
        deadline = time.monotonic() + 5
        while platform.controller.vc_jobs().get("default", VcJobs()).running != 1:
            assert time.monotonic() < deadline, "the view never showed the running job"
            time.sleep(0.05)
        gaps = [later - earlier for earlier, later in itertools.pairwise(refreshed)]
        assert gaps and min(gaps) >= 0.4  # 10% of the controller's time: 0.5 s per 0.05 s
    finally:
        platform.controller.stop()
        kill_processes_under(tmp_path)
        platform.database.dispose()
