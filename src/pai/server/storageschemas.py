"""Request and response bodies of the storage API: OpenPAI's storage objects (`name`, `share`,
`volumeName`, `type`, `data`, `readOnly`, `mountOptions`), plus PAI's file API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pai.server.schemas import Body
from pai.storage.kinds import StorageName


class StorageQuota(BaseModel):
    usedBytes: int
    limitBytes: int


class StorageSummary(BaseModel):
    name: str
    share: bool = Field(description="False: each user sees only the folder named after them.")
    volumeName: str = Field(description="OpenPAI's persistent volume; here the storage's name.")
    default: bool = Field(description="Granted to the `default` group: mounted by `storages: []`.")
    type: Literal["directory", "s3"]
    readOnly: bool
    description: str
    quota: StorageQuota | None = Field(
        default=None, description="Used and total bytes, when the kind reports them."
    )


class StorageList(BaseModel):
    storages: list[StorageSummary]


class StorageDetail(StorageSummary):
    data: dict[str, Any] = Field(
        description="Where it lives: `{path}` or `{endpoint, bucket, prefix, region}`; "
        "credentials are shown as ******."
    )
    mountOptions: list[str] = Field(default_factory=list)
    createdBy: str
    createdAt: datetime
    updatedBy: str
    updatedAt: datetime


class StorageRequest(Body):
    """A storage's definition (administrators). For `s3`, `data` holds `endpoint`, `bucket`,
    `prefix`, `region`, `accessKeyId` and `secretAccessKey`; an update may leave out the last
    two to keep the current ones."""

    type: Literal["directory", "s3"]
    data: dict[str, Any] = Field(description="`{path}` or the S3 fields (see above).")
    description: str = Field(default="", max_length=1024)
    share: bool = True
    readOnly: bool = False


class CreateStorageRequest(StorageRequest):
    name: StorageName


class FileEntry(BaseModel):
    name: str
    path: str = Field(description="From the storage's root, e.g. `/data/train.csv`.")
    type: Literal["file", "directory", "link", "other"]
    size: int
    modified: datetime | None


class FileListing(BaseModel):
    """What is at a path: the folder's entries, or the file alone."""

    storage: str
    path: str
    type: Literal["file", "directory", "link", "other"]
    entries: list[FileEntry]


class FileWritten(BaseModel):
    storage: str
    path: str
    size: int


class FilesRemoved(BaseModel):
    storage: str
    path: str
    removedFiles: int


class StartUploadRequest(Body):
    path: str = Field(min_length=1, max_length=4096)
    size: int = Field(ge=0, description="The whole file's size in bytes.")
    fingerprint: str = Field(
        default="",
        max_length=128,
        description="Identifies the source (e.g. its size and time); an upload in progress "
        "with the same path, size and fingerprint is resumed instead of started anew.",
    )


class UploadInfo(BaseModel):
    id: str
    storage: str
    path: str
    size: int
    offset: int = Field(description="Bytes received so far: send the rest from here.")
    chunkSize: int = Field(description="Send pieces of this size (the last may be shorter).")
    complete: bool
    createdAt: datetime
