"""A migrated SQLite database with the built-in groups and `admin`.

The rules tested here sit above SQL; tests/store and the API tests run on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai.auth import initialize
from pai.settings import Settings, default_database_url
from pai.store import Database

ADMIN_PASSWORD = "admin-password"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    url = default_database_url(tmp_path)
    database = Database(url)
    initialize(database, Settings(home=tmp_path, database_url=url, admin_password=ADMIN_PASSWORD))
    yield database
    database.dispose()
