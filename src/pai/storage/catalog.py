"""Defining, changing and removing storages (administrators), each change in the audit log.

A definition is checked against the storage itself before it is recorded: a directory must
exist on the PAI server's machine (which serves its files), an S3 bucket must answer with the
given credentials. A storage that cannot be used is refused at once rather than failing every
job that mounts it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pai.errors import ConflictStorageError, InvalidParametersError, NoStorageError
from pai.storage.access import Credentials
from pai.storage.backends.s3 import check_bucket
from pai.storage.kinds import DIRECTORY, S3, DirectoryLocation, S3Credentials, S3Location
from pai.store import audit, storages
from pai.store.sharing import StorageRow

AUDIT_KIND = "storage"


@dataclass(frozen=True)
class Definition:
    """Everything that defines a storage but its name."""

    kind: str
    location: DirectoryLocation | S3Location
    credentials: S3Credentials | None = None
    description: str = ""
    share: bool = True
    read_only: bool = False

    def check(self) -> None:
        """Refuse a definition whose storage cannot be used (see the module docstring)."""
        if isinstance(self.location, DirectoryLocation):
            if not Path(self.location.path).is_dir():
                raise InvalidParametersError(
                    f"data.path: {self.location.path} is not a directory on the PAI server's "
                    "machine; mount it there (and at the same path on every node) first"
                )
            return
        if self.credentials is None:
            raise InvalidParametersError(
                "data: an S3 storage needs accessKeyId and secretAccessKey"
            )
        check_bucket(self.location, self.credentials)

    def shown(self) -> dict[str, Any]:
        """What the audit log keeps of it: everything but the credentials."""
        return {
            "type": self.kind,
            "data": self.location.model_dump(),
            "share": self.share,
            "readOnly": self.read_only,
        }


def definition_of(row: StorageRow, credentials: Credentials) -> Definition:
    location: DirectoryLocation | S3Location = (
        DirectoryLocation.model_validate(row.location)
        if row.kind == DIRECTORY
        else S3Location.model_validate(row.location)
    )
    return Definition(
        kind=row.kind,
        location=location,
        credentials=credentials.open(row.sealed_credentials) if row.kind == S3 else None,
        description=row.description,
        share=row.share,
        read_only=row.read_only,
    )


def create_storage(
    session: Session, credentials: Credentials, actor: str, name: str, definition: Definition
) -> StorageRow:
    row = StorageRow(name=name, created_by=actor, updated_by=actor)
    _apply(row, definition, credentials)
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        raise ConflictStorageError(f"storage '{name}' already exists") from None
    audit.record(session, actor, "create", AUDIT_KIND, name, **definition.shown())
    return row


def update_storage(
    session: Session, credentials: Credentials, actor: str, name: str, definition: Definition
) -> StorageRow:
    row = existing(session, name)
    old = definition_of(row, credentials)
    _apply(row, definition, credentials)
    row.updated_by = actor
    before = {**old.shown(), "description": old.description, "credentials": old.credentials}
    after = {
        **definition.shown(),
        "description": definition.description,
        "credentials": definition.credentials,
    }
    changed = sorted(key for key in after if after[key] != before[key])
    del after["credentials"]
    audit.record(session, actor, "update", AUDIT_KIND, name, changed=changed, **after)
    return row


def delete_storage(session: Session, actor: str, name: str) -> None:
    """Jobs already submitted keep what they mount; groups keep the name in their ACLs (a
    storage defined again under that name is granted again)."""
    row = existing(session, name)
    session.delete(row)
    audit.record(session, actor, "delete", AUDIT_KIND, name)


def existing(session: Session, name: str) -> StorageRow:
    row = storages.find_storage(session, name)
    if row is None:
        raise NoStorageError(f"storage '{name}' does not exist")
    return row


def with_kept_credentials(
    definition: Definition, row: StorageRow, credentials: Credentials
) -> Definition:
    """`definition`, keeping the row's S3 credentials when it gives none (an update that
    changes other things need not send the secret again)."""
    if definition.kind == S3 and definition.credentials is None and row.kind == S3:
        return replace(definition, credentials=credentials.open(row.sealed_credentials))
    return definition


def _apply(row: StorageRow, definition: Definition, credentials: Credentials) -> None:
    row.kind = definition.kind
    row.location = definition.location.model_dump()
    row.sealed_credentials = (
        credentials.seal(definition.credentials) if definition.credentials is not None else None
    )
    row.description = definition.description
    row.share = definition.share
    row.read_only = definition.read_only
