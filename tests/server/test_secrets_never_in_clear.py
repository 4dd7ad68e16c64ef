"""Passwords and tokens never appear in clear: not in API responses, logs or the database.

A fresh server goes through everything that handles secrets (user creation, logins, failed
logins, application tokens, Basic auth, password changes, token revocation, a validation
error on a password field), recording every response; then the responses, the captured log
records, the server's log output and every column of every row of every table are searched
for each secret. The same holds for the `secrets:` of a job, whose value only its task sees,
and for the credentials of an S3 storage, which only the server and the storage's tasks use.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import sqlalchemy

from pai.store import Database
from server.harness import RunningServer, StartServer, basic_auth
from server.jobapi import job_yaml, unique, wait_for
from server.storagehelpers import S3_KEYS, moto_server_command, s3_server


class Recorder:
    """Sends requests and keeps every response, minus the token it was meant to hand out."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        self.transcripts: list[str] = []

    def call(
        self, method: str, path: str, *, issues_token: bool = False, **kwargs: object
    ) -> httpx.Response:
        with self.server.client() as client:
            response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
        text = response.text
        if issues_token:
            text = text.replace(response.json()["token"], "<the token this response issues>")
        headers = "\n".join(f"{name}: {value}" for name, value in response.headers.items())
        self.transcripts.append(f"{response.status_code}\n{headers}\n{text}")
        return response


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_no_secret_is_stored_logged_or_returned_in_clear(
    start_pai_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The test's own HTTP client logs each URL it calls (one holds a token); that is the
    # client's log, not the server's. (The last set_level call also sets caplog's handler.)
    for client_logger in ("httpx", "httpcore"):
        caplog.set_level(logging.WARNING, logger=client_logger)
    caplog.set_level(logging.DEBUG)
    server = start_pai_server()
    api = Recorder(server)
    passwords = {
        "admin": server.admin.password,
        "alice": "alice-Secret-1",
        "alice new": "alice-Secret-2",
        "bob": "bob-Secret-1",
        "bob reset": "bob-Secret-reset",
        "wrong": "wrong-Guess-77",
        "too short": "Zq9#x",
    }
    tokens: list[str] = []

    def login(username: str, password: str) -> str:
        body = {"username": username, "password": password}
        token: str = api.call("POST", "/authn/basic/login", json=body, issues_token=True).json()[
            "token"
        ]
        tokens.append(token)
        return token

    admin = login("admin", passwords["admin"])
    for name in ("alice", "bob"):
        created = api.call(
            "POST",
            "/users",
            json={"username": name, "password": passwords[name], "email": f"{name}@example.com"},
            headers=auth(admin),
        )
        assert created.status_code == 201
    alice = login("alice", passwords["alice"])
    bob = login("bob", passwords["bob"])
    wrong = api.call(
        "POST", "/authn/basic/login", json={"username": "alice", "password": passwords["wrong"]}
    )
    assert wrong.status_code == 400
    short = api.call(
        "POST",
        "/users",
        json={"username": "carol", "password": passwords["too short"]},
        headers=auth(admin),
    )
    assert short.status_code == 400
    application = api.call(
        "POST", "/tokens/application", issues_token=True, headers=auth(alice)
    ).json()["token"]
    tokens.append(application)
    assert api.call("GET", "/tokens/check", headers=basic_auth("alice", application)).is_success
    changed = api.call(
        "PUT",
        "/users/me",
        json={"data": {"newPassword": passwords["alice new"], "oldPassword": passwords["alice"]}},
        headers=auth(alice),
    )
    assert changed.status_code == 201
    reset = api.call(
        "PUT",
        "/users",
        json={"patch": True, "data": {"username": "bob", "password": passwords["bob reset"]}},
        headers=auth(admin),
    )
    assert reset.status_code == 201
    assert api.call("GET", "/tokens/check", headers=auth(bob)).status_code == 401
    revocable = login("alice", passwords["alice new"])
    assert api.call("DELETE", f"/tokens/{revocable}", headers=auth(alice)).is_success
    for path in ("/users", "/users/alice", "/groups", "/groups/default/userlist", "/tokens"):
        assert api.call("GET", path, headers=auth(admin)).is_success
    assert api.call("GET", "/tokens", headers=auth(alice)).is_success
    assert api.call("DELETE", "/authn/basic/logout", headers=auth(alice)).is_success

    secrets = {f"password {name}": value for name, value in passwords.items()}
    secrets |= {f"token {index}": token for index, token in enumerate(tokens)}
    assert server.settings.secret_key is not None
    secrets["signing key"] = server.settings.secret_key
    places = {
        "API responses": "\n".join(api.transcripts),
        "captured log records": caplog.text
        + "\n".join(str(record.__dict__) for record in caplog.records),
        "server log output": server.log_path.read_text(),
        "database": dump_database(server.settings.database_url),
    }
    found = [
        f"{secret} in {place}"
        for place, text in places.items()
        for secret, value in secrets.items()
        if value in text
    ]
    assert found == []
    assert any(record.name == "pai.server.requests" for record in caplog.records)
    # The searches looked at the right material: the database knows tokens by their hashes.
    assert hashlib.sha256(application.encode()).hexdigest() in places["database"]
    assert "$argon2id$" in places["database"]
    assert "/api/v2/tokens/[REDACTED]" in places["server log output"]


def dump_database(url: str) -> str:
    """Every column of every row of every table, as text."""
    database = Database(url)
    try:
        metadata = sqlalchemy.MetaData()
        metadata.reflect(database.engine)
        assert {"users", "groups", "memberships", "tokens"} <= set(metadata.tables)
        with database.engine.connect() as connection:
            return "\n".join(
                repr(tuple(row))
                for table in metadata.sorted_tables
                for row in connection.execute(table.select())
            )
    finally:
        database.dispose()


JOB_SECRET = "job-Secret-Value-5f1c9e"


def admin_login(api: Recorder) -> str:
    """A user token of the administrator (the response that issues it is kept without it)."""
    body = {"username": "admin", "password": api.server.admin.password}
    token: str = api.call("POST", "/authn/basic/login", json=body, issues_token=True).json()[
        "token"
    ]
    return token


def everything_kept(api: Recorder, caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    """What a platform kept, by place: the API responses, the log records, the database and
    every file under its home (task files and logs included)."""
    home = api.server.settings.home
    return {
        "API responses": "\n".join(api.transcripts),
        "captured log records": caplog.text
        + "\n".join(str(record.__dict__) for record in caplog.records),
        "database": dump_database(api.server.settings.database_url),
        **{
            f"file {path}": path.read_bytes().decode(errors="replace")
            for path in sorted(home.rglob("*"))
            if path.is_file()
        },
    }


def test_job_secrets_stay_sealed_everywhere_but_in_the_task(
    start_pai_platform: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A job's `secrets:` reach its task (which proves it by printing the value's SHA-256),
    yet no API response, log record, log file, task file or database row holds the value."""
    for client_logger in ("httpx", "httpcore"):
        caplog.set_level(logging.WARNING, logger=client_logger)
    caplog.set_level(logging.DEBUG)
    server = start_pai_platform()
    api = Recorder(server)
    admin = admin_login(api)
    headers = auth(admin)
    job = job_yaml(
        unique("sealed"),
        ['printf %s "<% $secrets.key %>" | sha256sum', 'test "<% $secrets.key %>" != ""'],
        top=f"secrets:\n  key: {JOB_SECRET}",
    )
    submitted = api.call("POST", "/jobs", content=job, headers=headers)
    assert submitted.status_code == 202, submitted.text
    name = submitted.json()["name"]
    with server.client(admin) as client:
        wait_for(client, name)
    task = f"/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts"
    for path in (
        "/jobs",
        f"/jobs/{name}",
        f"/jobs/{name}/config",
        f"/jobs/{name}/events",
        f"/jobs/{name}/job-attempts",
        f"/jobs/{name}/attempts/0",
        task,
        f"{task}/0/logs",
    ):
        assert api.call("GET", path, headers=headers).is_success, path
    logs = {
        stream: api.call("GET", f"{task}/0/logs/{stream}", headers=headers).text
        for stream in ("stdout", "stderr", "all", "runtime")
    }
    assert hashlib.sha256(JOB_SECRET.encode()).hexdigest() in logs["stdout"]
    assert "******" in api.call("GET", f"/jobs/{name}/config", headers=headers).text

    places = everything_kept(api, caplog)
    assert [place for place, text in places.items() if JOB_SECRET in text] == []
    # The searches looked at the right material: the store holds the job, its secret masked.
    assert name.split("~")[1] in places["database"] and "******" in places["database"]


def test_storage_credentials_stay_sealed_everywhere_but_in_the_task(
    start_pai_platform: StartServer,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    requirement: Callable[[bool, str], None],
) -> None:
    """An S3 storage's secret key is used by the server (to reach the bucket) and by a task
    that mounts the storage (which proves it by printing the key's SHA-256), yet no API
    response, log record, log file, task file or database row holds it."""
    requirement(moto_server_command() is not None, "moto's S3 server is not installed")
    for client_logger in ("httpx", "httpcore", "botocore", "boto3", "urllib3"):
        caplog.set_level(logging.WARNING, logger=client_logger)
    caplog.set_level(logging.DEBUG)
    server = start_pai_platform()
    api = Recorder(server)
    admin = admin_login(api)
    headers = auth(admin)
    secret = S3_KEYS["secretAccessKey"]
    with s3_server(tmp_path / "moto.log") as s3:
        created = api.call(
            "POST",
            "/storages",
            json={"name": "sealed", "type": "s3", "data": s3.data()},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        for method, path, body in (
            ("GET", "/storages", None),
            ("GET", "/storages/sealed", None),
            ("PUT", "/storages/sealed/content?path=a.txt", b"a"),
            ("GET", "/storages/sealed/files", None),
            ("GET", "/audit", None),
        ):
            assert api.call(method, path, headers=headers, content=body).is_success, path
        job = job_yaml(
            unique("keyed"),
            ['printf %s "$PAI_STORAGE_SEALED_SECRET_ACCESS_KEY" | sha256sum'],
            extras="  storages:\n    - name: sealed",
        )
        submitted = api.call("POST", "/jobs", content=job, headers=headers)
        assert submitted.status_code == 202, submitted.text
        name = submitted.json()["name"]
        with server.client(admin) as client:
            wait_for(client, name)
        task = f"/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs"
        stdout = api.call("GET", f"{task}/stdout", headers=headers).text
    assert hashlib.sha256(secret.encode()).hexdigest() in stdout

    places = everything_kept(api, caplog)
    assert [place for place, text in places.items() if secret in text] == []
    assert "sealed" in places["database"] and s3.bucket in places["database"]
