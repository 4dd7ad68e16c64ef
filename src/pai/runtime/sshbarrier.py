"""`python -m pai.runtime.sshbarrier SECONDS`: wait until every task of the job accepts SSH
connections (OpenPAI's `sshbarrier`), so the commands may ssh to any peer at once.

Exits 10 with OpenPAI's message when the time runs out, which the exit spec classifies.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from pai.runtime.sshd import peers

BARRIER_FAILED = 10
RETRY_INTERVAL = 0.2


def accepting(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def main() -> None:
    deadline = time.monotonic() + float(sys.argv[1])
    waiting = list(peers(os.environ))
    while waiting:
        waiting = [peer for peer in waiting if not accepting(peer[1], peer[2])]
        if waiting and time.monotonic() > deadline:
            names = ", ".join(name for name, _, _ in waiting)
            message = f"[pai] SSH barrier reaches max retry count: {names} not reachable"
            print(message, file=sys.stderr)
            sys.exit(BARRIER_FAILED)
        if waiting:
            time.sleep(RETRY_INTERVAL)


if __name__ == "__main__":
    main()
