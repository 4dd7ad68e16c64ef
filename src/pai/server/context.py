"""What every request handler may need, built once per app and kept on `app.state.context`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar, cast

from starlette.concurrency import run_in_threadpool

from pai.auth.bearer import authenticate_token, remembered_principal
from pai.auth.bearers import BearerCache
from pai.auth.ldap import LdapDirectory
from pai.auth.oidc import OidcProvider, OidcSignIn
from pai.auth.passwordlogin import PasswordLogins
from pai.auth.permissions import Principal
from pai.auth.sealing import SecretBox
from pai.auth.secret import load_secret_key
from pai.auth.tokens import TokenService
from pai.executors.base import Executor
from pai.orchestrator.controlplane import ControlPlane
from pai.server.intake import SubmissionIntake
from pai.server.ratelimit import StoredRateLimiter
from pai.settings import Settings
from pai.store import Database

T = TypeVar("T")


@dataclass(frozen=True)
class ServerContext:
    """The server's collaborators.

    `services` holds what later parts attach (the controller, the scheduler, an executor),
    keyed by the type that routers ask for: `context.control_plane`.
    """

    settings: Settings
    database: Database
    tokens: TokenService
    login_failures: StoredRateLimiter
    """Failed logins per account and client address (`PAI_LOGIN_RATE_LIMIT` per minute)."""
    submission_limiter: StoredRateLimiter
    """Job submissions per user (`PAI_SUBMISSION_RATE_LIMIT` per hour), for the jobs router."""
    launcher_type: str
    bearers: BearerCache
    """Who bears the tokens of recent requests (`authenticate`)."""
    password_logins: PasswordLogins
    """Who checks a user name and password (PAI, or the LDAP directory)."""
    oidc: OidcSignIn | None
    """Sign-ins through the OpenID Connect provider, in `oidc` mode."""
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
        bearers = BearerCache()
        bearers.watch(database)
        key = load_secret_key(settings)
        authn = settings.authn
        ldap = LdapDirectory(authn.ldap) if authn.ldap is not None else None
        oidc = (
            OidcSignIn(OidcProvider(authn.oidc), SecretBox(key), admin_groups=authn.admin_groups)
            if authn.oidc is not None
            else None
        )
        return cls(
            settings=settings,
            database=database,
            tokens=TokenService(key),
            login_failures=StoredRateLimiter(
                "login", settings.login_rate_limit, 60, what="failed logins"
            ),
            submission_limiter=StoredRateLimiter(
                "submission", settings.submission_rate_limit, 3600, what="job submissions"
            ),
            launcher_type=launcher_type,
            bearers=bearers,
            password_logins=PasswordLogins(authn, ldap),
            oidc=oidc,
            services=dict(services),
        )

    def authenticate(self, token: str) -> Principal:
        """The caller bearing `token`; `UnauthorizedUserError` if it is not live."""
        return authenticate_token(self.database, self.tokens, self.bearers, token)

    def remembered_caller(self, token: str) -> Principal | None:
        """The caller bearing `token` if that is known without reading the store, else None;
        `UnauthorizedUserError` if the token is forged or expired."""
        return remembered_principal(self.tokens, self.bearers, token)

    async def authenticate_async(self, token: str) -> Principal:
        """`authenticate`, on the event loop when the store need not be read."""
        known = self.remembered_caller(token)
        return known if known is not None else await run_in_threadpool(self.authenticate, token)

    @cached_property
    def intake(self) -> SubmissionIntake:
        """Where accepted submissions are recorded, in batches."""
        return SubmissionIntake(
            self.database, self.submission_limiter, lambda: self.control_plane.wake()
        )

    @property
    def control_plane(self) -> ControlPlane:
        """The controller's side that the API and the portal use."""
        return cast(ControlPlane, self._attached(ControlPlane))

    @property
    def executor(self) -> Executor:
        """Where task logs are read (only a server in the controller's process has it)."""
        return cast(Executor, self._attached(Executor))

    def service(self, kind: type[T]) -> T:
        """The attached service registered under `kind`."""
        return cast(T, self._attached(kind))

    def _attached(self, kind: type) -> object:
        try:
            return self.services[kind]
        except KeyError:
            raise LookupError(f"no {kind.__name__} is attached to this server") from None
