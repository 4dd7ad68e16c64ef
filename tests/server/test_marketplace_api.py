"""The marketplace through the REST API of the whole platform: the shipped examples are items
from the first start; users publish jobs (secrets masked), find, star and run each other's;
visibility follows openpaimarketplace; bad items are refused without leaving anything."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from server.harness import Account, RunningServer
from server.jobapi import job_yaml, wait_for
from server.storagehelpers import new_group

EXAMPLES = sorted(
    path.stem for path in (Path(__file__).parents[2] / "examples" / "jobs").glob("*.yaml")
)


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    return pai_platform


def unique_name(prefix: str = "template") -> str:
    return f"{prefix} {uuid.uuid4().hex[:8]}"


def item_body(name: str, **fields: Any) -> dict[str, Any]:
    protocol = job_yaml(f"tpl-{uuid.uuid4().hex[:6]}", ["echo from the marketplace"])
    return {
        "name": name,
        "summary": "prints a line",
        "description": "# Title\n\nSome *text*.",
        "tags": ["demo", "cpu"],
        "categories": ["tutorial"],
        "protocol": protocol,
        **fields,
    }


def publish(server: RunningServer, account: Account, body: dict[str, Any]) -> dict[str, Any]:
    with server.client(account.token) as client:
        response = client.post("/marketplace/items", json=body)
    assert response.status_code == 201, response.text
    item: dict[str, Any] = response.json()
    return item


def names(server: RunningServer, account: Account, **params: str) -> list[str]:
    with server.client(account.token) as client:
        response = client.get("/marketplace/items", params=params)
    assert response.status_code == 200, response.text
    return [item["name"] for item in response.json()]


def test_the_shipped_examples_are_items_from_the_first_start_and_cannot_be_changed(
    pai_server: RunningServer, alice: Account, admin: Account
) -> None:
    with pai_server.client(alice.token) as client:
        builtins = client.get("/marketplace/items", params={"source": "pai"}).json()
    assert sorted(item["name"] for item in builtins) == EXAMPLES
    hello = next(item for item in builtins if item["name"] == "hello-world")
    assert (hello["author"], hello["type"], hello["isPublic"]) == ("pai", "template", True)
    assert yaml.safe_load(hello["protocol"])["name"] == "hello-world"
    assert "examples/jobs/hello-world.yaml" in hello["description"]
    with pai_server.client(admin.token) as client:
        changed = client.put(f"/marketplace/items/{hello['id']}", json=item_body("renamed"))
        deleted = client.delete(f"/marketplace/items/{hello['id']}")
    assert [changed.status_code, deleted.status_code] == [403, 403]
    assert "comes with PAI" in deleted.json()["message"]


def test_an_item_is_published_found_starred_and_run_by_another_user(
    pai_server: RunningServer, alice: Account, bob: Account
) -> None:
    name = unique_name("mnist")
    protocol = job_yaml(
        f"tpl-{uuid.uuid4().hex[:6]}",
        ["echo token is <% $secrets.token %>"],
        top="secrets:\n  token: very-secret-value",
    )
    published = publish(pai_server, alice, item_body(name, protocol=protocol))
    assert published["author"] == alice.username
    assert "very-secret-value" not in published["protocol"]
    assert "******" in published["protocol"]
    assert (published["starNumber"], published["useNumber"], published["status"]) == (
        0,
        0,
        "approved",
    )

    keyword = name.split()[1]
    assert names(pai_server, bob, keyword=keyword) == [name]
    assert names(pai_server, bob, keyword=keyword, tags="demo,cpu") == [name]
    assert names(pai_server, bob, keyword=keyword, tags="demo,gpu") == []
    with pai_server.client(bob.token) as client:
        starred = client.put(f"/marketplace/users/{bob.username}/starItems/{published['id']}")
        again = client.put(f"/marketplace/users/{bob.username}/starItems/{published['id']}")
        assert (starred.json()["starNumber"], starred.json()["starred"]) == (1, True)
        assert again.json()["starNumber"] == 1
        assert client.get(f"/marketplace/items/{published['id']}/starUsers").json() == [
            bob.username
        ]
        mine = client.get(f"/marketplace/users/{bob.username}/starItems").json()
        assert [item["name"] for item in mine] == [name]
        others = client.get(f"/marketplace/users/{alice.username}/starItems")
        assert others.status_code == 403

        job = yaml.safe_load(published["protocol"])
        job["name"] = f"run-{uuid.uuid4().hex[:6]}"
        job["secrets"] = {"token": "bobs-own"}
        submitted = client.post(f"/marketplace/items/{published['id']}/submissions", json=job)
        assert submitted.status_code == 202, submitted.text
        assert wait_for(client, submitted.json()["name"])["jobStatus"]["state"] == "SUCCEEDED"
        after = client.get(f"/marketplace/items/{published['id']}").json()
    assert (after["useNumber"], after["starNumber"]) == (1, 1)
    with pai_server.client(alice.token) as client:
        assert client.get(f"/marketplace/items/{published['id']}").json()["starred"] is False


def test_visibility_follows_public_private_and_group_lists(
    pai_server: RunningServer, alice: Account, bob: Account, admin: Account
) -> None:
    carol = Account.create(pai_server)
    group = new_group(pai_server, [], [alice.username, carol.username])
    private = publish(
        pai_server, alice, item_body(unique_name("private"), isPublic=False, isPrivate=True)
    )
    shared = publish(
        pai_server, alice, item_body(unique_name("shared"), isPublic=False, groupList=[group])
    )
    expected = {
        alice.username: (True, True),
        admin.username: (True, True),
        carol.username: (False, True),
        bob.username: (False, False),
    }
    seen = {}
    for account in (alice, admin, carol, bob):
        with pai_server.client(account.token) as client:
            seen[account.username] = tuple(
                client.get(f"/marketplace/items/{item['id']}").status_code == 200
                for item in (private, shared)
            )
    assert seen == expected
    with pai_server.client(bob.token) as client:
        hidden = client.get(f"/marketplace/items/{private['id']}")
        listed = [item["id"] for item in client.get("/marketplace/items").json()]
    assert (hidden.status_code, hidden.json()["code"]) == (404, "NoItemError")
    assert private["id"] not in listed and shared["id"] not in listed


def test_only_the_author_or_an_administrator_changes_an_item(
    pai_server: RunningServer, alice: Account, bob: Account, admin: Account
) -> None:
    item = publish(pai_server, alice, item_body(unique_name()))
    with pai_server.client(bob.token) as client:
        refused = client.put(
            f"/marketplace/items/{item['id']}", json=item_body(item["name"], summary="bob's")
        )
        not_deleted = client.delete(f"/marketplace/items/{item['id']}")
    assert [refused.status_code, not_deleted.status_code] == [403, 403]
    with pai_server.client(admin.token) as client:
        changed = client.put(
            f"/marketplace/items/{item['id']}", json=item_body(item["name"], summary="fixed")
        )
        assert (changed.json()["summary"], changed.json()["updatedBy"]) == ("fixed", "admin")
        events = client.get("/audit", params={"kind": "marketplace", "target": item["name"]}).json()
        assert [(e["action"], e["actor"]) for e in events] == [
            ("update", "admin"),
            ("publish", alice.username),
        ]
    with pai_server.client(alice.token) as client:
        assert client.delete(f"/marketplace/items/{item['id']}").status_code == 200
        assert client.get(f"/marketplace/items/{item['id']}").status_code == 404


def test_an_invalid_job_is_refused_with_its_line_and_nothing_is_published(
    pai_server: RunningServer, alice: Account
) -> None:
    name = unique_name("broken")
    valid = item_body(name)["protocol"]
    broken = valid.replace("memoryMB: 256", "memoryMB: lots")
    line = next(n for n, text in enumerate(broken.splitlines(), start=1) if "lots" in text)
    unparsable = "protocolVersion: 2\nname: [unclosed\n"
    with pai_server.client(alice.token) as client:
        invalid = client.post("/marketplace/items", json=item_body(name, protocol=broken))
        garbled = client.post("/marketplace/items", json=item_body(name, protocol=unparsable))
    assert invalid.status_code == 400
    body = invalid.json()
    assert body["code"] == "InvalidProtocolError"
    assert any(
        problem["line"] == line and "memoryMB" in problem["path"] for problem in body["problems"]
    )
    assert garbled.status_code == 400 and garbled.json()["problems"][0]["line"] == 3
    assert names(pai_server, alice, name=name) == []


def test_duplicate_names_and_bad_fields_are_refused_without_a_trace(
    pai_server: RunningServer, alice: Account, bob: Account
) -> None:
    name = unique_name("twice")
    first = publish(pai_server, alice, item_body(name))
    with pai_server.client(bob.token) as client:
        duplicate = client.post("/marketplace/items", json=item_body(name))
        unknown_group = client.post(
            "/marketplace/items",
            json=item_body(unique_name(), isPublic=False, groupList=["nobody_here"]),
        )
        two_lines = client.post("/marketplace/items", json=item_body("two\nlines"))
        comma_tag = client.post("/marketplace/items", json=item_body(unique_name(), tags=["a,b"]))
        renamed_onto = client.put(f"/marketplace/items/{first['id']}", json=item_body(name))
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "ConflictItemError")
    assert unknown_group.status_code == 400 and "nobody_here" in unknown_group.json()["message"]
    assert two_lines.status_code == 400 and "body.name" in two_lines.json()["message"]
    assert comma_tag.status_code == 400 and "no comma" in comma_tag.json()["message"]
    assert renamed_onto.status_code == 403
    assert names(pai_server, alice, name=name) == [name]
    with pai_server.client(alice.token) as client:
        other = publish(pai_server, alice, item_body(unique_name()))
        clash = client.put(f"/marketplace/items/{other['id']}", json=item_body(name))
        assert clash.status_code == 409
        assert client.get(f"/marketplace/items/{other['id']}").json()["name"] == other["name"]
