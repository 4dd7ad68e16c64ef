"""Followed logs: a blocking iterator of log chunks served as a streaming response."""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Iterator

import anyio

FOLLOW_BUFFER_CHUNKS = 16
FOLLOW_POLL_SECONDS = 0.05
"""How often a followed log's response looks for new output from its reading thread."""


async def in_own_thread(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Iterate a blocking iterator on a daemon thread of its own rather than on the pool that
    runs requests, which followers waiting for output would otherwise exhaust. A client that
    goes away leaves that thread to finish its current wait, after which it stops; being a
    daemon, it never keeps a stopping server's process alive meanwhile (a pool thread would:
    a silent task's log may not grow for hours)."""
    handoff: queue.Queue[bytes | None] = queue.Queue(maxsize=FOLLOW_BUFFER_CHUNKS)
    abandoned = threading.Event()

    def produce() -> None:
        for chunk in chunks:
            if not _hand_over(handoff, chunk, abandoned):
                return
        _hand_over(handoff, None, abandoned)

    threading.Thread(target=produce, name="pai-log-follower", daemon=True).start()
    try:
        while True:
            try:
                chunk = handoff.get_nowait()
            except queue.Empty:
                await anyio.sleep(FOLLOW_POLL_SECONDS)
                continue
            if chunk is None:
                return
            yield chunk
    finally:
        abandoned.set()


def _hand_over(
    handoff: queue.Queue[bytes | None], item: bytes | None, abandoned: threading.Event
) -> bool:
    """Put `item` for the response to send; False once the client went away."""
    while not abandoned.is_set():
        try:
            handoff.put(item, timeout=FOLLOW_POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False
