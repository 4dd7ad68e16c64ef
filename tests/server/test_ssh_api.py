"""The SSH keys of a profile and the ssh info of a job over the API: bad keys are refused
with what and where, keys reach a job's tasks, and the job's keys are never shown."""

from __future__ import annotations

import asyncssh
import pytest

from server.harness import Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    return pai_platform


def public_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()


def keys_path(account: Account) -> str:
    return f"/users/{account.username}/sshkeys"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"title": "a", "value": "ssh-ed25519 AAAAnot64"}, "body.value: not an SSH public key"),
        ({"title": "a", "value": "line one\nline two"}, "body.value: expected one SSH public key"),
        ({"title": "has space", "value": "x"}, "body.title"),
        ({"value": "x"}, "body.title"),
    ],
)
def test_a_bad_key_is_refused_naming_the_field(
    pai_server: RunningServer, alice: Account, body: dict[str, str], message: str
) -> None:
    with pai_server.client(alice.token) as client:
        answer = client.post(keys_path(alice), json=body)
        kept = client.get(keys_path(alice)).json()

    assert answer.status_code == 400, answer.text
    assert message in answer.json()["message"]
    assert not [key for key in kept if key["title"] in ("a", "has space")]


def test_keys_are_listed_with_fingerprints_and_titles_are_unique(
    pai_server: RunningServer, bob: Account
) -> None:
    key = public_key()
    with pai_server.client(bob.token) as client:
        added = client.post(keys_path(bob), json={"title": "desk", "value": key + "\n"})
        again = client.post(keys_path(bob), json={"title": "desk", "value": public_key()})
        listed = client.get(keys_path(bob)).json()
        removed = client.delete(keys_path(bob) + "/desk")
        missing = client.delete(keys_path(bob) + "/desk")

    assert added.status_code == 201, added.text
    fingerprint = asyncssh.import_public_key(key).get_fingerprint()
    assert [(k["title"], k["value"], k["fingerprint"]) for k in listed] == [
        ("desk", key, fingerprint)
    ]
    assert again.status_code == 400 and "already has an SSH key titled 'desk'" in again.text
    assert removed.status_code == 200
    assert missing.status_code == 404 and "no SSH key titled 'desk'" in missing.text


def test_a_job_without_the_ssh_plugin_has_no_ssh_info(
    pai_server: RunningServer, alice: Account
) -> None:
    with pai_server.client(alice.token) as client:
        job = submit(client, job_yaml(unique("plain"), ["true"]))
        wait_for(client, job)
        answer = client.get(f"/jobs/{job}/ssh")

    assert answer.status_code == 404
    assert "does not use the ssh runtime plugin" in answer.json()["message"]


def test_an_unsupported_ssh_parameter_is_refused_at_submission(
    pai_server: RunningServer, alice: Account
) -> None:
    text = job_yaml(unique("sshd"), ["true"]) + (
        "extras:\n  com.microsoft.pai.runtimeplugin:\n"
        "    - {plugin: ssh, parameters: {jobssh: maybe}}\n"
    )
    with pai_server.client(alice.token) as client:
        answer = client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})

    assert answer.status_code == 400, answer.text
    assert "(ssh).parameters.jobssh: expected true or false" in answer.json()["message"]
