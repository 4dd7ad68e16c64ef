"""What the directories of the tests share: a free loopback port, and stopping a server."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def stop(process: subprocess.Popen[bytes]) -> None:
    """Ask the server to stop; kill it if it has not within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
