"""Who may use which storage, and the files a user sees in one.

As in OpenPAI, groups grant storages by name (`acls.storageConfigs`): a user may use the union
of what their groups grant, an administrator every storage. The storages granted to the
`default` group are everybody's defaults: a job asking for `extras.storages: []` mounts them.
A storage that is not shared gives each user a folder of their own, named after them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from pai.auth.permissions import DEFAULT_GROUP, Principal
from pai.auth.sealing import SecretBox
from pai.errors import ForbiddenUserError, NoStorageError
from pai.storage.backends.base import Backend
from pai.storage.backends.directory import DirectoryBackend
from pai.storage.backends.s3 import S3Backend
from pai.storage.kinds import DIRECTORY, DirectoryLocation, S3Credentials, S3Location
from pai.store import identity, storages
from pai.store.sharing import StorageRow


def may_use(caller: Principal, name: str) -> bool:
    return caller.admin or name in caller.grants.storage_configs


def usable_storage(session: Session, caller: Principal, name: str) -> StorageRow:
    """The storage `name`, if it exists (NoStorageError) and the caller may use it
    (ForbiddenUserError), as OpenPAI answers `GET /storages/{name}`."""
    row = storages.find_storage(session, name)
    if row is None:
        raise NoStorageError(f"storage '{name}' does not exist")
    if not may_use(caller, name):
        raise ForbiddenUserError(
            f"user '{caller.username}' may not use storage '{name}': none of the user's groups "
            "grants it (ask an administrator)"
        )
    return row


def visible_storages(
    session: Session, caller: Principal, *, defaults_only: bool = False
) -> Sequence[StorageRow]:
    """The storages the caller may use (only the defaults when asked), by name."""
    names: set[str] | None = None if caller.admin else set(caller.grants.storage_configs)
    if defaults_only:
        defaults = set(default_storage_names(session))
        names = defaults if names is None else names & defaults
    return storages.storages_named(session, names)


def default_storage_names(session: Session) -> list[str]:
    group = identity.find_group(session, DEFAULT_GROUP)
    return list(group.storage_configs) if group is not None else []


@dataclass(frozen=True)
class Credentials:
    """Opens the sealed credentials of storages (S3 keys)."""

    box: SecretBox

    def seal(self, credentials: S3Credentials) -> str:
        return self.box.seal(credentials.model_dump(by_alias=True))

    def open(self, sealed: str | None) -> S3Credentials:
        if sealed is None:
            raise ValueError("an S3 storage without credentials")
        return S3Credentials.model_validate(self.box.open(sealed))


def open_backend(row: StorageRow, username: str, credentials: Credentials) -> Backend:
    """The files of `row` as `username` sees them (their own folder when not shared)."""
    folder = None if row.share else username
    if row.kind == DIRECTORY:
        location = DirectoryLocation.model_validate(row.location)
        return DirectoryBackend.for_user(Path(location.path), folder)
    return S3Backend(
        S3Location.model_validate(row.location),
        credentials.open(row.sealed_credentials),
        user_folder=folder,
    )
