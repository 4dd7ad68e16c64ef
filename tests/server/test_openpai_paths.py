"""The API also answers at the URLs OpenPAI's clients build: under `/rest-server` (where
OpenPAI's proxy serves it) and with the trailing slash some of their calls add."""

from __future__ import annotations

import httpx

from server.harness import RunningServer, bearer_auth


def test_the_api_answers_under_rest_server_as_behind_openpai_proxy(
    pai_server: RunningServer,
) -> None:
    with httpx.Client(base_url=pai_server.base_url) as client:
        direct = client.get("/api/v2/info")
        prefixed = client.get("/rest-server/api/v2/info")
        elsewhere = client.get("/rest-server/login")
    assert prefixed.status_code == 200 and prefixed.json() == direct.json()
    assert elsewhere.status_code == 404  # only the API moves, not the portal


def test_a_trailing_slash_reaches_the_same_endpoint_without_a_redirect(
    pai_server: RunningServer,
) -> None:
    headers = bearer_auth(pai_server.admin_token())
    with httpx.Client(base_url=pai_server.base_url, headers=headers) as client:
        plain = client.get("/api/v2/users")
        slashed = client.get("/rest-server/api/v2/users/")
    assert slashed.status_code == 200 and slashed.json() == plain.json()
