"""Queries over storages, the storages of jobs, and uploads in progress."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.store.sharing import JobStorageRow, StorageRow, UploadRow


def find_storage(session: Session, name: str) -> StorageRow | None:
    return session.scalars(select(StorageRow).where(StorageRow.name == name)).one_or_none()


def storages_named(session: Session, names: Collection[str] | None) -> Sequence[StorageRow]:
    """The storages of these names (every storage for None), by name."""
    statement = select(StorageRow).order_by(StorageRow.name)
    if names is not None:
        statement = statement.where(StorageRow.name.in_(names))
    return session.scalars(statement).all()


def job_storages(session: Session, job_id: int) -> Sequence[JobStorageRow]:
    return session.scalars(
        select(JobStorageRow).where(JobStorageRow.job_id == job_id).order_by(JobStorageRow.position)
    ).all()


def find_upload(session: Session, upload_id: str) -> UploadRow | None:
    return session.get(UploadRow, upload_id)


def uploads_of(session: Session, storage: StorageRow, username: str) -> Sequence[UploadRow]:
    return session.scalars(
        select(UploadRow)
        .where(UploadRow.storage_id == storage.id, UploadRow.username == username)
        .order_by(UploadRow.created_at)
    ).all()
