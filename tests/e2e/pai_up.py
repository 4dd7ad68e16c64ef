"""`pai up` in its own process, started and killed as an operator would, on a free port of the
loopback interface and the four-node cluster of `examples/clusters/local-4node.yaml`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.executors.local import kill_processes_under
from pai.sdk import Client
from server.harness import LOCAL_CLUSTER_FILE

ADMIN_PASSWORD = "up-Admin-password-1"
STARTUP_TIMEOUT_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PaiUp:
    """`pai up` on one home and one port, which stay the same across restarts."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output = home.with_name(f"{home.name}-pai-up.out")
        """What `pai up` writes on its standard error, kept across restarts."""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start `pai up` and wait until it listens; fail with its output if it exits."""
        pai = Path(sys.executable).with_name("pai")
        env = {
            **os.environ,
            "PAI_HOME": str(self.home),
            "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
            # As after `source .venv/bin/activate`: tasks find this environment's python3.
            "PATH": f"{pai.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        env.pop("PAI_DATABASE_URL", None)
        with self.output.open("ab") as output:
            self.process = subprocess.Popen(
                [str(pai), "up", "--port", str(self.port), "--cluster", str(LOCAL_CLUSTER_FILE)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=output,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = self.output.read_text(errors="replace")
                raise AssertionError(f"pai up exited while starting:\n{said}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"pai up did not start listening within {STARTUP_TIMEOUT_SECONDS} s")

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a power cut ends it: no clean-up at all."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """Ctrl-C, if it still runs; then end the tasks it leaves running."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=30)
        kill_processes_under(self.home)

    def client(self) -> Client:
        return Client.login(self.url, "admin", ADMIN_PASSWORD)


@pytest.fixture
def pai_up(tmp_path: Path) -> Iterator[PaiUp]:
    platform = PaiUp(tmp_path / "home")
    platform.start()
    yield platform
    platform.stop()
