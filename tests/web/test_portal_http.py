"""The portal over plain HTTP: how the session is kept and protected, what forms may change,
and what the submit page does to a job (parameters, clones and their masked secrets)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from portal_client import Visitor, form_token, log_in

from pai.protocol import SECRET_MASK
from pai.web.routes import router as portal_router
from server.harness import Credentials, RunningServer, serve, server_settings
from server.jobapi import job_yaml, submit, unique, wait_for

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"


@pytest.fixture(scope="module")
def alice(portal: RunningServer) -> Credentials:
    return portal.create_user()


@pytest.fixture(scope="module")
def bob(portal: RunningServer) -> Credentials:
    return portal.create_user()


@pytest.fixture(scope="module")
def alice_api(portal: RunningServer, alice: Credentials) -> Iterator[httpx.Client]:
    with portal.client(portal.login(alice.username, alice.password)) as client:
        yield client


def test_the_session_cookie_is_hidden_from_scripts_and_other_sites(
    portal: RunningServer, alice: Credentials
) -> None:
    answer = log_in(portal, alice.username, alice.password)
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    session = next(
        cookie
        for cookie in answer.headers.get_list("set-cookie")
        if cookie.startswith("pai_session=")
    )
    attributes = {part.strip().lower() for part in session.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/"} <= attributes
    assert "secure" not in attributes  # served over plain http here


def test_the_api_does_not_take_the_portal_cookie(portal: RunningServer, alice: Credentials) -> None:
    visitor = Visitor(portal, alice)
    assert visitor.client.get("/jobs").status_code == 200
    answer = visitor.client.get("/api/v2/jobs")
    assert answer.status_code == 401 and answer.json()["code"] == "UnauthorizedUserError"


def test_a_form_without_its_token_changes_nothing(
    portal: RunningServer, alice: Credentials, alice_api: httpx.Client
) -> None:
    name = submit(alice_api, job_yaml(unique("guarded"), ["sleep 300"]))
    wait_for(alice_api, name, {"RUNNING"})
    visitor = Visitor(portal, alice)
    for data in ({}, {"csrf_token": "forged"}):
        stop = visitor.client.post(f"/jobs/{name}/stop", data=data)
        tag = visitor.client.post(f"/jobs/{name}/tags", data={"tag": "forged", **data})
        assert (stop.status_code, tag.status_code) == (403, 403)
        assert "did not come from this portal" in stop.text
    job = alice_api.get(f"/jobs/{name}").json()
    assert job["jobStatus"]["executionType"] == "START" and job["tags"] == []

    assert visitor.post(f"/jobs/{name}/stop").status_code == 303
    assert wait_for(alice_api, name)["jobStatus"]["state"] == "STOPPED"


def test_a_token_of_another_session_is_refused(
    portal: RunningServer, alice: Credentials, bob: Credentials
) -> None:
    bobs_token = Visitor(portal, bob).form_token
    visitor = Visitor(portal, alice)
    answer = visitor.client.post("/account/tokens", data={"csrf_token": bobs_token})
    assert answer.status_code == 403


def test_the_login_form_works_only_in_the_browser_that_loaded_it(
    portal: RunningServer, alice: Credentials
) -> None:
    token = form_token(httpx.get(f"{portal.base_url}/login"))
    answer = httpx.post(
        f"{portal.base_url}/login",
        data={"username": alice.username, "password": alice.password, "csrf_token": token},
    )
    assert answer.status_code == 400
    assert "pai_session" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize("target", ["//elsewhere.example/", "https://elsewhere.example/"])
def test_after_logging_in_a_visitor_stays_on_this_site(
    portal: RunningServer, alice: Credentials, target: str
) -> None:
    answer = log_in(portal, alice.username, alice.password, next=target)
    assert answer.headers["location"] == "/"


def test_logging_out_ends_the_session(portal: RunningServer, alice: Credentials) -> None:
    visitor = Visitor(portal, alice)
    session = visitor.client.cookies["pai_session"]
    assert visitor.post("/logout").headers["location"] == "/login"
    replayed = httpx.get(f"{portal.base_url}/jobs", cookies={"pai_session": session})
    assert replayed.status_code == 303 and replayed.headers["location"].startswith("/login")


def test_login_attempts_are_limited(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, login_rate_limit=2)
    with serve(settings, root_routers=[portal_router]) as server:
        answers = [log_in(server, "admin", "wrong-password") for _ in range(3)]
    assert [answer.status_code for answer in answers] == [400, 400, 429]
    assert "too many failed logins for admin" in answers[2].text
    assert "Retry-After" in answers[2].headers


def test_the_job_list_filters_sorts_and_pages(
    portal: RunningServer, alice: Credentials, alice_api: httpx.Client
) -> None:
    prefix = unique("listed")
    for suffix in ("b", "a", "c"):
        submit(alice_api, job_yaml(f"{prefix}-{suffix}", ["true"]))
    visitor = Visitor(portal, alice)

    def names(**query: str) -> list[str]:
        answer = visitor.client.get("/jobs/table", params={"keyword": prefix, **query})
        assert answer.status_code == 200
        return re.findall(rf">({prefix}-\w)</a>", answer.text)

    assert names(order="jobName,ASC") == [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    assert names(order="jobName,DESC", limit="2") == [f"{prefix}-c", f"{prefix}-b"]
    assert names(order="jobName,DESC", limit="2", offset="2") == [f"{prefix}-a"]
    assert names(user="somebody-else") == []
    refused = visitor.client.get("/jobs", params={"state": "SLEEPING"})
    assert refused.status_code == 400 and "unknown value 'SLEEPING'" in html.unescape(refused.text)


def test_parameters_typed_in_the_fields_replace_the_declared_ones(
    portal: RunningServer, alice: Credentials, alice_api: httpx.Client
) -> None:
    name = unique("tuned")
    text = (EXAMPLES / "parameters-secrets-deployment.yaml").read_text()
    text = text.replace("name: parameters-secrets-deployment", f"name: {name}")
    answer = Visitor(portal, alice).post(
        "/submit", job=text, **{"parameter.epochs": "5", "parameter.learning_rate": "0.05"}
    )
    assert answer.status_code == 303, answer.text
    config = alice_api.get(f"/jobs/{alice.username}~{name}/config").text
    assert "  epochs: 5\n" in config and "  learning_rate: 0.05\n" in config
    assert config.splitlines()[0] == text.splitlines()[0]  # the comments are kept
    assert len(config.splitlines()) == len(text.splitlines())


def test_the_submit_page_suggests_trying_the_job_here_first(
    portal: RunningServer, alice: Credentials
) -> None:
    page = Visitor(portal, alice).client.get("/submit")
    assert page.status_code == 200
    assert "Try it first with <code>pai run job.yaml</code>" in page.text


def test_a_clone_shows_secrets_masked_and_asks_for_them_again(
    portal: RunningServer, alice: Credentials, bob: Credentials, alice_api: httpx.Client
) -> None:
    secret = "clone-me-not-4242"
    text = (EXAMPLES / "parameters-secrets-deployment.yaml").read_text()
    text = text.replace("change-me-before-submitting", secret)
    name = submit(alice_api, text.replace("name: parameters-secrets", f"name: {unique('c')}"))
    visitor = Visitor(portal, alice)

    clone = visitor.client.get("/submit", params={"clone": name})
    assert clone.status_code == 200
    assert secret not in clone.text and SECRET_MASK in clone.text
    assert "type its value again" in clone.text
    masked = re.search(r"<textarea[^>]*>(.*?)</textarea>", clone.text, re.S)
    assert masked is not None
    refused = visitor.post("/submit", job=html.unescape(masked.group(1)))
    assert refused.status_code == 400 and "type its value again" in refused.text

    assert secret not in visitor.client.get(f"/jobs/{name}").text
    assert Visitor(portal, bob).client.get("/submit", params={"clone": name}).status_code == 403


def test_the_editor_check_needs_the_session_token(
    portal: RunningServer, alice: Credentials
) -> None:
    visitor = Visitor(portal, alice)
    text = (EXAMPLES / "hello-world.yaml").read_text()
    headers = {"Content-Type": "text/yaml", "X-Requested-With": "pai-portal"}
    refused = visitor.client.post("/submit/check", content=text, headers=headers)
    assert refused.status_code == 403 and refused.json()["code"] == "ForbiddenUserError"
    checked = visitor.client.post(
        "/submit/check", content=text, headers={**headers, "X-CSRF-Token": visitor.form_token}
    )
    assert checked.json()["problems"] == [] and "hello-world" in checked.json()["summary"]
