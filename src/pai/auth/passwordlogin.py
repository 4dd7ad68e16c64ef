"""Who may log in with a user name and password, in each sign-in mode.

- `basic`: PAI checks its own passwords.
- `ldap`: the directory checks them (`pai.auth.ldap`), except for local administrators, whom
  PAI checks: the way in when the directory is down or misconfigured.
- `oidc`: people sign in through the provider; only local administrators use a password.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from pai.auth.directory import LOCAL, Directory
from pai.auth.external import ExternalIdentity, sign_in_external
from pai.auth.ldap import LdapDirectory
from pai.auth.permissions import Grants
from pai.authn_settings import AuthnSettings
from pai.errors import ForbiddenUserError
from pai.store import Database, identity
from pai.store.models import User


class PasswordLogins:
    """Checks passwords as the sign-in mode says (see the module docstring)."""

    def __init__(self, settings: AuthnSettings, ldap: LdapDirectory | None = None) -> None:
        self._settings = settings
        self._ldap = ldap

    def vouch(self, database: Database, username: str, password: str) -> ExternalIdentity | None:
        """The directory's person if the directory checks this login (it has, then), or None
        if PAI checks the password itself (`authenticate`). Runs outside any transaction: the
        directory may take a while to answer."""
        if self._settings.mode == "basic":
            return None
        with database.reading() as session:
            if _is_local_admin(session, username):
                return None
        if self._ldap is None:
            provider = self._settings.oidc.display_name if self._settings.oidc else "the provider"
            raise ForbiddenUserError(
                f"this cluster signs in through {provider} (GET /api/v2/authn/oidc/login, or "
                "`pai login` without --username); only local administrators log in with a "
                "password"
            )
        return self._ldap.authenticate(username, password)

    def authenticate(
        self, session: Session, username: str, password: str, person: ExternalIdentity | None
    ) -> User:
        """The user logging in: the directory's `person` (created or updated, groups synced)
        or, when `vouch` gave None, the local user whose password this is."""
        if person is None:
            return Directory(session).authenticate(username, password)
        return sign_in_external(session, person, admin_groups=self._settings.admin_groups)


def _is_local_admin(session: Session, username: str) -> bool:
    user = identity.find_user(session, username)
    return user is not None and user.source == LOCAL and Grants.of_user(user).admin
