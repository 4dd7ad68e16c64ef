"""`python -m pai.runtime.sshbarrier SECONDS`: wait until every task of the job accepts SSH
connections (OpenPAI's `sshbarrier`), so the commands may ssh to any peer at once.

Exits 10 with OpenPAI's message when the time runs out, which the exit spec classifies. A
container task's supervisor waits the same way (`unreachable_peers`) before the task's commands
start, since the container's image need not have Python.
"""

from __future__ import annotations

import os
import socket
import sys
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


def main() -> None:
    missing = unreachable_peers(os.environ, float(sys.argv[1]))
    if missing:
        message = f"[pai] SSH barrier reaches max retry count: {', '.join(missing)} not reachable"
        print(message, file=sys.stderr)
        sys.exit(BARRIER_FAILED)


if __name__ == "__main__":
    main()
