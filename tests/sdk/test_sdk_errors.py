"""Error answers become exceptions a caller can catch by kind, on made-up answers and on a real
server."""

from __future__ import annotations

import socket

import httpx
import pytest

from pai.protocol import Problem
from pai.sdk import (
    Client,
    ConflictError,
    ForbiddenError,
    InvalidProtocolError,
    InvalidRequestError,
    NotFoundError,
    PaiError,
    RateLimitedError,
    ServerUnavailableError,
    UnauthorizedError,
)
from pai.sdk.errors import error_from_response
from server.harness import Account, RunningServer


def answer(status: int, code: str, message: str = "m", **extra: object) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": message, **extra})


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (404, "NoJobError", NotFoundError),
        (400, "NoUserError", NotFoundError),  # OpenPAI's login answers 400 for an unknown user
        (404, "NoVirtualClusterError", NotFoundError),
        (409, "ConflictJobError", ConflictError),
        (409, "ConflictUserError", ConflictError),
        (403, "ForbiddenUserError", ForbiddenError),
        (401, "UnauthorizedUserError", UnauthorizedError),
        (400, "InvalidParametersError", InvalidRequestError),
        (400, "IncorrectPasswordError", InvalidRequestError),
        (503, "ServiceUnavailableError", ServerUnavailableError),
    ],
)
def test_each_code_family_has_its_exception(status: int, code: str, kind: type) -> None:
    error = error_from_response(answer(status, code, "what happened"))

    assert type(error) is kind
    assert (error.status, error.code, error.message) == (status, code, "what happened")
    assert str(error) == f"what happened ({code})"


def test_an_unknown_code_is_a_plain_pai_error() -> None:
    error = error_from_response(answer(500, "UnknownError", "boom"))

    assert type(error) is PaiError
    assert error.status == 500


def test_invalid_protocol_errors_carry_located_problems() -> None:
    problems = [
        {"path": "taskRoles.main.instances", "message": "must be ≥ 1", "line": 7, "column": 16},
        {"path": "defaults.virtualCluster", "message": "no such VC", "line": None},
    ]
    error = error_from_response(answer(400, "InvalidProtocolError", "invalid", problems=problems))

    assert isinstance(error, InvalidProtocolError)
    assert isinstance(error, InvalidRequestError)
    assert error.problems == (
        Problem("taskRoles.main.instances", "must be ≥ 1", 7, 16),
        Problem("defaults.virtualCluster", "no such VC", None, None),
    )


def test_rate_limits_say_when_to_retry() -> None:
    response = httpx.Response(
        429,
        json={"code": "TooManyRequestsError", "message": "slow down"},
        headers={"Retry-After": "30"},
    )

    error = error_from_response(response)

    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 30.0


def test_an_answer_that_is_not_openpai_json_falls_back_to_the_status() -> None:
    error = error_from_response(httpx.Response(502, text="<html>bad gateway</html>"))

    assert isinstance(error, ServerUnavailableError)
    assert (error.code, error.message) == ("UnknownError", "Bad Gateway")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_server_is_waited_for_then_named_in_the_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    heard: list[tuple[str, float]] = []

    with (
        Client(
            url, "token", retry_for=1.0, on_retry=lambda e, s: heard.append((str(e), s))
        ) as client,
        pytest.raises(ServerUnavailableError) as caught,
    ):
        client.users()

    assert caught.value.status is None
    assert str(caught.value) == f"cannot reach the PAI server at {url}: connection refused"
    assert [said for said, _ in heard] == [str(caught.value)]  # told once, when it began
    assert 0 < heard[0][1] <= 1.0


def test_a_wrong_password_is_an_invalid_request(pai_server: RunningServer, alice: Account) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        Client.login(pai_server.base_url, alice.username, alice.password + "x")

    assert caught.value.code == "IncorrectPasswordError"


def test_a_user_that_does_not_exist_is_not_found(admin_client: Client) -> None:
    with pytest.raises(NotFoundError) as caught:
        admin_client.user("nobody-by-that-name")

    assert (caught.value.status, caught.value.code) == (404, "NoUserError")


def test_a_plain_user_is_forbidden_to_create_users(alice_client: Client) -> None:
    with pytest.raises(ForbiddenError) as caught:
        alice_client.create_user("mallory", "password1")

    assert caught.value.code == "ForbiddenUserError"


def test_creating_a_user_twice_conflicts(admin_client: Client, alice: Account) -> None:
    with pytest.raises(ConflictError) as caught:
        admin_client.create_user(alice.username, "password1")

    assert caught.value.code == "ConflictUserError"


def test_a_forged_token_is_unauthorized(pai_server: RunningServer) -> None:
    with Client(pai_server.base_url, "not-a-token") as client, pytest.raises(UnauthorizedError):
        client.whoami()


def test_a_stop_is_tried_again_while_the_store_is_away() -> None:
    """A stop met by a store restart (503 with Retry-After) is sent again and goes through, as
    a submission does: stopping twice is stopping once. A chaos run found a user's stop lost to
    a 503 from a PostgreSQL restart, its job left running."""
    answers = [
        httpx.Response(
            503, json={"code": "UnknownError", "message": "store"}, headers={"Retry-After": "0.1"}
        ),
        httpx.Response(202, json={"message": "stopping"}),
    ]
    sent: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path} {request.content.decode()}")
        return answers.pop(0)

    with Client("http://pai.test", "token", connections=httpx.MockTransport(server)) as client:
        assert client.stop("alice~train") == "stopping"

    assert sent == ['PUT /api/v2/jobs/alice~train/executionType {"value":"STOP"}'] * 2
