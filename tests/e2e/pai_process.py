"""`pai up` in a process of its own, started and killed as an operator would; job files; and
the `pai_up` fixture (on the four-node cluster file)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from cli.pai_runner import Pai, make_pai
from pai.executors.local import kill_processes_under
from pai.sdk import Client
from server.harness import LOCAL_CLUSTER_FILE
from task_ports import pai_command

ADMIN_PASSWORD = "up-Admin-password-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(
    arguments: list[str],
    *,
    home: Path,
    output: Path,
    env: Mapping[str, str],
    python: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`pai ARGUMENTS` in a process of its own with `home` and `env` (run by `python`, when
    given, rather than this virtualenv's `pai`); what it prints goes to `output`."""
    pai = Path(python or sys.executable).with_name("pai")
    environment = {
        **os.environ,
        "PAI_HOME": str(home),
        "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
        # As after `source .venv/bin/activate`: tasks find this environment's python3.
        "PATH": f"{pai.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    environment.pop("PAI_DATABASE_URL", None)
    environment.update(env)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as stream:
        return subprocess.Popen(
            [*pai_command(pai, str(python) if python else None), *arguments],
            env=environment,
            stdout=stream,
            stderr=subprocess.STDOUT,
        )


def launch(
    arguments: list[str],
    *,
    home: Path,
    port: int,
    output: Path,
    env: Mapping[str, str],
    python: Path | None = None,
    start_within: float = 60.0,
) -> subprocess.Popen[bytes]:
    """`spawn`, returned once the process answers HTTP on `port` (within `start_within`
    seconds). An answer, not a connection: the API workers of a `pai up` killed a moment ago
    may still hold the port while they stop, and their listening socket takes connections
    that no one will answer."""
    process = spawn(arguments, home=home, output=output, env=env, python=python)
    deadline = time.monotonic() + start_within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            printed = output.read_text(errors="replace")[-3000:]
            raise AssertionError(f"pai {arguments[0]} exited while starting:\n{printed}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v2/info", timeout=2)
            return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    printed = output.read_text(errors="replace")[-3000:]
    raise AssertionError(
        f"pai {arguments[0]} did not start listening within {start_within:g} s:\n{printed}"
    )


class PaiUp:
    """`pai up` in its own process, started and killed as an operator would."""

    def __init__(
        self,
        home: Path,
        cluster_file: Path | None,
        env: Mapping[str, str] | None = None,
        python: Path | None = None,
        start_within: float = 60.0,
    ) -> None:
        """`cluster_file` None: PAI describes the cluster itself (this machine, Ray's nodes);
        `python`, the Python that runs PAI (default: this virtualenv's); `start_within`, the
        seconds it has to answer HTTP once started."""
        self.home = home
        self.python = python
        self.cluster_file = cluster_file
        self.start_within = start_within
        self.extra_env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.output = home.parent / f"{home.name}.out"  # what `pai up` prints, for debugging

    def start(self, *options: str, default_layout: bool = False) -> None:
        """`pai up` with `options` besides the port and the cluster file. Everything is served
        from the one `pai up` process unless `options` or `default_layout` say otherwise: API
        worker processes each import the whole platform, which would add seconds of the
        tests' two cores to every start (test_scale_out.py runs the default layout)."""
        cluster = ["--cluster", str(self.cluster_file)] if self.cluster_file else []
        if not default_layout and "--api-workers" not in options:
            options = ("--api-workers", "0", *options)
        self.process = launch(
            ["up", "--port", str(self.port), *cluster, *options],
            home=self.home,
            port=self.port,
            output=self.output,
            env=self.extra_env,
            python=self.python,
            start_within=self.start_within,
        )

    def stop(self) -> None:
        """Ctrl-C, as an operator stops it; running tasks go on."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=30)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def client(self) -> Client:
        return Client.login(self.url, "admin", ADMIN_PASSWORD)

    def admin_cli(self, directory: Path) -> Pai:
        """The `pai` command, logged in as the administrator, its configuration in
        `directory`."""
        pai = make_pai(directory)
        login = pai.run(
            "login", "--server", self.url, "--username", "admin", "--password", ADMIN_PASSWORD
        )
        assert login.returncode == 0, login.stderr
        return pai


@contextmanager
def running(home: Path, env: Mapping[str, str] | None = None) -> Iterator[PaiUp]:
    """`pai up` on the four-node cluster file with `env`, stopped (and its tasks ended) when the
    block ends."""
    platform = PaiUp(home, LOCAL_CLUSTER_FILE, env)
    platform.start()
    try:
        yield platform
    finally:
        platform.stop()
        kill_processes_under(platform.home)


def job_file(name: str, commands: list[str]) -> str:
    lines = "\n".join(f"      - {command}" for command in commands)
    return (
        f"protocolVersion: 2\nname: {name}\ntype: job\n"
        "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\n"
        "taskRoles:\n  main:\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}\n"
        f"    commands:\n{lines}\n"
    )


@pytest.fixture
def pai_up(tmp_path: Path) -> Iterator[PaiUp]:
    """`pai up` in a process of its own on the four-node cluster file, stopped afterwards."""
    with running(tmp_path / "home") as platform:
        yield platform
