"""Migrations: an empty database reaches the models' schema, repeatably, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from pai.store import Base, Database, head_revision
from pai.store.database import alembic_config
from pai.store.installation import store_id


def upgrade(database: Database) -> None:
    with database.exclusive() as connection:
        database.upgrade(connection)


def schema_differences(database: Database) -> list[object]:
    """What differs between the migrated database and the models (empty: nothing)."""
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def test_an_empty_database_is_upgraded_to_exactly_the_models(pai_database_url: str) -> None:
    database = Database(pai_database_url)
    try:
        assert database.current_revision() is None
        upgrade(database)
        assert database.current_revision() == head_revision() == "0014_published_state_versions"
        assert schema_differences(database) == []
    finally:
        database.dispose()


def test_upgrading_again_changes_nothing(pai_database_url: str) -> None:
    database = Database(pai_database_url)
    try:
        upgrade(database)
        with database.engine.connect() as connection:
            before = sorted(inspect(connection).get_table_names())
        upgrade(database)
        with database.engine.connect() as connection:
            after = sorted(inspect(connection).get_table_names())
        assert before == after
        assert database.current_revision() == head_revision()
    finally:
        database.dispose()


def test_the_chain_downgrades_to_nothing_and_upgrades_again(pai_database_url: str) -> None:
    database = Database(pai_database_url)
    try:
        upgrade(database)
        with database.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        with database.engine.connect() as connection:
            assert inspect(connection).get_table_names() == ["alembic_version"]
        upgrade(database)
        assert schema_differences(database) == []
    finally:
        database.dispose()


def test_the_migration_chain_is_linear_and_named_by_number() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    assert len(scripts.get_heads()) == 1
    revisions = list(scripts.walk_revisions())
    assert [revision.down_revision for revision in revisions][-1] is None
    for revision in revisions:
        assert re.fullmatch(r"\d{4}_[a-z_]+", revision.revision), revision.revision
        assert revision.path is not None and revision.path.endswith(f"{revision.revision}.py")


def test_each_store_gets_an_identity_of_its_own_that_upgrades_keep(
    pai_database_url: str, tmp_path: Path
) -> None:
    first = Database(pai_database_url)
    other = Database(f"sqlite:///{tmp_path}/other.db")
    try:
        upgrade(first)
        upgrade(other)
        mine = store_id(first)
        upgrade(first)
        assert store_id(first) == mine
        assert re.fullmatch(r"[0-9a-f]{12}", mine)
        assert store_id(other) != mine
    finally:
        first.dispose()
        other.dispose()
