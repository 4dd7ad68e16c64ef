"""Every domain error becomes its HTTP status and an OpenPAI `{code, message}` body."""

from __future__ import annotations

import json

import pytest

import pai.errors
from pai.errors import PaiError, TooManyRequestsError, UnauthorizedUserError
from pai.server.errors import describe_validation_errors, error_response

ALL_ERRORS = sorted(
    (
        value
        for value in vars(pai.errors).values()
        if isinstance(value, type)
        and issubclass(value, PaiError)
        and value is not PaiError
        and "code" in vars(value)  # bases such as RetryLater have no code of their own
    ),
    key=lambda kind: kind.__name__,
)
EXPECTED_STATUS = {
    "ConflictGroupError": 409,
    "ConflictItemError": 409,
    "ConflictJobError": 409,
    "ConflictStorageError": 409,
    "ConflictUserError": 409,
    "ConflictVcError": 409,
    "ForbiddenUserError": 403,
    "IncorrectPasswordError": 400,
    "InvalidParametersError": 400,
    "InsufficientStorageError": 507,
    "InvalidProtocolError": 400,
    "NoApiError": 404,
    "NoFileError": 404,
    "NoGroupError": 404,
    "NoItemError": 404,
    "NoJobConfigError": 404,
    "NoJobError": 404,
    "NoStorageError": 404,
    "NoTagError": 404,
    "NoTaskLogError": 404,
    "NoUserError": 404,
    "NoUserLimitError": 404,
    "NoVirtualClusterError": 404,
    "ServiceUnavailableError": 503,
    "TooManyRequestsError": 429,
    "UnauthorizedUserError": 401,
    "UnknownError": 500,
}


@pytest.mark.parametrize("kind", ALL_ERRORS, ids=lambda kind: kind.__name__)
def test_each_error_has_its_openpai_code_and_status(kind: type[PaiError]) -> None:
    error = (
        kind("what went wrong")
        if kind is not TooManyRequestsError
        else kind("slow down", retry_after=2.2)
    )
    response = error_response(error)
    assert response.status_code == EXPECTED_STATUS[kind.__name__]
    body = json.loads(bytes(response.body))
    assert body == {"code": kind.__name__, "message": error.message}


def test_errors_bring_their_headers() -> None:
    assert error_response(TooManyRequestsError("x", retry_after=2.2)).headers["Retry-After"] == "3"
    assert (
        error_response(UnauthorizedUserError("x")).headers["WWW-Authenticate"].startswith("Bearer")
    )


def test_a_status_can_be_overridden_where_openpai_does() -> None:
    assert error_response(pai.errors.NoUserError("x", status=400)).status_code == 400


def test_validation_messages_name_fields_and_never_values() -> None:
    message = describe_validation_errors(
        [
            {"loc": ("body", "password"), "msg": "too short", "input": "hunter"},
            {"loc": ("body", "with patch: false", "data", "admin"), "msg": "Field required"},
        ]
    )
    assert message == (
        "body.password: too short; body.data.admin: Field required with patch: false"
    )
