"""The control plane scaled out: API workers and controllers as processes of their own on one
database (SQLite, PostgreSQL), as an operator runs them with `pai serve`; and `pai up
--api-workers`, which starts that layout on one machine."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil
import pytest

from e2e.pai_process import ADMIN_PASSWORD, PaiUp, free_port, job_file, launch, spawn
from pai.auth.bearers import DEFAULT_TTL_SECONDS as BEARER_TTL_SECONDS
from pai.executors.local import kill_processes_under
from pai.sdk import Client
from server.harness import BACKENDS, LOCAL_CLUSTER_FILE, empty_database

QUICK_JOBS = 12
BURST = 32
"""Submissions at once through one worker: more than its database pool's connections."""


class Deployment:
    """Processes of `pai serve` sharing one home (the tasks' directories) and one database."""

    def __init__(self, home: Path, database_url: str) -> None:
        self.home = home
        self.env = {"PAI_DATABASE_URL": database_url, "PAI_CONTROLLER_LEASE_SECONDS": "3"}
        self.processes: list[subprocess.Popen[bytes]] = []

    def controller(self, name: str, *, wait: bool = True) -> tuple[subprocess.Popen[bytes], int]:
        port = free_port()
        arguments = ["serve", "controller", "--port", str(port)]
        arguments += ["--cluster", str(LOCAL_CLUSTER_FILE)]
        if not wait:  # a standby does not listen until it takes over
            process = spawn(arguments, home=self.home, output=self._output(name), env=self.env)
            self.processes.append(process)
            return process, port
        return self._launch(arguments, name, port), port

    def api_worker(self, name: str) -> str:
        port = free_port()
        self._launch(["serve", "api", "--port", str(port)], name, port)
        return f"http://127.0.0.1:{port}"

    def _launch(self, arguments: list[str], name: str, port: int) -> subprocess.Popen[bytes]:
        process = launch(
            arguments, home=self.home, port=port, output=self._output(name), env=self.env
        )
        self.processes.append(process)
        return process

    def _output(self, name: str) -> Path:
        return self.home.parent / f"{name}.out"

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        kill_processes_under(self.home)


@pytest.fixture(params=BACKENDS)
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    with empty_database(request.param, request, tmp_path / "database") as url:
        running = Deployment(tmp_path / "home", url)
        try:
            yield running
        finally:
            running.stop()


def wait_for(condition, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_standby_controller_takes_over_and_both_workers_keep_every_submission(
    deployment: Deployment, tmp_path: Path
) -> None:
    first, _ = deployment.controller("controller-a")
    standby, _ = deployment.controller("controller-b", wait=False)
    workers = [deployment.api_worker("api-1"), deployment.api_worker("api-2")]
    runs = tmp_path / "runs"
    with ExitStack() as stack:
        clients = [
            stack.enter_context(Client.login(url, "admin", ADMIN_PASSWORD)) for url in workers
        ]
        long_job = ["echo started >> " + str(runs), "sleep 5", "echo finished"]
        clients[0].submit(job_file("outlives-its-controller", long_job))
        wait_for(
            lambda: clients[1].job("outlives-its-controller").job_status.state == "RUNNING",
            "the job to run (as the other worker shows it)",
        )
        quick = [f"quick-{index}" for index in range(QUICK_JOBS)]
        for index, name in enumerate(quick[: QUICK_JOBS // 2]):
            clients[index % 2].submit(job_file(name, ["echo quick"]))
        first.send_signal(signal.SIGKILL)
        first.wait()
        for index, name in enumerate(quick[QUICK_JOBS // 2 :]):  # while no controller acts
            clients[index % 2].submit(job_file(name, ["echo quick"]))
        burst = [f"burst-{index}" for index in range(BURST)]
        with ThreadPoolExecutor(BURST) as submitting:
            submitted = submitting.map(
                lambda name: clients[0].submit(job_file(name, ["echo burst"])), burst
            )
            assert len(list(submitted)) == BURST

        detail = clients[1].wait("outlives-its-controller", timeout=90, poll=0.2)
        assert detail.job_status.state == "SUCCEEDED"
        assert detail.job_status.retries == 0
        assert runs.read_text().splitlines() == ["started"]  # it ran once, not again
        log = clients[0].logs("outlives-its-controller", role="main")  # from the new controller
        assert "finished" in log
        for index, name in enumerate(quick):
            assert clients[index % 2].wait(name, timeout=60, poll=0.2).job_status.state == (
                "SUCCEEDED"
            )
        listed = {job.name for job in clients[0].jobs(limit=1000)}
        assert {"outlives-its-controller", *quick, *burst} <= listed
    assert standby.poll() is None  # it acts now
    assert_a_logout_holds_on_every_worker(workers)


def assert_a_logout_holds_on_every_worker(workers: list[str]) -> None:
    """A worker remembers who bears a token for a moment: a logout through another worker must
    still be refused there within that moment."""
    first, second = (f"{url}/api/v2" for url in workers)
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    token = httpx.post(f"{first}/authn/basic/login", json=login).raise_for_status().json()["token"]
    headers = {"Authorization": f"Bearer {token}"}

    def answer_of_second() -> int:
        return httpx.get(f"{second}/jobs", params={"limit": 1}, headers=headers).status_code

    assert answer_of_second() == 200  # the second worker now remembers the token
    httpx.delete(f"{first}/authn/basic/logout", headers=headers).raise_for_status()
    wait_for(
        lambda: answer_of_second() == 401,
        "the other worker to refuse the logged-out token",
        timeout=BEARER_TTL_SECONDS + 3,
    )


def test_pai_up_with_api_workers_runs_jobs_and_reads_their_logs(tmp_path: Path) -> None:
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE)
    platform.start("--api-workers", "2")
    try:
        with platform.client() as client:
            client.submit(job_file("through-a-worker", ["echo hello from a task"]))
            detail = client.wait("through-a-worker", timeout=60, poll=0.2)
            assert detail.job_status.state == "SUCCEEDED"
            assert "hello from a task" in client.logs("through-a-worker", role="main")
            clusters = httpx.get(
                f"{platform.url}/api/v2/virtual-clusters",
                headers={"Authorization": f"Bearer {client.token}"},
            )
            assert clusters.status_code == 200 and "research" in clusters.json()
            home_page = httpx.get(f"{platform.url}/", cookies={"pai_session": client.token or ""})
            assert home_page.status_code == 200 and "research" in home_page.text
    finally:
        platform.stop()
        kill_processes_under(platform.home)


def test_pai_up_serves_the_api_from_a_worker_per_core_by_default(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("on a single core `pai up` serves everything from one process")
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE)
    platform.start(default_layout=True)
    try:
        assert platform.process is not None
        expected = min(cores, 4)
        printed = platform.output.read_text()
        assert f"api:     {expected} worker processes" in printed, printed
        (serving,) = [
            child
            for child in psutil.Process(platform.process.pid).children()
            if "serve" in child.cmdline()
        ]

        def workers() -> int:
            return sum("spawn_main" in " ".join(c.cmdline()) for c in serving.children())

        wait_for(lambda: workers() == expected, "the API's worker processes")
        with platform.client() as client:
            client.submit(job_file("by-default", ["echo hello from a task"]))
            detail = client.wait("by-default", timeout=60, poll=0.2)
            assert detail.job_status.state == "SUCCEEDED"
            assert "hello from a task" in client.logs("by-default", role="main")
        scraped = httpx.get(f"{platform.url}/metrics")  # where Prometheus scrapes `pai up`
        assert scraped.status_code == 200, scraped.text
        assert 'pai_jobs{state="SUCCEEDED",virtual_cluster="default"} 1.0' in scraped.text
    finally:
        platform.stop()
        kill_processes_under(platform.home)
