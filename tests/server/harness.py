"""A real PAI API server for tests: uvicorn on a free loopback port, in a background thread.

Registered for the whole suite by `tests/conftest.py`, so any test can ask for:

- `pai_server`: one server per test module and database backend (SQLite, then PostgreSQL),
  shared by the module's tests. Use unique names for what you create.
- `start_pai_server(settings=None, **create_app_kwargs)`: a factory for servers a test starts
  itself, on a fresh database (parametrized over both backends too), e.g. with a tiny rate
  limit (`server_settings(...)`), extra routers or services. They stop when the test ends.
- `pai_database_url`: the URL of a fresh, empty database for one test (both backends).
- `pai_platform` and `start_pai_platform(settings=None)`: the same for the whole platform
  (`create_platform_app`: the API, the controller and the local executor) on the four-node
  cluster of `examples/clusters/local-4node.yaml`. Task processes a platform started are
  killed when it stops, so none outlives its test.

Every server gets its own `PAI_HOME` under pytest's tmp_path, a random admin password and
signing key (both on `server.settings`), and writes its JSON log to `server.log_path`.
The PostgreSQL backend creates a uniquely named database for each fixture instance and drops
it afterwards, so concurrent runs against one PostgreSQL never collide; it is skipped when
`PAI_TEST_POSTGRES_URL` is unset (a failure under `PAI_TEST_STRICT=1`).

Outside pytest, `serve(settings)` and `serve_platform(settings)` are the same things as
context managers.
"""

from __future__ import annotations

import base64
import itertools
import logging
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import sqlalchemy
import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from pai.cluster import cluster_from_file
from pai.executors.local import kill_processes_under
from pai.platform import create_platform_app
from pai.server import build_server, create_app
from pai.server.logconfig import configure_logging
from pai.settings import Settings, default_database_url
from pai.store import Database

STARTUP_TIMEOUT_SECONDS = 60.0
ADMIN_USERNAME = "admin"
LOCAL_CLUSTER_FILE = Path(__file__).parents[2] / "examples" / "clusters" / "local-4node.yaml"
"""Four CPU nodes on this machine (127.0.0.1..4); VCs `default` (3 nodes), `research` (1)."""

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)


@dataclass
class RunningServer:
    """A started server and helpers to talk to it."""

    base_url: str
    """`http://127.0.0.1:<port>`; the API is under `api_url`."""
    settings: Settings
    admin: Credentials
    log_path: Path
    """The server's log output (JSON lines, as `pai up` writes it)."""
    _admin_token: str | None = field(default=None, repr=False)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/v2"

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        """An httpx client rooted at `api_url`, sending `token` as a Bearer token if given."""
        headers = bearer_auth(token) if token else {}
        return httpx.Client(base_url=self.api_url, headers=headers, timeout=30.0, **kwargs)

    def login(self, username: str, password: str, **body: Any) -> str:
        """A user token for `username` (fails the test if the login fails)."""
        with self.client() as client:
            response = client.post(
                "/authn/basic/login", json={"username": username, "password": password, **body}
            )
        assert response.status_code == 200, response.text
        token: str = response.json()["token"]
        return token

    def admin_token(self) -> str:
        """A token of the `admin` user, obtained once per server."""
        if self._admin_token is None:
            self._admin_token = self.login(self.admin.username, self.admin.password)
        return self._admin_token

    def create_user(self, username: str | None = None, **fields: Any) -> Credentials:
        """Create a user through the API as admin; the name is unique unless given."""
        credentials = Credentials(
            username or f"user_{uuid.uuid4().hex[:10]}", fields.pop("password", None) or _password()
        )
        body = {"username": credentials.username, "password": credentials.password, **fields}
        with self.client(self.admin_token()) as client:
            response = client.post("/users", json=body)
        assert response.status_code == 201, response.text
        return credentials


@dataclass(frozen=True)
class Account:
    """A user with a live user token."""

    username: str
    password: str = field(repr=False)
    token: str = field(repr=False)

    @classmethod
    def create(cls, server: RunningServer, **fields: Any) -> Account:
        """A new user (unique name unless given) created by the admin, logged in."""
        credentials = server.create_user(**fields)
        token = server.login(credentials.username, credentials.password)
        return cls(credentials.username, credentials.password, token)


def bearer_auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def basic_auth(username: str, token: str) -> dict[str, str]:
    """`Authorization: Basic base64(user:applicationToken)`, as OpenPAI tools send it."""
    encoded = base64.b64encode(f"{username}:{token}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


def server_settings(home: Path, database_url: str | None = None, **overrides: Any) -> Settings:
    """Settings for a test server: random admin password and signing key, generous limits."""
    values: dict[str, Any] = {
        "home": home,
        "database_url": database_url or default_database_url(home),
        "admin_password": _password(),
        "secret_key": secrets.token_hex(32),
        "login_rate_limit": 10_000,
        "submission_rate_limit": 10_000,
        # Tests expect a job to wait while its VC is full; under the default `pai` policy it
        # would run on another VC's idle cells instead (tests/scheduler cover `pai`).
        "scheduler": "hived",
        # Tasks on the host as the suite's user (see tests/conftest.py).
        "isolation": "host",
        "task_user": "",
    }
    values.update(overrides)
    return Settings(**values)


AppFactory = Callable[..., FastAPI]


@contextmanager
def serve(
    settings: Settings, *, app_factory: AppFactory = create_app, **create_app_kwargs: Any
) -> Iterator[RunningServer]:
    """Run `app_factory(settings, **create_app_kwargs)` under uvicorn until the block ends.

    Without `settings.admin_password` the server generates the admin's password and prints it
    once; the `admin` credentials then hold none.
    """
    settings.home.mkdir(parents=True, exist_ok=True)
    log_path = settings.home / "server.log"
    with (
        log_path.open("a", encoding="utf-8") as log_stream,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener,
        ExitStack() as cleanup,
    ):
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        server = build_server(app_factory(settings, **create_app_kwargs), port=port)
        cleanup.enter_context(_server_log(settings.log_level, log_stream))
        # A daemon thread: a server that fails to stop fails its test instead of keeping the
        # interpreter (and the whole suite) from ever exiting.
        thread = threading.Thread(
            target=_run, args=(server, listener), name=f"pai-server-{port}", daemon=True
        )
        thread.start()
        cleanup.callback(_join_stopped, thread)
        cleanup.callback(setattr, server, "should_exit", True)
        _wait_started(server, thread, log_path)
        yield RunningServer(
            base_url=f"http://127.0.0.1:{port}",
            settings=settings,
            admin=Credentials(ADMIN_USERNAME, settings.admin_password or ""),
            log_path=log_path,
        )


@contextmanager
def serve_platform(
    settings: Settings, cluster_file: Path = LOCAL_CLUSTER_FILE
) -> Iterator[RunningServer]:
    """Run the whole platform on `cluster_file` until the block ends, then kill the tasks it
    left running (a stopping controller leaves them to the next start, as `pai up` does)."""
    cluster = cluster_from_file(cluster_file)
    with ExitStack() as cleanup:
        cleanup.callback(kill_processes_under, settings.home)
        yield cleanup.enter_context(
            serve(settings, app_factory=partial(create_platform_app, cluster=cluster))
        )


@contextmanager
def fresh_postgres_database(server_url: str) -> Iterator[str]:
    """A new, uniquely named database on the PostgreSQL server at `server_url`, dropped after."""
    name = f"pai_test_{uuid.uuid4().hex[:16]}"
    admin = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def empty_database(backend: str, request: pytest.FixtureRequest, directory: Path) -> Iterator[str]:
    """The URL of an empty database of `backend` ("sqlite" or "postgresql")."""
    if backend == "sqlite":
        yield default_database_url(directory)
        return
    with fresh_postgres_database(request.getfixturevalue("postgres_url")) as url:
        yield url


Serve = Callable[..., AbstractContextManager[RunningServer]]


@contextmanager
def _module_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, run: Serve
) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("pai-home")
    with (
        empty_database(request.param, request, home) as url,
        run(server_settings(home, url)) as server,
    ):
        yield server


@pytest.fixture(scope="module", params=BACKENDS)
def pai_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A server shared by the tests of one module, once per database backend."""
    with _module_server(request, tmp_path_factory, serve) as server:
        yield server


@pytest.fixture(scope="module", params=BACKENDS)
def pai_platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """The whole platform, shared by the tests of one module, once per database backend."""
    with _module_server(request, tmp_path_factory, serve_platform) as server:
        yield server


@pytest.fixture(params=BACKENDS)
def pai_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database for one test, once per backend."""
    with empty_database(request.param, request, tmp_path / "database") as url:
        yield url


@pytest.fixture
def database(pai_database_url: str) -> Iterator[Database]:
    """A migrated database of each backend, closed after the test."""
    database = Database(pai_database_url)
    with database.exclusive() as connection:
        database.upgrade(connection)
    yield database
    database.dispose()


StartServer = Callable[..., RunningServer]


@contextmanager
def _server_factory(database_url: str, directory: Path, run: Serve) -> Iterator[StartServer]:
    with ExitStack() as servers:
        counter = itertools.count()

        def start(settings: Settings | None = None, **kwargs: Any) -> RunningServer:
            if settings is None:
                settings = server_settings(directory / f"pai-home-{next(counter)}", database_url)
            return servers.enter_context(run(settings, **kwargs))

        yield start


@pytest.fixture
def start_pai_server(pai_database_url: str, tmp_path: Path) -> Iterator[StartServer]:
    """Factory of servers on this test's fresh database, stopped when the test ends.

    `start_pai_server(settings=None, **create_app_kwargs)`: by default each call gets a new
    `PAI_HOME` and `server_settings`; pass the `settings` of a running server to start a second
    one on the same home and database (a restart), or `server_settings(home, url, ...)` for
    other limits.
    """
    with _server_factory(pai_database_url, tmp_path, serve) as start:
        yield start


@pytest.fixture
def start_pai_platform(pai_database_url: str, tmp_path: Path) -> Iterator[StartServer]:
    """Factory of whole platforms on this test's fresh database, stopped (and their tasks
    killed) when the test ends: `start_pai_platform(settings=None, cluster_file=...)`."""
    with _server_factory(pai_database_url, tmp_path / "platforms", serve_platform) as start:
        yield start


@contextmanager
def _server_log(level: str, stream: IO[str]) -> Iterator[None]:
    root = logging.getLogger()
    previous_level = root.level
    handler = configure_logging(level, stream)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)


def _join_stopped(thread: threading.Thread) -> None:
    thread.join(STARTUP_TIMEOUT_SECONDS)
    if thread.is_alive():
        raise RuntimeError(f"the PAI server ({thread.name}) did not stop")


def _run(server: uvicorn.Server, listener: socket.socket) -> None:
    """uvicorn leaves with `SystemExit` when the app fails to start; `_wait_started` reports
    that failure from the server's log, so the thread ends quietly."""
    with suppress(SystemExit):
        server.run(sockets=[listener])


def _wait_started(server: uvicorn.Server, thread: threading.Thread, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the PAI server failed to start:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the PAI server did not start:\n{log_path.read_text()}")
        time.sleep(0.02)


def _password() -> str:
    return secrets.token_urlsafe(12)
