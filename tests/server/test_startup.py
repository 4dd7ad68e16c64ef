"""Start-up: migrations on an empty database, idempotent restarts, readiness, admin password."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import httpx
import pytest
from alembic import command

from pai.store import Database, head_revision
from pai.store.database import alembic_config
from server.harness import StartServer, serve, server_settings


def revision_of(url: str) -> str | None:
    database = Database(url)
    try:
        return database.current_revision()
    finally:
        database.dispose()


def test_an_empty_database_is_migrated_on_start(
    pai_database_url: str, start_pai_server: StartServer
) -> None:
    assert revision_of(pai_database_url) is None
    server = start_pai_server()
    assert revision_of(pai_database_url) == head_revision()
    assert httpx.get(f"{server.base_url}/healthz").json() == {"message": "ok"}
    assert httpx.get(f"{server.base_url}/readyz").json() == {"message": "ready"}


def test_starting_again_on_the_same_database_changes_nothing(
    start_pai_server: StartServer,
) -> None:
    first = start_pai_server()
    account = first.create_user()
    token = first.admin_token()
    second = start_pai_server(
        dataclasses.replace(first.settings, admin_password="a-different-password")
    )
    assert revision_of(second.settings.database_url) == head_revision()
    with second.client(token) as client:
        users = {user["username"]: user for user in client.get("/users").json()}
        groups = [group["groupname"] for group in client.get("/groups").json()]
    assert set(users) == {"admin", account.username}
    assert groups == ["admingroup", "default"]
    assert second.login("admin", first.admin.password)
    with second.client() as client:
        rejected = client.post(
            "/authn/basic/login",
            json={"username": "admin", "password": "a-different-password"},
        )
    assert rejected.status_code == 400


def test_readyz_fails_when_the_schema_is_not_current(start_pai_server: StartServer) -> None:
    server = start_pai_server()
    database = Database(server.settings.database_url)
    try:
        with database.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
    finally:
        database.dispose()
    response = httpx.get(f"{server.base_url}/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "code": "ServiceUnavailableError",
        "message": f"the database schema is at no revision, expected {head_revision()}",
    }


def test_a_generated_admin_password_is_printed_once_and_never_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = server_settings(tmp_path, admin_password=None)
    with serve(settings):
        pass
    printed = capsys.readouterr().out
    password = printed.split("with the password ", 1)[1].split()[0]
    with serve(settings) as server:
        response = httpx.post(
            f"{server.api_url}/authn/basic/login", json={"username": "admin", "password": password}
        )
    assert response.status_code == 200
    assert capsys.readouterr().out == ""  # the second start prints nothing
    assert password not in caplog.text
    assert password not in server.log_path.read_text()
    for database_file in tmp_path.glob("pai.db*"):
        assert password.encode() not in database_file.read_bytes()


def test_an_unreachable_database_fails_the_start_with_the_reason(tmp_path: Path) -> None:
    unreachable = "postgresql+psycopg://pai@127.0.0.1:1/pai"
    settings = server_settings(tmp_path, unreachable, store_wait_seconds=0)
    with pytest.raises(RuntimeError) as failure, serve(settings):
        pass
    message = str(failure.value)
    assert message.startswith("the PAI server failed to start")
    assert "Application startup failed" in message
    assert "Connection refused" in message or "connection failed" in message
