"""Queries over users, groups and tokens. Rules about them live in `pai.auth`."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, selectinload

from pai.store.models import Group, IdentityEpoch, Token, User, memberships


def find_user(session: Session, username: str) -> User | None:
    return session.scalars(
        select(User).where(User.username == username).options(selectinload(User.groups))
    ).one_or_none()


def all_users(session: Session) -> Sequence[User]:
    return session.scalars(
        select(User).order_by(User.username).options(selectinload(User.groups))
    ).all()


def find_group(session: Session, groupname: str) -> Group | None:
    return session.scalars(select(Group).where(Group.groupname == groupname)).one_or_none()


def find_groups(session: Session, groupnames: Collection[str]) -> Sequence[Group]:
    return session.scalars(
        select(Group).where(Group.groupname.in_(groupnames)).order_by(Group.groupname)
    ).all()


def all_groups(session: Session) -> Sequence[Group]:
    return session.scalars(select(Group).order_by(Group.groupname)).all()


def group_members(session: Session, group: Group) -> Sequence[User]:
    return session.scalars(
        select(User)
        .join(memberships, memberships.c.user_id == User.id)
        .where(memberships.c.group_id == group.id)
        .order_by(User.username)
        .options(selectinload(User.groups))
    ).all()


def count_admins(session: Session) -> int:
    """Users who belong to at least one group with the admin ACL."""
    return (
        session.scalar(
            select(func.count(func.distinct(memberships.c.user_id)))
            .join(Group, Group.id == memberships.c.group_id)
            .where(Group.is_admin.is_(True))
        )
        or 0
    )


def find_token(session: Session, token_hash: str) -> Token | None:
    return session.scalars(
        select(Token).where(Token.token_hash == token_hash).options(selectinload(Token.user))
    ).one_or_none()


@dataclass(frozen=True)
class GroupAcls:
    """A group's ACLs: what its members may do."""

    is_admin: bool
    virtual_clusters: list[str]
    storage_configs: list[str]


@dataclass(frozen=True)
class TokenBearer:
    """What checking a request's token reads: the token's times, its user and the ACLs of the
    user's groups."""

    username: str
    expires_at: datetime | None
    last_used_at: datetime | None
    groups: tuple[GroupAcls, ...]


def find_token_bearer(session: Session, token_hash: str) -> TokenBearer | None:
    """The bearer of the token recorded as `token_hash`, in one query (a row per group)."""
    rows = session.execute(
        select(
            User.username,
            Token.expires_at,
            Token.last_used_at,
            Group.is_admin,
            Group.virtual_clusters,
            Group.storage_configs,
        )
        .join(User, User.id == Token.user_id)
        .outerjoin(memberships, memberships.c.user_id == User.id)
        .outerjoin(Group, Group.id == memberships.c.group_id)
        .where(Token.token_hash == token_hash)
    ).all()
    if not rows:
        return None
    groups = tuple(
        GroupAcls(row.is_admin, row.virtual_clusters, row.storage_configs)
        for row in rows
        if row.is_admin is not None  # a user in no group: one row, without a group
    )
    first = rows[0]
    return TokenBearer(first.username, first.expires_at, first.last_used_at, groups)


def identity_epoch(session: Session) -> int:
    """The identity epoch (`IdentityEpoch`): it moves with every change to who bears what."""
    return session.scalar(select(IdentityEpoch.epoch)) or 0


def record_token_use(session: Session, token_hash: str, used_at: datetime) -> None:
    session.execute(
        update(Token).where(Token.token_hash == token_hash).values(last_used_at=used_at)
    )


def live_tokens(session: Session, user: User, now: datetime) -> Sequence[Token]:
    """The user's tokens that have not expired, newest first."""
    return session.scalars(
        select(Token)
        .where(Token.user_id == user.id)
        .where(Token.expires_at.is_(None) | (Token.expires_at > now))
        .order_by(Token.created_at.desc(), Token.id.desc())
    ).all()


def delete_expired_tokens(session: Session, now: datetime) -> None:
    session.execute(delete(Token).where(Token.expires_at <= now))


def delete_user_tokens(
    session: Session, user: User, *, application: bool, keep_hash: str | None
) -> None:
    """Delete the user's tokens of one kind (user or application), except `keep_hash`."""
    statement = delete(Token).where(Token.user_id == user.id, Token.application.is_(application))
    if keep_hash is not None:
        statement = statement.where(Token.token_hash != keep_hash)
    session.execute(statement)
