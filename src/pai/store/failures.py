"""Failures of the store that say nothing about the request that met them: its disk is full, or
it cannot be reached (PostgreSQL restarting, a network between). The API answers them with 507
or 503 and a `Retry-After`, never 500; the controller keeps its decisions in memory and writes
them once the store takes them again.

A failure is recognised by what it is, wherever it was raised: SQLite's and PostgreSQL's
errors (wrapped by SQLAlchemy or not), the operating system's "no space left", and a store
that stayed busy.
"""

from __future__ import annotations

import errno
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import exc as sql

from pai.errors import (
    ConfigurationError,
    InsufficientStorageError,
    RetryLater,
    ServiceUnavailableError,
)
from pai.store.database import StoreBusyError

FULL_RETRY_AFTER = 30.0
"""Seconds a client waits after the store's disk was full: room is made by people."""
UNREACHABLE_RETRY_AFTER = 2.0
"""Seconds a client waits after the store could not be reached: a restart takes seconds."""
STORE_WAIT_INTERVAL = 1.0
"""Seconds between a starting service's tries to reach its store."""
T = TypeVar("T")

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_SQLITE_FULL = ("database or disk is full", "disk is full")
_SQLITE_UNAVAILABLE = ("database is locked", "disk i/o error", "unable to open database")
_POSTGRES_FULL = "53100"  # disk_full
_POSTGRES_UNAVAILABLE_CLASSES = ("08", "57P", "53")  # connection, operator intervention, resources


def store_failure(error: BaseException) -> RetryLater | None:
    """The API error that `error` (or what caused it) means, if it is a failure of the store."""
    for cause in _chain(error):
        if isinstance(cause, OSError) and cause.errno in _FULL_ERRNOS:
            return _full()
        if isinstance(cause, sqlite3.OperationalError):
            text = str(cause).lower()
            if any(phrase in text for phrase in _SQLITE_FULL):
                return _full()
            if any(phrase in text for phrase in _SQLITE_UNAVAILABLE):
                return _unavailable("the store is busy or cannot be read")
        state = getattr(cause, "sqlstate", None)
        if isinstance(state, str):
            if state == _POSTGRES_FULL:
                return _full()
            if state.startswith(_POSTGRES_UNAVAILABLE_CLASSES):
                return _unavailable("the store (PostgreSQL) is restarting or out of resources")
        if _connection_lost(cause):
            return _unavailable("the store (PostgreSQL) cannot be reached")
        if isinstance(cause, StoreBusyError):
            return _unavailable("the store stayed busy")
    return None


def _connection_lost(error: BaseException) -> bool:
    if isinstance(error, sql.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sql.DisconnectionError | sql.TimeoutError):
        return True
    module = type(error).__module__
    return module.startswith("psycopg") and type(error).__name__ in (
        "OperationalError",
        "InterfaceError",
    )


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and what caused it: SQLAlchemy's original error, then causes and contexts."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop(0)
        if current is None or any(current is known for known in seen):
            continue
        seen.append(current)
        pending += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return seen


def _full() -> InsufficientStorageError:
    return InsufficientStorageError(
        "PAI's store has no room left on its disk: it cannot save this now (what is saved "
        "can still be read). An administrator must free space; try again later",
        retry_after=FULL_RETRY_AFTER,
    )


def _unavailable(why: str) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"{why}: nothing was saved; try again in a few seconds",
        retry_after=UNREACHABLE_RETRY_AFTER,
    )


def when_store_reachable(
    attempt: Callable[[], T], waiting: Callable[[str], None], patience: float
) -> T:
    """`attempt()`, tried again for up to `patience` seconds while the store cannot be reached:
    a service started during a store restart waits for it rather than ending (its supervisor
    would only start it again, at a greater cost), and a wrong address still fails with the
    reason (`ConfigurationError`, naming PAI_DATABASE_URL). `waiting` is told so, once, with
    why. A full disk or any other failure is raised at once: a person must act on those."""
    deadline = time.monotonic() + patience
    told = False
    while True:
        try:
            return attempt()
        except Exception as error:
            if not isinstance(store_failure(error), ServiceUnavailableError):
                raise
            cause = getattr(error, "orig", None) or error
            why = str(cause).strip().splitlines()[0]
            if time.monotonic() >= deadline:
                raise ConfigurationError(
                    f"PAI_DATABASE_URL: PAI's store cannot be reached ({why}); waited "
                    f"{patience:g} s (PAI_STORE_WAIT_SECONDS)"
                ) from error
            if not told:
                waiting(
                    f"PAI's store cannot be reached ({why}): waiting for it up to "
                    "PAI_STORE_WAIT_SECONDS (Ctrl-C stops)"
                )
                told = True
        time.sleep(STORE_WAIT_INTERVAL)
