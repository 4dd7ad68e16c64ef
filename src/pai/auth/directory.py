"""Users and groups, and the rules that keep them consistent.

Invariants every operation keeps (a violation raises and the transaction rolls back):
- every user belongs to the `default` group, which with `admingroup` cannot be deleted;
- at least one user stays an administrator, so nobody locks the cluster out of itself;
- changing a password signs the user out everywhere else (their other user tokens die);
- users of a directory (`source` oidc or ldap) have no PAI password: the directory keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from pai.auth.passwords import hash_password, needs_rehash, verify_password
from pai.auth.permissions import ADMIN_GROUP, DEFAULT_GROUP
from pai.errors import (
    ConflictGroupError,
    ConflictUserError,
    ForbiddenUserError,
    IncorrectPasswordError,
    NoGroupError,
    NoUserError,
    NoVirtualClusterError,
)
from pai.store import identity
from pai.store.models import Group, User

PROTECTED_GROUPS = (DEFAULT_GROUP, ADMIN_GROUP)
LOCAL = "local"
"""`User.source` of users with a PAI password."""


class Directory:
    """User and group operations inside one session (the caller owns the transaction)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    # -- reading -------------------------------------------------------------------------

    def user(self, username: str) -> User:
        user = identity.find_user(self._session, username)
        if user is None:
            raise NoUserError(f"user '{username}' does not exist")
        return user

    def users(self) -> Sequence[User]:
        return identity.all_users(self._session)

    def group(self, groupname: str) -> Group:
        group = identity.find_group(self._session, groupname)
        if group is None:
            raise NoGroupError(f"group '{groupname}' does not exist")
        return group

    def groups(self) -> Sequence[Group]:
        return identity.all_groups(self._session)

    def members(self, groupname: str) -> Sequence[User]:
        return identity.group_members(self._session, self.group(groupname))

    def authenticate(self, username: str, password: str) -> User:
        """The user whose password this is (OpenPAI answers 400 for both failures)."""
        user = identity.find_user(self._session, username)
        if user is None:
            raise NoUserError(f"user '{username}' does not exist", status=400)
        if user.source != LOCAL:
            raise IncorrectPasswordError(
                f"user '{username}' signs in through the organisation's directory "
                f"({user.source}), not with a PAI password"
            )
        if not verify_password(user.password_hash, password):
            raise IncorrectPasswordError("the password is incorrect")
        if needs_rehash(user.password_hash):
            user.password_hash = hash_password(password)
        return user

    # -- users ---------------------------------------------------------------------------

    def create_user(
        self,
        username: str,
        password: str | None,
        *,
        source: str = LOCAL,
        email: str = "",
        admin: bool = False,
        virtual_clusters: Sequence[str] | None = None,
        extension: Mapping[str, Any] | None = None,
    ) -> User:
        if identity.find_user(self._session, username) is not None:
            raise ConflictUserError(f"user '{username}' already exists")
        groups = [self.group(DEFAULT_GROUP)]
        if virtual_clusters:
            groups += self._groups_granting(virtual_clusters)
        if admin:
            groups.append(self.group(ADMIN_GROUP))
        user = User(
            username=username,
            email=email,
            source=source,
            password_hash="" if password is None else hash_password(password),
            extension=dict(extension or {}),
            groups=_unique(groups),
        )
        self._session.add(user)
        self._session.flush()
        return user

    def update_user(
        self,
        username: str,
        *,
        email: str | None = None,
        password: str | None = None,
        admin: bool | None = None,
        virtual_clusters: Sequence[str] | None = None,
        extension: Mapping[str, Any] | None = None,
        merge_extension: bool = False,
        keep_token_hash: str | None = None,
    ) -> User:
        """Change the given fields (None = unchanged). A new password revokes the user's user
        tokens except `keep_token_hash` (the caller's own, when users change their password)."""
        user = self.user(username)
        if email is not None:
            user.email = email
        if password is not None and user.source != LOCAL:
            raise ForbiddenUserError(
                f"the password of '{username}' is kept by the organisation's directory "
                f"({user.source}): change it there"
            )
        if password is not None:
            user.password_hash = hash_password(password)
            identity.delete_user_tokens(
                self._session, user, application=False, keep_hash=keep_token_hash
            )
        if extension is not None:
            user.extension = {**user.extension, **extension} if merge_extension else dict(extension)
        if virtual_clusters is not None:
            self._replace_virtual_cluster_groups(user, virtual_clusters)
        if admin is not None:
            self._set_admin(user, admin)
        return user

    def delete_user(self, username: str) -> None:
        self._session.delete(self.user(username))
        self._require_an_admin()

    def revoke_tokens(self, username: str) -> None:
        """Every token of the user stops working at once."""
        user = self.user(username)
        for application in (False, True):
            identity.delete_user_tokens(
                self._session, user, application=application, keep_hash=None
            )

    def add_to_group(self, username: str, groupname: str) -> User:
        user, group = self.user(username), self.group(groupname)
        if group not in user.groups:
            user.groups.append(group)
        return user

    def remove_from_group(self, username: str, groupname: str) -> User:
        user, group = self.user(username), self.group(groupname)
        if group.groupname == DEFAULT_GROUP:
            raise ForbiddenUserError("every user belongs to the default group")
        if group in user.groups:
            user.groups.remove(group)
        self._require_an_admin()
        return user

    def set_directory_groups(self, user: User, groups: Iterable[Group]) -> User:
        """Make `groups` the user's groups with an `externalName` (those the organisation's
        directory decides), keeping the others."""
        kept = [group for group in user.groups if not group.external_name]
        user.groups = _unique(kept + [group for group in groups if group.external_name])
        self._require_an_admin()
        return user

    def set_admin(self, user: User, admin: bool) -> User:
        self._set_admin(user, admin)
        return user

    def set_groups(self, username: str, groupnames: Sequence[str]) -> User:
        """Replace the user's groups; `default` is always kept."""
        user = self.user(username)
        user.groups = self._existing_groups({DEFAULT_GROUP, *groupnames})
        self._require_an_admin()
        return user

    # -- groups --------------------------------------------------------------------------

    def create_group(
        self,
        groupname: str,
        *,
        description: str = "",
        external_name: str = "",
        admin: bool = False,
        virtual_clusters: Sequence[str] = (),
        storage_configs: Sequence[str] = (),
        extension: Mapping[str, Any] | None = None,
    ) -> Group:
        if identity.find_group(self._session, groupname) is not None:
            raise ConflictGroupError(f"group '{groupname}' already exists")
        group = Group(
            groupname=groupname,
            description=description,
            external_name=external_name,
            is_admin=admin,
            virtual_clusters=_sorted_unique(virtual_clusters),
            storage_configs=_sorted_unique(storage_configs),
            extension=dict(extension or {}),
        )
        self._session.add(group)
        self._session.flush()
        return group

    def update_group(
        self,
        groupname: str,
        *,
        description: str | None = None,
        external_name: str | None = None,
        admin: bool | None = None,
        virtual_clusters: Sequence[str] | None = None,
        storage_configs: Sequence[str] | None = None,
        extension: Mapping[str, Any] | None = None,
        merge_extension: bool = False,
    ) -> Group:
        """Change the given fields (None = unchanged)."""
        group = self.group(groupname)
        if description is not None:
            group.description = description
        if external_name is not None:
            group.external_name = external_name
        if virtual_clusters is not None:
            group.virtual_clusters = _sorted_unique(virtual_clusters)
        if storage_configs is not None:
            group.storage_configs = _sorted_unique(storage_configs)
        if extension is not None:
            group.extension = (
                {**group.extension, **extension} if merge_extension else dict(extension)
            )
        if admin is not None:
            group.is_admin = admin
            self._require_an_admin()
        return group

    def delete_group(self, groupname: str) -> None:
        if groupname in PROTECTED_GROUPS:
            raise ForbiddenUserError(f"the '{groupname}' group cannot be deleted")
        self._session.delete(self.group(groupname))
        self._require_an_admin()

    # -- helpers -------------------------------------------------------------------------

    def _groups_granting(self, virtual_clusters: Iterable[str]) -> list[Group]:
        """The non-admin groups that grant each VC (OpenPAI maps a user's VCs to groups)."""
        granting = [group for group in self.groups() if not group.is_admin]
        chosen: list[Group] = []
        for virtual_cluster in virtual_clusters:
            matches = [group for group in granting if virtual_cluster in group.virtual_clusters]
            if not matches:
                raise NoVirtualClusterError(
                    f"virtual cluster '{virtual_cluster}' is not granted by any group"
                )
            chosen += matches
        return chosen

    def _replace_virtual_cluster_groups(self, user: User, virtual_clusters: Sequence[str]) -> None:
        kept = [
            group
            for group in user.groups
            if group.groupname == DEFAULT_GROUP or group.is_admin or not group.virtual_clusters
        ]
        user.groups = _unique(kept + self._groups_granting(virtual_clusters))

    def _set_admin(self, user: User, admin: bool) -> None:
        if admin and not any(group.is_admin for group in user.groups):
            user.groups.append(self.group(ADMIN_GROUP))
        elif not admin:
            user.groups = [group for group in user.groups if not group.is_admin]
            self._require_an_admin()

    def _existing_groups(self, groupnames: set[str]) -> list[Group]:
        groups = list(identity.find_groups(self._session, groupnames))
        missing = groupnames - {group.groupname for group in groups}
        if missing:
            raise NoGroupError(f"group '{sorted(missing)[0]}' does not exist")
        return groups

    def _require_an_admin(self) -> None:
        self._session.flush()
        if identity.count_admins(self._session) == 0:
            raise ForbiddenUserError("the change would leave the cluster without an administrator")


def _unique(groups: Iterable[Group]) -> list[Group]:
    return list({group.groupname: group for group in groups}.values())


def _sorted_unique(items: Iterable[str]) -> list[str]:
    return sorted(set(items))
