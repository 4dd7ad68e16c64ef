"""Rate limits counted in the database, so that every API worker counts against the same limit.

Each key's events are counted per fixed window of the limit's period; the rate over the last
period is estimated as this window's count plus the previous window's count weighted by how
much of it still overlaps the last period. That estimate slides like an exact sliding window
(no doubled burst across a window boundary) while it costs one row per key and window, and
one upsert per event, whatever the limit. `Retry-After` says when the estimate lets the next
event in.

A closed window's counts no longer change, so each process reads a key's previous count once
per window and remembers it: counting a burst of events then costs one statement.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from pai.errors import TooManyRequestsError
from pai.store.models import RateWindow
from pai.store.recordsets import json_rows, rows_documents

KEY_LENGTH = 320
"""As long as `rate_windows.key`: longer keys (user names are not checked at login) are cut."""
MAX_REMEMBERED_KEYS = 100_000
"""Previous-window counts remembered per limiter; beyond, the window's are read again."""


@dataclass(frozen=True)
class _Window:
    index: int
    elapsed: float
    """Seconds since the window started."""


class StoredRateLimiter:
    """At most `limit` events of `scope` per `period` seconds for each key."""

    def __init__(
        self,
        scope: str,
        limit: int,
        period: float,
        *,
        what: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if limit < 1 or period <= 0:
            raise ValueError(f"a rate limit needs limit >= 1 and period > 0, got {limit}/{period}")
        self.scope = scope
        self.limit = limit
        self.period = period
        self._what = what
        self._clock = clock
        self._closed_counts: tuple[int, dict[str, int]] = (-1, {})
        """A closed window's index and the counts of the keys read from it."""
        self._closed_lock = threading.Lock()
        self._upserts: dict[str, Any] = {}

    def acquire(self, session: Session, key: str) -> None:
        """Count one event for `key`, or raise `TooManyRequestsError` saying when to retry."""
        _, refusal = self.acquire_many(session, {key: 1})[key]
        if refusal is not None:
            raise refusal

    def acquire_many(
        self, session: Session, counts: Mapping[str, int]
    ) -> dict[str, tuple[int, TooManyRequestsError | None]]:
        """Count, for each key, as many of its `counts[key]` events as the limit lets through
        (in two statements whatever the number of keys): how many, and for the rest the
        refusal saying when to retry.

        The counts are raised first and the refused part taken back, so that concurrent
        workers never let more than the limit through; a refused event is not counted, so
        retrying too early does not push the wait further."""
        window = self._window()
        totals = self._increment(session, counts, window)
        previous = self._previous_counts(session, list(counts), window)
        weight = 1 - window.elapsed / self.period
        outcomes: dict[str, tuple[int, TooManyRequestsError | None]] = {}
        for key, count in counts.items():
            before = totals[key] - count
            room = math.floor(self.limit - previous.get(key, 0) * weight + 1e-9)
            granted = max(0, min(count, room - before))
            if granted == count:
                outcomes[key] = (count, None)
                continue
            session.execute(
                update(RateWindow)
                .where(*self._row(key, window.index))
                .values(count=RateWindow.count - (count - granted))
            )
            refusal = self._refusal(key, before + granted + 1, previous.get(key, 0), window)
            outcomes[key] = (granted, refusal)
        return outcomes

    def ensure_allowed(self, session: Session, key: str) -> None:
        """Refuse now if one more event of `key` would exceed the limit (nothing is counted:
        the caller counts with `record` only what should count, such as a failed login)."""
        window = self._window()
        current = self._count(session, key, window.index) + 1
        previous = self._previous_counts(session, [key], window).get(key, 0)
        if self._estimate(current, previous, window) > self.limit:
            raise self._refusal(key, current, previous, window)

    def record(self, session: Session, key: str) -> None:
        """Count one event of `key`."""
        self._increment(session, {key: 1}, self._window())

    # -- counting ---------------------------------------------------------------------------------

    def _window(self) -> _Window:
        now = self._clock()
        index = math.floor(now / self.period)
        return _Window(index, now - index * self.period)

    def _row(self, key: str, index: int) -> tuple[ColumnElement[bool], ...]:
        return (
            RateWindow.scope == self.scope,
            RateWindow.key == key[:KEY_LENGTH],
            RateWindow.window == index,
        )

    def _count(self, session: Session, key: str, index: int) -> int:
        return self._counts(session, [key], index).get(key, 0)

    def _counts(self, session: Session, keys: list[str], index: int) -> dict[str, int]:
        """The counts of `keys` in window `index` (absent: none)."""
        stored = {key[:KEY_LENGTH]: key for key in keys}
        rows = session.execute(
            select(RateWindow.key, RateWindow.count).where(
                RateWindow.scope == self.scope,
                RateWindow.key.in_(stored),
                RateWindow.window == index,
            )
        )
        return {stored[cut]: int(count) for cut, count in rows}

    def _previous_counts(
        self, session: Session, keys: list[str], window: _Window
    ) -> dict[str, int]:
        """The counts of `keys` in the window before `window`, read from the store only for
        the keys not read since that window closed."""
        closed = window.index - 1
        with self._closed_lock:
            index, remembered = self._closed_counts
            if index != closed or len(remembered) > MAX_REMEMBERED_KEYS:
                remembered = {}
                self._closed_counts = (closed, remembered)
            unread = [key for key in keys if key not in remembered]
        if unread:
            read = self._counts(session, unread, closed)
            with self._closed_lock:
                if self._closed_counts[0] == closed:
                    remembered.update({key: read.get(key, 0) for key in unread})
        else:
            read = {}
        return {key: remembered.get(key, read.get(key, 0)) for key in keys}

    def _increment(
        self, session: Session, counts: Mapping[str, int], window: _Window
    ) -> dict[str, int]:
        """Add to each key's count in `window` and return the new counts; the first events of
        a window clear the keys' windows that no estimate reads any more."""
        stored = {key[:KEY_LENGTH]: key for key in counts}
        rows = [
            {"scope": self.scope, "key": cut, "window": window.index, "count": counts[key]}
            for cut, key in stored.items()
        ]
        statement, parameters = self._upsert(session, rows)
        totals = {
            stored[cut]: int(total)
            for each in parameters
            for cut, total in session.connection().execute(statement, each)
        }
        fresh = [key[:KEY_LENGTH] for key, total in totals.items() if total == counts[key]]
        if fresh:
            session.execute(
                delete(RateWindow).where(
                    RateWindow.scope == self.scope,
                    RateWindow.key.in_(fresh),
                    RateWindow.window < window.index - 1,
                )
            )
        return totals

    def _upsert(self, session: Session, rows: list[dict[str, Any]]) -> tuple[Any, list[Any]]:
        """A statement, and the parameters of each of its executions, that add each row's
        `count` to its window's row, returning the key and the new count: on PostgreSQL the
        rows are a JSON document (`pai.store.recordsets`), on SQLite one parameter set each
        (sent as one multi-row statement). The statement is compiled once per process rather
        than once per call."""
        backend = session.get_bind().dialect.name
        if backend not in self._upserts:
            self._upserts[backend] = _window_upsert(backend)
        if backend == "postgresql":
            return self._upserts[backend], list(rows_documents(rows))
        return self._upserts[backend], [rows]

    def _estimate(self, current: int, previous: int, window: _Window) -> float:
        return current + previous * (1 - window.elapsed / self.period)

    def _refusal(
        self, key: str, current: int, previous: int, window: _Window
    ) -> TooManyRequestsError:
        wait = self._wait(current, previous, window)
        return TooManyRequestsError(
            f"too many {self._what} for {key} (at most {self.limit} per "
            f"{_describe(self.period)}); try again in {max(1, math.ceil(wait))} s",
            retry_after=wait,
        )

    def _wait(self, current: int, previous: int, window: _Window) -> float:
        """Seconds until an event counted as the `current`-th of this window fits."""
        if current <= self.limit and previous > 0:
            # The previous window's weight fades until the estimate is within the limit.
            return self.period * (1 - (self.limit - current) / previous) - window.elapsed
        # This window alone is full: in the next one, its events fade in turn.
        return self.period - window.elapsed + self.period * (1 - (self.limit - 1) / (current - 1))


def _describe(period: float) -> str:
    for length, name in ((3600.0, "hour"), (60.0, "minute"), (1.0, "second")):
        if period == length:
            return name
    return f"{period:g} s"


_COUNTED = ("scope", "key", "window", "count")
"""The columns of a `RateWindow` row that `_window_upsert` writes."""


def _window_upsert(backend: str) -> Any:
    """`RateWindow` rows inserted, or their `count` added to the stored rows' (see `_upsert`)."""
    windows = RateWindow.metadata.tables[RateWindow.__tablename__]
    insert: postgresql.Insert | sqlite.Insert
    if backend == "postgresql":
        counted = json_rows([windows.c[name] for name in _COUNTED], name="counted")
        insert = postgresql.insert(windows).from_select(list(_COUNTED), select(*counted.columns))
    else:
        insert = sqlite.insert(windows).values({name: bindparam(name) for name in _COUNTED})
    return insert.on_conflict_do_update(
        index_elements=["scope", "key", "window"],
        set_={"count": windows.c.count + insert.excluded.count},
    ).returning(windows.c.key, windows.c.count)
