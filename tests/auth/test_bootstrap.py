"""First start: built-in groups, the `admin` user and its password; later starts change nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from pai.auth import BootstrapResult, initialize
from pai.auth.directory import Directory
from pai.settings import Settings
from pai.store import Database, identity


def test_first_start_creates_groups_and_admin_with_a_generated_password(
    pai_database_url: str, tmp_path: Path
) -> None:
    database = Database(pai_database_url)
    settings = Settings(home=tmp_path, database_url=pai_database_url)
    try:
        first = initialize(database, settings)
        second = initialize(database, settings)
        assert first.admin_created
        assert first.generated_admin_password is not None
        assert first.generated_admin_password not in repr(first)
        assert second == BootstrapResult(admin_created=False)
        with database.session() as session:
            directory = Directory(session)
            assert [group.groupname for group in directory.groups()] == ["admingroup", "default"]
            assert directory.authenticate("admin", first.generated_admin_password)
    finally:
        database.dispose()


def test_the_configured_admin_password_is_used_and_not_returned(
    pai_database_url: str, tmp_path: Path
) -> None:
    database = Database(pai_database_url)
    settings = Settings(home=tmp_path, database_url=pai_database_url, admin_password="from-the-env")
    try:
        assert initialize(database, settings) == BootstrapResult(admin_created=True)
        with database.session() as session:
            assert Directory(session).authenticate("admin", "from-the-env")
    finally:
        database.dispose()


def test_servers_starting_together_create_one_admin(pai_database_url: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, database_url=pai_database_url, admin_password="pw-pw-pw")
    results: list[BootstrapResult] = []
    errors: list[BaseException] = []

    def start() -> None:
        database = Database(pai_database_url)  # one engine each, like separate processes
        try:
            results.append(initialize(database, settings))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)
        finally:
            database.dispose()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(result.admin_created for result in results) == [False, False, False, True]
    database = Database(pai_database_url)
    try:
        with database.session() as session:
            assert identity.count_admins(session) == 1
    finally:
        database.dispose()
