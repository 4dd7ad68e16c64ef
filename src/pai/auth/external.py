"""Users vouched for by the organisation's directory (an OpenID Connect provider or LDAP).

Their first sign-in creates them; every sign-in makes their PAI groups with an `externalName`
those that name one of their directory groups, so their virtual clusters follow the directory.
Groups without an `externalName` (`default`, groups an administrator fills by hand) stay as
they are. With `PAI_AUTHN_ADMIN_GROUPS`, the directory also decides who is an administrator.

A local administrator's name is never taken over by the directory: they are the way in when
the directory is down or misconfigured. Any other local user whose name the directory signs
in becomes that directory user: their PAI password and tokens are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from pai.auth.directory import LOCAL, Directory
from pai.auth.names import is_email, is_username
from pai.auth.permissions import Grants
from pai.errors import ForbiddenUserError, UnauthorizedUserError
from pai.store import identity
from pai.store.models import User


def exact(name: str) -> str:
    return name


@dataclass(frozen=True)
class ExternalIdentity:
    """A person as the directory describes them at sign-in."""

    username: str
    source: str
    """`oidc` or `ldap`."""
    email: str = ""
    groups: frozenset[str] = frozenset()
    """The directory groups' names, as `fold` writes them."""
    fold: Callable[[str], str] = exact
    """How names compare: OIDC group values exactly, LDAP DNs and cns regardless of case."""

    def belongs_to(self, external_name: str) -> bool:
        return self.fold(external_name) in self.groups


def sign_in_external(
    session: Session, person: ExternalIdentity, *, admin_groups: Sequence[str] = ()
) -> User:
    """The PAI user for `person`, created or updated, with groups synchronised."""
    if not is_username(person.username):
        raise UnauthorizedUserError(
            f"the directory names this person {person.username!r}, which is not a valid PAI "
            "user name (letters, digits, '_', '.', '-'; at most 64 characters)"
        )
    directory = Directory(session)
    email = person.email if is_email(person.email) else ""
    user = identity.find_user(session, person.username)
    if user is None:
        user = directory.create_user(person.username, None, source=person.source, email=email)
    elif user.source != person.source:
        _adopt(session, user, person)
    if email:
        user.email = email
    managed = [group for group in identity.all_groups(session) if group.external_name]
    directory.set_directory_groups(
        user, [group for group in managed if person.belongs_to(group.external_name)]
    )
    if admin_groups:
        directory.set_admin(user, any(person.belongs_to(name) for name in admin_groups))
    session.flush()
    return user


def _adopt(session: Session, user: User, person: ExternalIdentity) -> None:
    """Make `user` the directory's `person` (see the module docstring)."""
    if user.source == LOCAL and Grants.of_user(user).admin:
        raise ForbiddenUserError(
            f"'{user.username}' is a local administrator of PAI, whom the directory cannot "
            "sign in; they log in with their PAI password"
        )
    user.source = person.source
    user.password_hash = ""
    Directory(session).revoke_tokens(user.username)
