"""Groups' limits per user in a VC (`group_user_limits`): written by administrators through the
API, read by the controller for the members of each group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pai.store.identity import identity_epoch
from pai.store.models import Group, GroupUserLimit, User, memberships


@dataclass(frozen=True)
class MemberLimit:
    """A limit that applies to `username` in `virtual_cluster` through `groupname`."""

    username: str
    groupname: str
    virtual_cluster: str
    gpus: float | None
    cpus: float | None
    jobs: int | None


def group_limits(session: Session, virtual_cluster: str | None = None) -> Sequence[GroupUserLimit]:
    """Every group's limit (in one VC, or in all), by VC then group name."""
    query = select(GroupUserLimit).join(Group)
    if virtual_cluster is not None:
        query = query.where(GroupUserLimit.virtual_cluster == virtual_cluster)
    return session.scalars(query.order_by(GroupUserLimit.virtual_cluster, Group.groupname)).all()


def set_group_limit(
    session: Session,
    group: Group,
    virtual_cluster: str,
    *,
    gpus: float | None,
    cpus: float | None,
    jobs: int | None,
    set_by: str,
) -> GroupUserLimit:
    """Create or replace the group's limit in the VC."""
    row = session.scalar(
        select(GroupUserLimit).where(
            GroupUserLimit.group_id == group.id, GroupUserLimit.virtual_cluster == virtual_cluster
        )
    )
    if row is None:
        row = GroupUserLimit(group=group, virtual_cluster=virtual_cluster, set_by=set_by)
        session.add(row)
    row.gpus, row.cpus, row.jobs, row.set_by = gpus, cpus, jobs, set_by
    session.flush()
    return row


def remove_group_limit(session: Session, group: Group, virtual_cluster: str) -> bool:
    """Drop the group's limit in the VC; False if it had none."""
    row = session.scalar(
        select(GroupUserLimit).where(
            GroupUserLimit.group_id == group.id, GroupUserLimit.virtual_cluster == virtual_cluster
        )
    )
    if row is None:
        return False
    session.delete(row)
    return True


def member_limits(session: Session) -> list[MemberLimit]:
    """Each (member, group, VC) a group limit applies to."""
    rows = session.execute(
        select(
            User.username,
            Group.groupname,
            GroupUserLimit.virtual_cluster,
            GroupUserLimit.gpus,
            GroupUserLimit.cpus,
            GroupUserLimit.jobs,
        )
        .join(Group, Group.id == GroupUserLimit.group_id)
        .join(memberships, memberships.c.group_id == Group.id)
        .join(User, User.id == memberships.c.user_id)
        .order_by(User.username, Group.groupname, GroupUserLimit.virtual_cluster)
    ).all()
    return [MemberLimit(*row) for row in rows]


def limits_version(session: Session) -> tuple[int, int, datetime | None]:
    """Moves whenever what `member_limits` returns may have changed: a limit set or removed,
    or users, groups or memberships changed (the identity epoch)."""
    count, latest = session.execute(
        select(func.count(GroupUserLimit.id), func.max(GroupUserLimit.updated_at))
    ).one()
    return identity_epoch(session), count, latest
