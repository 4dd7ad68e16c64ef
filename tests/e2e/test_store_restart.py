"""PostgreSQL restarts under a stream of submissions, through a real `pai up`: nobody who
submits sees an error, and every job is recorded once and runs.

The test runs a PostgreSQL cluster of its own (Debian's `initdb` and `pg_ctl`, on a free port
of 127.0.0.1, as the `postgres` user), so that it can restart it; submissions come from the
SDK five times a second and from the `pai` command once a second, while the restart takes
the store away for two seconds (about as long as a server's restart took when this was
reported; a bare `pg_ctl restart` of the test's small cluster can be over between two
submissions). The server answers what it cannot save with 503 and `Retry-After`; clients
try again, naming each submission so that one that had arrived is answered as accepted, not
as a conflict.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.pai_process import PaiUp, job_file, running
from pai.chaos.postgres import PostgresCluster
from pai.executors.local import kill_processes_under
from server.harness import LOCAL_CLUSTER_FILE

pytestmark = pytest.mark.slow
STREAM_SECONDS = 12.0
RESTART_AFTER = 4.0
OUTAGE_SECONDS = 2.0


@pytest.fixture
def platform(restartable_postgres: PostgresCluster, tmp_path: Path) -> Iterator[PaiUp]:
    with running(tmp_path / "home", {"PAI_DATABASE_URL": restartable_postgres.url}) as up:
        yield up


class Stream:
    """Submissions at a steady rate in a thread; what each submitter saw."""

    def __init__(self, submit: Callable[[str], object], prefix: str, per_second: float) -> None:
        self.names: list[str] = []
        self.failures: list[str] = []
        self._submit = submit
        self._prefix = prefix
        self._interval = 1 / per_second
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        ends = time.monotonic() + STREAM_SECONDS
        number = 0
        while time.monotonic() < ends:
            name = f"{self._prefix}-{number}"
            number += 1
            started = time.monotonic()
            try:
                self._submit(name)
                self.names.append(name)
            except Exception as error:  # what the user would have seen
                self.failures.append(f"{name}: {error}")
            time.sleep(max(0.0, self._interval - (time.monotonic() - started)))


def test_a_store_restart_under_a_stream_of_submissions_loses_nothing_and_doubles_nothing(
    platform: PaiUp, restartable_postgres: PostgresCluster, tmp_path: Path
) -> None:
    pai = platform.admin_cli(tmp_path / "cli")
    jobs_dir = tmp_path / "job-files"
    jobs_dir.mkdir()
    client = platform.client()

    def by_sdk(name: str) -> object:
        return client.submit(job_file(name, ["echo ran"]))

    def by_cli(name: str) -> object:
        path = jobs_dir / f"{name}.yaml"
        path.write_text(job_file(name, ["echo ran"]))
        done = pai.run("submit", str(path))
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip())
        return done

    streams = [Stream(by_sdk, "sdk", 5), Stream(by_cli, "cli", 1)]
    for stream in streams:
        stream.start()
    time.sleep(RESTART_AFTER)
    restartable_postgres.restart(OUTAGE_SECONDS)
    for stream in streams:
        stream.join()

    assert [failure for stream in streams for failure in stream.failures] == []
    submitted = sorted(name for stream in streams for name in stream.names)
    listed = sorted(job.name for job in client.jobs())
    assert listed == submitted  # each job once: none lost, none recorded twice
    deadline = time.monotonic() + 180
    while {job.state for job in client.jobs()} != {"SUCCEEDED"}:
        assert time.monotonic() < deadline, {job.name: job.state for job in client.jobs()}
        time.sleep(1)
    server_log = (platform.home / "pai.log").read_text()
    assert '"path": "/api/v2/jobs", "status": 503' in server_log  # clients did meet it
    client.close()


def test_pai_up_started_while_its_store_is_down_waits_for_it_and_then_serves(
    restartable_postgres: PostgresCluster, tmp_path: Path
) -> None:
    """As under a supervisor that starts it during a store restart: no crash, a message."""
    restartable_postgres.pause()
    store = {"PAI_DATABASE_URL": restartable_postgres.url}
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE, store)
    starting = threading.Thread(target=platform.start, daemon=True)
    starting.start()
    try:
        deadline = time.monotonic() + 60
        while "waiting for it" not in _printed(platform):
            assert time.monotonic() < deadline, _printed(platform)[-2000:]
            time.sleep(0.2)
        assert "PAI's store cannot be reached (" in _printed(platform)
        restartable_postgres.resume()
        starting.join(timeout=90)

        assert platform.process is not None and platform.process.poll() is None
        with platform.client() as client:
            client.submit(job_file("after-the-store", ["echo ran"]))
            deadline = time.monotonic() + 60
            while client.job("after-the-store").state != "SUCCEEDED":
                assert time.monotonic() < deadline, client.job("after-the-store").state
                time.sleep(0.5)
        assert "Traceback" not in _printed(platform)
    finally:
        platform.stop()
        kill_processes_under(platform.home)


def _printed(platform: PaiUp) -> str:
    return platform.output.read_text(errors="replace") if platform.output.exists() else ""


def test_pai_up_whose_store_never_answers_says_why_and_exits(tmp_path: Path) -> None:
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/postgres"
    env = {**os.environ, "PAI_HOME": str(tmp_path / "home"), "PAI_DATABASE_URL": unreachable}
    env["PAI_STORE_WAIT_SECONDS"] = "1"
    pai = Path(sys.executable).with_name("pai")
    done = subprocess.run(
        [str(pai), "up", "--port", "1"], env=env, capture_output=True, text=True, timeout=120
    )

    printed = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, printed
    assert "waiting for it up to PAI_STORE_WAIT_SECONDS" in printed
    assert "error: PAI_DATABASE_URL: PAI's store cannot be reached (" in printed
    assert "waited 1 s" in printed and "Traceback" not in printed
