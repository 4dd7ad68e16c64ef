"""Login, logout and the token lifecycle through a real server (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

import jwt

import pai
from pai.auth.tokens import TokenService
from pai.store import Database, identity
from pai.store.types import utcnow
from server.harness import Account, RunningServer, basic_auth, bearer_auth


def check(server: RunningServer, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    with server.client() as client:
        response = client.get("/tokens/check", headers=headers)
    return response.status_code, response.json()


def application_token(server: RunningServer, account: Account) -> str:
    with server.client(account.token) as client:
        response = client.post("/tokens/application")
    assert response.status_code == 200, response.text
    assert response.json()["application"] is True
    token: str = response.json()["token"]
    return token


def test_info_describes_the_server(pai_server: RunningServer) -> None:
    with pai_server.client() as client:
        assert client.get("/info").json() == {
            "name": "PAI RESTful API",
            "version": pai.__version__,
            "launcherType": "k8s",
            "authnMethod": "basic",
            "executor": "local",
        }
        assert client.get("/authn/info").json() == {
            "authn_type": "basic",
            "loginURI": "/api/v2/authn/basic/login",
            "loginURIMethod": "post",
            "mode": "basic",
            "provider": "",
        }


def test_login_answers_with_openpai_fields_and_a_day_long_token(
    pai_server: RunningServer, alice: Account
) -> None:
    with pai_server.client() as client:
        response = client.post(
            "/authn/basic/login", json={"username": alice.username, "password": alice.password}
        )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"user", "token", "admin", "hasGitHubPAT"}
    assert (body["user"], body["admin"], body["hasGitHubPAT"]) == (alice.username, False, False)
    status, claims = check(pai_server, bearer_auth(body["token"]))
    assert status == 200
    assert claims["username"] == alice.username
    assert claims["application"] is False
    assert claims["admin"] is False
    assert claims["exp"] - claims["iat"] == 86400  # type: ignore[operator]


def test_admin_login_says_admin(pai_server: RunningServer, admin: Account) -> None:
    with pai_server.client() as client:
        body = client.post(
            "/authn/basic/login", json={"username": "admin", "password": admin.password}
        ).json()
    assert body["admin"] is True


def test_login_expiration_is_honoured_within_bounds(
    pai_server: RunningServer, alice: Account
) -> None:
    credentials = {"username": alice.username, "password": alice.password}
    with pai_server.client() as client:
        short = client.post("/authn/basic/login", json={**credentials, "expiration": 60})
        too_short = client.post("/authn/basic/login", json={**credentials, "expiration": 59})
        too_long = client.post("/authn/basic/login", json={**credentials, "expiration": 604801})
        # JSON has one number type: 90.0 is an integer, 90.5 is not
        as_float = client.post("/authn/basic/login", json={**credentials, "expiration": 90.0})
        fraction = client.post("/authn/basic/login", json={**credentials, "expiration": 90.5})
    _, claims = check(pai_server, bearer_auth(short.json()["token"]))
    assert claims["exp"] - claims["iat"] == 60  # type: ignore[operator]
    _, claims = check(pai_server, bearer_auth(as_float.json()["token"]))
    assert claims["exp"] - claims["iat"] == 90  # type: ignore[operator]
    assert fraction.status_code == 400 and "body.expiration" in fraction.json()["message"]
    assert too_short.status_code == 400
    assert too_short.json()["code"] == "InvalidParametersError"
    assert "body.expiration" in too_short.json()["message"]
    assert too_long.status_code == 400
    assert too_long.json()["message"] == "body.expiration: must be at most 604800 seconds"


def test_a_form_encoded_login_works_as_openpai_clients_send_it(
    pai_server: RunningServer, alice: Account
) -> None:
    """OpenPAI's SDK and portal post `username=...&password=...&expiration=...`."""
    form = {"username": alice.username, "password": alice.password}
    with pai_server.client() as client:
        login = client.post("/authn/basic/login", data={**form, "expiration": "120"})
        as_token = client.post("/tokens", data=form)
        not_a_number = client.post("/authn/basic/login", data={**form, "expiration": "soon"})
        too_short = client.post("/authn/basic/login", data={**form, "expiration": "59"})
        missing = client.post("/authn/basic/login", data={"username": alice.username})
        twice = client.post(
            "/authn/basic/login",
            content=f"username={alice.username}&username=x&password=p",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        not_json = client.post(
            "/authn/basic/login", content=b"{", headers={"Content-Type": "application/json"}
        )
    assert login.status_code == 200, login.text
    _, claims = check(pai_server, bearer_auth(login.json()["token"]))
    assert claims["exp"] - claims["iat"] == 120  # type: ignore[operator]
    assert as_token.status_code == 200 and as_token.json()["user"] == alice.username
    assert not_a_number.json() == {
        "code": "InvalidParametersError",
        "message": "body.expiration: Input should be a valid integer",
    }
    assert too_short.status_code == 400 and "body.expiration" in too_short.json()["message"]
    assert missing.json()["message"] == "body.password: Field required"
    assert twice.json()["message"] == "body.username: given 2 times; give it once"
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["message"]
    assert alice.password not in not_a_number.text + missing.text


def test_login_failures_say_which_part_is_wrong(pai_server: RunningServer, alice: Account) -> None:
    with pai_server.client() as client:
        unknown = client.post(
            "/authn/basic/login", json={"username": "nobody_here", "password": "whatever"}
        )
        wrong = client.post(
            "/authn/basic/login", json={"username": alice.username, "password": "not-it"}
        )
    assert (unknown.status_code, unknown.json()["code"]) == (400, "NoUserError")
    assert (wrong.status_code, wrong.json()["code"]) == (400, "IncorrectPasswordError")


def test_post_tokens_logs_in_like_basic_login(pai_server: RunningServer, alice: Account) -> None:
    with pai_server.client() as client:
        response = client.post(
            "/tokens", json={"username": alice.username, "password": alice.password}
        )
    assert response.status_code == 200
    assert check(pai_server, bearer_auth(response.json()["token"]))[0] == 200


def test_logout_revokes_only_the_calling_token(pai_server: RunningServer, alice: Account) -> None:
    first = pai_server.login(alice.username, alice.password)
    second = pai_server.login(alice.username, alice.password)
    with pai_server.client(first) as client:
        assert client.delete("/authn/basic/logout").status_code == 200
    status, body = check(pai_server, bearer_auth(first))
    assert (status, body["code"]) == (401, "UnauthorizedUserError")
    assert "revoked" in str(body["message"])
    assert check(pai_server, bearer_auth(second))[0] == 200


def test_token_list_describes_live_tokens_by_hash_only(
    pai_server: RunningServer, bob: Account
) -> None:
    user_token = pai_server.login(bob.username, bob.password)
    app_token = application_token(pai_server, bob)
    with pai_server.client(user_token) as client:
        response = client.get("/tokens")
    assert response.status_code == 200
    body = response.json()
    listed = {entry["tokenHash"]: entry for entry in body["details"]}
    assert body["tokens"] == list(listed)  # OpenPAI's list: what DELETE /tokens/{token} takes
    user_entry = listed[hashlib.sha256(user_token.encode()).hexdigest()]
    app_entry = listed[hashlib.sha256(app_token.encode()).hexdigest()]
    assert user_entry["application"] is False
    assert user_entry["expireTime"] > user_entry["createdTime"]
    assert (app_entry["application"], app_entry["expireTime"]) == (True, None)
    assert user_token not in response.text
    assert app_token not in response.text


def test_a_token_is_revoked_by_value_or_by_hash(pai_server: RunningServer, alice: Account) -> None:
    by_value = pai_server.login(alice.username, alice.password)
    by_hash = pai_server.login(alice.username, alice.password)
    with pai_server.client(alice.token) as client:
        assert client.delete(f"/tokens/{by_value}").status_code == 200
        digest = hashlib.sha256(by_hash.encode()).hexdigest()
        assert client.delete(f"/tokens/{digest}").status_code == 200
        assert client.delete(f"/tokens/{digest}").status_code == 200  # already gone: idempotent
    assert check(pai_server, bearer_auth(by_value))[0] == 401
    assert check(pai_server, bearer_auth(by_hash))[0] == 401
    assert check(pai_server, bearer_auth(alice.token))[0] == 200


def test_nobody_revokes_somebody_elses_token(
    pai_server: RunningServer, alice: Account, bob: Account, admin: Account
) -> None:
    victim = pai_server.login(alice.username, alice.password)
    for intruder in (bob, admin):
        with pai_server.client(intruder.token) as client:
            response = client.delete(f"/tokens/{victim}")
        assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert check(pai_server, bearer_auth(victim))[0] == 200


def test_an_expired_token_is_rejected(pai_server: RunningServer, alice: Account) -> None:
    assert pai_server.settings.secret_key is not None
    two_days_ago = utcnow() - timedelta(days=2)
    issuer = TokenService(pai_server.settings.secret_key.encode(), clock=lambda: two_days_ago)
    database = Database(pai_server.settings.database_url)
    try:
        with database.session() as session:
            user = identity.find_user(session, alice.username)
            assert user is not None
            expired = issuer.issue(session, user, lifetime=timedelta(hours=1)).token
    finally:
        database.dispose()
    status, body = check(pai_server, bearer_auth(expired))
    assert (status, body["code"]) == (401, "UnauthorizedUserError")
    assert "expired" in str(body["message"])


def test_tokens_not_issued_by_the_server_are_rejected(
    pai_server: RunningServer, alice: Account
) -> None:
    assert pai_server.settings.secret_key is not None
    payload = {"username": alice.username, "application": False, "iat": 1, "jti": "x"}
    foreign = jwt.encode(payload, secrets.token_hex(32), algorithm="HS256")
    # Correctly signed but never issued (as if minted with a stolen key): no record, no entry.
    unrecorded = jwt.encode(payload, pai_server.settings.secret_key, algorithm="HS256")
    for token in (foreign, unrecorded, "not-a-token"):
        status, body = check(pai_server, bearer_auth(token))
        assert (status, body["code"]) == (401, "UnauthorizedUserError")


def test_application_tokens_authenticate_with_basic_auth(
    pai_server: RunningServer, alice: Account, bob: Account
) -> None:
    token = application_token(pai_server, alice)
    status, claims = check(pai_server, basic_auth(alice.username, token))
    assert status == 200
    assert (claims["username"], claims["application"], claims["exp"]) == (
        alice.username,
        True,
        None,
    )
    assert check(pai_server, bearer_auth(token))[0] == 200
    assert check(pai_server, basic_auth(bob.username, token))[0] == 401
    assert check(pai_server, basic_auth(alice.username, alice.token))[0] == 401


def test_application_tokens_cannot_manage_tokens(pai_server: RunningServer, alice: Account) -> None:
    token = application_token(pai_server, alice)
    with pai_server.client(token) as client:
        responses = [
            client.post("/tokens/application"),
            client.get("/tokens"),
            client.delete("/authn/basic/logout"),
        ]
    for response in responses:
        assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
    assert check(pai_server, bearer_auth(token))[0] == 200


def test_missing_or_malformed_credentials_are_401(pai_server: RunningServer) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Token abc"},
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Basic " + "bm9jb2xvbg=="},  # "nocolon"
    ):
        status, body = check(pai_server, headers)
        assert (status, body["code"]) == (401, "UnauthorizedUserError"), headers


def test_the_api_document_names_the_credentials_each_operation_takes(
    pai_server: RunningServer,
) -> None:
    """Generated clients and the API's docs page learn from the document which operations need
    `Authorization`: every one that may answer 401 for a user's token, and no other."""
    with pai_server.client() as client:
        document = client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert {name: scheme["scheme"] for name, scheme in schemes.items()} == {
        "HTTPBearer": "bearer",
        "HTTPBasic": "basic",
    }
    operations = {
        (method.upper(), path): operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
    either = [{"HTTPBearer": []}, {"HTTPBasic": []}]
    assert operations[("GET", "/api/v2/users/{user}")]["security"] == either
    assert operations[("GET", "/api/v2/groups")]["security"] == either
    assert operations[("POST", "/api/v2/tokens/application")]["security"] == either
    assert "security" not in operations[("GET", "/api/v2/info")]
    assert "security" not in operations[("POST", "/api/v2/authn/basic/login")]
