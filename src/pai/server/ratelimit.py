"""A small in-process rate limiter over a sliding window.

"At most `limit` events in any `period`-long window" is exactly what the setting says (a fixed
window would allow twice the limit across a window boundary), and the oldest event in the
window tells when the next one is allowed, which becomes the `Retry-After` header. Memory is
`limit` timestamps per active key. State lives in this process: limits are per API process.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from pai.errors import TooManyRequestsError

PRUNE_THRESHOLD = 10_000
"""Above this many keys, keys without an event in the current window are forgotten."""


class RateLimiter:
    """At most `limit` events per `period` seconds for each key; thread-safe."""

    def __init__(
        self,
        limit: int,
        period: float,
        *,
        what: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or period <= 0:
            raise ValueError(f"a rate limit needs limit >= 1 and period > 0, got {limit}/{period}")
        self.limit = limit
        self.period = period
        self._what = what
        self._clock = clock
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str) -> None:
        """Count one event for `key`, or raise `TooManyRequestsError` saying when to retry.

        A refused event is not counted, so retrying too early does not push the wait further.
        """
        with self._lock:
            now = self._clock()
            events = self._events.setdefault(key, deque())
            while events and events[0] <= now - self.period:
                events.popleft()
            if len(events) >= self.limit:
                wait = events[0] + self.period - now
                raise TooManyRequestsError(
                    f"too many {self._what} for {key} (at most {self.limit} per "
                    f"{_describe(self.period)}); try again in {max(1, math.ceil(wait))} s",
                    retry_after=wait,
                )
            events.append(now)
            if len(self._events) > PRUNE_THRESHOLD:
                self._prune(now)

    def _prune(self, now: float) -> None:
        self._events = {
            key: events
            for key, events in self._events.items()
            if events and events[-1] > now - self.period
        }


def _describe(period: float) -> str:
    for length, name in ((3600.0, "hour"), (60.0, "minute"), (1.0, "second")):
        if period == length:
            return name
    return f"{period:g} s"
