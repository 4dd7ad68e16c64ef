"""OpenPAI's `sshbarrier`: a task's commands start only once every task of the job accepts SSH
connections, so that they may ssh to any peer at once.

The task's supervisor waits (`unreachable_peers`) before it gives the task its script; when the
time runs out, the task ends with exit code 10 and OpenPAI's message, which the exit spec
classifies.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping

from pai.runtime.sshd import peers

BARRIER_FAILED = 10
RETRY_INTERVAL = 0.2


def accepting(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def unreachable_peers(env: Mapping[str, str], seconds: float) -> list[str]:
    """Wait up to `seconds` for every task of the job `env` describes to accept SSH
    connections; the names of those that still do not."""
    deadline = time.monotonic() + seconds
    waiting = list(peers(env))
    while waiting:
        waiting = [peer for peer in waiting if not accepting(peer[1], peer[2])]
        if waiting and time.monotonic() > deadline:
            break
        if waiting:
            time.sleep(RETRY_INTERVAL)
    return [name for name, _, _ in waiting]
