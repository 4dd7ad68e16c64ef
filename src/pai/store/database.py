"""The `Database`: one engine, its sessions, and the schema migrations that run on start."""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from pai.errors import ConfigurationError

SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS = "pai.store:migrations"
_READ_ONLY = "pai_read_only"
"""Execution option of the connections of `Database.reading()`."""
_SCHEMA_LOCK_KEY = zlib.crc32(b"pai.store.schema")
"""PostgreSQL advisory-lock key that serialises start-up work across processes."""
PING_AFTER_IDLE_SECONDS = 10.0
"""A pooled PostgreSQL connection unused this long is checked before it is handed out."""


class StoreBusyError(TimeoutError):
    """A write waited for this process's other writers longer than SQLite would."""


class Database:
    """A SQLite or PostgreSQL database holding PAI's state.

    SQLite is tuned for a server with many threads: WAL (readers do not block the writer),
    foreign keys enforced, a busy timeout, and `BEGIN IMMEDIATE` for every transaction. Left to
    itself the driver runs a transaction's reads outside the transaction, so a read-modify-write
    could lose an update; taking the write lock up front makes transactions serial, and a
    second writer waits (up to the busy timeout) instead of failing. Transactions are short, so
    serialising them costs little on one machine; PostgreSQL is the choice for more. What only
    reads (checking the token of every request, every page and GET of the API) uses
    `reading()`, which takes no write lock.

    The threads of one process also queue for SQLite's write lock on a Python lock first:
    SQLite's busy handler sleeps in steps of up to 100 ms while it waits, so under many
    concurrent writers the lock would often sit free while they sleep; a Python lock hands
    it to the next writer the moment it is released. Other processes still meet the busy
    timeout.
    """

    def __init__(self, url: str) -> None:
        self.url = _parse_url(url)
        self.engine = _create_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._readers = sessionmaker(
            self.engine.execution_options(**{_READ_ONLY: True}), expire_on_commit=False
        )
        event.listen(self._readers, "before_flush", _refuse_writes)
        self._write_lock = threading.Lock() if self.backend == "sqlite" else None
        self.rows_written = 0
        """Rows this process inserted, updated or deleted: what a task costs the store, which
        `/metrics` shows and the scale benchmark divides by the tasks started."""
        self._counting = threading.Lock()
        event.listen(self.engine, "after_cursor_execute", self._count_rows)

    def _count_rows(self, *event: Any) -> None:
        """SQLAlchemy's `after_cursor_execute`: (connection, cursor, statement, parameters,
        context, executemany)."""
        cursor, context = event[1], event[4]
        if context is not None and (context.isinsert or context.isupdate or context.isdelete):
            with self._counting:
                self.rows_written += max(cursor.rowcount, 0)

    @property
    def backend(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.url.get_backend_name()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._write_turn(), self._sessions.begin() as session:
            yield session

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A transaction that only reads. On SQLite it begins as a plain (deferred) `BEGIN`: a
        consistent WAL snapshot that neither waits for nor holds up writers. A change made in
        it is refused when the block ends rather than written."""
        with self._readers.begin() as session:
            yield session

    def listen(self, name: str, listener: Callable[..., Any]) -> None:
        """Register a SQLAlchemy session event (`after_flush`, `after_commit`, ...) on the
        sessions of `session()`, where everything but start-up work writes."""
        event.listen(self._sessions, name, listener)

    @contextmanager
    def exclusive(self) -> Iterator[Connection]:
        """A transaction that no other PAI process runs at the same time (start-up work).

        PostgreSQL: a transaction-level advisory lock; SQLite: the database's write lock,
        which `BEGIN IMMEDIATE` takes at once.
        """
        with self._write_turn(), self.engine.begin() as connection:
            if self.backend == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY}
                )
            yield connection

    @contextmanager
    def _write_turn(self) -> Iterator[None]:
        """On SQLite, wait for this process's other writers first (see the class docstring)."""
        if self._write_lock is None:
            yield
            return
        if not self._write_lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            raise StoreBusyError(
                f"the database stayed busy for {SQLITE_BUSY_TIMEOUT_MS / 1000:g} s "
                "(a transaction of this process held it)"
            )
        try:
            yield
        finally:
            self._write_lock.release()

    def upgrade(self, connection: Connection) -> None:
        """Apply every pending migration inside `connection`'s transaction."""
        command.upgrade(alembic_config(connection), "head")

    def current_revision(self) -> str | None:
        """The schema revision the database is at (None when never migrated)."""
        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for PAI's migrations, running on `connection` if given."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision shipped with this version of PAI."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migration chain is empty"
    return head


def _parse_url(raw: str) -> URL:
    try:
        url = make_url(raw)
    except ArgumentError:
        raise ConfigurationError(
            "PAI_DATABASE_URL: not a database URL; use sqlite:///<path> or "
            "postgresql+psycopg://<user>@<host>/<database>"
        ) from None
    backend = url.get_backend_name()
    if url.drivername == "postgresql":
        return url.set(drivername="postgresql+psycopg")  # the driver PAI installs
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise ConfigurationError("PAI_DATABASE_URL: SQLite needs a file, e.g. sqlite:///pai.db")
        return url
    if backend != "postgresql":
        raise ConfigurationError(
            f"PAI_DATABASE_URL: unsupported database {backend!r}; use SQLite or PostgreSQL"
        )
    return url


def _create_engine(url: URL) -> Engine:
    if url.get_backend_name() == "postgresql":
        # At most 15 connections per process, as SQLAlchemy's default, but 10 of them kept
        # (not 5): a connection made for a burst is closed after it, and making one costs more
        # than most statements.
        engine = create_engine(url, pool_size=10, max_overflow=5)
        _ping_idle_connections(engine)
        return engine
    assert url.database is not None
    _create_private_file(Path(url.database).expanduser())
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_immediate)
    return engine


def _ping_idle_connections(engine: Engine) -> None:
    """Check a pooled connection that sat idle (the server or a firewall may have closed it)
    before handing it out; a dead one is replaced before anyone uses it.

    Checking every connection at every checkout (`pool_pre_ping`) costs each transaction a
    round trip. One used within the last seconds is alive unless the server restarted since,
    and then the first statement that fails makes SQLAlchemy replace the whole pool."""

    def note_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    def ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle = time.monotonic() - record.info.get("checked_in_at", time.monotonic())
        if idle < PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as failure:  # any driver error: the pool makes a new connection
            raise DisconnectionError(f"a pooled connection was dead: {failure}") from failure

    event.listen(engine, "checkin", note_checkin)
    event.listen(engine, "checkout", ping_if_idle)


def _create_private_file(path: Path) -> None:
    """Create the SQLite file readable by its owner only: it holds password hashes.

    SQLite gives its -wal and -shm files the main file's permissions, so they follow.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the driver so `_begin_immediate` decides how to begin.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


def _begin_immediate(connection: Connection) -> None:
    read_only = connection.get_execution_options().get(_READ_ONLY, False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _refuse_writes(session: Session, _context: Any, _instances: Any) -> None:
    if session.new or session.deleted or any(map(session.is_modified, session.dirty)):
        raise RuntimeError("a change was made in a read-only transaction (Database.reading)")
