"""What can go wrong when talking to a PAI server, as exceptions a caller can catch by kind.

The server answers every error with an HTTP status and an OpenPAI error code
(`{"code": "NoJobError", "message": "..."}`); `error_from_response` turns that into the
subclass of `PaiError` for the code's family, so callers write `except NotFoundError:` instead
of comparing strings. Errors raised before any request is sent (a malformed job name, an
unknown parameter) are `InvalidArgumentError`; a missing or broken client configuration is
`ConfigError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from pai.protocol import Problem


class PaiError(Exception):
    """An error the PAI server reported (or, for `ServerUnavailableError`, could not report).

    `status` is the HTTP status (None when no answer came), `code` the OpenPAI error code
    such as `NoJobError` (None when no answer came), `message` the server's explanation.

        try:
            client.job("alice~missing")
        except PaiError as error:
            print(error.status, error.code, error.message)  # 404 NoJobError job ... not found
    """

    def __init__(self, status: int | None, code: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} ({self.code})" if self.code else self.message

    def __repr__(self) -> str:
        fields = f"status={self.status!r}, code={self.code!r}, message={self.message!r}"
        return f"{type(self).__name__}({fields})"


class InvalidRequestError(PaiError):
    """The server rejected the request's content (HTTP 400: InvalidParametersError,
    IncorrectPasswordError, ...)."""


class InvalidProtocolError(InvalidRequestError):
    """A submitted job is not a valid job; `problems` locates each issue in the YAML."""

    def __init__(
        self, status: int | None, code: str | None, message: str, problems: tuple[Problem, ...]
    ) -> None:
        super().__init__(status, code, message)
        self.problems = problems


class UnauthorizedError(PaiError):
    """No credentials, or a token that is invalid, expired or revoked (HTTP 401)."""


class ForbiddenError(PaiError):
    """The caller may not do this: not an admin, not the job's owner, no access to the VC (403)."""


class NotFoundError(PaiError):
    """The named thing does not exist (codes `No*Error`: NoJobError, NoUserError, ...)."""


class ConflictError(PaiError):
    """The name is taken (codes `Conflict*Error`: ConflictJobError, ConflictUserError, ...)."""


class RateLimitedError(PaiError):
    """Too many requests (429); `retry_after` is the number of seconds to wait, if known."""

    def __init__(
        self, status: int | None, code: str | None, message: str, retry_after: float | None
    ) -> None:
        super().__init__(status, code, message)
        self.retry_after = retry_after


class ServerUnavailableError(PaiError):
    """The server could not be reached, did not answer in time, or said it is not ready."""


class ServerNotTrustedError(ServerUnavailableError):
    """The TLS handshake with the server failed (its certificate is not trusted here, for
    example): trying again does not help; trust its CA (`SSL_CERT_FILE`) or fix the URL."""


class InvalidArgumentError(ValueError):
    """A call was rejected before anything was sent (a malformed job name, an unknown
    parameter, a role the job does not have)."""


class ConfigError(Exception):
    """The client configuration is missing or unreadable; the message says which file."""


class WaitTimeoutError(TimeoutError):
    """`Client.wait` gave up; `job` is the last state seen (a `JobDetail`)."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


_BY_STATUS: Mapping[int, type[PaiError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    502: ServerUnavailableError,
    503: ServerUnavailableError,
    504: ServerUnavailableError,
}


def error_class(status: int, code: str) -> type[PaiError]:
    """The exception class for an error answer: by OpenPAI code family, else by HTTP status."""
    if code.startswith("No") and code.endswith("Error"):
        return NotFoundError
    if code.startswith("Conflict"):
        return ConflictError
    if code == "UnauthorizedUserError":
        return UnauthorizedError
    if code == "ForbiddenUserError":
        return ForbiddenError
    if code == "ServiceUnavailableError":
        return ServerUnavailableError
    return _BY_STATUS.get(status, PaiError)


def error_from_response(response: httpx.Response) -> PaiError:
    """The `PaiError` an error response stands for; tolerates bodies that are not OpenPAI's
    (a proxy's HTML page), falling back to the HTTP reason phrase."""
    body = _json_object(response)
    status = response.status_code
    code = str(body.get("code") or "UnknownError")
    message = str(body.get("message") or response.reason_phrase or f"HTTP {status}")
    if code == "InvalidProtocolError":
        return InvalidProtocolError(status, code, message, _problems(body.get("problems")))
    if code == "TooManyRequestsError" or status == 429:
        return RateLimitedError(status, code, message, _retry_after(response))
    return error_class(status, code)(status, code, message)


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return body if isinstance(body, dict) else {}


def _problems(raw: Any) -> tuple[Problem, ...]:
    # The protocol package is large (a tenth of a second to import) and only this answer needs
    # it: imported here, a client that never submits an invalid job never loads it.
    from pai.protocol import Problem

    if not isinstance(raw, list):
        return ()
    return tuple(
        Problem(
            path=str(item.get("path") or ""),
            message=str(item.get("message") or ""),
            line=_optional_int(item.get("line")),
            column=_optional_int(item.get("column")),
        )
        for item in raw
        if isinstance(item, dict)
    )


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None
