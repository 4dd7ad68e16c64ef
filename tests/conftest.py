"""Suite-wide helpers: requirements that skip locally but fail in strict mode (CI)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import task_ports
from pai.chaos.postgres import PostgresCluster, server_installed

STRICT = os.environ.get("PAI_TEST_STRICT") == "1"

# A real API server for any test that needs one (fixtures pai_server, start_pai_server,
# pai_database_url; see tests/server/harness.py), and `pai up` in a process of its own
# (fixture pai_up; see tests/e2e/pai_process.py); container images in a registry of their own
# (fixtures busybox_image, python_image; see tests/container_images.py); the organisation's
# directories, an LDAP server and an OpenID Connect provider (fixtures ldap_directory,
# oidc_provider; see tests/providers/fixtures.py).
pytest_plugins = ["server.harness", "e2e.pai_process", "container_images", "providers.fixtures"]

# Under pytest-xdist, the platforms of this worker hand out task ports no other worker does.
task_ports.use_worker_share()

# Tasks run on the host as the suite's own user wherever a test does not choose otherwise:
# most tests are about what the platform does with a task, and their jobs name images no
# registry here has. The tests of containers and isolation (tests/executors/containers,
# tests/e2e/test_isolation.py) set these themselves.
CONTAINER_SANDBOX = "container_sandbox"
"""The fixture every test of containers uses (tests/container_images.py)."""
CONTAINERS_GROUP = "containers"

HOST_TASKS = {"PAI_ISOLATION": "host", "PAI_TASK_USER": "root"}
os.environ.update(HOST_TASKS)


def require(available: bool, reason: str) -> None:
    """Skip the calling test when something it needs is missing; fail under PAI_TEST_STRICT=1."""
    if available:
        return
    if STRICT:
        pytest.fail(f"requirement missing (PAI_TEST_STRICT=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def requirement() -> Callable[[bool, str], None]:
    """`require`, for fixtures and helpers of other test directories: they cannot import it by
    name, since each directory's conftest module is also called `conftest`."""
    return require


@pytest.fixture
def restartable_postgres(tmp_path: Path) -> Iterator[PostgresCluster]:
    """A PostgreSQL server of the test's own (Debian's `initdb` and `pg_ctl`, on a free port of
    127.0.0.1, as the `postgres` user), which the test may stop and start again."""
    require(os.geteuid() == 0, "the test runs its PostgreSQL cluster as the postgres user")
    require(server_installed(), "PostgreSQL's server is not installed (apt-get install postgresql)")
    cluster = PostgresCluster(Path("/tmp") / f"pai-pg-{os.getpid()}-{tmp_path.name[-12:]}")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a reachable PostgreSQL server, from PAI_TEST_POSTGRES_URL."""
    url = os.environ.get("PAI_TEST_POSTGRES_URL", "")
    require(bool(url), "PAI_TEST_POSTGRES_URL is not set")
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url)
        with engine.connect():
            pass
        engine.dispose()
    except Exception as exc:  # any driver or connection error means "not available"
        require(False, f"PostgreSQL at PAI_TEST_POSTGRES_URL is not reachable: {exc}")
    yield url


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of Debian's chromium, which Playwright drives in the portal tests."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    require(path is not None, "Debian's chromium is not installed (apt-get install chromium)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def git_path() -> str:
    """Path of git, which the git runtime plugin runs."""
    path = shutil.which("git")
    require(path is not None, "git is not installed (apt-get install git)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def torch_module():  # type: ignore[no-untyped-def]
    """The torch module, for the DDP example."""
    try:
        import torch
    except ImportError:
        require(False, "torch is not installed (pip install torch==2.13.0)")
    return torch


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """With `--dist loadgroup` (pyproject.toml), the tests that share one instance of a
    module-scoped fixture (a module's server or platform, once per database backend) run on one
    worker, which sets it up once, instead of each worker setting up its own. A test marked with
    a group of its own keeps it; every other test of containers runs in one group: two
    workers' podman, each with its own image store, slow each other's containers down tenfold
    (their starts wait on each other), so one worker runs them all, one after the other."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if CONTAINER_SANDBOX in getattr(item, "fixturenames", ()):
            group: str | None = CONTAINERS_GROUP
        else:
            group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The module and the parameters of the module-scoped fixtures `item` uses; None if it
    uses none."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return None
    shared = [
        name
        for name, fixtures in definitions.name2fixturedefs.items()
        if fixtures and fixtures[-1].scope in ("module", "class")
    ]
    if not shared:
        return None
    callspec = getattr(item, "callspec", None)
    indices = callspec.indices if callspec is not None else {}
    # No "[" or "]": xdist finds the group after the last "@" that follows any "]".
    parameters = [f"{name}={indices[name]}" for name in sorted(shared) if name in indices]
    return " ".join([item.nodeid.split("::")[0], *parameters])
