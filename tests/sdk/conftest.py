"""Clients of the module's shared server (see tests/server/harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pai.sdk import Client
from sdk.jobs_api import require_jobs_api
from server.harness import Account, RunningServer


@pytest.fixture(scope="module")
def admin_client(pai_server: RunningServer) -> Iterator[Client]:
    with Client.login(pai_server.base_url, "admin", pai_server.admin.password) as client:
        yield client


@pytest.fixture(scope="module")
def alice(pai_server: RunningServer) -> Account:
    """A plain user."""
    return Account.create(pai_server)


@pytest.fixture(scope="module")
def alice_client(pai_server: RunningServer, alice: Account) -> Iterator[Client]:
    with Client(pai_server.base_url, alice.token) as client:
        yield client


@pytest.fixture(scope="module")
def jobs_server(
    pai_platform: RunningServer, requirement: Callable[[bool, str], None]
) -> RunningServer:
    """The module's whole platform (API, controller, local executor on the four-node example
    cluster), for tests that need the jobs API."""
    require_jobs_api(pai_platform, requirement)
    return pai_platform
