"""Signing in through a real OpenID Connect provider (django-oidc-provider on 127.0.0.1): the
flow end to end over HTTP, what the directory's groups decide, and every refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest

from pai import pkce
from providers.oidc import OidcProvider, sign_in_over_http
from server.directory_groups import start_oidc_pai, user_view
from server.harness import RunningServer

CLIENT = "http://127.0.0.1:8765/callback"
"""A command-line client's loopback redirect URI (nobody listens: the test reads the URL)."""

StartServer = Callable[..., RunningServer]


@pytest.fixture
def pai(
    oidc_provider: OidcProvider,
    start_pai_server: StartServer,
    pai_database_url: str,
    tmp_path: Path,
) -> RunningServer:
    return start_oidc_pai(start_pai_server, oidc_provider, tmp_path / "pai-home", pai_database_url)


def start(server: RunningServer, verifier: str, redirect_uri: str = CLIENT) -> str:
    query = httpx.QueryParams(redirect_uri=redirect_uri, code_challenge=pkce.challenge(verifier))
    return f"{server.api_url}/authn/oidc/login?{query}"


def sign_in(server: RunningServer, name: str, password: str) -> dict[str, object]:
    """Sign in as `name` through the provider, as `pai login` does: the login answer."""
    verifier = pkce.new_verifier()
    back = sign_in_over_http(start(server, verifier), name, password, stop_at=CLIENT)
    code = parse_qs(back.query.decode())["code"][0]
    with server.client() as client:
        response = client.post("/authn/oidc/token", json={"code": code, "codeVerifier": verifier})
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


def refusal(server: RunningServer, name: str, password: str) -> dict[str, list[str]]:
    """The query the client gets back from a refused sign-in."""
    back = sign_in_over_http(start(server, pkce.new_verifier()), name, password, stop_at=CLIENT)
    return parse_qs(back.query.decode())


def test_the_api_says_it_signs_in_through_the_provider(pai: RunningServer) -> None:
    with pai.client() as client:
        assert client.get("/info").json()["authnMethod"] == "OIDC"
        assert client.get("/authn/info").json() == {
            "authn_type": "OIDC",
            "loginURI": "/api/v2/authn/oidc/login",
            "loginURIMethod": "get",
            "mode": "oidc",
            "provider": "Example Identity",
        }
        response = client.get(start(pai, pkce.new_verifier()))
    assert response.status_code == 302
    provider_page = httpx.URL(response.headers["location"])
    assert str(provider_page).startswith(f"{pai.settings.authn.oidc.issuer}/authorize?")  # type: ignore[union-attr]
    query = parse_qs(provider_page.query.decode())
    assert query["code_challenge_method"] == ["S256"]
    assert query["response_type"] == ["code"]
    assert {"state", "nonce", "code_challenge"} <= set(query)


def test_first_sign_in_creates_the_user_with_the_directorys_groups_and_vcs(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("alice", "alice-pass", "vision")

    answer = sign_in(pai, "alice", "alice-pass")

    assert (answer["user"], answer["admin"]) == ("alice", False)
    alice = user_view(pai, "alice")
    assert alice["grouplist"] == ["default", "vision_team"]
    assert alice["virtualCluster"] == ["default", "vision"]
    assert alice["email"] == "alice@example.org"
    with pai.client(str(answer["token"])) as client:
        assert client.get("/tokens/check").json()["username"] == "alice"


def test_a_group_change_at_the_provider_moves_vc_access_at_the_next_sign_in(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("bob", "bob-pass", "vision")
    first = sign_in(pai, "bob", "bob-pass")
    assert user_view(pai, "bob")["virtualCluster"] == ["default", "vision"]

    oidc_provider.person("bob", "bob-pass", "speech")
    sign_in(pai, "bob", "bob-pass")

    assert user_view(pai, "bob")["virtualCluster"] == ["default", "speech"]
    with pai.client(str(first["token"])) as client:  # the older token carries today's rights
        assert client.get("/users/bob").json()["virtualCluster"] == ["default", "speech"]


def test_the_admin_group_makes_administrators_and_tokens_can_be_revoked_at_once(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("carol", "carol-pass", "pai-admins")
    answer = sign_in(pai, "carol", "carol-pass")
    assert answer["admin"] is True

    with pai.client(pai.admin_token()) as client:
        assert client.delete("/users/carol/tokens").status_code == 200
    with pai.client(str(answer["token"])) as client:
        assert client.get("/tokens/check").status_code == 401


def test_a_person_the_provider_does_not_know_gets_no_token(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("dave", "dave-pass", "vision")
    oidc_provider.delete("dave")
    with pytest.raises(AssertionError, match="did not match"):
        sign_in_over_http(start(pai, pkce.new_verifier()), "dave", "dave-pass", stop_at=CLIENT)
    with pai.client(pai.admin_token()) as client:
        assert client.get("/users/dave").status_code == 404


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("forged", "signature does not match the provider's key: it was forged or altered"),
        ("unsigned", "signed with 'none', which PAI does not accept"),
        ("expired", "the ID token expired at"),
        ("audience", "issued for another client, not 'pai-cluster'"),
        ("nonce", "not issued for this sign-in (its nonce differs)"),
    ],
)
def test_a_bad_id_token_is_refused_with_a_clear_message(
    pai: RunningServer, oidc_provider: OidcProvider, mode: str, message: str
) -> None:
    oidc_provider.person("erin", "erin-pass", "vision")
    oidc_provider.tamper(mode)

    answer = refusal(pai, "erin", "erin-pass")

    assert "code" not in answer
    assert answer["error"] == ["UnauthorizedUserError"]
    assert message in answer["error_description"][0]
    with pai.client(pai.admin_token()) as client:
        assert client.get("/users/erin").status_code == 404
        assert client.get("/users/mallory").status_code == 404


def test_a_state_works_once_and_an_unknown_state_is_refused(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("frank", "frank-pass")
    provider_return = sign_in_over_http(
        start(pai, pkce.new_verifier()),
        "frank",
        "frank-pass",
        stop_at=f"{pai.api_url}/authn/oidc/return",
    )
    with pai.client() as client:
        first = client.get(str(provider_return))
        again = client.get(str(provider_return))
        unknown = client.get("/authn/oidc/return", params={"state": "made-up", "code": "x"})
    assert first.status_code == 302 and "code=" in first.headers["location"]
    for refused in (again, unknown):
        assert refused.status_code == 400
        assert refused.json()["message"] == (
            "state: this sign-in is unknown, already finished or expired; start it again"
        )


def test_a_login_code_needs_the_clients_verifier_and_works_once(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("grace", "grace-pass")
    verifier = pkce.new_verifier()
    back = sign_in_over_http(start(pai, verifier), "grace", "grace-pass", stop_at=CLIENT)
    code = parse_qs(back.query.decode())["code"][0]
    with pai.client() as client:
        stolen = client.post(
            "/authn/oidc/token", json={"code": code, "codeVerifier": pkce.new_verifier()}
        )
        late = client.post("/authn/oidc/token", json={"code": code, "codeVerifier": verifier})
    assert stolen.status_code == 401
    assert "verifier does not match" in stolen.json()["message"]
    assert late.status_code == 401  # the code was used up by the wrong attempt


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example/steal",
        "//evil.example/steal",
        "/\\evil.example",
        "http://127.0.0.1.evil.example:80/",
        "http://user@127.0.0.1:9000/",
        "javascript:alert(1)",
    ],
)
def test_a_foreign_redirect_is_refused(pai: RunningServer, redirect_uri: str) -> None:
    with pai.client() as client:
        response = client.get(start(pai, pkce.new_verifier(), redirect_uri))
    assert response.status_code == 400
    assert response.json()["code"] == "InvalidParametersError"
    assert "neither a page of this site nor a loopback address" in response.json()["message"]


def test_password_login_is_kept_for_the_local_administrator_only(
    pai: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("heidi", "heidi-pass", "vision")
    sign_in(pai, "heidi", "heidi-pass")
    with pai.client() as client:
        admin = client.post(
            "/authn/basic/login",
            json={"username": pai.admin.username, "password": pai.admin.password},
        )
        heidi = client.post(
            "/authn/basic/login", json={"username": "heidi", "password": "heidi-pass"}
        )
    assert admin.status_code == 200
    assert heidi.status_code == 403
    assert "signs in through Example Identity" in heidi.json()["message"]


def test_the_client_secret_is_never_shown(pai: RunningServer, oidc_provider: OidcProvider) -> None:
    oidc_provider.person("ivan", "ivan-pass", "vision")
    sign_in(pai, "ivan", "ivan-pass")
    oidc_provider.tamper("forged")
    refusal(pai, "ivan", "ivan-pass")
    secret = oidc_provider.client_secret
    with pai.client(pai.admin_token()) as client:
        answers = [client.get(path).text for path in ("/info", "/authn/info", "/users/ivan")]
    assert secret not in repr(pai.settings)
    assert all(secret not in answer for answer in answers)
    assert secret not in pai.log_path.read_text()
    database = pai.settings.home / "pai.db"
    if database.exists():
        assert secret.encode() not in database.read_bytes()
