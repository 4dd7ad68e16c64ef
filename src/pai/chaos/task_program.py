"""What every task of a chaos run executes: it records its own run and behaves as its job's
kind asks. Standard library only: it runs under whatever `python3` the node has.

    python3 task_program.py RUNS BEHAVIOUR [SECONDS] [EXIT_CODE]

It writes `RUNS/<job>/<role>-<index>/<job attempt>.<task attempt>-<pid>`: a first JSON line
(host, attempts, start), a beat (the time) every `BEAT` seconds while it runs, and a last JSON
line with its exit code when it ends by itself. A run killed says nothing more: its last beat
is when it was last seen alive. Behaviours: `succeed`, `fail` (with EXIT_CODE), `flaky` (fails
once per job, then succeeds), `forever` (until stopped), `server` and `client` (the two roles of
a gang that talk over TCP through the addresses and ports PAI gave them).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

BEAT = 0.25
EXCHANGE_PATIENCE = 600.0
"""How long the gang's client keeps trying to reach its server (PAI may be retrying it)."""


class RunRecord:
    """The run's own file, and the thread that beats into it."""

    def __init__(self, runs: Path) -> None:
        env = os.environ
        role = env["PAI_CURRENT_TASK_ROLE_NAME"]
        task = runs / env["PAI_JOB_NAME"] / f"{role}-{env['PAI_TASK_INDEX']}"
        task.mkdir(parents=True, exist_ok=True)
        self.job_dir = task.parent
        attempts = f"{env.get('FC_FRAMEWORK_ATTEMPT_ID', '0')}.{env.get('FC_TASK_ATTEMPT_ID', '0')}"
        self._out = open(task / f"{attempts}-{os.getpid()}", "a", buffering=1)  # noqa: SIM115
        first = {
            "host": env["PAI_CONTAINER_HOST_IP"],
            "job_attempt": int(env.get("FC_FRAMEWORK_ATTEMPT_ID", "0")),
            "task_attempt": int(env.get("FC_TASK_ATTEMPT_ID", "0")),
            "start": time.time(),
        }
        self._lock = threading.Lock()
        self._write(json.dumps(first))
        threading.Thread(target=self._beat, daemon=True).start()

    def _write(self, line: str) -> None:
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def _beat(self) -> None:
        while True:
            self._write(repr(time.time()))
            time.sleep(BEAT)

    def end(self, code: int) -> None:
        self._write(json.dumps({"end": time.time(), "exit_code": code}))
        sys.exit(code)


SERVER_ROLE = "server"


def server_address() -> tuple[str, int]:
    """Where the gang's server listens, from the variables PAI gives every task of the job."""
    host = os.environ[f"PAI_HOST_IP_{SERVER_ROLE}_0"]
    return host, int(os.environ[f"PAI_PORT_LIST_{SERVER_ROLE}_0_http"])


def serve(seconds: float) -> int:
    me, port = server_address()
    with socket.create_server((me, port)) as server:
        connection, _ = server.accept()
        with connection:
            heard = connection.recv(100).decode()
            connection.sendall(f"hello {heard} from {me}".encode())
    time.sleep(seconds)
    return 0


def ask(seconds: float) -> int:
    server = server_address()
    me = os.environ["PAI_CONTAINER_HOST_IP"]
    deadline = time.monotonic() + EXCHANGE_PATIENCE
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(server, timeout=5) as connection:
                connection.sendall(me.encode())
                if connection.recv(100).decode() == f"hello {me} from {server[0]}":
                    time.sleep(seconds)
                    return 0
        except OSError:
            pass
        time.sleep(0.5)
    return 1


def main(arguments: list[str]) -> None:
    runs, behaviour = Path(arguments[0]), arguments[1]
    seconds = float(arguments[2]) if len(arguments) > 2 else 0.0
    record = RunRecord(runs)
    if behaviour == "forever":
        while True:
            time.sleep(1)
    if behaviour == "server":
        record.end(serve(seconds))
    if behaviour == "client":
        record.end(ask(seconds))
    time.sleep(seconds)
    if behaviour == "fail":
        record.end(int(arguments[3]))
    if behaviour == "flaky":
        marker = record.job_dir / "failed-once"
        if not marker.exists():
            marker.touch()
            record.end(1)
    record.end(0)


if __name__ == "__main__":
    main(sys.argv[1:])
