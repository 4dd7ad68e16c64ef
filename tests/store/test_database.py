"""The Database: SQLite tuned for a threaded server, PostgreSQL, transactions, constraints."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, delete, func, select

from pai.errors import ConfigurationError
from pai.store import Database, Group, Token, User
from pai.store.models import memberships
from pai.store.types import utcnow


def sqlite_database(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'state' / 'pai.db'}")
    with database.exclusive() as connection:
        database.upgrade(connection)
    return database


def test_sqlite_is_tuned_for_a_threaded_server(tmp_path: Path) -> None:
    database = sqlite_database(tmp_path)
    with database.engine.connect() as connection:
        pragmas = {
            name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        }
    database.dispose()
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 30000}


def test_the_sqlite_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    sqlite_database(tmp_path).dispose()
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state" / "pai.db").stat().st_mode) == 0o600


def test_concurrent_read_modify_write_transactions_lose_no_update(tmp_path: Path) -> None:
    """Each transaction reads a counter and writes it back incremented: only real
    transactions (the read included) that queue on the lock, not fail, end at the exact sum."""
    database = sqlite_database(tmp_path)
    with database.session() as session:
        session.add(Group(groupname="counter", description="0"))
    errors: list[BaseException] = []

    def increment() -> None:
        try:
            for _ in range(20):
                with database.session() as session:
                    counter = session.scalars(select(Group)).one()
                    counter.description = str(int(counter.description) + 1)
        except BaseException as error:  # collected and reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=increment) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with database.session() as session:
        total = session.scalars(select(Group.description)).one()
    database.dispose()
    assert errors == []
    assert total == "120"


def test_a_session_commits_or_rolls_back_as_a_whole(database: Database) -> None:
    with database.session() as session:
        session.add(Group(groupname="kept"))
    with pytest.raises(RuntimeError), database.session() as session:
        session.add(Group(groupname="dropped"))
        session.flush()
        raise RuntimeError("abort")
    with database.session() as session:
        names = set(session.scalars(select(Group.groupname)))
    assert names == {"kept"}


def test_deleting_a_user_deletes_its_tokens_and_memberships_in_the_database(
    database: Database,
) -> None:
    with database.session() as session:
        group = Group(groupname="team")
        user = User(username="u1", password_hash="x", groups=[group])
        session.add(Token(token_hash="a" * 64, user=user, created_at=utcnow()))
    with database.session() as session:
        # A plain SQL DELETE: the foreign keys themselves cascade, not the ORM.
        session.execute(delete(User).where(User.username == "u1"))
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Token)) == 0
        assert session.scalar(select(func.count()).select_from(memberships)) == 0
        assert session.scalar(select(func.count()).select_from(Group)) == 1


def test_timestamps_come_back_as_aware_utc(database: Database) -> None:
    with database.session() as session:
        session.add(User(username="u2", password_hash="x"))
    with database.session() as session:
        user = session.scalars(select(User)).one()
    assert user.created_at.utcoffset() is not None
    assert abs((utcnow() - user.created_at).total_seconds()) < 3600


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://root@127.0.0.1/pai", "unsupported database 'mysql'"),
        ("sqlite://", "SQLite needs a file"),
        ("not a url", "not a database URL"),
    ],
)
def test_unusable_urls_are_rejected_naming_the_variable(url: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"^PAI_DATABASE_URL: .*{expected}"):
        Database(url)


def test_a_postgresql_url_without_driver_uses_psycopg() -> None:
    database = Database("postgresql://pai@127.0.0.1:5432/pai")
    assert (database.backend, database.url.drivername) == ("postgresql", "postgresql+psycopg")
    database.dispose()


def test_a_pooled_postgresql_connection_closed_while_idle_is_replaced_unnoticed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server (or a firewall, or an administrator) may close a connection that sits in the
    pool; the next transaction gets a live one instead of an error."""
    import pai.store.database as database_module

    database = Database(postgres_url)
    try:
        with database.engine.connect() as connection:
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        administrator = create_engine(postgres_url)
        with administrator.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        administrator.dispose()
        monkeypatch.setattr(database_module, "PING_AFTER_IDLE_SECONDS", 0.0)
        with database.reading() as session:
            assert session.execute(select(func.pg_backend_pid())).scalar() != pid
    finally:
        database.dispose()
