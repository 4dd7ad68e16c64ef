"""The `pai` command as a user runs it: the installed console script in a subprocess, with its
own configuration file, against the module's real server (see tests/server/harness.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pai_runner import Pai, make_pai

from sdk.jobs_api import require_jobs_api
from server.harness import RunningServer


@pytest.fixture
def pai(tmp_path: Path) -> Pai:
    return make_pai(tmp_path)


@pytest.fixture
def admin_pai(pai: Pai, pai_server: RunningServer) -> Pai:
    """`pai` logged in as the administrator."""
    pai.login(pai_server, pai_server.admin.username, pai_server.admin.password)
    return pai


@pytest.fixture(scope="module")
def jobs_server(
    pai_platform: RunningServer, requirement: Callable[[bool, str], None]
) -> RunningServer:
    """The module's whole platform (API, controller, local executor on the four-node example
    cluster), for tests that need the jobs API."""
    require_jobs_api(pai_platform, requirement)
    return pai_platform
