"""The administration and account forms over plain HTTP: what each changes, what the API then
sees, and how a refused change explains itself."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from urllib.parse import unquote

import httpx
import pytest
from portal_client import Visitor, log_in

from server.harness import RunningServer, bearer_auth
from server.jobapi import job_yaml, submit


@pytest.fixture(scope="module")
def admin(portal: RunningServer) -> Visitor:
    return Visitor(portal, portal.admin)


@pytest.fixture(scope="module")
def admin_api(portal: RunningServer) -> Iterator[httpx.Client]:
    with portal.client(portal.admin_token()) as client:
        yield client


def notice(answer: httpx.Response) -> str:
    """The notice a form's redirect carries to the next page."""
    assert answer.status_code == 303, answer.text
    text: str = json.loads(unquote(answer.cookies["pai_notice"]))["text"]
    return text


def test_a_group_grants_a_virtual_cluster_to_the_users_put_in_it(
    portal: RunningServer, admin: Visitor, admin_api: httpx.Client
) -> None:
    group, username = f"team_{uuid.uuid4().hex[:6]}", f"member_{uuid.uuid4().hex[:6]}"
    created = admin.post("/admin/groups", groupname=group, description="A team", vcs=["default"])
    assert f"group '{group}' is created" in notice(created)
    made = admin.post("/admin/users", username=username, password="member-password")
    assert notice(made) == f"User {username} is created."

    with portal.client(portal.login(username, "member-password")) as api:
        refused = api.post("/jobs", content=job_yaml("early", ["true"], vc="research"))
        assert refused.status_code == 403
        admin.post(f"/admin/groups/{group}", description="A team", vcs=["research"])
        admin.post(f"/admin/users/{username}/groups", groups=[group])
        assert submit(api, job_yaml("later", ["true"], vc="research"))

    groups = admin_api.get(f"/users/{username}").json()["grouplist"]
    assert sorted(groups) == sorted(["default", group])
    assert f"Members: {username}" in admin.client.get(f"/admin/groups/{group}").text
    assert "may submit to default, research" in admin.client.get(f"/admin/users/{username}").text

    assert f"group '{group}' is deleted" in notice(admin.post(f"/admin/groups/{group}/delete"))
    assert admin_api.get(f"/groups/{group}").status_code == 404
    assert f"user '{username}' is deleted" in notice(admin.post(f"/admin/users/{username}/delete"))
    assert log_in(portal, username, "member-password").status_code == 400
    assert admin.client.get(f"/admin/users/{username}").status_code == 404


def test_a_refused_change_says_why_and_changes_nothing(
    admin: Visitor, admin_api: httpx.Client
) -> None:
    username = f"short_{uuid.uuid4().hex[:6]}"
    answer = admin.post("/admin/users", username=username, password="abc")
    assert "password" in notice(answer) and "at least 6 characters" in notice(answer)
    assert admin_api.get(f"/users/{username}").status_code == 404
    protected = admin.post("/admin/groups/default/delete")
    assert "cannot be deleted" in notice(protected)
    last_admin = admin.post("/admin/users/admin/groups", groups=[])
    assert "without an administrator" in notice(last_admin)
    assert admin_api.get("/users/admin").json()["admin"] is True


def test_an_application_token_is_shown_once_and_can_be_revoked(portal: RunningServer) -> None:
    user = portal.create_user()
    visitor = Visitor(portal, user)
    page = visitor.post("/account/tokens")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    token = page.text.split('id="new-token" class="mono" value="')[1].split('"')[0]
    with portal.client() as api:
        assert api.get("/jobs", headers=bearer_auth(token)).status_code == 200
        listed = api.get("/tokens", headers=bearer_auth(portal.login(user.username, user.password)))
        application = [item for item in listed.json()["details"] if item["application"]]
        assert len(application) == 1
        assert token not in visitor.client.get("/account").text

        revoked = visitor.post("/account/tokens/revoke", token_hash=application[0]["tokenHash"])
        assert notice(revoked) == "the token is revoked"
        assert api.get("/jobs", headers=bearer_auth(token)).status_code == 401


def test_changing_the_password_keeps_this_session_and_ends_the_others(
    portal: RunningServer,
) -> None:
    user = portal.create_user()
    here, elsewhere = Visitor(portal, user), Visitor(portal, user)
    mismatch = here.post(
        "/account/password",
        old_password=user.password,
        new_password="brand-new-password",
        repeated_password="brand-new-passw0rd",
    )
    assert "differ" in notice(mismatch)
    changed = here.post(
        "/account/password",
        old_password=user.password,
        new_password="brand-new-password",
        repeated_password="brand-new-password",
    )
    assert "Your password is changed" in notice(changed)
    assert here.client.get("/account").status_code == 200
    assert elsewhere.client.get("/account").status_code == 303
    assert log_in(portal, user.username, "brand-new-password").status_code == 303


def test_a_user_cannot_act_on_the_jobs_of_another(portal: RunningServer) -> None:
    owner, other = portal.create_user(), portal.create_user()
    with portal.client(portal.login(owner.username, owner.password)) as api:
        name = submit(api, job_yaml(f"mine-{uuid.uuid4().hex[:6]}", ["sleep 300"]))
        visitor = Visitor(portal, other)
        page = visitor.client.get(f"/jobs/{name}").text
        assert "Stop" not in page and "Clone" not in page
        assert f"Only {owner.username} and administrators can read this job" in page
        refused = visitor.post(f"/jobs/{name}/stop")
        assert "only" in notice(refused) and "may stop or start" in notice(refused)
        assert api.get(f"/jobs/{name}").json()["jobStatus"]["executionType"] == "START"
        log = visitor.client.get(
            f"/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs/all"
        )
        assert log.status_code == 403
        api.put(f"/jobs/{name}/executionType", json={"value": "STOP"})
