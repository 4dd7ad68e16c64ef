"""Telling a controller in another process to look at the store now: one UDP datagram.

API workers record submissions and stop requests in the store, where the controller finds them
at its next regular check (every second); a datagram to the port the controller serves on makes
it look at once. The datagram carries nothing but its arrival: a sender can at most make the
controller look earlier, so it needs no authentication, and a lost one costs only latency.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

_sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def send_wakeup(address: str) -> None:
    """Wake the controller serving at `address` (`http://HOST:PORT`); never raises."""
    parts = urlsplit(address)
    if parts.hostname is None or parts.port is None:
        return
    with contextlib.suppress(OSError):
        _sender.sendto(b"wake", (parts.hostname, parts.port))


class WakeupListener:
    """Calls `wake` for each datagram arriving at `host:port` (UDP), until `stop()`."""

    def __init__(self, host: str, port: int, wake: Callable[[], None]) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((host, port))
        self._socket.settimeout(0.5)
        self._wake = wake
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pai-wakeups", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._socket.recv(16)
            except TimeoutError:
                continue
            except OSError:
                log.warning("the wake-up socket failed", exc_info=True)
                return
            self._wake()
