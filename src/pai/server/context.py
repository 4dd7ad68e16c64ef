"""What every request handler may need, built once per app and kept on `app.state.context`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from pai.auth.secret import load_secret_key
from pai.auth.tokens import TokenService
from pai.server.ratelimit import StoredRateLimiter
from pai.settings import Settings
from pai.store import Database

T = TypeVar("T")


@dataclass(frozen=True)
class ServerContext:
    """The server's collaborators.

    `services` holds what later parts attach (the controller, the scheduler, an executor),
    keyed by the type that routers ask for: `context.service(Controller)`.
    """

    settings: Settings
    database: Database
    tokens: TokenService
    login_failures: StoredRateLimiter
    """Failed logins per account and client address (`PAI_LOGIN_RATE_LIMIT` per minute)."""
    submission_limiter: StoredRateLimiter
    """Job submissions per user (`PAI_SUBMISSION_RATE_LIMIT` per hour), for the jobs router."""
    launcher_type: str
    services: Mapping[type, object] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        settings: Settings,
        database: Database,
        *,
        launcher_type: str,
        services: Mapping[type, object],
    ) -> ServerContext:
        return cls(
            settings=settings,
            database=database,
            tokens=TokenService(load_secret_key(settings)),
            login_failures=StoredRateLimiter(
                "login", settings.login_rate_limit, 60, what="failed logins"
            ),
            submission_limiter=StoredRateLimiter(
                "submission", settings.submission_rate_limit, 3600, what="job submissions"
            ),
            launcher_type=launcher_type,
            services=dict(services),
        )

    def service(self, kind: type[T]) -> T:
        """The attached service registered under `kind`."""
        try:
            return cast(T, self.services[kind])
        except KeyError:
            raise LookupError(f"no {kind.__name__} is attached to this server") from None
