"""Store records rendered as OpenPAI's JSON objects."""

from __future__ import annotations

from datetime import datetime

from pai.auth.permissions import Grants
from pai.server.schemas import GroupInfo, TokenInfo, UserInfo
from pai.store.models import Group, Token, User


def user_info(user: User) -> UserInfo:
    grants = Grants.of_user(user)
    return UserInfo(
        username=user.username,
        email=user.email,
        grouplist=sorted(group.groupname for group in user.groups),
        extension=user.extension,
        admin=grants.admin,
        virtualCluster=list(grants.virtual_clusters),
        storageConfig=list(grants.storage_configs),
    )


def group_info(group: Group) -> GroupInfo:
    acls = {
        "admin": group.is_admin,
        "virtualClusters": group.virtual_clusters,
        "storageConfigs": group.storage_configs,
    }
    return GroupInfo(
        groupname=group.groupname,
        description=group.description,
        externalName=group.external_name,
        extension={**group.extension, "acls": acls},
    )


def token_info(token: Token) -> TokenInfo:
    return TokenInfo(
        tokenHash=token.token_hash,
        application=token.application,
        createdTime=epoch_ms(token.created_at),
        expireTime=None if token.expires_at is None else epoch_ms(token.expires_at),
        lastUsedTime=None if token.last_used_at is None else epoch_ms(token.last_used_at),
    )


def epoch_ms(moment: datetime) -> int:
    """OpenPAI's time format: milliseconds since the epoch."""
    return int(moment.timestamp() * 1000)
