"""Errors a client can cause, named by their OpenPAI error codes.

Any layer (auth, the controller, a router) raises these; the server turns them into the HTTP
status plus a `{code, message}` body in one place. Keeping them outside `pai.server` lets code
that must not import the web layer raise exactly what the API will answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar


class ConfigurationError(ValueError):
    """The installation is misconfigured (an environment variable, a file); raised at start-up."""


class PaiError(Exception):
    """Base of every error the API reports; subclasses fix the OpenPAI `code` and HTTP status."""

    code: ClassVar[str] = "UnknownError"
    default_status: ClassVar[int] = 500

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.default_status

    @property
    def headers(self) -> dict[str, str]:
        """Extra response headers this error calls for."""
        return {}


class InvalidParametersError(PaiError):
    code = "InvalidParametersError"
    default_status = 400


class InvalidProtocolError(PaiError):
    """The job file is invalid; `problems` locates each problem (path, line, column)."""

    code = "InvalidProtocolError"
    default_status = 400

    def __init__(self, message: str, *, problems: Sequence[Mapping[str, object]] = ()) -> None:
        super().__init__(message)
        self.problems = [dict(problem) for problem in problems]


class IncorrectPasswordError(PaiError):
    code = "IncorrectPasswordError"
    default_status = 400


class UnauthorizedUserError(PaiError):
    code = "UnauthorizedUserError"
    default_status = 401

    @property
    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="pai"'}


class ForbiddenUserError(PaiError):
    code = "ForbiddenUserError"
    default_status = 403


class NoApiError(PaiError):
    code = "NoApiError"
    default_status = 404


class NoUserError(PaiError):
    code = "NoUserError"
    default_status = 404


class NoGroupError(PaiError):
    code = "NoGroupError"
    default_status = 404


class NoVirtualClusterError(PaiError):
    code = "NoVirtualClusterError"
    default_status = 404


class NoUserLimitError(PaiError):
    code = "NoUserLimitError"
    default_status = 404


class NoJobError(PaiError):
    code = "NoJobError"
    default_status = 404


class NoJobConfigError(PaiError):
    code = "NoJobConfigError"
    default_status = 404


class NoStorageError(PaiError):
    code = "NoStorageError"
    default_status = 404


class NoTaskLogError(PaiError):
    code = "NoTaskLogError"
    default_status = 404


class NoTagError(PaiError):
    code = "NoTagError"
    default_status = 404


class NoFileError(PaiError):
    """A path inside a storage names nothing (PAI's addition: OpenPAI has no file API)."""

    code = "NoFileError"
    default_status = 404


class NoItemError(PaiError):
    """No marketplace item has this id, or the caller may not see it."""

    code = "NoItemError"
    default_status = 404


class ConflictUserError(PaiError):
    code = "ConflictUserError"
    default_status = 409


class ConflictGroupError(PaiError):
    code = "ConflictGroupError"
    default_status = 409


class ConflictJobError(PaiError):
    code = "ConflictJobError"
    default_status = 409


class ConflictVcError(PaiError):
    code = "ConflictVcError"
    default_status = 409


class ConflictStorageError(PaiError):
    code = "ConflictStorageError"
    default_status = 409


class ConflictItemError(PaiError):
    """A marketplace item of this name exists already."""

    code = "ConflictItemError"
    default_status = 409


class RetryLater(PaiError):
    """An error that passes: `retry_after` (seconds), when known, becomes the `Retry-After`
    header, which clients wait for before they try again."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class InsufficientStorageError(RetryLater):
    """The storage has no room for the data (507, as WebDAV answers a full store)."""

    code = "InsufficientStorageError"
    default_status = 507


class TooManyRequestsError(RetryLater):
    """A rate limit was hit."""

    code = "TooManyRequestsError"
    default_status = 429

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message, retry_after=retry_after)


class ServiceUnavailableError(RetryLater):
    code = "ServiceUnavailableError"
    default_status = 503


class UnknownError(PaiError):
    code = "UnknownError"
    default_status = 500
