"""`pai up` as a user runs it: a separate process, driven by the `pai` SDK over HTTP.

The control plane is killed with SIGKILL while jobs run and clients hold connections to it,
started again at once on the same home and port, and the jobs finish exactly once with their
logs intact. The PyTorch DDP example trains across two tasks with the gloo backend when torch is
installed.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path
from types import ModuleType

import pytest

from cli.pai_runner import make_pai
from e2e.pai_process import ADMIN_PASSWORD, PaiUp, job_file

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
pytestmark = pytest.mark.slow


def held_connections(port: int) -> Iterator[socket.socket | http.client.HTTPConnection]:
    """What clients leave open on a server: two idle keep-alive connections after a request
    each, and one in the middle of sending a request."""
    for _ in range(2):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/api/v2/info")
        connection.getresponse().read()
        yield connection
    partial = socket.create_connection(("127.0.0.1", port), timeout=10)
    partial.sendall(b"GET /api/v2/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    yield partial


def test_killed_with_clients_connected_it_restarts_at_once_and_jobs_finish_once(
    pai_up: PaiUp, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    names = ["survivor-a", "survivor-b"]
    with pai_up.client() as client:
        for name in names:
            commands = [f"echo {name} >> {runs}", "echo before the crash", "sleep 4"]
            client.submit(job_file(name, [*commands, "echo after the crash"]))
        deadline = time.monotonic() + 30
        while any(client.job(name).job_status.state != "RUNNING" for name in names):
            assert time.monotonic() < deadline, "the jobs never started"
            time.sleep(0.1)
    with ExitStack() as clients:
        for connection in held_connections(pai_up.port):
            clients.enter_context(closing(connection))
        pai_up.kill()
        pai_up.start()  # at once, on the same port, while the dead server's connections linger
    with pai_up.client() as client:
        for name in names:
            detail = client.wait(name, timeout=60, poll=0.2)
            assert detail.job_status.state == "SUCCEEDED"
            assert detail.job_status.retries == 0
            log = client.logs(name, role="main")
            assert "before the crash" in log and "after the crash" in log
    assert sorted(runs.read_text().splitlines()) == names


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


def test_ctrl_c_stops_pai_up_while_a_client_follows_a_log(pai_up: PaiUp) -> None:
    """A followed log of a silent task never ends by itself: stopping must not wait for it."""
    with pai_up.client() as client:
        client.submit(job_file("silent", ["echo one line", "sleep 300"]))
        followed = client.follow_logs("silent", role="main")
        assert next(followed) == "one line"
        assert pai_up.process is not None
        started = time.monotonic()
        pai_up.stop()  # Ctrl-C, while the client still follows
        assert pai_up.process.returncode is not None
        assert time.monotonic() - started < 20
        followed.close()
