"""Fixtures of the end-to-end storage tests: the whole platform on SQLite, once per module
(the storage API runs on both backends in tests/server/test_storages_api.py), and a user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.harness import Account, RunningServer, serve_platform, server_settings


@pytest.fixture(scope="module")
def sqlite_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with serve_platform(server_settings(tmp_path_factory.mktemp("pai-home"))) as server:
        yield server


@pytest.fixture(scope="module")
def alice(sqlite_platform: RunningServer) -> Account:
    return Account.create(sqlite_platform)
