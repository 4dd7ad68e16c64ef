"""Models of what users share: team storages (and the files moving in and out of them), the
marketplace of job templates, and the audit log of who changed either, and when."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from pai.store.models import Base, Timestamped
from pai.store.types import utcnow


class StorageRow(Timestamped, Base):
    """A storage an administrator defined. Groups grant it by name (`acls.storageConfigs`)."""

    __tablename__ = "storages"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    """`directory` or `s3` (`pai.storage.kinds`)."""
    description: Mapped[str] = mapped_column(Text, default="")
    location: Mapped[dict[str, Any]] = mapped_column()
    """Where it lives, without secrets: `{path}` or `{endpoint, bucket, prefix, region}`."""
    sealed_credentials: Mapped[str | None] = mapped_column(Text)
    """The kind's credentials (S3 keys), encrypted with the cluster key."""
    share: Mapped[bool] = mapped_column(default=True)
    """False: each user sees (and each job mounts) only the sub-folder named after the user."""
    read_only: Mapped[bool] = mapped_column(default=False)
    created_by: Mapped[str] = mapped_column(String(64))
    updated_by: Mapped[str] = mapped_column(String(64))


class JobStorageRow(Base):
    """A storage a job mounts, as it was when the job was submitted (what every launch of the
    job's tasks uses, whatever becomes of the storage later)."""

    __tablename__ = "job_storages"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    mount_path: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    read_only: Mapped[bool] = mapped_column()
    location: Mapped[dict[str, Any]] = mapped_column()
    """The storage's location, narrowed to the user's sub-folder when it is not shared."""
    sealed_credentials: Mapped[str | None] = mapped_column(Text)


class UploadRow(Base):
    """A resumable upload in progress: the bytes received so far are kept by the storage's
    backend (`state` says where); the row goes when the upload completes or is abandoned."""

    __tablename__ = "storage_uploads"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    storage_id: Mapped[int] = mapped_column(
        ForeignKey("storages.id", ondelete="CASCADE"), index=True
    )
    username: Mapped[str] = mapped_column(String(64), index=True)
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    fingerprint: Mapped[str] = mapped_column(String(128), default="")
    """What the client says identifies its source (to resume only the same file)."""
    state: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class MarketItemRow(Timestamped, Base):
    """A marketplace item: a job template (or a data template) others can find and run."""

    __tablename__ = "market_items"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    author: Mapped[str] = mapped_column(String(64), index=True)
    type: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    """`marketplace` (published here) or `pai` (shipped with PAI: the built-in examples)."""
    summary: Mapped[str] = mapped_column(String(1024), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    categories: Mapped[list[str]] = mapped_column(default=list)
    tags: Mapped[list[str]] = mapped_column(default=list)
    protocol: Mapped[str] = mapped_column(Text)
    """The job YAML, secrets masked."""
    data_type: Mapped[str] = mapped_column(String(32), default="")
    """A data template's kind of data (openpaimarketplace's `dataType`)."""
    data_url: Mapped[str] = mapped_column(String(2048), default="")
    """Where a data template's data is (`dataUrl`)."""
    is_public: Mapped[bool] = mapped_column(default=True)
    is_private: Mapped[bool] = mapped_column(default=False)
    group_list: Mapped[list[str]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="approved")
    use_number: Mapped[int] = mapped_column(default=0)
    updated_by: Mapped[str] = mapped_column(String(64))


class MarketStarRow(Base):
    __tablename__ = "market_stars"

    item_id: Mapped[str] = mapped_column(
        ForeignKey("market_items.id", ondelete="CASCADE"), primary_key=True
    )
    username: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)
    starred_at: Mapped[datetime] = mapped_column(default=utcnow)


class AuditEventRow(Base):
    """One change to something shared: who did what to which object, and when."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_kind_target", "kind", "target"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(64), index=True)
    action: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(32))
    """`storage`, `file` or `marketplace`."""
    target: Mapped[str] = mapped_column(String(1024))
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
