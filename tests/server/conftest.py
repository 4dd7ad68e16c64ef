"""Fixtures of the API tests: accounts on the module's shared server (see harness.py)."""

from __future__ import annotations

import pytest

from server.harness import Account, RunningServer


@pytest.fixture(scope="module")
def admin(pai_server: RunningServer) -> Account:
    return Account(pai_server.admin.username, pai_server.admin.password, pai_server.admin_token())


@pytest.fixture(scope="module")
def alice(pai_server: RunningServer) -> Account:
    """A plain user."""
    return Account.create(pai_server)


@pytest.fixture(scope="module")
def bob(pai_server: RunningServer) -> Account:
    """Another plain user."""
    return Account.create(pai_server)
