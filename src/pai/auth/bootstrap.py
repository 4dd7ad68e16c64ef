"""First start: migrate the database and create the built-in groups and the `admin` user."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from pai.auth.directory import Directory
from pai.auth.permissions import ADMIN_GROUP, DEFAULT_GROUP, DEFAULT_VIRTUAL_CLUSTER
from pai.settings import Settings
from pai.store import Database, identity

ADMIN_USER = "admin"


@dataclass(frozen=True)
class BootstrapResult:
    """What start-up did.

    `generated_admin_password` is set only on the start that created the `admin` user without
    `PAI_ADMIN_PASSWORD`: the caller shows it once, and nothing else ever records it.
    """

    admin_created: bool
    generated_admin_password: str | None = field(default=None, repr=False)


def initialize(database: Database, settings: Settings) -> BootstrapResult:
    """Apply pending migrations and create what must always exist. Safe to run on every start,
    from several processes at once (they queue on the database's start-up lock)."""
    with database.exclusive() as connection:
        database.upgrade(connection)
        with Session(bind=connection) as session:
            result = ensure_builtin_identities(session, settings)
            session.flush()
    return result


def ensure_builtin_identities(session: Session, settings: Settings) -> BootstrapResult:
    """The `default` group (granting the `default` VC), `admingroup`, and on first start `admin`."""
    directory = Directory(session)
    if identity.find_group(session, DEFAULT_GROUP) is None:
        directory.create_group(
            DEFAULT_GROUP,
            description="Every user belongs to this group",
            virtual_clusters=[DEFAULT_VIRTUAL_CLUSTER],
        )
    if identity.find_group(session, ADMIN_GROUP) is None:
        directory.create_group(ADMIN_GROUP, description="Administrators of the cluster", admin=True)
    if identity.count_admins(session) > 0 or identity.find_user(session, ADMIN_USER) is not None:
        return BootstrapResult(admin_created=False)
    password = settings.admin_password or secrets.token_urlsafe(16)
    directory.create_user(ADMIN_USER, password, admin=True)
    generated = None if settings.admin_password else password
    return BootstrapResult(admin_created=True, generated_admin_password=generated)
