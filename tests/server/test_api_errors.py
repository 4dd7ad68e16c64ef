"""Error bodies everywhere, and the seams later parts plug into (routers, services, lifespans)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from fastapi import APIRouter

from pai.server.context import ServerContext
from pai.server.deps import Caller, Context
from pai.store import head_revision
from server.harness import RunningServer, StartServer


def test_unknown_paths_and_methods_are_no_api_errors(pai_server: RunningServer) -> None:
    with pai_server.client() as client:
        missing = client.get("/no/such/thing")
        wrong_method = client.patch("/info")
    assert missing.status_code == 404
    assert missing.json() == {
        "code": "NoApiError",
        "message": "there is no API at GET /api/v2/no/such/thing",
    }
    assert wrong_method.status_code == 405
    assert wrong_method.json() == {
        "code": "NoApiError",
        "message": "method not allowed: PATCH /api/v2/info",
    }


def test_malformed_json_and_unknown_fields_are_invalid_parameters(
    pai_server: RunningServer,
) -> None:
    with pai_server.client(pai_server.admin_token()) as client:
        malformed = client.post(
            "/groups", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        unknown = client.put(
            "/groups", json={"patch": True, "data": {"groupname": "x", "bogus": 1}}
        )
    assert malformed.status_code == 400
    assert malformed.json()["code"] == "InvalidParametersError"
    assert unknown.status_code == 400
    assert unknown.json() == {
        "code": "InvalidParametersError",
        "message": "body.data.bogus: Extra inputs are not permitted with patch: true",
    }


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("GET", "/users/a%00b", None, "path"),
        ("DELETE", "/tokens/a%00b", None, "path"),
        ("GET", "/groups?x%00=1", None, "query.x\\0"),
        ("POST", "/groups", {"groupname": "nul", "description": "a\x00b"}, "body: description"),
        ("POST", "/groups", {"groupname": "nul", "extension": {"k\x00": 1}}, "extension.k\\0"),
        ("POST", "/authn/basic/login", {"username": "a\x00", "password": "secret"}, "username"),
    ],
)
def test_text_with_nul_is_refused_where_it_is(
    pai_server: RunningServer, method: str, path: str, body: object, where: str
) -> None:
    """PostgreSQL cannot store NUL: it is refused up front on both backends, never a 500."""
    with pai_server.client(pai_server.admin_token()) as client:
        response = client.request(method, path, json=body)
        groups = {group["groupname"] for group in client.get("/groups").json()}
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "InvalidParametersError"
    assert where in response.json()["message"]
    assert "NUL character" in response.json()["message"]
    assert "nul" not in groups


def test_a_query_parameter_given_twice_is_refused(pai_server: RunningServer) -> None:
    """Lists are comma-separated; a repeated parameter was silently read as its last value."""
    with pai_server.client(pai_server.admin_token()) as client:
        response = client.get("/groups", params=[("groupname", "a"), ("groupname", "b")])
    assert response.status_code == 400
    assert response.json() == {
        "code": "InvalidParametersError",
        "message": "query.groupname: given 2 times; give it once (a list is comma-separated)",
    }


@dataclass
class Greeter:
    greeting: str
    events: list[str] = field(default_factory=list)


def test_routers_services_and_lifespans_plug_into_the_app(start_pai_server: StartServer) -> None:
    greeter = Greeter("hello")
    router = APIRouter()

    @router.get("/greeting")
    def greeting(context: Context, caller: Caller) -> dict[str, str]:
        return {"message": f"{context.service(Greeter).greeting}, {caller.username}"}

    @asynccontextmanager
    async def running(context: ServerContext) -> AsyncIterator[None]:
        greeter.events.append(f"start at {context.database.current_revision()}")
        yield
        greeter.events.append("stop")

    server = start_pai_server(routers=[router], services={Greeter: greeter}, lifespans=[running])
    with server.client(server.admin_token()) as client:
        assert client.get("/greeting").json() == {"message": "hello, admin"}
    assert greeter.events == [f"start at {head_revision()}"]


def test_an_unexpected_error_is_a_500_without_details(start_pai_server: StartServer) -> None:
    router = APIRouter()

    @router.get("/explode")
    def explode() -> None:
        raise RuntimeError("internal detail, password=hunter2-secret")

    server = start_pai_server(routers=[router])
    with server.client() as client:
        response = client.get("/explode")
    request_id = response.headers["X-Request-ID"]
    assert response.status_code == 500
    assert response.json() == {
        "code": "UnknownError",
        "message": f"internal server error; the server log has details (request {request_id})",
    }
    logged = [json.loads(line) for line in server.log_path.read_text().splitlines()]
    failure = next(entry for entry in logged if entry.get("request_id") == request_id)
    assert failure["level"] == "ERROR"
    assert "RuntimeError: internal detail, password=[REDACTED]" in failure["exception"]
    assert "hunter2-secret" not in server.log_path.read_text()
