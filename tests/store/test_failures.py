"""Failures of the store become answers a client can act on: 507 when its disk is full, 503
when it cannot be reached, each with a `Retry-After`; anything else is not the store's."""

from __future__ import annotations

import errno
import sqlite3

import psycopg
import pytest
from sqlalchemy import exc

from pai.errors import InsufficientStorageError, ServiceUnavailableError
from pai.store.database import StoreBusyError
from pai.store.failures import store_failure


def wrapped(error: BaseException) -> exc.OperationalError:
    """As SQLAlchemy raises a driver's error."""
    return exc.OperationalError("UPDATE jobs SET state=?", {}, error)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "error",
    [
        wrapped(sqlite3.OperationalError("database or disk is full")),
        OSError(errno.ENOSPC, "No space left on device"),
        wrapped(psycopg.errors.DiskFull("could not extend file")),
    ],
)
def test_a_full_disk_is_507_with_retry_after(error: BaseException) -> None:
    failure = store_failure(error)

    assert isinstance(failure, InsufficientStorageError)
    assert failure.status == 507
    assert "no room left on its disk" in failure.message
    assert int(failure.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    "error",
    [
        wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator")),
        wrapped(psycopg.OperationalError("connection refused")),
        wrapped(sqlite3.OperationalError("database is locked")),
        StoreBusyError("the database stayed busy for 30 s"),
    ],
)
def test_a_store_away_or_busy_is_503_with_retry_after(error: BaseException) -> None:
    failure = store_failure(error)

    assert isinstance(failure, ServiceUnavailableError)
    assert failure.status == 503
    assert "nothing was saved" in failure.message
    assert failure.headers["Retry-After"] == "2"


def test_a_cause_further_down_the_chain_is_found() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as full:
            raise RuntimeError("writing the job's events failed") from full
    except RuntimeError as error:
        assert isinstance(store_failure(error), InsufficientStorageError)


@pytest.mark.parametrize(
    "error",
    [
        exc.IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed")),  # type: ignore[arg-type]
        OSError(errno.EACCES, "Permission denied"),
        ValueError("a bug"),
        TimeoutError("an HTTP call timed out"),
    ],
)
def test_other_errors_are_not_the_stores(error: BaseException) -> None:
    assert store_failure(error) is None
