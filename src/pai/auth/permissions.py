"""Who may do what. Rights come only from groups: admin, virtual clusters and storages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pai.auth.tokens import TokenClaims
from pai.store.identity import GroupAcls
from pai.store.models import Group, User

DEFAULT_GROUP = "default"
DEFAULT_VIRTUAL_CLUSTER = "default"
ADMIN_GROUP = "admingroup"


@dataclass(frozen=True)
class Grants:
    """The union of the ACLs of a user's groups."""

    admin: bool
    virtual_clusters: tuple[str, ...]
    storage_configs: tuple[str, ...]

    @classmethod
    def of_groups(cls, groups: Iterable[Group | GroupAcls]) -> Grants:
        groups = list(groups)
        return cls(
            admin=any(group.is_admin for group in groups),
            virtual_clusters=_union(group.virtual_clusters for group in groups),
            storage_configs=_union(group.storage_configs for group in groups),
        )

    @classmethod
    def of_user(cls, user: User) -> Grants:
        return cls.of_groups(user.groups)


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of one request: the token used and the rights it carries."""

    token: TokenClaims
    grants: Grants

    @property
    def username(self) -> str:
        return self.token.username

    @property
    def application(self) -> bool:
        """True when the caller authenticated with an application token."""
        return self.token.application

    @property
    def admin(self) -> bool:
        return self.grants.admin

    def may_act_for(self, username: str) -> bool:
        """Owners act on their own things (jobs, tokens); admins on everybody's."""
        return self.admin or username == self.username

    def may_use_virtual_cluster(self, virtual_cluster: str) -> bool:
        """Admins may use every VC; others the VCs their groups grant."""
        return self.admin or virtual_cluster in self.grants.virtual_clusters


def _union(lists: Iterable[list[str]]) -> tuple[str, ...]:
    return tuple(sorted({item for items in lists for item in items}))
