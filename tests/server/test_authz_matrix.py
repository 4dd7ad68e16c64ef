"""Who gets what: every endpoint called by an anonymous client, a plain user, another user
and an administrator must answer exactly the expected status.

"user" owns what the path names (or the path names something created for this one call);
"other" is a second plain user. To cover a new endpoint, add a `Case`: its `build` returns the
request for one role and may first create what the request needs, so that a successful call
by one role does not change what the next role sees.

The server is the whole platform, so that job, VC and node endpoints answer for real: `user`
owns a finished job (`World.job`) whose task has logs. As in OpenPAI, every logged-in user
reads jobs, but only the owner or an administrator reads their config and logs or changes
them. A storage is used by the members of the groups granting it (`user` here) and by
administrators, who alone define storages and read the audit log. Marketplace items are seen
by everyone when public (by the author and administrators when private), changed by their
author or an administrator; a user's stars are that user's alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import yaml

from server.harness import Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for
from server.storagehelpers import define_storage, new_group, unique_storage

ROLES = ("anonymous", "user", "other", "admin")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    json: Any = None
    token: str | None = None
    """A token to use instead of the role's own one (for calls that revoke the caller's token)."""
    content: bytes | None = None


@dataclass
class World:
    server: RunningServer
    accounts: dict[str, Account]
    job: str
    """A finished job of "user"."""
    storage: str
    """A directory storage granted to "user" only (through a group), at `storage_root`."""
    storage_root: Path
    item: str
    """A public marketplace item of "user"."""

    def token(self, role: str) -> str | None:
        return None if role == "anonymous" else self.accounts[role].token

    def fresh_token(self, role: str) -> str | None:
        """A new user token of `role`, for calls that revoke it."""
        if role == "anonymous":
            return None
        account = self.accounts[role]
        return self.server.login(account.username, account.password)

    def as_admin(self, method: str, path: str, json: Any = None) -> Any:
        with self.server.client(self.accounts["admin"].token) as client:
            response = client.request(method, path, json=json)
        assert response.status_code < 300, response.text
        return response.json()

    def new_user(self) -> str:
        return self.server.create_user().username

    def new_group(self) -> str:
        name = f"g_{uuid.uuid4().hex[:10]}"
        self.as_admin("POST", "/groups", {"groupname": name})
        return name

    def tagged_job(self) -> str:
        """The user's job, tagged (again) with the tag the untag case removes."""
        self.as_admin("PUT", f"/jobs/{self.job}/tag", {"value": "to-remove"})
        return self.job

    def new_storage(self) -> str:
        name = unique_storage("matrix")
        folder = self.storage_root.parent / name
        folder.mkdir()
        define_storage(self.server, name, "directory", {"path": str(folder)})
        return name

    def user_file(self) -> str:
        """A file in the user's storage, made for one call."""
        name = f"file-{uuid.uuid4().hex[:8]}.txt"
        (self.storage_root / name).write_text("x")
        return name

    def user_upload(self) -> str:
        """An upload in progress of the user's, to the user's storage."""
        body = {"path": f"up-{uuid.uuid4().hex[:8]}", "size": 10}
        with self.server.client(self.accounts["user"].token) as client:
            upload_id: str = client.post(f"/storages/{self.storage}/uploads", json=body).json()[
                "id"
            ]
        return upload_id

    def user_item(self, **fields: Any) -> str:
        """A marketplace item of the user's, made for one call."""
        with self.server.client(self.accounts["user"].token) as client:
            item_id: str = client.post("/marketplace/items", json=item_json(**fields)).json()["id"]
        return item_id

    def user_application_token(self) -> str:
        with self.server.client(self.accounts["user"].token) as client:
            token: str = client.post("/tokens/application").json()["token"]
        return token


def public_key() -> str:
    key: str = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    return key


@dataclass(frozen=True)
class Case:
    name: str
    expected: tuple[int, int, int, int]
    """Statuses for anonymous, user, other, admin."""
    build: Callable[[World, str], Call]


def fixed(method: str, path: str, json: Any = None) -> Callable[[World, str], Call]:
    return lambda world, role: Call(method, path, json)


def on_job(method: str, suffix: str = "", json: Any = None) -> Callable[[World, str], Call]:
    """A call on the user's job: `/jobs/{user~job}{suffix}`."""
    return lambda world, role: Call(method, f"/jobs/{world.job}{suffix}", json)


TASK = "/attempts/0/taskRoles/main/taskIndex/0/attempts"


def on_storage(
    method: str, suffix: str = "", path: str | None = None, **call: Any
) -> Callable[[World, str], Call]:
    """A call on the user's storage: `/storages/{storage}{suffix}`, with `?path=` if given."""
    query = f"?path={path}" if path is not None else ""
    return lambda world, role: Call(method, f"/storages/{world.storage}{suffix}{query}", **call)


def fresh_path() -> str:
    return f"made-{uuid.uuid4().hex[:8]}"


STORAGE_CASES = [
    Case("GET /storages", (401, 200, 200, 200), fixed("GET", "/storages")),
    Case("GET /storages/{storage}", (401, 200, 403, 200), on_storage("GET")),
    Case(
        "POST /storages",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "POST",
            "/storages",
            {
                "name": unique_storage("made"),
                "type": "directory",
                "data": {"path": str(world.storage_root)},
            },
        ),
    ),
    Case(
        "PUT /storages/{storage}",
        (401, 403, 403, 200),
        lambda world, role: Call(
            "PUT",
            f"/storages/{world.new_storage()}",
            {"type": "directory", "data": {"path": str(world.storage_root)}},
        ),
    ),
    Case(
        "DELETE /storages/{storage}",
        (401, 403, 403, 200),
        lambda world, role: Call("DELETE", f"/storages/{world.new_storage()}"),
    ),
    Case("GET /storages/{storage}/files", (401, 200, 403, 200), on_storage("GET", "/files")),
    Case(
        "GET /storages/{storage}/content",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "GET", f"/storages/{world.storage}/content?path={world.user_file()}"
        ),
    ),
    Case(
        "PUT /storages/{storage}/content",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "PUT", f"/storages/{world.storage}/content?path={fresh_path()}", content=b"data"
        ),
    ),
    Case(
        "POST /storages/{storage}/folders",
        (401, 201, 403, 201),
        lambda world, role: Call("POST", f"/storages/{world.storage}/folders?path={fresh_path()}"),
    ),
    Case(
        "DELETE /storages/{storage}/files",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "DELETE", f"/storages/{world.storage}/files?path={world.user_file()}"
        ),
    ),
    Case("GET /storages/{storage}/uploads", (401, 200, 403, 200), on_storage("GET", "/uploads")),
    Case(
        "POST /storages/{storage}/uploads",
        (401, 201, 403, 201),
        lambda world, role: Call(
            "POST", f"/storages/{world.storage}/uploads", {"path": fresh_path(), "size": 4}
        ),
    ),
    Case(
        "GET /storages/{storage}/uploads/{user's upload}",
        (401, 200, 403, 200),
        lambda world, role: Call("GET", f"/storages/{world.storage}/uploads/{world.user_upload()}"),
    ),
    Case(
        "PUT /storages/{storage}/uploads/{user's upload}",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "PUT",
            f"/storages/{world.storage}/uploads/{world.user_upload()}?offset=0",
            content=b"12345",
        ),
    ),
    Case(
        "DELETE /storages/{storage}/uploads/{user's upload}",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "DELETE", f"/storages/{world.storage}/uploads/{world.user_upload()}"
        ),
    ),
    Case("GET /audit", (401, 403, 403, 200), fixed("GET", "/audit")),
]

MARKET_CASES = [
    Case("GET /marketplace/items", (401, 200, 200, 200), fixed("GET", "/marketplace/items")),
    Case(
        "POST /marketplace/items",
        (401, 201, 201, 201),
        lambda world, role: Call("POST", "/marketplace/items", item_json()),
    ),
    Case(
        "GET /marketplace/items/{public item}",
        (401, 200, 200, 200),
        lambda world, role: Call("GET", f"/marketplace/items/{world.item}"),
    ),
    Case(
        "GET /marketplace/items/{private item}",
        (401, 200, 404, 200),
        lambda world, role: Call(
            "GET", f"/marketplace/items/{world.user_item(isPublic=False, isPrivate=True)}"
        ),
    ),
    Case(
        "PUT /marketplace/items/{item}",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "PUT", f"/marketplace/items/{world.item}", item_json(name=f"renamed {role}")
        ),
    ),
    Case(
        "DELETE /marketplace/items/{item}",
        (401, 200, 403, 200),
        lambda world, role: Call("DELETE", f"/marketplace/items/{world.user_item()}"),
    ),
    Case(
        "POST /marketplace/items/{item}/submissions",
        (401, 202, 202, 202),
        lambda world, role: Call(
            "POST", f"/marketplace/items/{world.item}/submissions", job_dict(unique("market"))
        ),
    ),
    Case(
        "GET /marketplace/items/{item}/starUsers",
        (401, 200, 200, 200),
        lambda world, role: Call("GET", f"/marketplace/items/{world.item}/starUsers"),
    ),
    Case(
        "GET /marketplace/users/{user}/starItems",
        (401, 200, 403, 403),
        lambda world, role: Call(
            "GET", f"/marketplace/users/{world.accounts['user'].username}/starItems"
        ),
    ),
    Case(
        "PUT /marketplace/users/{user}/starItems/{item}",
        (401, 200, 403, 403),
        lambda world, role: Call(
            "PUT",
            f"/marketplace/users/{world.accounts['user'].username}/starItems/{world.item}",
        ),
    ),
    Case(
        "DELETE /marketplace/users/{user}/starItems/{item}",
        (401, 200, 403, 403),
        lambda world, role: Call(
            "DELETE",
            f"/marketplace/users/{world.accounts['user'].username}/starItems/{world.item}",
        ),
    ),
    Case("GET /marketplace/tags", (401, 200, 200, 200), fixed("GET", "/marketplace/tags")),
    Case(
        "GET /marketplace/categories", (401, 200, 200, 200), fixed("GET", "/marketplace/categories")
    ),
]


def on_user_keys(method: str, with_key: bool = False) -> Callable[[World, str], Call]:
    """A call on the user's SSH keys; `with_key` adds one first and names it in the path."""

    def build(world: World, role: str) -> Call:
        path = f"/users/{world.accounts['user'].username}/sshkeys"
        title = f"k{uuid.uuid4().hex[:8]}"
        if with_key:
            world.as_admin("POST", path, {"title": title, "value": public_key()})
            return Call(method, f"{path}/{title}")
        if method == "POST":
            return Call(method, path, {"title": title, "value": public_key()})
        return Call(method, path)

    return build


SSH_CASES = [
    Case("GET /users/{user}/sshkeys", (401, 200, 403, 200), on_user_keys("GET")),
    Case("POST /users/{user}/sshkeys", (401, 201, 403, 201), on_user_keys("POST")),
    Case(
        "DELETE /users/{user}/sshkeys/{title}",
        (401, 200, 403, 200),
        on_user_keys("DELETE", with_key=True),
    ),
    # The user's job has no ssh plugin: only who may see it learns that.
    Case("GET /jobs/{job}/ssh", (401, 404, 403, 404), on_job("GET", "/ssh")),
    Case("GET /interactive-jobs", (401, 200, 200, 200), fixed("GET", "/interactive-jobs")),
]


CASES = [
    Case("GET /info", (200, 200, 200, 200), fixed("GET", "/info")),
    Case("GET /authn/info", (200, 200, 200, 200), fixed("GET", "/authn/info")),
    Case(
        "DELETE /authn/basic/logout",
        (401, 200, 200, 200),
        lambda world, role: Call("DELETE", "/authn/basic/logout", token=world.fresh_token(role)),
    ),
    Case("GET /tokens", (401, 200, 200, 200), fixed("GET", "/tokens")),
    Case("GET /tokens/check", (401, 200, 200, 200), fixed("GET", "/tokens/check")),
    Case("POST /tokens/application", (401, 200, 200, 200), fixed("POST", "/tokens/application")),
    Case(
        "DELETE /tokens/{user's token}",
        (401, 200, 403, 403),
        lambda world, role: Call("DELETE", f"/tokens/{world.user_application_token()}"),
    ),
    Case("GET /users", (401, 200, 200, 200), fixed("GET", "/users")),
    Case(
        "POST /users",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "POST", "/users", {"username": f"u_{uuid.uuid4().hex[:10]}", "password": "pass-word"}
        ),
    ),
    Case(
        "PUT /users",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "PUT",
            "/users",
            {"patch": True, "data": {"username": world.new_user(), "email": "x@example.com"}},
        ),
    ),
    Case(
        "PUT /users/me",
        (401, 201, 201, 201),
        fixed("PUT", "/users/me", {"patch": True, "data": {"extension": {"seen": True}}}),
    ),
    Case(
        "GET /users/{user}",
        (401, 200, 200, 200),
        lambda world, role: Call("GET", f"/users/{world.accounts['user'].username}"),
    ),
    Case(
        "DELETE /users/{user}",
        (401, 403, 403, 200),
        lambda world, role: Call("DELETE", f"/users/{world.new_user()}"),
    ),
    Case(
        "PUT /users/{user}/group",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "PUT", f"/users/{world.new_user()}/group", {"groupname": world.new_group()}
        ),
    ),
    Case(
        "DELETE /users/{user}/group",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "DELETE", f"/users/{world.new_user()}/group", {"groupname": world.new_group()}
        ),
    ),
    Case(
        "PUT /users/{user}/grouplist",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "PUT", f"/users/{world.new_user()}/grouplist", {"grouplist": ["default"]}
        ),
    ),
    Case("GET /groups", (401, 200, 200, 200), fixed("GET", "/groups")),
    Case(
        "POST /groups",
        (401, 403, 403, 201),
        lambda world, role: Call("POST", "/groups", {"groupname": f"g_{uuid.uuid4().hex[:10]}"}),
    ),
    Case(
        "PUT /groups",
        (401, 403, 403, 201),
        lambda world, role: Call(
            "PUT", "/groups", {"patch": True, "data": {"groupname": world.new_group()}}
        ),
    ),
    Case("GET /groups/{group}", (401, 200, 200, 200), fixed("GET", "/groups/default")),
    Case(
        "DELETE /groups/{group}",
        (401, 403, 403, 201),
        lambda world, role: Call("DELETE", f"/groups/{world.new_group()}"),
    ),
    Case(
        "GET /groups/{group}/userlist",
        (401, 403, 403, 200),
        fixed("GET", "/groups/default/userlist"),
    ),
    Case(
        "POST /jobs",
        (401, 202, 202, 202),
        lambda world, role: Call("POST", "/jobs", json=job_dict(unique("matrix"))),
    ),
    Case("GET /jobs", (401, 200, 200, 200), fixed("GET", "/jobs")),
    Case("GET /jobs/{job}", (401, 200, 200, 200), on_job("GET")),
    Case("GET /jobs/{job}/attempts/0", (401, 200, 200, 200), on_job("GET", "/attempts/0")),
    Case("GET /jobs/{job}/job-attempts", (401, 200, 200, 200), on_job("GET", "/job-attempts")),
    Case("GET /jobs/{job}/job-attempts/0", (401, 200, 200, 200), on_job("GET", "/job-attempts/0")),
    Case(
        "GET /jobs/{job}/job-attempts/healthz",
        (200, 200, 200, 200),
        on_job("GET", "/job-attempts/healthz"),
    ),
    Case("GET /jobs/{job}/{task} attempts", (401, 200, 200, 200), on_job("GET", TASK)),
    Case(
        "GET /jobs/{job}/{task attempt} logs",
        (401, 200, 403, 200),
        on_job("GET", f"{TASK}/0/logs"),
    ),
    Case(
        "GET /jobs/{job}/{task attempt} logs/all",
        (401, 200, 403, 200),
        on_job("GET", f"{TASK}/0/logs/all"),
    ),
    Case("GET /jobs/{job}/config", (401, 200, 403, 200), on_job("GET", "/config")),
    Case("GET /jobs/{job}/events", (401, 200, 200, 200), on_job("GET", "/events")),
    Case(
        "PUT /jobs/{job}/executionType",
        (401, 202, 403, 202),
        on_job("PUT", "/executionType", {"value": "STOP"}),
    ),
    Case("PUT /jobs/{job}/tag", (401, 200, 403, 200), on_job("PUT", "/tag", {"value": "seen"})),
    Case(
        "DELETE /jobs/{job}/tag",
        (401, 200, 403, 200),
        lambda world, role: Call(
            "DELETE", f"/jobs/{world.tagged_job()}/tag", {"value": "to-remove"}
        ),
    ),
    Case("GET /virtual-clusters", (401, 200, 200, 200), fixed("GET", "/virtual-clusters")),
    Case(
        "GET /virtual-clusters?nodes", (401, 200, 200, 200), fixed("GET", "/virtual-clusters?nodes")
    ),
    Case(
        "GET /virtual-clusters/{vc}",
        (401, 200, 200, 200),
        fixed("GET", "/virtual-clusters/default"),
    ),
    Case("GET /cluster/sku-types", (401, 200, 200, 200), fixed("GET", "/cluster/sku-types")),
    Case("GET /cluster/nodes", (401, 200, 200, 200), fixed("GET", "/cluster/nodes")),
    *STORAGE_CASES,
    *MARKET_CASES,
    *SSH_CASES,
]


def item_json(**fields: Any) -> dict[str, Any]:
    """A marketplace item of a job that does nothing."""
    body = {"name": f"matrix {uuid.uuid4().hex[:8]}", "protocol": job_yaml(unique("tpl"), ["true"])}
    return {**body, **fields}


def job_dict(name: str) -> dict[str, Any]:
    """A job that does nothing, as the JSON body of a submission."""
    loaded: dict[str, Any] = yaml.safe_load(job_yaml(name, ["true"]))
    return loaded


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    """The accounts of conftest.py live on the whole platform here."""
    return pai_platform


@pytest.fixture(scope="module")
def world(
    pai_server: RunningServer,
    admin: Account,
    alice: Account,
    bob: Account,
    tmp_path_factory: pytest.TempPathFactory,
) -> World:
    with pai_server.client(alice.token) as client:
        job = submit(client, job_yaml(unique("owned"), ["echo owned"]))
        wait_for(client, job)
        item: str = client.post("/marketplace/items", json=item_json()).json()["id"]
    storage_root = tmp_path_factory.mktemp("matrix-storages") / "owned"
    storage_root.mkdir()
    storage = unique_storage("owned")
    define_storage(pai_server, storage, "directory", {"path": str(storage_root)})
    new_group(pai_server, [storage], [alice.username])
    accounts = {"user": alice, "other": bob, "admin": admin}
    return World(pai_server, accounts, job, storage, storage_root, item)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_role_gets_exactly_the_expected_status(world: World, case: Case) -> None:
    observed = []
    for role in ROLES:
        call = case.build(world, role)
        token = call.token if call.token is not None else world.token(role)
        with world.server.client(token) as client:
            response = client.request(call.method, call.path, json=call.json, content=call.content)
        if response.status_code >= 400:
            assert set(response.json()) == {"code", "message"}, response.text
        observed.append(response.status_code)
    assert tuple(observed) == case.expected, dict(zip(ROLES, observed, strict=True))
